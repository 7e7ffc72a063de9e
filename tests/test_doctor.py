"""``python -m copilot doctor``: every check ok offline; a broken setting fails and names the check."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from copilot.llm.embedded import DEFAULT_EMBEDDED_MODEL
from tests.conftest import ROOT, clean_env

pytestmark = pytest.mark.slow


def doctor(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "copilot", "doctor", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def test_doctor_json_all_ok_offline(tmp_path: Path) -> None:
    env = clean_env() | {"COPILOT_DATA_DIR": str(tmp_path / "data")}
    result = doctor("--json", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert report["ok"] is True
    assert set(checks) == {"data_dir", "sqlite", "files", "index", "thoughts", "faiss", "embedder", "llm"}
    assert all(c["ok"] for c in checks.values())
    assert checks["embedder"]["data"]["dimension"] == 384
    assert checks["llm"]["data"]["backend"] == "local"
    assert DEFAULT_EMBEDDED_MODEL in checks["llm"]["data"]["model"], "the default embedded model"
    assert checks["llm"]["data"]["licence"].startswith("Apache-2.0") and "licence: Apache-2.0" in checks["llm"]["detail"]
    assert checks["llm"]["data"]["tokens"] > 0 and checks["llm"]["data"]["tokens_per_s"] > 0
    assert checks["sqlite"]["data"]["journal_mode"] == "wal"


def test_doctor_names_the_failed_check(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    env = clean_env() | {"COPILOT_DATA_DIR": str(blocker / "data"),
                         "COPILOT_LLM_MODEL": str(tmp_path / "missing.gguf")}
    result = doctor(env=env)
    assert result.returncode != 0
    lines = result.stdout.splitlines()
    assert any(line.startswith("FAIL data_dir") for line in lines)
    assert any(line.startswith("FAIL llm") and "GGUF model file not found" in line for line in lines)
    assert any(line.startswith("ok   faiss") for line in lines)
    assert "failed check(s): data_dir, sqlite, files, index, thoughts, llm" in result.stderr
    assert result.stderr.startswith(f"error: the database {blocker / 'data' / 'copilot.db'} cannot be opened")
