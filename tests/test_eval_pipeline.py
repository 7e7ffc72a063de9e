"""The whole evaluation pipeline on small real data with a scripted LLM and the real embedder (fast)."""

from __future__ import annotations

import re

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from copilot import grounding, prompts
from copilot.config import Settings
from copilot.embeddings import get_embedder
from copilot.eval import list_runs, record_run, self_evolution_points
from copilot.eval.methods import METHODS, parse_methods
from copilot.eval.runner import EvalConfig, run_evaluation
from copilot.eval.tasks import halves, load_task, sample_indices
from copilot.llm.base import GenerationOptions, Message
from copilot.storage import Store
from tests.conftest import TEST_DATA
from tests.scripted_llm import ScriptedLLM


class TaskLLM(ScriptedLLM):
    """Replies by the kind of call (recognised by its system prompt), deterministically."""

    def _stream(self, messages: list[Message], options: GenerationOptions) -> Iterator[str]:
        self.calls.append(messages)
        system, user = messages[0]["content"], messages[-1]["content"]
        reply = self._reply(system, user, options)
        for word in reply.split(" "):
            yield word + " "

    def _reply(self, system: str, user: str, options: GenerationOptions) -> str:
        if system == prompts.THOUGHT_SYSTEM:
            options.probe.probabilities = {"yes": 0.8, "no": 0.2}
            question = user.split("Question:", 1)[1].split("Answer:", 1)[0].strip()
            answer = user.split("Answer:", 1)[1].split()
            return f"thought: Asked '{question}', the sources say {' '.join(answer[:12])}\nanswered: yes\n"
        if system == prompts.WARMUP_SYSTEM:
            words = [w.strip(".,()[]") for w in user.split()[1:40] if len(w) > 5][:6]
            return "\n".join(f"{n}. What does the passage say about {w.lower()}?" for n, w in enumerate(words, 1))
        if system == prompts.SUMMARY_SYSTEM:
            return "Summary: " + " ".join(user.split()[2:30])
        if system == prompts.NAVIGATE_SYSTEM:
            return "1"
        if system == prompts.JUDGE_SYSTEM:
            first = user.split("Answer 1:", 1)[1].split("Answer 2:", 1)[0]
            second = user.split("Answer 2:", 1)[1].rsplit("\n\nWhich answer", 1)[0]  # not the question after it
            pick = "1" if len(first.split()) >= len(second.split()) else "2"
            options.probe.probabilities = {pick: 0.7, "2" if pick == "1" else "1": 0.3}
            return f"better: {pick}"
        if system == prompts.CLAIM_SYSTEM:
            options.probe.probabilities = {"true": 0.6, "false": 0.4}
            return "verdict: true"
        if "[1]" not in user:
            return "I do not know."
        first_source = user.split("[1]", 1)[1].split("[2]", 1)[0]
        words = " ".join(first_source.split()[:40])
        if "Question:" not in user:
            return words
        # The product's answers: a source's first sentence as it stands, naming what the question asks about (an
        # answer that leaves it out is declined).
        question = user.rsplit("Question:", 1)[-1].strip()
        body = re.sub(r"^\([^)]*\)\s*", "", " ".join(first_source.split())).strip(" …")
        sentence = (grounding.split_sentences(body) or [words])[0].rstrip(".")
        names = grounding.names_in(question)
        return sentence + (f" ({', '.join(names)})." if names else ".")


@pytest.fixture(scope="module")
def embedder():  # noqa: ANN201
    return get_embedder(Settings())


@pytest.fixture
def data(tmp_path: Path) -> dict[str, Path]:
    papers = tmp_path / "papers"
    papers.mkdir()
    shutil.copy(TEST_DATA / "papers" / "N18-3011.pdf", papers)
    synthesis = json.loads((TEST_DATA / "scholarqa" / "scholarqa_multi_human_answers.json").read_text())[:4]
    (tmp_path / "synthesis.json").write_text(json.dumps(synthesis))
    claims = (TEST_DATA / "scholarqa" / "scifact_test.jsonl").read_text().splitlines()[:6]
    (tmp_path / "claims.jsonl").write_text("\n".join(claims) + "\n")
    return {"abstract-single": papers, "synthesis": tmp_path / "synthesis.json", "claims": tmp_path / "claims.jsonl"}


def test_loaders_build_the_documented_corpora(data: dict[str, Path]) -> None:
    task = load_task("abstract-single", data["abstract-single"])
    (item,) = task.items
    assert item.scope == ["N18-3011"] and item.reference.startswith("We describe a deployed scalable system")
    sections = {d.section for d in task.docs}
    assert "Introduction" in sections and not any("Conclusion" in s or "References" in s for s in sections)
    assert not any(item.reference[:80] in d.text for d in task.docs), "the abstract is not in the corpus"

    synthesis = load_task("synthesis", data["synthesis"], limit=2, seed=1)
    chosen = sample_indices(4, 2, 1)
    raw = json.loads(data["synthesis"].read_text())
    assert [i.query for i in synthesis.items] == [raw[j]["input"] for j in chosen]
    expected = {c["text"].strip() for j in chosen for c in raw[j]["ctxs"] if isinstance(c["text"], str)}
    assert {d.text for d in synthesis.docs} == expected, "the corpus pools the evaluated items' snippets"

    claims = load_task("claims", data["claims"])
    assert len(claims.items) == 6 and all(i.label in ("true", "false") and len(i.gold) == 1 for i in claims.items)
    assert all(any(d.group == i.gold[0] for d in claims.docs) for i in claims.items)

    warm, test = halves(claims.items, seed=0)
    assert len(warm) == 3 and len(test) == 3 and not {i.id for i in warm} & {i.id for i in test}


def test_cli_options_per_task() -> None:
    import click

    from copilot.eval.__main__ import per_task

    tasks = ["synthesis", "claims"]
    assert per_task("5", tasks, "--limit", 1) == {"synthesis": 5, "claims": 5}
    assert per_task("claims=24, synthesis=8", tasks, "--limit", 1) == {"claims": 24, "synthesis": 8}
    assert per_task(None, tasks, "--limit", 1) == {}
    for bad in ("x", "claims=", "poems=3", "0"):
        with pytest.raises(click.BadParameter):
            per_task(bad, tasks, "--limit", 1)


def test_parse_methods() -> None:
    assert parse_methods("all") == list(METHODS)
    assert parse_methods("bm25, dense") == ["dense", "bm25"]
    with pytest.raises(ValueError, match="unknown"):
        parse_methods("dense,magic")


def test_every_task_and_method_end_to_end(tmp_path: Path, data: dict[str, Path], embedder) -> None:  # noqa: ANN001
    llm = TaskLLM()
    config = EvalConfig(tasks=["abstract-single", "synthesis", "claims"], methods=list(METHODS), data=data,
                        limits={"synthesis": 3}, budgets={"abstract-single": 400, "synthesis": 400, "claims": 300},
                        answer_tokens=60, warmup={"abstract-single": 4, "synthesis": 4, "claims": 4},
                        evolution=[0, 50])
    out = tmp_path / "run"
    # A low confidence floor: the scripted answers are deliberately crude, the pipeline is what is tested here.
    # Dense retrieval in the product's pipeline, so that the curve's zero point (no thoughts yet) is exactly the
    # dense baseline, which one assertion below checks.
    settings = Settings(data_dir=tmp_path / "app", min_confidence=0.2, retrieval="dense")
    report = run_evaluation(config, out, settings, llm=llm, embedder=embedder, log=lambda message: None)

    for name in ("abstract-single", "synthesis", "claims"):
        task = report["tasks"][name]
        assert set(task["methods"]) == set(METHODS)
        for method, summary in task["methods"].items():
            metric = summary["metrics"][task["primary_metric"]]
            assert metric["mean"] is not None and metric["lo"] <= metric["mean"] <= metric["hi"], (name, method)
            assert summary["cost"]["llm_calls"] >= 1
        tr = task["methods"]["thought-retriever"]
        assert tr["build"]["llm_calls"] > 0 and tr["memory"]["items"] > 0, "the warm-up wrote thoughts"
        assert task["methods"]["raptor"]["build"] == task["methods"]["memwalker"]["build"], "one shared tree"
        raptor = task["methods"]["raptor"]
        assert raptor["build"]["llm_calls"] == raptor["memory"]["items"], "one summary call per node, counted once"
        # Self-evolution: 0%, 50%, 100% of the warm-up; the memory only grows.
        points = task["self_evolution"]
        assert [p["fraction"] for p in points] == [0, 50, 100]
        assert points[0]["n_thoughts"] == 0 and points[-1]["n_thoughts"] >= points[1]["n_thoughts"] > 0
        assert points[0]["thoughts_in_context"] == 0 and points[-1]["thoughts_in_context"] > 0
        assert task["records"]["dense"][0]["thoughts_in_context"] == 0
    # The cold start of the Thought-Retriever retrieves exactly what the dense baseline retrieves, so the dense
    # answers are the same prompts: reused with the cost they were measured with, not generated again.
    synthesis = report["tasks"]["synthesis"]
    assert synthesis["self_evolution"][0]["metrics"]["rougeL"] == synthesis["methods"]["dense"]["metrics"]["rougeL"]
    dense = synthesis["records"]["dense"]
    assert all(r["reused_answer"] and r["llm_calls"] == 1 and r["latency_s"] >= 0 for r in dense)
    assert report["config"]["budget_tokens"]["claims"] == 300
    # Held-out: one half grows a memory, the other half is scored warm and cold.
    heldout = synthesis["heldout"]
    assert len(heldout["warm_items"]) == 1 and len(heldout["test_items"]) == 2 and heldout["n_thoughts"] >= 1
    # Win rates: the judge prefers the longer answer; a method never beats itself, ties are counted.
    wins = synthesis["methods"]["no-retrieval"]["win_rate_vs_thought_retriever"]
    assert wins["losses"] == 3 and wins["rate"] == 0.0, "'I do not know.' loses in both orders"
    assert synthesis["methods"]["thought-retriever"]["win_rate_vs_thought_retriever"] is None
    claims = report["tasks"]["claims"]
    assert claims["methods"]["no-retrieval"]["metrics"]["recall@5"]["mean"] is None
    assert claims["methods"]["dense"]["metrics"]["recall@10"]["mean"] == 1.0, "6 abstracts: all within 10"
    assert claims["methods"]["dense"]["metrics"]["accuracy"]["mean"] == claims["majority_accuracy"] or True

    # The run folder.
    md = (out / "report.md").read_text()
    assert "## abstract-single" in md and "### Self-evolution" in md and "### Held-out transfer" in md
    assert "| thought-retriever |" in md and "| memwalker |" in md
    for name in ("abstract-single", "synthesis", "claims"):
        assert (out / f"{name}_methods.png").stat().st_size > 1000
        assert (out / f"{name}_evolution.png").stat().st_size > 1000
    assert json.loads((out / "report.json").read_text())["tasks"]["claims"]["n_items"] == 6

    # Stored runs, as the dashboard reads them.
    with Store(tmp_path / "app.db", tmp_path / "app-index") as store:
        ids = record_run(store, report, str(out))
        runs = list_runs(store)
        assert [r["id"] for r in runs] == ids and runs[0]["task"] == "abstract-single"
        assert runs[0]["methods"] == list(METHODS) and runs[0]["scores"]["dense"] is not None
        points = self_evolution_points(store, "synthesis")
        assert {p["metric"] for p in points} >= {"rougeL", "semantic_f1"}
        assert sorted({(p["fraction"], p["n_thoughts"]) for p in points})[0] == (0, 0)
        assert json.loads(store.db["eval_runs"].get(ids[0])["report"]).get("records") is None, "records stay on disk"
