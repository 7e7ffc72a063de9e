"""The Library tab's first visit, BibTeX import and housekeeping through ``gradio_client``, on an app of its own.

Its own app, because a first visit needs an instance whose library is still empty (arXiv papers are shared by
everyone) and the import's results depend on which papers are already stored. The arXiv stand-in serves the four
shared papers; its category listing starts with SPECTER, S2ORC and the literature graph, so "Add example papers"
adds 2301.00003, 2301.00004 and 2301.00001, and the BibTeX export then finds 2301.00001 stored and adds 2301.00002.
"""

from __future__ import annotations

import re

from pathlib import Path

import pytest
from gradio_client import Client, handle_file

from copilot.config import Settings
from tests.ui_harness import TEST_PAPERS, RoutedLLM, app_in_process, metadata

pytestmark = pytest.mark.slow

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - yields (url, services, stub arxiv, root)
    root = tmp_path_factory.mktemp("ui-library")
    settings = Settings(data_dir=root / "data", llm_backend="local", users="session")
    with app_in_process(settings, RoutedLLM()) as (url, services, arxiv):
        graph, longeval = arxiv.papers
        arxiv.papers = [metadata("2301.00003", "SPECTER: Document-level Representation Learning",
                                 f"{arxiv.base_url}/2020.acl-main.207.pdf"),
                        metadata("2301.00004", "S2ORC: The Semantic Scholar Open Research Corpus",
                                 f"{arxiv.base_url}/2020.acl-main.447.pdf"),
                        graph, longeval]
        yield url, services, arxiv, root


def _client(url: str) -> Client:
    return Client(url, verbose=False)


def _rows(table: dict | list) -> list[list]:
    return table["data"] if isinstance(table, dict) else table


def _upload(client: Client, root: Path, name: str, as_name: str) -> list[list]:
    """Upload a copy of a shared paper whose bytes differ from the one the arXiv stand-in serves (a trailing
    comment), so that it is an upload of its own rather than the arXiv paper already stored."""
    copy = root / as_name
    copy.write_bytes((TEST_PAPERS / name).read_bytes() + b"\n% the user's own copy\n")
    notice, papers = client.predict([handle_file(str(copy))], api_name="/upload_pdfs")
    assert "added" in notice or "already in your library" in notice, notice
    return _rows(papers)


def test_a_first_visit_adds_example_papers_or_says_to_upload(app) -> None:  # noqa: ANN001
    url, _, arxiv, _ = app
    client = _client(url)
    assert _rows(client.predict(api_name="/list_papers")) == []
    summary, *_ = client.predict("", "newest", api_name="/dashboard")
    assert summary.startswith("**No thoughts yet.**") and "Chat tab" in summary

    arxiv.offline = True
    try:
        notice, papers = client.predict("cs.CL", api_name="/add_example_papers")
    finally:
        arxiv.offline = False
    assert "arXiv is unavailable" in notice and "Upload PDFs" in notice and _rows(papers) == []
    with pytest.raises(Exception, match="not an arXiv category"):
        client.predict("not a category!", api_name="/add_example_papers")

    notice, papers = client.predict("cs.CL", api_name="/add_example_papers")
    assert sorted(r[0] for r in _rows(papers)) == ["2301.00001", "2301.00003", "2301.00004"], notice
    assert notice.count(": added as") == 3, notice
    assert all(r[-1] == "shared" and r[2] == "Ada Lovelace, Alan Turing" and r[3] == "2026" for r in _rows(papers))


def test_import_bibtex_adds_arxiv_entries_lists_the_rest_and_refuses_a_malformed_file(app) -> None:  # noqa: ANN001
    url, _, arxiv, root = app
    client = _client(url)
    before = sorted(r[0] for r in _rows(client.predict(api_name="/list_papers")))
    assert "2301.00002" not in before
    with pytest.raises(Exception, match=r"line 8 is malformed .*Nothing was imported"):
        client.predict(handle_file(str(DATA / "malformed.bib")), api_name="/import_bibtex")
    assert sorted(r[0] for r in _rows(client.predict(api_name="/list_papers"))) == before

    lookups = arxiv.lookups
    summary, result, papers = client.predict(handle_file(str(DATA / "zotero_export.bib")), api_name="/import_bibtex")
    assert arxiv.lookups == lookups + 1, "the new arXiv entries are looked up in one request"
    status = {r[0]: (r[2], r[3]) for r in _rows(result)}
    assert status == {
        "ammar_construction_2023": ("already in the library", "2301.00001"),
        "krishna2023longeval": ("added", "2301.00002"),
        "cohan_specter_2020": ("DOI only", ""),
        "lo_s2orc_2020": ("file to upload", ""),
        "turing_unpublished_2023": ("not found", ""),
        "lovelace_graph_v2": ("already in the library", "2301.00001"),
        "godel_book_1931": ("not found", ""),
    }
    details = {r[0]: r[4] for r in _rows(result)}
    assert details["cohan_specter_2020"] == "https://doi.org/10.18653/v1/2020.acl-main.207"
    assert "Lo et al. - 2020 - S2ORC.pdf" in details["lo_s2orc_2020"]
    assert summary.startswith("**7 entries:** 1 added, 2 already in the library, 1 file to upload, 1 DOI only, "
                              "2 not found.") and "Upload PDFs" in summary
    assert "2301.00002" in [r[0] for r in _rows(papers)]
    # Importing it again adds nothing and looks nothing up but the paper arXiv lacks.
    _, result, _ = client.predict(handle_file(str(DATA / "zotero_export.bib")), api_name="/import_bibtex")
    assert {r[0]: r[2] for r in _rows(result)}["krishna2023longeval"] == "already in the library"


def test_a_file_field_is_listed_never_read_from_the_server(app) -> None:  # noqa: ANN001
    """A visitor's export naming a PDF on the server's own disk gets it listed for upload, not added."""
    url, _, _, root = app
    client = _client(url)
    on_server = (TEST_PAPERS / "2023.eacl-main.121.pdf").resolve()
    bib = root / "server-path.bib"
    bib.write_text(f"@article{{probe, title = {{LongEval}}, file = {{Full Text PDF:{on_server}:application/pdf}}}}\n")
    summary, result, papers = client.predict(handle_file(str(bib)), api_name="/import_bibtex")
    assert [r[2] for r in _rows(result)] == ["file to upload"] and "2023.eacl-main.121.pdf" in _rows(result)[0][4]
    assert not [r for r in _rows(papers) if r[-1] == "you"], "nothing was uploaded from the server's disk"


def test_filter_and_remove_several_papers_flagging_their_thoughts(app) -> None:  # noqa: ANN001
    url, _, _, root = app
    a, b = _client(url), _client(url)
    _upload(a, root, "2023.eacl-main.121.pdf", "longeval.pdf")
    papers = _upload(a, root, "N18-3011.pdf", "graph.pdf")
    mine = {r[0]: r for r in papers if r[-1] == "you"}
    assert len(mine) == 2
    # Authors and year of an upload come from its PDF (LongEval's from its first page).
    by_title = {r[1][:8]: r for r in mine.values()}
    assert by_title["LONGEVAL"][2] == "Kalpesh Krishna, Erin Bransom, Bailey Kuehl et al." and \
        by_title["LONGEVAL"][3] == "2023"
    assert by_title["Construc"][2] == "Waleed Ammar, Dirk Groeneveld, Chandra Bhagavatula et al." and \
        by_title["Construc"][3] == "2018"

    shown = _rows(a.predict("krishna", api_name="/filter_papers"))
    assert [r[0] for r in shown] == [by_title["LONGEVAL"][0]]
    assert len(_rows(a.predict("semantic scholar", api_name="/filter_papers"))) >= 2  # the upload and arXiv's copy
    assert _rows(b.predict("krishna", api_name="/filter_papers")) == [], "B never sees A's uploads"
    assert len(_rows(a.predict("", api_name="/filter_papers"))) == len(_rows(a.predict(api_name="/list_papers")))

    # A thought built on one of them is flagged when the papers go.
    _, _, _, query_id, _ = a.predict("What does LongEval recommend for human evaluation?", [], list(mine), False,
                                     False, api_name="/chat")
    assert "added" in a.predict(query_id, api_name="/thought_status")
    with pytest.raises(Exception, match="No paper"):
        b.predict(list(mine), api_name="/remove_papers")
    with pytest.raises(Exception, match="shared by everyone.*Nothing was removed"):
        a.predict([*mine, "2301.00001"], api_name="/remove_papers")
    assert set(mine) <= {r[0] for r in _rows(a.predict(api_name="/list_papers"))}, "a refused list removes none"
    notice, papers = a.predict(list(mine), api_name="/remove_papers")
    assert notice.startswith("Removed 2 papers") and re.search(r"\b1 thought built on them is flagged|"
                                                                r"\b\d+ thoughts built on them are flagged", notice), notice
    assert not set(mine) & {r[0] for r in _rows(papers)}
    thoughts = _rows(a.predict("", "newest", api_name="/list_thoughts"))
    assert thoughts and all(r[5] for r in thoughts), "every thought built on the removed papers is flagged"
    with pytest.raises(Exception, match="Choose the papers"):
        a.predict([], api_name="/remove_papers")


def test_no_refusal_shows_a_server_path(app) -> None:  # noqa: ANN001
    """Every refusal an API caller (and so the page) gets is one line naming files by name only: never the Gradio
    cache, the data directory or any other absolute path of the server."""
    from gradio.utils import get_upload_folder

    url, services, _, root = app
    client = _client(url)
    not_a_pdf = root / "notes.pdf"
    not_a_pdf.write_text("these are notes, not a PDF")
    empty = root / "empty.pdf"
    empty.write_bytes(b"")
    calls = [
        ([handle_file(str(not_a_pdf))], "/upload_pdfs"),
        ([handle_file(str(empty)), handle_file(str(not_a_pdf))], "/upload_pdfs"),
        ([], "/upload_pdfs"),
        (["not an id"], "/add_arxiv"),
        (["pdf-000000000000"], "/remove_papers"),
        (99, "/thought_detail"),
        ("x" * 5000, [], [], False, False, "/chat"),
    ]
    server_paths = [str(Path(get_upload_folder()).resolve()), "/tmp", str(services.settings.data_dir.resolve()),
                    str(root)]
    refused = []
    for *args, api_name in calls:
        with pytest.raises(Exception) as info:  # noqa: PT011 - any refusal; its text is what is checked
            client.predict(*args, api_name=api_name)
        refused.append(str(info.value))
    assert any("notes.pdf" in m for m in refused) and any("empty.pdf" in m for m in refused), refused
    leaks = [m for m in refused if any(p in m for p in server_paths)]
    assert not leaks, leaks
    assert all("\n" not in m.strip() for m in refused), refused
