"""Display equations stay in the body where they stand, their number written "(Equation N)": the scattered pieces
of a typeset equation are joined, a number that wrapped onto the next paragraph comes back, an unnumbered one set
between paragraphs is kept; an equation's chunk is the paragraph around it."""

from __future__ import annotations

import pymupdf
import pytest

from copilot.embeddings import load_tokenizer
from ingest.chunking import chunk_paper
from ingest.pdf import parse_pdf
from tests.conftest import TEST_DATA, parsed_paper

PAPERS = TEST_DATA / "papers"
SPECTER = PAPERS / "2020.acl-main.207.pdf"
S2ORC = PAPERS / "2020.acl-main.447.pdf"
ODD = PAPERS / "odd" / "value-error-box-diff-page-3574574f60182fc886aa13ad9d9dd3efc4d0a081.pdf"


@pytest.fixture(scope="module")
def specter():  # noqa: ANN201 - a ParsedPaper
    return parsed_paper(SPECTER)


def test_the_scattered_pieces_of_a_numbered_equation_are_joined_where_it_stands(specter) -> None:  # noqa: ANN001
    specter = specter.text
    assert "the paper:5 v = Transformer(input)[CLS] (Equation 1) where Transformer is" in specter  # one line of text
    # the triplet loss, from seven pieces; its braces and parentheses are lost with their font
    assert "L = max d PQ, P+ −d PQ, P− + m , 0 (Equation 2) where d is a distance function" in specter
    # an unnumbered one, between the paragraphs that introduce and explain it
    assert "the L2 norm distance: d(PA, PB) = ∥vA −vB∥2, where vA is the vector" in specter
    assert "paper A (Equation 1).6 Starting" in specter  # the paper's own reference, left as it is
    # a fraction, row by row
    assert "Stitle = 2 × J × C J + C (Equation 1) where the Jaccard index" in parsed_paper(S2ORC).text


def test_a_wrapped_number_and_a_two_row_equation_are_read_in_order() -> None:
    odd = parse_pdf(ODD).text
    assert odd.count("(Equation ") == 4
    # "(1)" and "(2)" wrapped below their equations, onto the first line of the next paragraph
    assert "Z = [p1:s; X2; q1:t; Y2; p1:s; X1; q1:t; Y1; p1:s; X; q1:t], (Equation 1) where Z is" in odd
    assert "Z = [d1:m; p1:s; X2; q1:t; Y2; p1:s; X1; q1:t; Y1; p1:s; X; q1:t]. (Equation 2) In this format" in odd
    # two rows of pieces with superscripts, the number between them
    assert ("Z = [d1:m; p c(X2,Y2) 1:s ; X2; q c(X2,Y2) 1:t ; Y2; p c(X1,Y1) 1:s ; X1; q c(X1,Y1) 1:t ; Y1; "
            "p c(X,Y ) 1:s ; X; q c(X,Y ) 1:t ]. (Equation 3)") in odd
    assert "iBLEU = α · BLEU −(1 −α) · self-BLEU (Equation 4) We use BLEU4" in odd  # an indented line of a paragraph


def test_an_equation_is_in_the_chunk_of_the_paragraph_around_it(specter) -> None:  # noqa: ANN001
    chunks = chunk_paper("p", specter, load_tokenizer())
    [loss] = [c for c in chunks if "L = max" in c.text]
    assert "(Equation 2)" in loss.text and "triplet margin loss" in loss.text and loss.page_start == 3


def _page(tmp_path, lines: list[tuple[float, float, str]]):  # noqa: ANN001, ANN202 - a path
    """A one-column PDF page with ``lines`` (x, baseline y, text) in Times 10 pt."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    for x, y, text in lines:
        page.insert_text((x, y), text, fontsize=10, fontname="tiro")
    path = tmp_path / "page.pdf"
    doc.save(path)
    return path


def test_only_a_number_at_the_right_of_its_column_is_an_equations(tmp_path) -> None:  # noqa: ANN001
    prose = ("Results depend on how the weights are chosen, which the following section explains in more detail "
             "for every one of the models we trained on the corpus.")
    words = prose.split()
    body = [" ".join(words[i:i + 14]) for i in range(0, len(words), 14)]
    lines = [(72, 100 + 12 * i, line) for i, line in enumerate(body)]
    lines += [(200, 150, "E = mc"), (250, 150, "+ k"), (522, 150, "(5)")]  # pieces, their number at the right
    lines += [(72, 175 + 12 * i, line) for i, line in enumerate(body)]
    lines += [(150, 220, "x = y"), (300, 232, "(6)")]  # a number in the middle of the page: no equation's
    lines += [(72, 245 + 12 * i, line) for i, line in enumerate(body)]
    text = parse_pdf(_page(tmp_path, lines)).text
    assert "E = mc + k (Equation 5)" in text
    assert "Equation 6" not in text


def test_an_equation_that_cannot_be_read_costs_its_pieces_never_the_page(monkeypatch) -> None:  # noqa: ANN001
    from ingest.pdf import document

    def broken(blocks, width):  # noqa: ANN001, ANN202
        raise IndexError("an equation's pieces in an order nobody foresaw")

    monkeypatch.setattr(document, "join_equations", broken)
    parsed = parse_pdf(S2ORC)
    assert "We construct the final corpus by assembling" in parsed.text and "(Equation" not in parsed.text
    assert any("the equations of page 4 could not be read" in w for w in parsed.warnings)
