"""What many users on one machine wait for: ``python -m copilot.bench latency --users 1,5,10``.

The four shared papers go into a fresh library once, as shared arXiv papers (everybody sees them, as on a
public demo). For each number of users N, a copy of that library is opened with the configured LLM (the
embedded model by default) and background thought writing on, and N threads start together; each asks its
questions one after another through :meth:`Copilot.chat_stream`, the very calls the Chat tab makes. Per
answer it records when the sources arrived, when the first word of the answer arrived and when the answer was
complete, all from the moment the question was sent; after the last answer it waits for the thoughts and
reads how long after its answer each was written (thought lag). Errors are answers that raised.

"Waited behind a thought" counts answers whose wait for the model overlapped a running background (thought)
call: the scheduler lets an answer go before any queued thought, so only a thought call already running can
delay it, and with one slot only when the answer arrives while it runs.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from copilot.config import DATA_ROOT, Settings
from copilot.engine import AskResult, Copilot
from copilot.library import Library
from copilot.types import AnswerSources
from ingest.models import PaperMetadata

if TYPE_CHECKING:
    from copilot.ui.services import Services

PAPERS_DIR = DATA_ROOT / "papers"
# The shared papers as the arXiv papers they are (the library stores arXiv papers for everybody).
PAPERS = {
    "N18-3011.pdf": ("1805.02262", "Construction of the Literature Graph in Semantic Scholar"),
    "2020.acl-main.207.pdf": ("2004.07180", "SPECTER: Document-level Representation Learning using "
                              "Citation-informed Transformers"),
    "2020.acl-main.447.pdf": ("1911.02782", "S2ORC: The Semantic Scholar Open Research Corpus"),
    "2023.eacl-main.121.pdf": ("2301.13298", "LongEval: Guidelines for Human Evaluation of Faithfulness in "
                               "Long-form Summarization"),
}
# Questions a reader of these papers asks; user i starts at question 3*i, so users ask different things.
QUESTIONS = [
    "What is the literature graph of Semantic Scholar?",
    "How is SPECTER trained?",
    "What is S2ORC and what does it contain?",
    "What does LongEval recommend for human evaluation of faithfulness?",
    "Which entities and relations does the Semantic Scholar literature graph link?",
    "How is SPECTER evaluated, and on which tasks?",
    "How were the S2ORC papers parsed from PDF?",
    "How many annotators does LongEval suggest, and why?",
    "How are entities linked to the literature graph?",
    "What citation signal does SPECTER use instead of labels?",
    "Which fields of study does S2ORC cover?",
    "Why is long-form summarization hard to evaluate?",
]
JSON_KEYS = ("users", "sources_p50_s", "ttft_p50_s", "ttft_p95_s", "total_p50_s", "total_p95_s", "errors",
             "waited_behind_thought")
Log = Callable[[str], None]


@dataclass
class Turn:
    """One answer as its user saw it, in seconds from sending the question."""

    user: str
    question: str
    sources_s: float | None = None
    first_word_s: float | None = None
    total_s: float | None = None
    error: str | None = None
    result: AskResult | None = None  # its thought timings fill in later


@dataclass
class Run:
    users: int
    turns: list[Turn] = field(default_factory=list)
    waited_behind_thought: int = 0
    thought_lags_s: list[float] = field(default_factory=list)
    thoughts_pending: int = 0
    wall_s: float = 0.0


def build_library(settings: Settings, log: Log) -> None:
    """The four shared papers in ``settings.data_dir``, shared with every user."""
    copilot = Copilot.open(settings)
    library = Library.open(settings, store=copilot.store, embedder=copilot.embedder)
    for name, (arxiv_id, title) in PAPERS.items():
        metadata = PaperMetadata(arxiv_id=arxiv_id, version="v1", title=title, authors=[], abstract="",
                                 categories=["cs.CL"], primary_category="cs.CL", published="", updated="",
                                 pdf_url="")
        result = library.add_pdf(PAPERS_DIR / name, metadata=metadata)
        log(f"added {arxiv_id}: {result.n_chunks} chunks")
    copilot.store.close()


def ask_all(services: Services, user: str, questions: list[str], start: threading.Barrier,
            turns: list[Turn]) -> None:
    """One simulated user: each question right after the previous answer, as the chat tab asks it."""
    start.wait()
    for question in questions:
        turn = Turn(user, question)
        sent = time.perf_counter()
        try:
            services.copilot.visible_paper_ids(user, None)
            for update in services.copilot.chat_stream(user, question):
                now = time.perf_counter() - sent
                if isinstance(update, AnswerSources):
                    turn.sources_s = now
                elif isinstance(update, str) and update.strip() and turn.first_word_s is None:
                    turn.first_word_s = now
                elif isinstance(update, AskResult):
                    turn.total_s = now
                    turn.result = update
        except Exception as exc:  # noqa: BLE001 - an error is a measured outcome
            turn.error = f"{type(exc).__name__}: {exc}"
        turns.append(turn)


def run_users(base: Path, n_users: int, n_questions: int, settings: Settings, thought_wait_s: float,
              log: Log) -> Run:
    """N users asking at once on a copy of the library in ``base``."""
    # Gradio reads HF_HUB_OFFLINE when imported: the web app's services load once the command has set it.
    from copilot.ui.services import Services

    work = Path(tempfile.mkdtemp(prefix=f"latency-{n_users}-"))
    try:
        shutil.copytree(base, work / "data")
        run_settings = settings.model_copy(update={"data_dir": work / "data"})
        services = Services(run_settings)
        copilot = services.copilot
        copilot.embedder.encode_query("warm-up")  # models loaded before the clock starts
        copilot.llm.chat([{"role": "user", "content": "Hello"}], max_tokens=1)
        copilot.llm.scheduler.reset_stats()
        users = [f"user{i + 1}" for i in range(n_users)]
        plans = {u: [QUESTIONS[(n_questions * i + q) % len(QUESTIONS)] for q in range(n_questions)]
                 for i, u in enumerate(users)}
        start = threading.Barrier(n_users + 1)
        run = Run(n_users)
        threads = [threading.Thread(target=ask_all, args=(services, u, plans[u], start, run.turns), daemon=True)
                   for u in users]
        for thread in threads:
            thread.start()
        began = time.perf_counter()
        start.wait()
        for thread in threads:
            thread.join()
        run.wall_s = time.perf_counter() - began
        run.waited_behind_thought = copilot.llm.scheduler.stats().answers_waited_behind_background
        if not copilot.flush(timeout=thought_wait_s):
            log(f"  thoughts still being written after {thought_wait_s:.0f} s")
        for turn in run.turns:
            timings = turn.result.timings if turn.result is not None else {}
            if "thought_lag_ms" in timings:
                run.thought_lags_s.append(timings["thought_lag_ms"] / 1000)
            elif turn.result is not None:
                run.thoughts_pending += 1
        copilot.store.close()
        return run
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _percentile(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 2) if values else None


def summary(run: Run) -> dict[str, Any]:
    """The figures of one run: the JSON keys first, then what the table shows besides."""
    ok = [t for t in run.turns if t.error is None]
    sources = [t.sources_s for t in ok if t.sources_s is not None]
    ttft = [t.first_word_s for t in ok if t.first_word_s is not None]
    total = [t.total_s for t in ok if t.total_s is not None]
    return {
        "users": run.users,
        "sources_p50_s": _percentile(sources, 50), "ttft_p50_s": _percentile(ttft, 50),
        "ttft_p95_s": _percentile(ttft, 95), "total_p50_s": _percentile(total, 50),
        "total_p95_s": _percentile(total, 95), "errors": sum(t.error is not None for t in run.turns),
        "waited_behind_thought": run.waited_behind_thought,
        # Beyond the JSON keys: the Markdown table's extra columns.
        "sources_p95_s": _percentile(sources, 95), "answers": len(run.turns), "ttft_max_s": _percentile(ttft, 100),
        "thought_lag_p50_s": _percentile(run.thought_lags_s, 50),
        "thought_lag_max_s": _percentile(run.thought_lags_s, 100), "thoughts_pending": run.thoughts_pending,
        "wall_s": round(run.wall_s, 1),
        "error_messages": sorted({t.error for t in run.turns if t.error}),
    }


def json_row(row: dict[str, Any]) -> dict[str, Any]:
    """Exactly the keys other tools read."""
    return {key: row[key] for key in JSON_KEYS}


def markdown(rows: list[dict[str, Any]]) -> str:
    def cell(value: float | None) -> str:
        return "–" if value is None else str(value)

    head = ("| users | answers | sources p50 / p95 (s) | first word p50 / p95 / max (s) | full answer p50 / p95 (s) "
            "| errors | waited behind a thought | thought lag p50 / max (s) | wall (s) |")
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        lag = f"{cell(r['thought_lag_p50_s'])} / {cell(r['thought_lag_max_s'])}"
        if r["thoughts_pending"]:
            lag += f" ({r['thoughts_pending']} pending)"
        lines.append(f"| {r['users']} | {r['answers']} | {cell(r['sources_p50_s'])} / {cell(r['sources_p95_s'])} "
                     f"| {cell(r['ttft_p50_s'])} / {cell(r['ttft_p95_s'])} / {cell(r['ttft_max_s'])} "
                     f"| {cell(r['total_p50_s'])} / {cell(r['total_p95_s'])} | {r['errors']} "
                     f"| {r['waited_behind_thought']} | {lag} | {r['wall_s']} |")
    return "\n".join(lines)
