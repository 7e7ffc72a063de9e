"""Uploads are deduplicated within their owner's library only: another user's copy of the same PDF is a paper of
their own, and nothing an add says reveals who else holds the file. arXiv papers stay shared by arXiv id."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from copilot.storage import Store
from copilot.engine import add_message
from ingest.errors import IngestError
from copilot.library import Library, upload_paper_id
from ingest.models import PaperMetadata
from tests.conftest import TEST_DATA
from tests.library_support import HashEmbedder

LITGRAPH = TEST_DATA / "papers" / "N18-3011.pdf"


@pytest.fixture
def library(tmp_path: Path) -> Library:
    data = tmp_path / "data"
    lib = Library(Store(data / "copilot.db", data / "index"), data / "pdfs", embedder=HashEmbedder())
    yield lib
    lib.store.close()


def test_another_user_uploading_the_same_pdf_gets_a_paper_of_their_own(library: Library) -> None:
    ada = library.add_pdf(LITGRAPH, user_id="ada")
    bob = library.add_pdf(LITGRAPH, user_id="bob")
    assert ada.added and bob.added, "bob's upload must not be refused because ada holds the file"
    assert bob.paper_id != ada.paper_id
    assert ada.paper_id not in add_message(bob) and "already" not in add_message(bob)
    assert [p.id for p in library.list("ada")] == [ada.paper_id]
    assert [p.id for p in library.list("bob")] == [bob.paper_id]
    ada_chunks = library.store.chunks.ids_of(ada.paper_id)
    bob_chunks = library.store.chunks.ids_of(bob.paper_id)
    assert len(bob_chunks) == len(ada_chunks) == bob.n_chunks > 10
    assert not set(ada_chunks) & set(bob_chunks)
    assert library.store.check_consistency()["chunks"]


def test_an_owner_reuploading_their_pdf_is_told_it_is_in_their_library(library: Library, tmp_path: Path) -> None:
    first = library.add_pdf(LITGRAPH, user_id="ada")
    renamed = tmp_path / "my copy.pdf"
    renamed.write_bytes(LITGRAPH.read_bytes())
    again = library.add_pdf(renamed, user_id="ada")
    assert not again.added and again.paper_id == first.paper_id
    assert add_message(again) == f"already in your library as {first.paper_id}"
    assert library.store.db["papers"].count == 1
    assert again.n_chunks == first.n_chunks > 10, "a re-add reports the passages the paper has, not 0"


def test_the_command_line_prints_no_terminal_escapes_from_a_file_name(library: Library, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from copilot import cli as cli_module
    from copilot.library import Library as LibraryType

    monkeypatch.setattr(LibraryType, "open", classmethod(lambda cls, settings, **kw: library))
    monkeypatch.setattr(library.store, "close", lambda: None)
    odd = tmp_path / "paper\x1b]0;owned\x07\x1b[2J.pdf"
    odd.write_bytes(LITGRAPH.read_bytes())
    runner = CliRunner()
    for _ in range(2):  # added, then already there
        done = runner.invoke(cli_module.cli, ["papers", "add", str(odd), "--quiet"])
        assert done.exit_code == 0, done.output
        assert "\x1b" not in done.output and "\x07" not in done.output
    assert "already in your library" in done.output and " 0 chunks" not in done.output
    broken = tmp_path / "notes\x1b[31m.pdf"
    broken.write_bytes(b"not a PDF at all")
    done = runner.invoke(cli_module.cli, ["papers", "add", str(broken)])
    assert done.exit_code == 1 and "notes" in done.output, done.output  # the error names the file ...
    assert "\x1b" not in done.output  # ... without its escape sequence


def test_removing_one_owners_copy_leaves_the_other(library: Library) -> None:
    ada = library.add_pdf(LITGRAPH, user_id="ada")
    bob = library.add_pdf(LITGRAPH, user_id="bob")
    with pytest.raises(IngestError, match="No paper"):
        library.remove(ada.paper_id, user_id="bob")
    library.remove(bob.paper_id, user_id="bob")
    assert library.list("bob") == []
    kept = library.show(ada.paper_id, user_id="ada")
    assert kept.n_chunks == ada.n_chunks and Path(kept.pdf_path).is_file(), "ada's paper and file are untouched"
    library.remove(ada.paper_id, user_id="ada")
    assert list(library.pdf_dir.iterdir()) == [], "the file goes with the last paper that used it"


def test_upload_ids_differ_by_owner_and_old_ids_still_deduplicate(library: Library) -> None:
    sha = "ab" * 32
    assert upload_paper_id(sha, "ada") != upload_paper_id(sha, "bob")
    assert upload_paper_id(sha, "ada") == upload_paper_id(sha, "ada")
    first = library.add_pdf(LITGRAPH, user_id="ada")
    # An upload stored under the old id scheme (pdf-<hash prefix>) is still the owner's copy.
    sha = library.store.papers.get(first.paper_id).file_hash
    with library.store.transaction() as conn:
        conn.execute("PRAGMA defer_foreign_keys = ON")
        conn.execute("UPDATE papers SET id = ? WHERE id = ?", [f"pdf-{sha[:12]}", first.paper_id])
        conn.execute("UPDATE chunks SET paper_id = ? WHERE paper_id = ?", [f"pdf-{sha[:12]}", first.paper_id])
    again = library.add_pdf(LITGRAPH, user_id="ada")
    assert not again.added and again.paper_id == f"pdf-{sha[:12]}"
    assert library.add_pdf(LITGRAPH, user_id="bob").added


def test_an_arxiv_paper_is_not_hidden_by_someones_upload_of_the_same_file(library: Library) -> None:
    upload = library.add_pdf(LITGRAPH, user_id="ada")
    metadata = PaperMetadata(arxiv_id="1805.02262", version="v1", title="Construction of the Literature Graph",
                             authors=["Waleed Ammar"], abstract="", categories=["cs.CL"], primary_category="cs.CL",
                             published="2018-05-06T00:00:00+00:00", updated="2018-05-06T00:00:00+00:00",
                             pdf_url="https://arxiv.org/pdf/1805.02262v1")
    shared = library.add_pdf(LITGRAPH, user_id="bob", metadata=metadata)
    assert shared.added and shared.paper_id == "1805.02262"
    assert {p.id for p in library.list("bob")} == {"1805.02262"}
    assert {p.id for p in library.list("ada")} == {"1805.02262", upload.paper_id}
    # Once shared, the same file uploaded by anyone is the shared paper they can already see.
    carol = library.add_pdf(LITGRAPH, user_id="carol")
    assert not carol.added and carol.paper_id == "1805.02262"


def stored_state(lib: Library) -> dict:
    return {"papers": lib.store.db["papers"].count, "chunks": lib.store.db["chunks"].count,
            "files": sorted(p.name for p in lib.pdf_dir.iterdir()) if lib.pdf_dir.exists() else []}


def test_a_truncated_upload_is_refused_naming_the_users_file(library: Library, tmp_path: Path) -> None:
    library.add_pdf(LITGRAPH, user_id="ada")
    before = stored_state(library)
    data = (TEST_DATA / "papers" / "2020.acl-main.207.pdf").read_bytes()
    cut = tmp_path / "specter draft.pdf"
    cut.write_bytes(data[: int(len(data) * 0.3)])
    with pytest.raises(IngestError) as info:
        library.add_pdf(cut, user_id="ada")
    message = str(info.value)
    assert message.startswith("specter draft.pdf is damaged or truncated") and "\n" not in message
    assert ".tmp" not in message and not re.search(r"[0-9a-f]{16}", message), "the stored file is never named"
    assert stored_state(library) == before, "nothing is stored and no file is left"
