"""End to end with the default embedded model: add a real paper, ask through the CLI, read the record and the thought
it kept; and one smoke test for each other embedded model (the smallest one with ``--no-thoughts``): the same paper,
one question, a record of the same shape. The paper is added once through the CLI; each test asks in its own copy of
that library."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from copilot.config import GROUNDING_THRESHOLD
from copilot.llm.embedded import DEFAULT_EMBEDDED_MODEL
from tests.conftest import ROOT, TEST_DATA, clean_env

pytestmark = pytest.mark.slow


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def added(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A real paper added once through the CLI: its data directory and the paper's id. Each test asks in a copy."""
    data = tmp_path_factory.mktemp("added") / "data"
    result = cli("-m", "copilot", "papers", "add", str(TEST_DATA / "papers" / "2020.acl-main.207.pdf"), "--json",
                 env=clean_env() | {"COPILOT_DATA_DIR": str(data)})
    assert result.returncode == 0, result.stderr
    return data, json.loads(result.stdout)["results"][0]["paper_id"]


def asked(tmp_path: Path, embedded_model: str, added: tuple[Path, str],
          *options: str) -> tuple[dict, str, dict[str, str]]:
    """One question asked with ``ask --json`` (and ``options``) in a copy of the library with the paper: the record,
    the paper's id and the environment."""
    data, paper_id = added
    shutil.copytree(data, tmp_path / "data")
    env = clean_env() | {"COPILOT_DATA_DIR": str(tmp_path / "data"), "COPILOT_MAX_ANSWER_TOKENS": "80",
                         "COPILOT_LLM_MODEL": embedded_model}
    first = cli("-m", "copilot", "ask", "How is SPECTER trained?", "--json", *options, env=env)
    assert first.returncode == 0, first.stderr
    record = json.loads(first.stdout)
    assert record["model"] == f"local:{embedded_model}" or record["declined"], record["model"]
    assert len(record["answer"].split()) >= 3
    assert record["sources"] and all(s["kind"] == "chunk" and s["paper_id"] == paper_id for s in record["sources"])
    return record, paper_id, env


@pytest.mark.parametrize("embedded_model", ["qwen2.5-coder-0.5b", "smollm2-135m", "gemma3-270m"])
def test_each_other_embedded_model_answers_once(tmp_path: Path, embedded_model: str,
                                               added: tuple[Path, str]) -> None:
    # The smallest model also shows `--no-thoughts`: the answer's call alone, as the default would make it.
    no_thoughts = embedded_model == "smollm2-135m"
    record, _, _ = asked(tmp_path, embedded_model, added, *(["--no-thoughts"] if no_thoughts else []))
    assert isinstance(record["declined"], bool) and isinstance(record["evidence"], list)
    assert record["thought"]["outcome"] in {"added", "merged", "dropped"}
    if no_thoughts:
        assert record["llm_calls"] == 1 + record["rechecks"] and record["thought"]["outcome"] == "dropped"
        assert record["thought"]["reason"].startswith("disabled"), record["thought"]


def test_ask_json_with_the_default_embedded_model(tmp_path: Path, added: tuple[Path, str]) -> None:
    record, paper_id, env = asked(tmp_path, DEFAULT_EMBEDDED_MODEL, added)
    assert isinstance(record["declined"], bool) and isinstance(record["evidence"], list)
    assert record["sources"] and all(s["kind"] == "chunk" and s["paper_id"] == paper_id for s in record["sources"])
    assert [s["n"] for s in record["sources"]] == list(range(1, len(record["sources"]) + 1))
    assert record["thought"]["outcome"] in {"added", "merged", "dropped"} and "reason" in record["thought"]
    # The answer, its rechecks when it is short and states a fact, then the thought's call when one is made.
    assert record["rechecks"] in (0, 2) and 1 + record["rechecks"] <= record["llm_calls"] <= 2 + record["rechecks"]
    assert set(record["timings"]) == {"retrieve_ms", "wait_ms", "first_word_ms", "answer_ms", "grounding_ms",
                                      "recheck_ms", "thought_ms", "thought_lag_ms"}
    # Declined: the decline, the model's draft kept apart, no evidence, no thought.
    if record["declined"]:
        assert record["answer"] == "The papers in scope do not say." and record["evidence"] == []
        assert record["nearest"] and record["thought"]["outcome"] == "dropped"
        assert record["thought"]["reason"].startswith("declined")
    # Else each answer sentence's support in the sources, the verbatim evidence of the supported ones; an
    # unsupported sentence makes no thought.
    else:
        assert record["grounding"] and all(
            set(g) == {"sentence", "support", "source_n", "quote", "missing", "unstable"} for g in record["grounding"])
        assert all(g["sentence"].strip() in record["answer"] for g in record["grounding"])
        assert record["grounded"] == all(g["support"] >= GROUNDING_THRESHOLD and not g["missing"]
                                         and not g["unstable"] for g in record["grounding"])
        assert record["evidence"] and all(set(e) == {"n", "quote", "paper_id", "page", "section"}
                                          for e in record["evidence"])
        assert all(e["paper_id"] == paper_id and isinstance(e["page"], int) for e in record["evidence"])
        if not record["grounded"]:
            assert record["thought"]["outcome"] == "dropped"
            assert record["thought"]["reason"].startswith("ungrounded")
    timings = record["timings"]
    assert timings["retrieve_ms"] <= timings["first_word_ms"] <= timings["retrieve_ms"] + timings["answer_ms"]
    assert timings["thought_lag_ms"] >= timings["thought_ms"]

    listed = cli("-m", "copilot", "thoughts", "list", "--json", env=env)
    thoughts = json.loads(listed.stdout)
    if record["thought"]["outcome"] == "added":
        assert [t["id"] for t in thoughts] == [record["thought"]["thought_id"]]
        assert thoughts[0]["depth"] == 1
        shown = json.loads(cli("-m", "copilot", "thoughts", "show", str(thoughts[0]["id"]), "--json", env=env).stdout)
        assert shown["sources"] and all(s["kind"] == "chunk" for s in shown["sources"])
        deleted = cli("-m", "copilot", "thoughts", "delete", str(thoughts[0]["id"]), env=env)
        assert deleted.returncode == 0
        assert json.loads(cli("-m", "copilot", "thoughts", "list", "--json", env=env).stdout) == []
    else:
        assert thoughts == []
