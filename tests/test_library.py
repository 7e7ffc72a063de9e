"""The library on real papers: idempotent adds, list/show/remove, and failed adds that change nothing."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from copilot.config import Settings
from copilot.embeddings import get_embedder
from copilot import library as library_module
from ingest.errors import IngestError, PDFError
from copilot.library import Library
from ingest.models import PaperMetadata
from copilot.types import ThoughtSource
from tests.conftest import ROOT, TEST_DATA, clean_env, count_rows, get_row

pytestmark = pytest.mark.slow
PAPERS = TEST_DATA / "papers"
LITGRAPH = PAPERS / "N18-3011.pdf"


@pytest.fixture
def library(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Library:
    """The library of a fresh data directory, its records on each storage backend in turn."""
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else ""
    settings = Settings(data_dir=tmp_path / "data", database_url=url)
    lib = Library.open(settings, embedder=get_embedder(settings))
    yield lib
    lib.store.close()


def snapshot(lib: Library) -> dict:
    """Everything an add could change (the embedded backend also has its index files to keep in step)."""
    store = lib.store
    seen = {
        "papers": count_rows(store, "papers"),
        "chunks": count_rows(store, "chunks"),
        "pdfs": sorted(p.name for p in lib.pdf_dir.iterdir()) if lib.pdf_dir.exists() else [],
        "searchable": store.count("chunks"),
    }
    if store.backend == "sqlite":
        seen |= {"generation": store.generation("chunks"), "index": len(store.index("chunks") or [])}
    return seen


def test_add_search_and_idempotency(library: Library, tmp_path: Path) -> None:
    result = library.add_pdf(LITGRAPH)
    assert result.added and result.n_chunks > 10 and result.n_pages >= 5
    assert "Literature Graph" in result.title
    assert library.store.check_consistency()["chunks"]
    query = library.embedder.encode_query("How are entities linked in the Semantic Scholar literature graph?")
    hits = library.store.search("chunks", query, 3)
    rows = [get_row(library.store, "chunks", i) for i, _ in hits]
    assert all(r["paper_id"] == result.paper_id for r in rows)
    before = snapshot(library)
    copy = tmp_path / "renamed copy.pdf"
    shutil.copy(LITGRAPH, copy)
    again = library.add_pdf(copy)
    assert not again.added and again.paper_id == result.paper_id
    assert snapshot(library) == before


def test_list_show_remove(library: Library) -> None:
    added = library.add_pdf(PAPERS / "2020.acl-main.207.pdf", user_id="ada")
    papers = library.list()
    assert [p.id for p in papers] == [added.paper_id]
    assert papers[0].n_chunks == added.n_chunks
    assert library.list(user_id="bob") == [], "an upload is visible only to its owner"
    shown = library.show(added.paper_id)
    assert shown.abstract and shown.sections and shown.references
    assert any("introduction" in s["title"].lower() for s in shown.sections)
    # A thought built on one of its chunks is flagged when the paper goes.
    chunk_id = library.chunks(added.paper_id)[3].id
    thought_ids = library.store.insert_with_vectors(
        "thoughts", [{"user_id": "ada", "text": "SPECTER embeds papers.", "confidence": 0.9, "flagged": 0}],
        np.ones((1, 384), dtype=np.float32) / np.sqrt(384))
    library.store.thoughts.add_sources(thought_ids[0], [ThoughtSource("chunk", chunk_id)])
    with pytest.raises(IngestError):
        library.remove(added.paper_id, user_id="bob")
    removed = library.remove(added.paper_id, user_id="ada")
    assert removed.chunks_removed == added.n_chunks and removed.thoughts_flagged == 1
    assert library.store.thoughts.get(thought_ids[0]).flagged
    assert count_rows(library.store, "chunks") == 0 and count_rows(library.store, "papers") == 0
    assert library.store.count("chunks") == 0
    assert list(library.pdf_dir.iterdir()) == []
    with pytest.raises(IngestError, match="No paper"):
        library.show(added.paper_id)


def test_a_paper_added_again_by_its_owner_is_not_parsed_or_embedded_again(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Removed and put back by its owner: the last parse and vectors are reused and the paper is the same. Another
    user's upload of the same file is parsed and embedded for that user, so the time an add takes tells nothing
    about what others added."""
    import ingest.pdf

    from tests.library_support import HashEmbedder

    parses, embedded = [], []
    real_parse = ingest.pdf.parse_pdf
    monkeypatch.setattr(ingest.pdf, "parse_pdf", lambda *a, **k: parses.append(a[0]) or real_parse(*a, **k))
    embedder = HashEmbedder()
    real_encode = embedder.encode_documents
    monkeypatch.setattr(embedder, "encode_documents", lambda texts: embedded.append(len(texts)) or real_encode(texts))
    library = Library.open(Settings(data_dir=tmp_path / "data"), embedder=embedder)
    pdf = tmp_path / "copy of the SPECTER paper.pdf"  # bytes no other test adds under this name
    shutil.copy(PAPERS / "2020.acl-main.207.pdf", pdf)

    first = library.add_pdf(pdf, user_id="ada")
    chunks = [(c.section, c.text, c.page_start, c.char_start) for c in library.chunks(first.paper_id)]
    vectors = library.store.chunks.vectors([c.id for c in library.chunks(first.paper_id)])
    sections = library.show(first.paper_id).sections
    assert len(parses) == 1 and embedded == [first.n_chunks]
    library.remove(first.paper_id, user_id="ada")
    again = library.add_pdf(pdf, user_id="ada")
    assert again.added and again.paper_id == first.paper_id and again.n_chunks == first.n_chunks
    assert len(parses) == 1 and embedded == [first.n_chunks], "neither parsed nor embedded again"
    assert [(c.section, c.text, c.page_start, c.char_start) for c in library.chunks(again.paper_id)] == chunks
    assert np.array_equal(library.store.chunks.vectors([c.id for c in library.chunks(again.paper_id)]), vectors)
    assert library.show(again.paper_id).sections == sections

    other = library.add_pdf(pdf, user_id="bob")
    assert other.added and other.paper_id != first.paper_id
    assert len(parses) == 2 and embedded == [first.n_chunks, first.n_chunks], "another owner's add is its own"
    library.store.close()


def bad_pdfs(tmp_path: Path) -> dict[str, Path]:
    truncated = tmp_path / "truncated.pdf"
    truncated.write_bytes(LITGRAPH.read_bytes()[:4000])
    text = tmp_path / "text.pdf"
    text.write_text("This is a text file, not a PDF.")
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"")
    import pymupdf

    blank = tmp_path / "blank.pdf"
    doc = pymupdf.open()
    doc.new_page()
    doc.save(blank)
    encrypted = tmp_path / "encrypted.pdf"
    src = pymupdf.open(LITGRAPH)
    src.save(encrypted, encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="owner", user_pw="user")
    return {"truncated": truncated, "text": text, "empty": empty, "blank": blank, "encrypted": encrypted}


def test_failed_adds_leave_the_library_as_it_was(library: Library, tmp_path: Path) -> None:
    library.add_pdf(LITGRAPH)
    before = snapshot(library)
    for name, path in bad_pdfs(tmp_path).items():
        with pytest.raises(PDFError) as info:
            library.add_pdf(path)
        assert str(info.value), name
        assert snapshot(library) == before, f"{name} changed the library"


def test_add_arxiv_paper_offline(library: Library, monkeypatch: pytest.MonkeyPatch) -> None:
    metadata = PaperMetadata(arxiv_id="2004.07180", version="v4", title="SPECTER: Document-level Representation "
                             "Learning using Citation-informed Transformers", authors=["Arman Cohan"],
                             abstract="Representation learning is a critical ingredient.", categories=["cs.CL"],
                             primary_category="cs.CL", published="2020-04-15T00:00:00+00:00",
                             updated="2020-05-20T00:00:00+00:00", pdf_url="https://arxiv.org/pdf/2004.07180v4")

    class FakeArxiv:
        def by_id(self, ref: str) -> PaperMetadata:
            assert ref == "arXiv:2004.07180v4"
            return metadata

    def fake_download(url: str, dest: Path, **kwargs) -> tuple[Path, str]:  # noqa: ANN003
        assert url == metadata.pdf_url
        from ingest.download import stage_upload

        return stage_upload(PAPERS / "2020.acl-main.207.pdf", dest)

    library._arxiv = FakeArxiv()
    monkeypatch.setattr(library_module, "download_pdf", fake_download)
    result = library.add_arxiv("arXiv:2004.07180v4")
    assert result.added and result.paper_id == "2004.07180"
    shown = library.show("https://arxiv.org/abs/2004.07180")
    assert shown.title.startswith("SPECTER") and shown.authors == ["Arman Cohan"]
    assert shown.version == "v4" and shown.source == "arxiv" and shown.user_id is None
    assert not library.add_arxiv("2004.07180").added


def run_cli(*args: str, data_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "copilot", "papers", *args, "--data-dir", str(data_dir)], cwd=ROOT,
                          env=clean_env(), capture_output=True, text=True, timeout=600)


def test_cli(tmp_path: Path) -> None:
    data = tmp_path / "data"
    added = run_cli("add", str(PAPERS / "2023.eacl-main.121.pdf"), "--json", data_dir=data)
    assert added.returncode == 0, added.stderr
    paper_id = json.loads(added.stdout)["results"][0]["paper_id"]
    listed = json.loads(run_cli("list", "--json", data_dir=data).stdout)
    assert [p["id"] for p in listed] == [paper_id]
    shown = json.loads(run_cli("show", paper_id, "--sections", "--json", data_dir=data).stdout)
    assert shown["sections"] and shown["n_references"] > 10
    bad = tmp_path / "bad.pdf"
    bad.write_text("nope")
    failed = run_cli("add", str(bad), data_dir=data)
    assert failed.returncode == 1 and "error:" in failed.stderr and "not a PDF" in failed.stderr
    removed = run_cli("remove", paper_id, data_dir=data)
    assert removed.returncode == 0 and "removed" in removed.stdout
    assert json.loads(run_cli("list", "--json", data_dir=data).stdout) == []
    missing = run_cli("show", "nope", data_dir=data)
    assert missing.returncode == 1 and "No paper 'nope'" in missing.stderr
