"""A database that cannot be used (random bytes, a truncated or damaged file, a directory, no permission) is one
line naming the file and what to do, in every command and in a single user's web app (a shared instance's visitors
read that it is unavailable, without the server's paths), and the file is left as it was."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import gradio as gr
import numpy as np
import pytest
from click.testing import CliRunner

from copilot.tools import doctor
from copilot.cli import cli as copilot_cli
from copilot.cli import papers as papers_cli
from copilot.config import Settings
from copilot.errors import without_paths
from copilot.storage import StorageError, Store
from copilot.ui.context import UNAVAILABLE, AppContext
from copilot.ui.services import Services
from tests.conftest import ROOT, TEST_DATA, clean_env


def good_database(data: Path) -> bytes:
    """The bytes of a real database with a paper and 300 chunks (several pages of rows)."""
    with Store(data / "copilot.db", data / "index") as store:
        store.db["papers"].insert({"id": "p1", "title": "A paper"})
        rng = np.random.default_rng(0)
        store.insert_with_vectors("chunks", [{"paper_id": "p1", "seq": i, "section": "Body", "text": "word " * 200}
                                             for i in range(300)], rng.normal(size=(300, 16)).astype(np.float32))
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return (data / "copilot.db").read_bytes()


def broken(tmp_path: Path, kind: str) -> Path:
    """A data directory whose database is broken in the way ``kind`` names."""
    data = tmp_path / kind
    db = data / "copilot.db"
    data.mkdir(parents=True)
    if kind == "random":
        db.write_bytes(np.random.default_rng(1).bytes(40_000))
    elif kind == "directory":
        db.mkdir()
    else:
        raw = good_database(tmp_path / "good")
        if kind == "truncated":
            db.write_bytes(raw[: len(raw) * 3 // 10])
        elif kind == "damaged-page":  # a page deep in the chunks table overwritten: the header and schema are fine
            at = len(raw) // 2 // 4096 * 4096
            db.write_bytes(raw[:at] + np.random.default_rng(2).bytes(4096) + raw[at + 4096:])
        elif kind == "overwritten-16k":  # 16 KB of the middle overwritten: several pages damaged at once
            at = len(raw) // 2
            db.write_bytes(raw[:at] + np.random.default_rng(3).bytes(16384) + raw[at + 16384:])
    return data


KINDS = ["random", "truncated", "damaged-page", "overwritten-16k", "directory"]


@pytest.mark.parametrize("kind", KINDS)
def test_opening_raises_one_line_naming_the_file_and_leaves_it_alone(tmp_path: Path, kind: str) -> None:
    data = broken(tmp_path, kind)
    db = data / "copilot.db"
    before = db.read_bytes() if db.is_file() else None
    with pytest.raises(StorageError) as info:
        Store.open(Settings(data_dir=data))
    message = str(info.value)
    assert message.startswith(f"the database {db} ") and "\n" not in message
    assert ("is a directory" if kind == "directory" else "move it away") in message
    if before is not None:
        assert db.read_bytes() == before, "the broken file must not be changed"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
def test_a_database_without_permission_says_so(tmp_path: Path) -> None:
    data = tmp_path / "data"
    good_database(data)
    (data / "copilot.db").chmod(0)
    try:
        with pytest.raises(StorageError, match="read and write access"):
            Store.open(Settings(data_dir=data))
    finally:
        (data / "copilot.db").chmod(0o644)


def _sqlite_error(cls: type, message: str, name: str) -> Exception:
    exc = cls(message)
    exc.sqlite_errorname = name  # what SQLite itself sets on the errors it raises
    return exc


def test_what_counts_as_an_unusable_database(tmp_path: Path) -> None:
    """Permission and I/O errors name the fix; a busy or locked database, or a bug, is not the file's fault."""
    import sqlite3

    from copilot.storage.store import unusable_database

    db = tmp_path / "copilot.db"
    denied = unusable_database(db, PermissionError(13, "Permission denied"))
    readonly = unusable_database(db, _sqlite_error(sqlite3.OperationalError, "attempt to write a readonly database",
                                                   "SQLITE_READONLY"))
    io = unusable_database(db, _sqlite_error(sqlite3.OperationalError, "disk I/O error", "SQLITE_IOERR_READ"))
    for error in (denied, readonly, io):
        assert isinstance(error, StorageError) and str(error).startswith(f"the database {db} cannot be opened")
        assert "read and write access" in str(error)
    assert unusable_database(db, _sqlite_error(sqlite3.OperationalError, "database is locked", "SQLITE_BUSY")) is None
    assert unusable_database(db, ValueError("a bug")) is None
    damaged = unusable_database(db, _sqlite_error(sqlite3.DatabaseError, "database disk image is malformed",
                                                  "SQLITE_CORRUPT"))
    assert "is damaged or not a SQLite database (database disk image is malformed): move it away" in str(damaged)


PDF = str(TEST_DATA / "papers" / "N18-3011.pdf")
COMMANDS = [
    (papers_cli, ["list"]), (papers_cli, ["list", "--json"]), (papers_cli, ["add", PDF, "--quiet"]),
    (papers_cli, ["show", "p1"]), (papers_cli, ["remove", "p1"]),
    (copilot_cli, ["ask", "What is a literature graph?"]), (copilot_cli, ["thoughts", "list"]),
    (copilot_cli, ["thoughts", "show", "1"]), (copilot_cli, ["thoughts", "delete", "1"]),
    (copilot_cli, ["reindex"]), (copilot_cli, ["warmup", "p1"]), (copilot_cli, ["draft", "abstract", "p1"]),
    (copilot_cli, ["draft", "related", "--title", "Graphs"]), (copilot_cli, ["ideas"]),
    (copilot_cli, ["refresh", "--category", "cs.CL"]),
]


@pytest.mark.parametrize(("group", "args"), COMMANDS, ids=[" ".join(a[:2]) for _, a in COMMANDS])
def test_every_command_ends_with_the_one_line_and_status_1(tmp_path: Path, group: click.Group,
                                                           args: list[str]) -> None:
    data = broken(tmp_path, "random")
    result = CliRunner().invoke(group, [*args, "--data-dir", str(data)])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stderr.splitlines() == [f"error: {_message(data)}"]


def _message(data: Path) -> str:
    with pytest.raises(StorageError) as info:
        Store.open(Settings(data_dir=data))
    return str(info.value)


def test_doctor_reports_the_line_and_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = broken(tmp_path, "truncated")
    monkeypatch.setattr(doctor, "checks_for", lambda settings: [doctor.check_data_dir, doctor.check_sqlite,
                                                               doctor.check_files, doctor.check_index])
    result = CliRunner().invoke(copilot_cli, ["doctor", "--repair", "--data-dir", str(data)])
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0] == f"error: {_message(data)}"
    assert "failed check(s): sqlite, files, index" in result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("FAIL sqlite") and str(data / "copilot.db") in line for line in lines)


def test_real_processes_print_the_line_without_a_traceback(tmp_path: Path) -> None:
    data = broken(tmp_path, "damaged-page")
    for args in (["papers", "list"], ["ask", "What is S2ORC?"]):
        done = subprocess.run([sys.executable, "-m", "copilot", *args, "--data-dir", str(data)], cwd=ROOT,
                              env=clean_env(), capture_output=True, text=True, timeout=120)
        assert done.returncode == 1, done.stdout + done.stderr
        assert done.stderr.splitlines() == [f"error: {_message(data)}"], done.stderr


def test_the_app_shows_the_line_as_an_error(tmp_path: Path) -> None:
    data = broken(tmp_path, "random")
    settings = Settings(data_dir=data, users="single")
    ctx = AppContext(settings, Services(settings), "single")
    with pytest.raises(gr.Error) as info:
        ctx.user(None)
    # The page names the file, never its server path (the log keeps the whole line).
    assert info.value.message == without_paths(_message(data)) and str(data) not in info.value.message
    # Once the file is moved away, the next action opens a fresh database.
    (data / "copilot.db").rename(data / "copilot.db.broken")
    assert ctx.user(None) == "local"
    assert ctx.services.store.papers.visible() == []


@pytest.mark.slow  # starts the app
def test_the_running_app_answers_every_action_with_the_line(tmp_path: Path) -> None:
    from gradio_client import Client

    from copilot.ui import build_app
    from tests.conftest import free_port

    data = broken(tmp_path, "truncated")
    settings = Settings(data_dir=data, users="session", llm_backend="local")
    demo = build_app(settings, Services(settings), warm_up=False)
    port = free_port()
    demo.queue().launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        calls = [("/list_papers", ()), ("/list_thoughts", ("", "newest")), ("/search_arxiv", ("graphs", "all", 3))]
        for api, args in calls:
            with pytest.raises(Exception) as info:  # noqa: PT011 - gradio_client's AppError carries the message
                client.predict(*args, api_name=api)
            # A shared instance's visitors read one line without the server's paths; the log has the file's line.
            assert str(info.value) == UNAVAILABLE and str(data) not in str(info.value), api
    finally:
        demo.close()
