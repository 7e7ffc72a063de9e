"""The one command line: ``python -m copilot`` with its ``papers`` and ``bench`` groups, and the one place where an
error a user sees becomes a single ``error:`` line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from copilot.bench.cli import bench
from copilot.cli import cli
from copilot.library import Library
from tests.conftest import ROOT, clean_env


def test_python_m_ingest_points_to_the_papers_group() -> None:
    done = subprocess.run([sys.executable, "-m", "ingest", "add", "2104.12255"], cwd=ROOT, env=clean_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stdout == "" and done.stderr.splitlines() == ["use: python -m copilot papers ..."]


def test_papers_and_bench_are_groups_of_the_one_command_line() -> None:
    assert {"papers", "bench", "ask", "thoughts", "draft", "ideas", "refresh", "doctor", "reindex", "migrate",
            "warmup"} <= set(cli.commands)
    assert set(cli.commands["papers"].commands) == {"add", "list", "show", "remove", "sync-zotero"}
    assert cli.commands["bench"] is bench, "python -m copilot bench is python -m copilot.bench"
    shown = CliRunner().invoke(cli, ["bench", "--help"])
    assert shown.exit_code == 0 and "latency" in shown.output and "scale" in shown.output


def test_an_error_a_user_sees_is_one_line_and_status_1(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["papers", "show", "nope", "--data-dir", str(tmp_path / "data")])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "error: No paper 'nope' in the library; `python -m copilot papers list` shows what is there."]


def test_the_empty_library_names_the_add_command(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["papers", "list", "--data-dir", str(tmp_path / "data")])
    assert result.exit_code == 0
    assert "`python -m copilot papers add 2104.12255`" in result.stdout


def test_any_other_exception_is_not_hidden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: Library, user_id: str | None = None) -> list:
        raise KeyError("a bug")

    monkeypatch.setattr(Library, "list", broken)
    result = CliRunner().invoke(cli, ["papers", "list", "--data-dir", str(tmp_path / "data")])
    assert result.exit_code == 1 and isinstance(result.exception, KeyError)
