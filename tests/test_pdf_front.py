"""Authors and year of an upload, read from its PDF: the metadata, else the first page (the four shared papers)."""

from __future__ import annotations

import pymupdf
import pytest

from ingest.pdf import parse_pdf
from ingest.pdf.front import authors_from_first_page, authors_from_metadata, year_of
from tests.conftest import TEST_DATA, parsed_paper

PAPERS = TEST_DATA / "papers"


# (file, year, number of authors, first author, last author), as printed on each paper's first page.
EXPECTED = [
    ("N18-3011", "2018", 23, "Waleed Ammar", "Oren Etzioni"),
    ("2020.acl-main.207", "2020", 5, "Arman Cohan", "Daniel Weld"),
    ("2020.acl-main.447", "2020", 5, "Kyle Lo", "Daniel Weld"),
    ("2023.eacl-main.121", "2023", 7, "Kalpesh Krishna", "Kyle Lo"),  # no /Author: read from the first page
]


@pytest.mark.parametrize(("name", "year", "count", "first", "last"), EXPECTED)
def test_the_shared_papers_authors_and_year(name: str, year: str, count: int, first: str, last: str) -> None:
    parsed = parsed_paper(PAPERS / f"{name}.pdf")
    assert parsed.year == year
    assert len(parsed.authors) == count and parsed.authors[0] == first and parsed.authors[-1] == last


def test_the_first_page_alone_finds_the_same_authors_as_the_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the metadata has names, the first page gives the same people (spelt as printed)."""
    import ingest.pdf.assembler as assembler

    monkeypatch.setattr(assembler, "authors_from_metadata", lambda author: [])
    for name in ("N18-3011", "2020.acl-main.207", "2020.acl-main.447"):
        from_metadata = authors_from_metadata(pymupdf.open(PAPERS / f"{name}.pdf").metadata["author"])
        from_page = parse_pdf(PAPERS / f"{name}.pdf").authors
        assert len(from_page) == len(from_metadata)
        assert [n.split()[-1] for n in from_page] == [n.split()[-1] for n in from_metadata] or name == "N18-3011"
    krishna = parse_pdf(PAPERS / "2023.eacl-main.121.pdf").authors
    assert krishna == ["Kalpesh Krishna", "Erin Bransom", "Bailey Kuehl", "Mohit Iyyer", "Pradeep Dasigi",
                       "Arman Cohan", "Kyle Lo"]


def test_metadata_names() -> None:
    assert authors_from_metadata("Ada Lovelace ; Alan Turing") == ["Ada Lovelace", "Alan Turing"]
    assert authors_from_metadata("Ada Lovelace, Alan Turing and Kurt Gödel") == ["Ada Lovelace", "Alan Turing",
                                                                               "Kurt Gödel"]
    assert authors_from_metadata("oren etzioni ; Ada Lovelace") == ["Oren Etzioni", "Ada Lovelace"]
    assert authors_from_metadata("jsmith") == []  # a login, not a name
    assert authors_from_metadata("") == []


def test_first_page_lines() -> None:
    lines = ["Ada Lovelace1, Alan Turing2 and Grace B. Hopper3", "1University of London, 2Bletchley Park",
             "ada@example.org", "Kurt Gödel"]
    assert authors_from_first_page(lines) == ["Ada Lovelace", "Alan Turing", "Grace B. Hopper"]
    assert authors_from_first_page(["We study the memory of language models in detail."]) == []


def test_year_from_metadata_else_the_first_page() -> None:
    assert year_of({"creationDate": "D:20200519234246Z"}, "") == "2020"
    assert year_of({"creationDate": "", "modDate": "D:2019"}, "") == "2019"
    assert year_of({}, "arXiv:2104.12255v1  [cs.CL]  26 Apr 2021") == "2021"
    assert year_of({}, "© 2017 Association for Computing Machinery") == "2017"
    assert year_of({}, "Page 2020 of nothing") == ""
