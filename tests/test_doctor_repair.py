"""``doctor`` compares each vector index with the database and finds files no read uses; ``--repair`` rebuilds the
index and removes them, and the papers stay as they were."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from copilot.tools import doctor
from copilot.cli import cli
from copilot.config import Settings
from copilot.storage import Store
from copilot.library import Library
from tests.conftest import TEST_DATA
from tests.library_support import HashEmbedder

STORAGE_CHECKS = [doctor.check_sqlite, doctor.check_files, doctor.check_index]


def add_papers(settings: Settings) -> dict[str, int]:
    library = Library.open(settings, embedder=HashEmbedder())
    try:
        added = [library.add_pdf(TEST_DATA / "papers" / name, user_id=user)
                 for name, user in (("N18-3011.pdf", "ada"), ("2020.acl-main.207.pdf", "bob"))]
    finally:
        library.store.close()
    return {a.paper_id: a.n_chunks for a in added}


def make_orphans(settings: Settings) -> int:
    """A stored PDF no paper uses, a staged upload of a dead process, an old snapshot with its delta, a killed
    snapshot save's temporary folder; returns their total size."""
    pdfs, index = settings.data_dir / "pdfs", settings.index_dir
    (pdfs / f"{'0' * 64}.pdf").write_bytes(b"%PDF-1.4 left by a killed add" * 100)
    (pdfs / ".upload-999999999-abc.tmp").write_bytes(b"%PDF-1.4 half a copy")
    (index / "chunks.0.snap").mkdir()
    (index / "chunks.0.snap" / "part").write_bytes(b"x" * 5000)
    (index / "chunks.0.delta").write_bytes(b"y" * 300)
    (index / ".chunks.9.snap.tmp-999999999").mkdir()
    (index / ".chunks.9.snap.tmp-999999999" / "part").write_bytes(b"z" * 700)
    return 29 * 100 + 20 + 5000 + 300 + 700


def test_doctor_finds_orphans_and_repair_removes_them(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    papers = add_papers(settings)
    clean = {c.name: c for c in doctor.run_checks(settings, STORAGE_CHECKS)}
    assert clean["files"].ok and clean["files"].detail == "no orphan files"
    assert clean["index"].ok and clean["index"].data["consistent"] == {"chunks": True, "thoughts": True,
                                                                       "memories": True}
    size = make_orphans(settings)
    # (Loading an index also clears temporary folders of dead writers, so the files are looked at first.)
    found = {c.name: c for c in doctor.run_checks(settings, [doctor.check_files])}
    assert not found["files"].ok
    assert found["files"].detail.startswith("5 orphan files (2 orphan pdfs, 3 stale index files), 8.9 kB")
    assert sum(f["bytes"] for kind in ("orphan_pdfs", "stale_index_files") for f in found["files"].data[kind]) == size
    repaired = {c.name: c for c in doctor.run_checks(settings, STORAGE_CHECKS, repair=True)}
    assert repaired["files"].ok and repaired["files"].detail.startswith("removed 5 orphan files")
    assert {c.name: c.ok for c in doctor.run_checks(settings, STORAGE_CHECKS)} == {"sqlite": True, "index": True,
                                                                                 "files": True}
    with Store.open(settings) as store:
        assert {p.id: p.n_chunks for p in store.papers.visible()} == papers
        assert all(Path(store.papers.get(p).pdf_path).is_file() for p in papers)
        assert store.check_consistency()["chunks"]


def test_an_index_that_differs_from_the_database_is_rebuilt(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    papers = add_papers(settings)
    with Store.open(settings) as store:
        store.index("chunks")
        # The owner changes behind the index's back (no metadata hook): its filters no longer match the rows.
        store.db.execute("UPDATE papers SET user_id = 'carol' WHERE user_id = 'ada'")
    (index,) = doctor.run_checks(settings, [doctor.check_index])
    assert not index.ok and index.data["consistent"]["chunks"] is False and "--repair" in index.detail
    (index,) = doctor.run_checks(settings, [doctor.check_index], repair=True)
    assert index.ok and index.data["rebuilt"] == ["chunks"]
    assert f"chunks {sum(papers.values())} vectors rebuilt" in index.detail
    with Store.open(settings) as store:
        assert store.check_consistency() == {"chunks": True, "thoughts": True, "memories": True}


def test_doctor_repair_from_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    add_papers(settings)
    make_orphans(settings)
    monkeypatch.setattr(doctor, "checks_for", lambda settings: [doctor.check_sqlite, doctor.check_files])
    args = ["doctor", "--data-dir", str(settings.data_dir)]
    found = CliRunner().invoke(cli, args)
    assert found.exit_code == 1 and "failed check(s): files" in found.stderr
    assert any(line.startswith("FAIL files") and "5 orphan files" in line for line in found.stdout.splitlines())
    repaired = CliRunner().invoke(cli, [*args, "--repair"])
    assert repaired.exit_code == 0, repaired.output
    lines = repaired.stdout.splitlines()
    assert any(line.startswith("ok   files") and "removed 5 orphan files" in line for line in lines)
    assert CliRunner().invoke(cli, args).exit_code == 0
