"""Reading bibliography exports: what each entry names (arXiv id, DOI, local PDFs) and refusing broken files."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.bibtex import BibtexError, file_names, parse_bibtex

DATA = Path(__file__).resolve().parent / "data"


def _one(body: str) -> object:
    [entry] = parse_bibtex(body)
    return entry


def test_a_zotero_and_google_scholar_export_is_read_entry_by_entry() -> None:
    entries = parse_bibtex((DATA / "zotero_export.bib").read_text())
    assert [e.key for e in entries] == ["ammar_construction_2023", "krishna2023longeval", "cohan_specter_2020",
                                        "lo_s2orc_2020", "turing_unpublished_2023", "lovelace_graph_v2",
                                        "godel_book_1931"]
    by_key = {e.key: e for e in entries}
    graph = by_key["ammar_construction_2023"]
    assert graph.title == "Construction of the Literature Graph in Semantic Scholar"  # braces gone
    assert graph.authors == ["Lovelace, Ada", "Turing, Alan"] and graph.year == "2023"
    assert graph.arxiv_id == "2301.00001"
    # Zotero's attachment list: the PDF is kept (by name only), the HTML snapshot is not.
    assert graph.files == ["Lovelace and Turing - 2023 - Construction of the Literature Graph.pdf"]
    assert by_key["krishna2023longeval"].arxiv_id == "2301.00002"  # Google Scholar's "arXiv preprint arXiv:…"
    specter = by_key["cohan_specter_2020"]
    assert specter.arxiv_id is None and specter.doi == "10.18653/v1/2020.acl-main.207"
    s2orc = by_key["lo_s2orc_2020"]
    assert s2orc.arxiv_id is None and s2orc.doi is None and s2orc.files == ["Lo et al. - 2020 - S2ORC.pdf"]
    assert by_key["turing_unpublished_2023"].arxiv_id == "2301.09999"  # eprint + archivePrefix
    assert by_key["lovelace_graph_v2"].arxiv_id == "2301.00001"  # \url{…/pdf/2301.00001v2.pdf}: the version dropped
    godel = by_key["godel_book_1931"]
    assert godel.title == "Über formal unentscheidbare Sätze" and godel.authors == ["Gödel, Kurt"]
    assert (godel.arxiv_id, godel.doi, godel.files) == (None, None, [])


@pytest.mark.parametrize(("fields", "expected"), [
    ("eprint = {1706.03762}", "1706.03762"),
    ("eprint = {hep-th/9901001v2}, eprinttype = {arxiv}", "hep-th/9901001"),
    ("arxivId = {1706.03762}", "1706.03762"),  # Mendeley
    ("doi = {10.48550/arXiv.1706.03762}", "1706.03762"),  # arXiv's own DataCite DOI
    ("url = {https://arxiv.org/abs/1706.03762v7}", "1706.03762"),
    ("note = {arXiv: 1706.03762}", "1706.03762"),
    ("eprint = {PMC1234567}, archivePrefix = {PMC}", None),  # another archive's eprint
    ("url = {https://example.org/1706.03762}", None),
    ("journal = {Journal of arXiv Studies}", None),
])
def test_where_an_arxiv_id_is_found(fields: str, expected: str | None) -> None:
    assert _one(f"@misc{{k, title = {{T}}, {fields}}}").arxiv_id == expected


def test_dois_from_the_doi_field_or_a_doi_link() -> None:
    assert _one("@article{k, doi = {https://doi.org/10.1145/3366423.3380211}}").doi == "10.1145/3366423.3380211"
    assert _one("@article{k, url = {https://doi.org/10.1000/xyz123}}").doi == "10.1000/xyz123"
    assert _one("@article{k, url = {https://example.org/10.1000/xyz123}}").doi is None


@pytest.mark.parametrize(("value", "names"), [
    ("Full Text PDF:/home/ada/Zotero/storage/AB/paper.pdf:application/pdf", ["paper.pdf"]),
    (r"Full Text:C\:\\Users\\ada\\Zotero\\storage\\AB\\win paper.pdf:application/pdf", ["win paper.pdf"]),
    (r":C$\backslash$:/Users/ada/Documents/Mendeley Desktop/Lovelace - 2023.pdf:pdf", ["Lovelace - 2023.pdf"]),
    (":paper.pdf:PDF", ["paper.pdf"]),  # JabRef
    ("/home/ada/papers/plain.pdf", ["plain.pdf"]),
    ("Snapshot:/home/ada/Zotero/storage/CD/page.html:text/html", []),
    ("A:/x/one.pdf:application/pdf;B:/y/two.pdf:application/pdf", ["one.pdf", "two.pdf"]),
])
def test_local_files_are_named_never_opened(value: str, names: list[str]) -> None:
    assert file_names(value) == names


def test_a_malformed_file_names_its_bad_line_and_yields_nothing() -> None:
    with pytest.raises(BibtexError, match=r"entry starting on line 8 is malformed .*Nothing was imported"):
        parse_bibtex((DATA / "malformed.bib").read_text())


@pytest.mark.parametrize("text", ["", "just some notes, no entries", "% a comment\n@comment{nothing here}"])
def test_a_file_without_entries_is_refused(text: str) -> None:
    with pytest.raises(BibtexError, match="No BibTeX entries found"):
        parse_bibtex(text)


def test_too_many_entries_are_refused_before_anything_is_done() -> None:
    text = "\n".join(f"@misc{{k{i}, title = {{T{i}}}}}" for i in range(6))
    assert len(parse_bibtex(text, max_entries=6)) == 6
    with pytest.raises(BibtexError, match="6 entries; an import takes at most 5"):
        parse_bibtex(text, max_entries=5)


def test_a_repeated_key_keeps_both_entries() -> None:
    entries = parse_bibtex("@misc{k, eprint = {2301.00001}}\n@misc{k, eprint = {2301.00002}}")
    assert [e.arxiv_id for e in entries] == ["2301.00001", "2301.00002"]
