"""``python -m copilot.eval``: the options, and a quick run with the real embedded model and embedder.

The real run is ``--quick`` narrowed further (one paper, three methods, one warm-up question, a 300-token
budget) so that it finishes in about a minute on 2 CPU cores; the full ``--quick`` (two papers, every method,
summary trees and the judge) takes several minutes there and is exercised by hand (docs/evaluation.md, "Evaluation").
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from copilot.eval.__main__ import main
from tests.conftest import ROOT, TEST_DATA, clean_env


def test_help_documents_the_options() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for option in ("--task", "--methods", "--data", "--limit", "--budget", "--warmup", "--evolution", "--quick",
                   "--out", "--no-judge", "--no-heldout", "--data-dir"):
        assert option in result.output
    assert "thought-retriever" in result.output and "memwalker" in result.output


@pytest.mark.parametrize("args", [["--methods", "magic"], ["--task", "poems"], ["--evolution", "0,150"],
                                  ["--task", "all", "--data", "."], ["--limit", "claims=0"]])
def test_bad_options_are_refused(args: list[str]) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "Error" in result.output


@pytest.mark.slow
def test_quick_run_with_the_embedded_model(tmp_path: Path) -> None:
    papers = tmp_path / "papers"
    papers.mkdir()
    shutil.copy(TEST_DATA / "papers" / "N18-3011.pdf", papers)
    out, app = tmp_path / "run", tmp_path / "app"
    command = [sys.executable, "-m", "copilot.eval", "--task", "abstract-single", "--quick", "--data", str(papers),
               "--methods", "thought-retriever,dense,no-retrieval", "--warmup", "1", "--budget", "300",
               "--answer-tokens", "48", "--out", str(out), "--data-dir", str(app)]
    # The smallest embedded model, a real one: the evaluation runs any embedded model; the default's figures are its
    # own benchmark's (docs/evaluation.md), and the default answers end to end in the browser walk and `ask --json`.
    env = clean_env() | {"COPILOT_LLM_MODEL": "smollm2-135m"}
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]

    report = json.loads((out / "report.json").read_text())
    assert report["llm"].startswith("local:smollm2-135m ") and report["config"]["quick"]
    task = report["tasks"]["abstract-single"]
    assert task["n_items"] == 1 and set(task["methods"]) == {"thought-retriever", "dense", "no-retrieval"}
    for name, method in task["methods"].items():
        for metric in ("rouge1", "rouge2", "rougeL", "semantic_f1"):
            assert 0.0 <= method["metrics"][metric]["mean"] <= 1.0, (name, metric)
        assert method["cost"]["llm_calls"] >= 1 and method["cost"]["latency_s"] > 0
    assert task["methods"]["no-retrieval"]["cost"]["context_tokens"] == 0
    assert 0 < task["methods"]["dense"]["cost"]["context_tokens"] <= 300
    assert [p["fraction"] for p in task["self_evolution"]] == [0, 50, 100]
    assert task["methods"]["thought-retriever"]["build"]["llm_calls"] >= 3, "question writing, answer, thought"
    answers = [r["answer"] for records in task["records"].values() for r in records]
    assert all(a.strip() for a in answers), "the embedded model answered every time"

    md = (out / "report.md").read_text()
    assert "| thought-retriever |" in md and "| no-retrieval |" in md and "### Self-evolution" in md
    assert (out / "abstract-single_methods.png").exists() and (out / "abstract-single_evolution.png").exists()

    from copilot.eval import list_runs, self_evolution_points
    from copilot.storage import Store

    with Store(app / "copilot.db", app / "index") as store:
        (run,) = list_runs(store)
        assert run["task"] == "abstract-single" and run["path"] == str(out.resolve()) and run["quick"]
        points = self_evolution_points(store)
        assert {p["fraction"] for p in points} == {0, 50, 100} and {p["run_id"] for p in points} == {run["id"]}
