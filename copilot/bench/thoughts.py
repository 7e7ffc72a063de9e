"""``python -m copilot.bench.thoughts`` (``make bench-thoughts``): ten questions in a row through the real engine.

Adds the papers of a folder to a fresh library, asks a fixed sequence with repeats and paraphrases, and
records for each question what was retrieved (chunks, thoughts and their depths), what happened to the new
thought, the answer's grounding check (as the engine made it, with its time), and two separate times:
the user-visible ask (retrieve + answer) and the background thought writing. ``COPILOT_THOUGHT_NEEDS_GROUNDING=false``
measures the same run without the gate that drops ungrounded answers before the thought call.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

import click

from copilot.cli import Command
from copilot.config import DATA_ROOT, Settings, apply_offline_defaults
from copilot.engine import Copilot
from copilot.library import Library
from copilot.types import Grounding

DEFAULT_PAPERS = DATA_ROOT / "papers"
QUESTIONS = [
    "What is the literature graph of Semantic Scholar?",
    "Which nodes and edges make up the Semantic Scholar literature graph?",  # a paraphrase
    "What is S2ORC?",
    "How is SPECTER trained?",
    "What is the literature graph of Semantic Scholar?",  # a repeat
    "What does LongEval recommend for human evaluation of faithfulness?",
    "How could the Semantic Scholar literature graph be checked with the LongEval evaluation guidelines?",
    "How is SPECTER trained?",  # a repeat
    "How does the Semantic Scholar literature graph help paper recommendation?",  # builds on earlier answers
    "What does LongEval recommend for human evaluation of faithfulness?",  # a repeat
]


def run_session(settings: Settings, papers_dir: Path, questions: list[str]) -> dict:
    copilot = Copilot.open(settings)
    library = Library.open(settings, store=copilot.store, embedder=copilot.embedder)
    for pdf in sorted(papers_dir.glob("*.pdf")):
        library.add_pdf(pdf)
    rows = []
    for n, question in enumerate(questions, start=1):
        start = time.perf_counter()
        result = copilot.ask(question)
        visible_ms = 1000 * (time.perf_counter() - start)
        copilot.flush()
        record = result.as_dict()
        checked = result.grounding or Grounding([], False, settings.grounding_threshold)
        check_ms = result.timings.get("grounding_ms", 0.0)
        rows.append({
            "n": n, "question": question, "ask_ms": round(visible_ms, 1),
            "thought_ms": result.timings.get("thought_ms"),
            "retrieved": [f"{s['kind']}#{s['id']}@d{s['depth']}" for s in record["sources"]],
            "thoughts_retrieved": sum(s["kind"] == "thought" for s in record["sources"]),
            "max_depth_retrieved": max((s["depth"] for s in record["sources"]), default=0),
            "thought": {k: record["thought"].get(k) for k in ("outcome", "reason", "thought_id", "depth",
                                                              "confidence", "model_confidence", "relevance")},
            "llm_calls": record["llm_calls"], "answer": result.answer,
            "grounded": checked.grounded, "grounding_ms": round(check_ms, 1), "sentences": len(checked.sentences),
            "least_support": min((s.support for s in checked.sentences), default=None),
        })
    stats = copilot.memory.stats()
    outcomes = [r["thought"]["outcome"] for r in rows]
    return {
        "questions": rows,
        "summary": {
            "added": outcomes.count("added"), "merged": outcomes.count("merged"), "dropped": outcomes.count("dropped"),
            "max_thought_depth": max(stats["by_depth"], default=0), "thoughts_by_depth": stats["by_depth"],
            "answers_retrieving_thoughts": sum(r["thoughts_retrieved"] > 0 for r in rows),
            "utilisation": stats["utilisation"],
            "ask_ms_median": round(statistics.median(r["ask_ms"] for r in rows), 1),
            "thought_ms_median": round(statistics.median(r["thought_ms"] or 0 for r in rows), 1),
            "max_llm_calls_per_query": max(r["llm_calls"] for r in rows),
            "needs_grounding": settings.thought_needs_grounding,
            "grounded_answers": sum(r["grounded"] for r in rows),
            "dropped_ungrounded": sum((r["thought"]["reason"] or "").startswith("ungrounded") for r in rows),
            "grounding_ms_median": round(statistics.median(r["grounding_ms"] for r in rows), 1),
        },
    }


@click.command(cls=Command, help="Ask ten questions in a row on the real papers with the configured LLM; print the record.")
@click.option("--papers", "papers_dir", type=click.Path(path_type=Path), default=DEFAULT_PAPERS, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Also write the JSON record here.")
@click.option("--data-dir", default=None, help="Keep the library and memory here (default: a temporary folder).")
def main(papers_dir: Path, out: Path | None, data_dir: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(data_dir or tmp))
        apply_offline_defaults(settings)
        report = run_session(settings, papers_dir, QUESTIONS)
    text = json.dumps(report, indent=2)
    if out:
        out.write_text(text)
    click.echo(text)


if __name__ == "__main__":
    main()
