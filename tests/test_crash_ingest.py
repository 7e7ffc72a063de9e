"""SIGKILL ``python -m copilot papers add`` at seeded random moments and where it hurts most (a PDF copied but not
yet stored; a PDF moved into place inside the uncommitted transaction): ``doctor --repair`` then leaves no orphan
file, the database is whole and agrees with its index, and every committed paper is intact."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from copilot.tools import doctor
from copilot.cli import cli
from copilot.config import Settings
from copilot.storage import Store
from tests.conftest import ROOT, TEST_DATA, clean_env

CHILD = Path(__file__).with_name("crash_ingest.py")
PDFS = sorted((TEST_DATA / "papers").glob("*.pdf"))
KILLS = 6


def start(data: Path, pdf: Path, pause: str = "") -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(CHILD), str(data), str(pdf), pause], cwd=ROOT, env=clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def finish(proc: subprocess.Popen) -> dict | None:
    """The add's JSON report when the child ran to its end, else None (killed)."""
    out, _ = proc.communicate(timeout=120)
    if proc.returncode != 0:
        return None
    (result,) = json.loads(out)["results"]
    return result


def kill_at_pause(proc: subprocess.Popen) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "PAUSED", f"the child did not reach its pause: {line!r}"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def test_killed_adds_leave_nothing_after_doctor_repair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(20261201)
    data = tmp_path / "data"
    settings = Settings(data_dir=data)
    committed: dict[str, int] = {}

    began = time.monotonic()
    first = finish(start(data, PDFS[0]))
    assert first is not None and first["added"]
    committed[first["paper_id"]] = first["n_chunks"]
    one_add_s = time.monotonic() - began

    modes = ["staged", "placed"] + ["random"] * (KILLS - 2)
    rng.shuffle(modes)
    killed = 0
    for mode in modes:
        pdf = rng.choice(PDFS[1:])
        if mode == "random":
            proc = start(data, pdf)
            time.sleep(rng.uniform(0.2, one_add_s))
            proc.send_signal(signal.SIGKILL)
            result = finish(proc)
            if result is None:
                killed += 1
            elif result["added"]:  # it finished before the kill: a committed paper like any other
                committed[result["paper_id"]] = result["n_chunks"]
        else:
            with Store.open(settings) as store:  # a pause needs a PDF the library does not hold yet
                held = {p.file_hash for p in map(store.papers.get, store.papers.visible_ids()) if p}
            pdf = next((p for p in PDFS[1:] if _sha(p) not in held), None)
            if pdf is None:
                continue
            kill_at_pause(start(data, pdf, mode))
            killed += 1
    assert killed >= 2

    monkeypatch.setattr(doctor, "checks_for",
                        lambda settings: [doctor.check_sqlite, doctor.check_files, doctor.check_index])
    args = ["doctor", "--data-dir", str(data)]
    found = CliRunner().invoke(cli, [*args, "--json"])
    report = {c["name"]: c for c in json.loads(found.stdout)["checks"]}
    assert len(report["files"]["data"]["orphan_pdfs"]) >= 2, "the paused kills each leave a file to clean"
    repaired = CliRunner().invoke(cli, [*args, "--repair"])
    assert repaired.exit_code == 0, repaired.output
    again = CliRunner().invoke(cli, [*args, "--json"])
    checks = {c["name"]: c for c in json.loads(again.stdout)["checks"]}
    assert again.exit_code == 0 and checks["files"]["detail"] == "no orphan files", again.output

    leftovers = [p.name for p in data.rglob("*") if ".tmp" in p.name]
    assert not leftovers, leftovers
    with Store.open(settings) as store:
        assert store.integrity_ok()
        assert store.check_consistency() == {"chunks": True, "thoughts": True, "memories": True}
        papers = {p.id: p for p in map(store.papers.get, store.papers.visible_ids()) if p}
        for paper_id, n_chunks in committed.items():
            assert papers[paper_id].n_chunks == n_chunks, f"committed paper {paper_id} changed"
        for paper in papers.values():  # every paper is whole: its chunks and its file
            assert paper.n_chunks > 10 and Path(paper.pdf_path).is_file()
        stored = {p.name for p in (data / "pdfs").iterdir()}
        assert stored == {Path(p.pdf_path).name for p in papers.values()}, "every stored file belongs to a paper"


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow  # the real command with the real embedder, and the real doctor (embedder and LLM checks too)
def test_killed_real_adds_then_real_doctor_repair(tmp_path: Path) -> None:
    """``python -m copilot papers add`` itself, killed six times at seeded random moments of a whole add (most land
    while the PDF is staged and the model loads), then ``python -m copilot doctor --repair``."""
    rng = random.Random(71)
    data = tmp_path / "data"

    def add(pdf: Path) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "copilot", "papers", "add", str(pdf), "--json", "--quiet",
                                 "--data-dir", str(data)], cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)

    began = time.monotonic()
    first = finish(add(PDFS[0]))
    assert first is not None and first["added"]
    one_add_s = time.monotonic() - began
    committed = {first["paper_id"]: first["n_chunks"]}
    killed = 0
    for _ in range(KILLS):
        proc = add(rng.choice(PDFS[1:]))
        time.sleep(rng.uniform(0.5, one_add_s))
        proc.send_signal(signal.SIGKILL)
        result = finish(proc)
        killed += result is None
        if result is not None and result["added"]:
            committed[result["paper_id"]] = result["n_chunks"]
    assert killed >= 3, "most kills must land inside an add"

    repaired = subprocess.run([sys.executable, "-m", "copilot", "doctor", "--repair", "--json", "--data-dir",
                               str(data)], cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=600)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    checks = {c["name"]: c for c in json.loads(repaired.stdout)["checks"]}
    assert checks["files"]["ok"] and checks["index"]["ok"]
    print(checks["files"]["detail"])  # e.g. "removed 5 orphan files (5 orphan pdfs), 6.6 MB"

    settings = Settings(data_dir=data)
    (files,) = doctor.run_checks(settings, [doctor.check_files])
    assert files.ok and files.detail == "no orphan files"
    assert not [p.name for p in data.rglob("*") if ".tmp" in p.name]
    with Store.open(settings) as store:
        assert store.integrity_ok()
        assert store.check_consistency() == {"chunks": True, "thoughts": True, "memories": True}
        papers = {p.id: p for p in map(store.papers.get, store.papers.visible_ids()) if p}
        assert {paper_id: papers[paper_id].n_chunks for paper_id in committed} == committed
        assert {p.name for p in (data / "pdfs").iterdir()} == {Path(p.pdf_path).name for p in papers.values()}
