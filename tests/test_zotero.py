"""A Zotero library as a source of papers: a local stand-in for the Zotero web API (tests/zotero_server.py) serving a
library of 22 items (arXiv preprints, PDF attachments with real PDFs, metadata-only records), synced through
pyzotero into the real library (real store, embedder, PDF parsing; arXiv stood in for by a local server)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from copilot.cli import cli
from copilot.config import Settings
from copilot.embeddings import Embedder
from copilot.engine import Copilot
from copilot.errors import NotFound, UserError
from copilot.library import Library
from copilot.storage import Store
from copilot.tasks import zotero as zotero_task
from copilot.tasks.zotero import ZoteroError
from tests.conftest import all_rows
from tests.scripted_llm import ScriptedLLM
from tests.ui_harness import TEST_PAPERS, StubArxiv, pdf_server
from tests.zotero_server import KEY, USER, ZoteroLibrary, attachment, item, serve

MORE = TEST_PAPERS / "more"
RECORDED = Path(__file__).parent / "data" / "zotero"  # responses the real web API gave (pyzotero's test fixtures)


def _library() -> ZoteroLibrary:
    """22 items: 4 name arXiv papers (two of them twice), 3 bring a stored PDF (one of them the same file as an arXiv
    paper's), 15 are records only."""
    lib = ZoteroLibrary()
    lib.items += [
        item("ARX00001", 1, "preprint", "Construction of the Literature Graph", archiveID="arXiv:2301.00001",
             repository="arXiv"),
        item("ARX00002", 2, "journalArticle", "LongEval", DOI="10.48550/arXiv.2301.00002"),
        item("ARX00003", 3, "conferencePaper", "Literature Graph (again)", url="https://arxiv.org/abs/2301.00001v1"),
        item("ARX00004", 4, "report", "LongEval (again)", extra="arXiv: 2301.00002"),
        item("PDF00001", 5, "journalArticle", "SciBERT results", DOI="10.18653/v1/D19-1371"),
        attachment("ATT00001", "PDF00001", 5, "scibert.pdf"),
        item("PDF00002", 6, "conferencePaper", "A paper with its PDF", DOI="10.18653/v1/2020.acl-main.207"),
        attachment("ATT00002", "PDF00002", 6, "acl-207.pdf"),
        attachment("PDF00003", "", 7, "standalone.pdf"),
    ]
    lib.items[-1]["data"].pop("parentItem")
    lib.files = {"ATT00001": MORE / "D19-1371.scibert-table-page.pdf",
                 "ATT00002": TEST_PAPERS / "2020.acl-main.207.pdf", "PDF00003": TEST_PAPERS / "N18-3011.pdf"}
    kinds = ["book", "journalArticle", "thesis", "webpage", "bookSection", "note", "journalArticle", "manuscript",
             "report", "conferencePaper", "book", "journalArticle", "presentation", "dataset", "journalArticle"]
    for n, kind in enumerate(kinds, start=1):
        lib.items.append(item(f"META{n:04d}", 7 + n, kind, f"A record without a PDF {n}", DOI=f"10.1000/meta.{n}"))
    lib.items.append(attachment("LINK0001", "META0001", 8, "elsewhere.pdf", linkMode="linked_file"))
    lib.collections["COLL2345"] = ["ARX00001", "PDF00001", "META0001"]
    return lib


@pytest.fixture
def zotero() -> Iterator[tuple[ZoteroLibrary, str]]:
    lib = _library()
    server, url = serve(lib)
    yield lib, url
    server.shutdown()


@pytest.fixture
def copilot(tmp_path: Path, embedder: Embedder, zotero: tuple[ZoteroLibrary, str]) -> Iterator[Copilot]:
    _, url = zotero
    settings = Settings(data_dir=tmp_path / "data", llm_backend="local", zotero_api_url=url, secret="s" * 32)
    store = Store.open(settings)
    engine = Copilot(settings, store, embedder, ScriptedLLM())
    papers, base = pdf_server(TEST_PAPERS)
    engine.library = Library.open(settings, store=store, embedder=embedder, arxiv=StubArxiv(base))
    yield engine
    papers.shutdown()


def _sync(copilot: Copilot, user: str = "ada") -> dict:
    report = copilot.sync_zotero(user)
    return {k: report[k] for k in ("added", "already", "metadata_only", "unchanged", "failed", "left")}


def test_a_library_of_22_items_syncs_once_and_then_only_what_changed(copilot: Copilot, zotero) -> None:  # noqa: ANN001
    lib, _ = zotero
    copilot.connect_zotero("ada", USER, KEY)
    stored = all_rows(copilot.store, "zotero_connections")[0]
    assert KEY not in repr(stored) and stored["sealed_key"], "the key is kept sealed"
    assert copilot.zotero_connection("ada")["has_key"] and "sealed_key" not in copilot.zotero_connection("ada")
    report = copilot.sync_zotero("ada")
    assert {k: report[k] for k in ("added", "already", "metadata_only", "unchanged", "failed", "left")} == \
        {"added": 4, "already": 3, "metadata_only": 15, "unchanged": 0, "failed": 0, "left": 0}
    standalone = next(line for line in report["items"] if line["item"] == "PDF00003")
    assert standalone["status"] == "already" and standalone["paper_id"] == "2301.00001", "the same PDF, known"
    mine = {p.id: p for p in copilot.papers("ada")}
    assert {"2301.00001", "2301.00002"} <= set(mine) and sum(not p.shared for p in mine.values()) == 2
    assert _sync(copilot) == dict.fromkeys(("added", "already", "metadata_only", "unchanged", "failed", "left"), 0)
    assert len(copilot.papers("ada")) == len(mine), "nothing twice"
    copilot.connect_zotero("ada", USER, "")  # the panel again, its key box empty: the stored key and place stay
    assert copilot.zotero_connection("ada")["has_key"] and copilot.zotero_connection("ada")["library_version"] > 0
    # One new record, one PDF item edited in Zotero (a new version): only those two are read again.
    lib.items.append(item("META9999", 40, "book", "Added since"))
    lib.items[4]["version"] = lib.items[4]["data"]["version"] = 41
    assert _sync(copilot) == {"added": 0, "already": 1, "metadata_only": 1, "unchanged": 0, "failed": 0, "left": 0}
    # A PDF attached in Zotero to a record taken before (its parent's version stays): the record is taken again.
    lib.items.append(attachment("ATT00009", "META0003", 42, "found-later.pdf"))
    lib.files["ATT00009"] = MORE / "D19-1371.scibert-table-page.pdf"
    later = copilot.sync_zotero("ada")
    assert [(i["item"], i["status"]) for i in later["items"]] == [("META0003", "already")], later["items"]
    assert _sync(copilot)["already"] == 0, "and not again"
    copilot.disconnect_zotero("ada")
    assert copilot.zotero_connection("ada") is None and all_rows(copilot.store, "zotero_connections") == []
    with pytest.raises(NotFound):
        copilot.disconnect_zotero("ada")
    with pytest.raises(UserError, match="Connect a Zotero library first"):
        copilot.sync_zotero("ada")


def test_items_as_the_web_api_recorded_them_are_listed_as_records(copilot: Copilot, zotero) -> None:  # noqa: ANN001
    """The 20 top-level items of a real public library as the web API answered them (pyzotero's recorded response:
    webpages, books, a film, an artwork; creators as two names, as one name or none), one of them with a recorded
    child attachment that is a web page, not a PDF: each is listed as a record with its title, none fails, no file
    is asked for, and a second sync reads nothing again."""
    lib, _ = zotero
    recorded = json.loads((RECORDED / "items_doc.json").read_text())
    page = json.loads((RECORDED / "attachments_doc.json").read_text())
    page["data"]["parentItem"] = recorded[1]["key"]  # recorded under another library's item: here under this one
    lib.items, lib.files, lib.collections = [*recorded, page], {}, {}
    assert len(recorded) == 20 and page["data"]["contentType"] == "text/html"
    copilot.connect_zotero("ada", USER, KEY)
    report = copilot.sync_zotero("ada")
    assert {k: report[k] for k in ("added", "already", "metadata_only", "unchanged", "failed", "left")} == \
        {"added": 0, "already": 0, "metadata_only": 20, "unchanged": 0, "failed": 0, "left": 0}, \
        [(line["item"], line["status"], line["message"]) for line in report["items"]]
    titles = {line["item"]: line["title"] for line in report["items"]}
    assert titles == {i["key"]: i["data"]["title"] for i in recorded}
    assert f"/users/{USER}/items/{recorded[1]['key']}/children" in lib.requests, "its attachment was looked at"
    assert not [r for r in lib.requests if r.endswith("/file")], "a web page attachment is never downloaded"
    assert copilot.papers("ada") == [], "a record brings no paper"
    assert _sync(copilot) == dict.fromkeys(("added", "already", "metadata_only", "unchanged", "failed", "left"), 0)


def test_a_collection_alone_and_a_limit_per_sync(copilot: Copilot, zotero) -> None:  # noqa: ANN001
    copilot.connect_zotero("ada", USER, KEY, collection="COLL2345")
    assert _sync(copilot) == {"added": 2, "already": 0, "metadata_only": 1, "unchanged": 0, "failed": 0, "left": 0}
    copilot.settings.zotero_max_items = 8
    copilot.connect_zotero("bob", USER, KEY)
    first = _sync(copilot, "bob")
    assert sum(first[k] for k in ("added", "already", "metadata_only")) == 8 and first["failed"] == 0
    second = _sync(copilot, "bob")
    assert second["unchanged"] == 8 and sum(second[k] for k in ("added", "already", "metadata_only")) == 8
    third = _sync(copilot, "bob")
    assert third["left"] == 0 and sum(third[k] for k in ("added", "already", "metadata_only")) == 6
    assert _sync(copilot, "bob")["unchanged"] == 0, "a whole sync moves the starting point on"


def test_the_pdf_bytes_of_one_sync_are_bounded(copilot: Copilot, zotero) -> None:  # noqa: ANN001
    lib, _ = zotero
    lib.items = [i for i in lib.items if i["key"].startswith(("PDF", "ATT"))]  # 430 KB, 700 KB, 175 KB in order
    copilot.settings.zotero_max_mb = 1
    copilot.connect_zotero("ada", USER, KEY)
    first = copilot.sync_zotero("ada")
    assert (first["added"], first["left"]) == (2, 1)
    assert [i["item"] for i in first["items"] if i["status"] == "left for the next sync"] == ["PDF00002"]
    assert _sync(copilot) == {"added": 1, "already": 0, "metadata_only": 0, "unchanged": 2, "failed": 0, "left": 0}
    copilot.settings.max_upload_mb = 0  # an upload may be no PDF at all: a changed item's file is not read
    lib.items[0]["version"] = 50
    assert copilot.sync_zotero("ada")["items"][0]["message"].startswith("its PDF is larger than the 0 MB")


def test_a_pdf_the_library_refuses_is_not_read_again_until_its_item_changes(copilot: Copilot, zotero,  # noqa: ANN001
                                                                             tmp_path: Path) -> None:
    lib, _ = zotero
    damaged = tmp_path / "damaged.pdf"
    damaged.write_bytes(b"%PDF-1.4\n" + b"\x00garbage" * 200)
    lib.items = [i for i in lib.items if i["key"].startswith(("PDF", "ATT"))]
    lib.files["ATT00002"] = damaged
    copilot.connect_zotero("ada", USER, KEY)
    first = copilot.sync_zotero("ada")
    assert (first["added"], first["failed"]) == (2, 1)
    [refused] = [i for i in first["items"] if i["status"] == "failed"]
    assert refused["item"] == "PDF00002" and "damaged" in refused["message"]
    reads = len([r for r in lib.requests if "ATT00002" in r])
    assert _sync(copilot) == {"added": 0, "already": 0, "metadata_only": 0, "unchanged": 0, "failed": 0, "left": 0}
    assert len([r for r in lib.requests if "ATT00002" in r]) == reads, "not downloaded again"
    lib.items[2]["version"] = lib.items[2]["data"]["version"] = 60  # edited in Zotero: taken again
    assert _sync(copilot)["failed"] == 1


def test_a_sync_cut_half_way_keeps_what_it_took_and_resumes(copilot: Copilot, zotero) -> None:  # noqa: ANN001
    lib, _ = zotero
    lib.fail_file = "ATT00002"  # the second PDF's download drops
    copilot.connect_zotero("ada", USER, KEY)
    with pytest.raises(ZoteroError, match="could not be reached"):
        copilot.sync_zotero("ada")
    taken = all_rows(copilot.store, "zotero_items")
    assert [r["item_key"] for r in taken] == ["ARX00001", "ARX00002", "ARX00003", "ARX00004", "PDF00001"]
    lib.fail_file = None
    del lib.files["PDF00003"]  # a stored attachment whose file Zotero no longer has: listed, the sync goes on
    resumed = copilot.sync_zotero("ada")
    assert next(i for i in resumed["items"] if i["item"] == "PDF00003")["message"] == \
        "its PDF is not in Zotero's storage"
    resumed = {k: resumed[k] for k in ("added", "already", "metadata_only", "unchanged", "failed", "left")}
    assert resumed == {"added": 1, "already": 0, "metadata_only": 16, "unchanged": 5, "failed": 0, "left": 0}
    assert len(all_rows(copilot.store, "zotero_items")) == 22


def test_zotero_refusals_are_one_line_and_lose_nothing(copilot: Copilot, zotero) -> None:  # noqa: ANN001
    lib, _ = zotero
    copilot.connect_zotero("ada", USER, "WrongKey0000000000000000")
    with pytest.raises(ZoteroError, match="refused the key"):
        copilot.sync_zotero("ada")
    copilot.connect_zotero("ada", USER, KEY)
    lib.rate_limited = True
    with pytest.raises(ZoteroError, match="sync again in 7 seconds") as refused:
        copilot.sync_zotero("ada")
    assert "\n" not in str(refused.value) and "127.0.0.1" not in str(refused.value)
    assert all_rows(copilot.store, "zotero_items") == []
    for bad in ({"library_id": "ada"}, {"library_id": USER, "collection": "not a key"},
                {"library_id": USER, "api_key": "key with spaces"}):
        with pytest.raises(UserError):
            copilot.connect_zotero("ada", **bad)
    assert copilot.zotero_connection("ada")["library_id"] == USER, "a refused connection keeps the one before"


def test_the_command_line_connects_syncs_and_disconnects(tmp_path: Path, zotero, monkeypatch) -> None:  # noqa: ANN001
    lib, url = zotero
    lib.items = [i for i in lib.items if not i["key"].startswith("ARX")]  # no arXiv: the command line's is real
    monkeypatch.setenv("COPILOT_ZOTERO_API_URL", url)
    monkeypatch.setenv("COPILOT_SECRET", "s" * 32)
    monkeypatch.setenv("COPILOT_LLM_BACKEND", "local")
    args = ["papers", "sync-zotero", "--data-dir", str(tmp_path / "data"), "--quiet"]
    refused = CliRunner().invoke(cli, [*args, "--library-id", USER, "--api-key", "WrongKey0000"])
    assert refused.exit_code == 1 and refused.stdout == ""
    assert refused.stderr.splitlines() == ["error: Zotero refused the key: check the user or group id, and that the "
                                           "key may read this library."]
    first = CliRunner().invoke(cli, [*args, "--library-id", USER, "--api-key", KEY])
    assert first.exit_code == 0, first.output
    assert first.stdout.splitlines()[-1] == ("added 3, already in the library 0, metadata only 15, unchanged 0, "
                                             "failed 0, left for the next sync 0")
    again = CliRunner().invoke(cli, [*args, "--json"])
    assert again.exit_code == 0 and json.loads(again.stdout)["added"] == 0 and json.loads(again.stdout)["items"] == []
    gone = CliRunner().invoke(cli, [*args, "--disconnect"])
    assert gone.exit_code == 0 and "disconnected" in gone.stdout


@pytest.mark.slow
def test_the_library_tab_syncs_each_users_own_connection(tmp_path: Path, zotero) -> None:  # noqa: ANN001
    from gradio_client import Client

    from tests.ui_harness import RoutedLLM, app_in_process

    lib, url = zotero
    lib.items = [i for i in lib.items if i["key"] in ("ARX00001", "META0001", "META0002")]
    settings = Settings(data_dir=tmp_path / "data", llm_backend="local", users="session", zotero_api_url=url)
    with app_in_process(settings, RoutedLLM()) as (app_url, services, _arxiv):
        ada, bob = Client(app_url, verbose=False), Client(app_url, verbose=False)
        summary, result, papers, key_box = ada.predict(USER, KEY, "", False, False, api_name="/sync_zotero")
        assert summary.startswith("**Zotero synced:** 1 added") and key_box == "", "the key box is emptied"
        rows = result["data"] if isinstance(result, dict) else result
        assert [r[0] for r in rows] == ["ARX00001", "META0001", "META0002"]
        with pytest.raises(Exception, match="Connect a Zotero library first"):
            bob.predict("", "", "", False, False, api_name="/sync_zotero")
        with pytest.raises(Exception, match="No Zotero library is connected"):
            bob.predict(api_name="/disconnect_zotero")
        again, *_ = ada.predict("", "", "", False, False, api_name="/sync_zotero")
        assert again.startswith("**Zotero synced:** 0 added"), again
        assert "disconnected" in ada.predict(api_name="/disconnect_zotero")


def test_zoteros_local_api_file_is_read_from_its_path_only_when_small_enough(zotero: tuple[ZoteroLibrary, str],
                                                                             monkeypatch: pytest.MonkeyPatch,
                                                                             tmp_path: Path) -> None:
    """Zotero 7's local API answers a file with a redirect to its file:// URL: the file's size is read first, and a
    file past the bytes left is never opened; a redirect to another machine is refused."""
    lib, url = zotero
    lib.file_urls = True
    zot = zotero_task.client({"library_id": USER, "library_type": "user", "local": True}, KEY, api_url=url,
                             timeout_s=10)
    zot.endpoint = url  # the stand-in listens where Zotero's local API would
    path = lib.files["ATT00002"]
    expected, size = path.read_bytes(), path.stat().st_size
    opened: list[Path] = []
    real_open = Path.open
    monkeypatch.setattr(Path, "open", lambda self, *a, **k: opened.append(self) or real_open(self, *a, **k))
    assert zotero_task._local_file(zot, "ATT00002", size) == expected
    assert opened == [path.resolve()]
    opened.clear()
    assert zotero_task._local_file(zot, "ATT00002", size - 1) is None
    assert opened == [], "a file larger than the bytes left is never opened"
    for elsewhere in (f"file://elsewhere{path.resolve()}", f"{url}/users/{USER}/items/ATT00002/file", "file://[x/"):
        lib.redirect_to = elsewhere
        with pytest.raises(ZoteroError, match="somewhere other than this machine"):
            zotero_task._local_file(zot, "ATT00002", size)
    assert opened == [], "nothing read from a redirect off this machine"
    lib.redirect_to = None
    lib.files["ATT00002"] = Path("/nonexistent/zotero/file 100%25.pdf")
    with pytest.raises(zotero_task.ZoteroNotFound):
        zotero_task._local_file(zot, "ATT00002", size)
    spaced = tmp_path / "a paper 100%41.pdf"  # a file name with a space and a literal percent sign
    spaced.write_bytes(expected)
    lib.files["ATT00002"] = spaced
    assert zotero_task._local_file(zot, "ATT00002", size) == expected, "the path is decoded once"
    lib.file_urls = False
    assert zotero_task._local_file(zot, "ATT00001", 10**7) == lib.files["ATT00001"].read_bytes(), "bytes sent"
