"""PDF parsing on real papers, checked against their S2ORC parses, and on every kind of bad input."""

from __future__ import annotations

import difflib
import functools
import json
import re
import time
from pathlib import Path

import pymupdf
import pytest

from ingest.errors import PDFError
from ingest.models import ParsedPaper
from ingest.pdf import UNTITLED_SECTION, parse_pdf
from ingest.references import RefLine, split_references
from ingest.sections import HeadingDetector, normalise_heading, plausible_successor
from tests.conftest import TEST_DATA, parsed_paper

PAPERS = TEST_DATA / "papers"
WITH_S2ORC = ["N18-3011", "2020.acl-main.207"]
WITHOUT_S2ORC = ["2020.acl-main.447", "2023.eacl-main.121"]
ALL_PAPERS = WITH_S2ORC + WITHOUT_S2ORC
TITLES = {
    "N18-3011": "Construction of the Literature Graph in Semantic Scholar",
    "2020.acl-main.207": "SPECTER: Document-level Representation Learning using Citation-informed Transformers",
    "2020.acl-main.447": "S2ORC: The Semantic Scholar Open Research Corpus",
    "2023.eacl-main.121": "LONGEVAL: Guidelines for Human Evaluation of Faithfulness in Long-form Summarization",
}



@functools.cache
def parsed(name: str) -> ParsedPaper:
    return parsed_paper(PAPERS / f"{name}.pdf")


@functools.cache
def s2orc(name: str) -> dict:
    return json.loads((PAPERS / f"{name}.json").read_text())


def normalise(text: str) -> str:
    """Lowercase, whitespace collapsed, everything but letters, digits and spaces dropped."""
    text = re.sub(r"\s+", " ", text.lower())
    return " ".join(re.sub(r"[^0-9a-z ]", "", text).split())


def similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, normalise(a), normalise(b)).ratio()


def s2orc_headings(name: str) -> list[str]:
    """The distinct, non-empty section names of the S2ORC body text, in order."""
    headings: list[str] = []
    for paragraph in s2orc(name)["pdf_parse"]["body_text"]:
        if paragraph["section"] and paragraph["section"] not in headings:
            headings.append(paragraph["section"])
    return headings


def titles(paper: ParsedPaper) -> set[str]:
    return {normalise_heading(s.title) for s in paper.sections}


# --------------------------------------------------------------------------------------------------
# Against S2ORC


@pytest.mark.parametrize("name", WITH_S2ORC)
def test_abstract_matches_s2orc(name: str) -> None:
    assert similarity(parsed(name).abstract, s2orc(name)["abstract"]) >= 0.9


@pytest.mark.parametrize("name", WITH_S2ORC)
def test_most_s2orc_headings_are_found(name: str) -> None:
    expected = s2orc_headings(name)
    found = [h for h in expected if normalise_heading(h) in titles(parsed(name))]
    assert len(found) >= 0.8 * len(expected), sorted(set(expected) - set(found))


@pytest.mark.parametrize("name", WITH_S2ORC)
def test_reference_count_matches_s2orc(name: str) -> None:
    expected = len(s2orc(name)["pdf_parse"]["bib_entries"])
    assert abs(len(parsed(name).references) - expected) <= 0.1 * expected


@pytest.mark.parametrize("name", WITH_S2ORC)
def test_title_matches_s2orc(name: str) -> None:
    assert similarity(parsed(name).title, s2orc(name)["title"]) >= 0.95


# --------------------------------------------------------------------------------------------------
# Structure of every paper


@pytest.mark.parametrize("name", ALL_PAPERS)
def test_title_and_abstract(name: str) -> None:
    paper = parsed(name)
    assert paper.title == TITLES[name]
    assert len(paper.abstract) > 400
    assert not paper.abstract.lower().startswith("abstract")
    assert paper.warnings == []


@pytest.mark.parametrize("name", WITHOUT_S2ORC)
def test_sane_structure(name: str) -> None:
    paper = parsed(name)
    names = titles(paper)
    assert "introduction" in names
    assert any(n.startswith("conclusion") for n in names)
    assert "references" in names
    assert len(paper.references) > 10
    assert any(s.level == 2 for s in paper.sections)


@pytest.mark.parametrize("name", ALL_PAPERS)
def test_sections_partition_the_text_in_order(name: str) -> None:
    paper = parsed(name)
    assert paper.sections[0].char_start == 0
    assert normalise_heading(paper.sections[0].title) == "introduction"
    for section, following in zip(paper.sections, paper.sections[1:] + [None]):
        assert section.char_start < section.char_end <= len(paper.text)
        if following is not None:
            assert section.char_end <= following.char_start
            assert not paper.text[section.char_end:following.char_start].strip()
        assert 1 <= section.page_start <= section.page_end <= paper.n_pages
        assert section.level >= 1
        # The section's text opens with its heading as printed.
        assert normalise(section.title) in normalise(paper.section_text(section)[: len(section.title) + 12])


@pytest.mark.parametrize("name", ALL_PAPERS)
def test_each_heading_is_on_the_page_its_section_starts(name: str) -> None:
    paper = parsed(name)
    with pymupdf.open(PAPERS / f"{name}.pdf") as doc:
        pages = [re.sub(r"[^0-9a-z]", "", page.get_text(flags=0).lower()) for page in doc]
    for section in paper.sections:
        assert re.sub(r"[^0-9a-z]", "", section.title.lower()) in pages[section.page_start - 1], section


@pytest.mark.parametrize("name", ALL_PAPERS)
def test_page_offsets(name: str) -> None:
    paper = parsed(name)
    assert len(paper.page_offsets) == paper.n_pages
    assert paper.page_offsets[0] == 0
    assert paper.page_offsets == sorted(paper.page_offsets)
    assert paper.page_offsets[-1] < len(paper.text)
    # Text from the last page maps to the last page; the first section to the first page.
    assert paper.page_at(len(paper.text) - 1) == paper.n_pages
    assert paper.page_at(0) == 1


def test_known_sections_and_their_pages() -> None:
    paper = parsed("N18-3011")
    by_title = {s.title: s for s in paper.sections}
    assert [(s.title, s.level) for s in paper.sections[:4]] == [
        ("Introduction", 1), ("Structure of The Literature Graph", 1), ("Node Types", 2), ("Edge Types", 2)]
    assert by_title["Extracting Metadata"].page_start == 2
    assert by_title["Entity Extraction and Linking"].page_start == 4
    assert by_title["Knowledge Bases"].level == 2
    assert paper.sections[-1].title == "References"
    # A sentence on page 3 is mapped to page 3.
    offset = paper.text.index("We split each PDF into individual pages")
    assert paper.page_at(offset) == 3


def test_multi_line_and_appendix_headings() -> None:
    paper = parsed("2023.eacl-main.121")
    names = [s.title for s in paper.sections]
    assert "The LONGEVAL guidelines for faithfulness human evaluation" in names
    assert "RQ1: Does inter-annotator agreement improve using fine-grained annotations?" in names
    assert {"Limitations", "Ethical Considerations", "Acknowledgments", "Appendix"} <= set(names)
    after_references = names[names.index("References") + 1:]
    assert "Bootstrap analysis of inter-annotator variance" in after_references
    other = parsed("2020.acl-main.447")
    assert "Numeric representations in S2ORC-SCIBERT" in [s.title for s in other.sections]


# --------------------------------------------------------------------------------------------------
# Clean text


@pytest.mark.parametrize("name", ALL_PAPERS)
def test_text_is_clean(name: str) -> None:
    paper = parsed(name)
    everything = "\n".join([paper.title, paper.abstract, paper.text, *paper.references])
    for bad in ("\ufb01", "\ufb02", "\ufb00", "\ufb03", "\u00ad", "\ufffd", "\u00a8"):
        assert bad not in everything
    paragraphs = [p.strip() for p in paper.text.split("\n\n")]
    assert not [p for p in paragraphs if p.isdigit()], "page numbers left in the text"
    assert "Association for Computational Linguistics\n" not in paper.text
    assert "Proceedings of the 58th Annual Meeting" not in paper.text.split("References")[0]
    # "token- and sentence-level" is how the authors wrote it; other "word- word" is a missed line join.
    assert not re.search(r"[a-z]- (?!and |or |to )[a-z]", paper.abstract + paper.text.split("References")[0])


def test_hyphenation_ligatures_and_running_footers() -> None:
    paper = parsed("N18-3011")
    # "no-|table", "facili-|tate", "scienti\ufb01c": joined and expanded.
    assert "Despite notable advances in scientific search engines" in paper.text
    assert "to facilitate algorithmic manipulation and discovery" in paper.abstract
    assert "Proceedings of NAACL-HLT 2018" not in paper.text
    assert "Due to space constraints" not in paper.text  # a footnote, not body text
    specter = parsed("2020.acl-main.207")
    assert "state-of-the-art" in specter.text  # a real compound keeps its hyphens
    assert "SciBERT: A Pretrained Language Model" in " ".join(specter.references)  # "SciB-|ERT"


def test_two_columns_are_read_in_order_and_tables_left_out() -> None:
    paper = parsed("N18-3011")
    # The sentence runs from the bottom of the left column to the top of the right one, past a figure.
    assert "(e.g., Xiong et al., 2017). We describe methods used in a scalable deployed production" in paper.text
    # The figure's caption is a source of its own beside the text, never part of it.
    assert "Figure 1: Part of" not in paper.text
    assert [(n.page, n.text) for n in paper.notes if n.kind == "figure"] == [(1, "Figure 1: Part of the literature "
                                                                                 "graph.")]
    assert "Approach CS Bio" not in paper.text
    assert "Field Precision Recall" not in paper.text
    assert "Table 2: Document-level evaluation of three approaches" in paper.text


def test_tables_and_footnotes_are_kept_as_notes_beside_the_text() -> None:
    from ingest.chunking import chunk_paper
    from tests.library_support import WordTokenizer

    paper = parsed("N18-3011")
    tables = [n for n in paper.notes if n.kind == "table"]
    footnotes = [n for n in paper.notes if n.kind == "footnote"]
    science_parse = next(n for n in tables if "Field | Precision | Recall | F1" in n.text or "Field Precision" in n.text)
    assert science_parse.page == 3 and "title" in science_parse.text and "85.5" in science_parse.text
    assert "\n" in science_parse.text, "one row a line"
    assert any("ScienceParse libraries" in n.text and n.page == 3 for n in footnotes)
    assert "85.5 85.5" not in paper.text, "the body text stays prose"
    chunks = chunk_paper("p", paper, WordTokenizer())
    table_chunks = [c for c in chunks if c.section == "Table" and "85.5" in c.text]
    assert table_chunks and table_chunks[0].page_start == table_chunks[0].page_end == 3
    assert any(c.section == "Footnote" and "MetaMap Lite" in c.text for c in chunks)


def test_accented_names_are_composed() -> None:
    references = " ".join(parsed("2020.acl-main.207").references)
    assert "Jörg Sander" in references
    assert "Řehůřek" in references


# --------------------------------------------------------------------------------------------------
# References


@pytest.mark.parametrize("name", ALL_PAPERS)
def test_references_are_one_entry_each(name: str) -> None:
    paper = parsed(name)
    references_section = next(s for s in paper.sections if s.title == "References")
    section_text = paper.section_text(references_section)
    for entry in paper.references:
        assert entry in section_text
        assert "\n" not in entry
        assert re.search(r"\b(19|20)\d\d[a-z]?\b", entry), entry
        assert entry[0].isupper(), entry
        assert len(entry) < 700, entry


def test_reference_entries_have_their_text() -> None:
    references = parsed("N18-3011").references
    assert references[0].startswith("Waleed Ammar, Matthew E. Peters, Chandra Bhagavatula, and Russell Power. 2017.")
    assert references[-1].startswith("Chenyan Xiong")


def test_reference_splitting_cues() -> None:
    def lines(texts: list[str], xs: list[float], ys: list[float] | None = None) -> list[RefLine]:
        ys = ys or [12.0 * i for i in range(len(texts))]
        return [RefLine(t, x, y, y + 10, 0, 0) for t, x, y in zip(texts, xs, ys)]

    labelled = lines(["[1] A. Author. 2001. A title", "continued here.", "[2] B. Author. 2002. Other.",
                      "[3] C. Author. 2003. Third", "and more."], [0, 0, 0, 0, 0])
    assert split_references(labelled) == [[0, 1], [2], [3, 4]]
    hanging = lines(["Ann Author. 2001. A title that", "wraps here.", "Bob Author. 2002. Short.",
                     "Cid Author. 2003. Another", "that wraps."], [0, 7, 0, 0, 7])
    assert split_references(hanging) == [[0, 1], [2], [3, 4]]
    spaced = lines(["Ann, A. 2001. A title that", "wraps here.", "Bob, B. 2002. Short.", "Cid, C. 2003. Another",
                    "that wraps.", "Dan, D. 2004. Last."], [0] * 6, [0, 11, 25, 39, 50, 64])
    assert split_references(spaced) == [[0, 1], [2], [3, 4], [5]]


# --------------------------------------------------------------------------------------------------
# Heading detection on its own


def test_numbering_must_follow_on() -> None:
    assert plausible_successor((0,), (1,))
    assert plausible_successor((2,), (2, 1))
    assert plausible_successor((2, 1), (2, 2))
    assert plausible_successor((2, 3), (3,))
    assert not plausible_successor((3,), (2, 1))  # going back
    assert not plausible_successor((3,), (91, 6))  # a table cell like "91.6"
    assert not plausible_successor((2,), (2, 7))


def test_heading_detector() -> None:
    detector = HeadingDetector(body_size=11.0, section_size=12.0)
    intro = detector.classify("1 Introduction", size=12.0, bold=True)
    assert intro is not None and (intro.title, intro.number, intro.level) == ("Introduction", ("1",), 1)
    detector.accept(intro)
    assert detector.classify("2 Method", size=11.0, bold=False) is None  # not emphasised
    assert detector.classify("1 Introduction", size=12.0, bold=True) is None  # "1" again: not a next number
    assert detector.classify("3 out of 5 annotators agreed", size=11.0, bold=True) is None
    assert detector.classify("Training Data", size=12.0, bold=True) is None  # unknown: only after the body starts
    sub = detector.classify("1.1 Data and Setup", size=11.0, bold=True)
    assert sub is not None and sub.level == 2
    assert detector.classify("A Prompts", size=12.0, bold=True) is None  # letters only in appendices
    refs = detector.classify("References", size=12.0, bold=True)
    assert refs is not None and refs.kind == "references"
    detector.accept(refs)
    appendix = detector.classify("A Prompts", size=12.0, bold=True)
    assert appendix is not None and appendix.kind == "appendix" and appendix.title == "Prompts"
    detector.allow_generic = True
    assert detector.classify("Training Data", size=11.0, bold=True) is None  # a paragraph title at body size
    generic = detector.classify("Training Data", size=12.0, bold=True)
    assert generic is not None and generic.level == 1


# --------------------------------------------------------------------------------------------------
# A generated single-column paper: running header, page numbers, keywords, numbered references


def _generated_paper() -> bytes:
    paragraph = ("Retrieval augmented models combine a parametric generator with a non-parametric memory. "
                 "We study how the memory is searched and how its contents are used when generating text. ") * 3
    with pymupdf.open() as doc:
        for number in range(4):
            page = doc.new_page(width=612, height=792)
            page.insert_text((72, 40), "Preprint. Under review at a conference", fontsize=8)
            page.insert_text((300, 760), str(number + 1), fontsize=10)
            y = 80
            if number == 0:
                page.insert_text((120, y), "A Study of Retrieval Augmented Generation", fontsize=17, fontname="hebo")
                page.insert_text((250, y + 30), "Ada Lovelace", fontsize=11)
                page.insert_text((280, y + 70), "Abstract", fontsize=11, fontname="hebo")
                page.insert_textbox(pymupdf.Rect(100, y + 80, 512, y + 160),
                                    "We present a study of retrieval augmented generation. " * 5, fontsize=10)
                page.insert_text((100, y + 175), "Keywords: retrieval, generation", fontsize=10)
                y += 200
            for k in (1, 2):
                section = 2 * number + k
                title = "Introduction" if section == 1 else f"Experiments on corpus {section}"
                page.insert_text((72, y), f"{section} {title}", fontsize=12, fontname="hebo")
                page.insert_textbox(pymupdf.Rect(72, y + 10, 540, y + 160), paragraph, fontsize=10)
                y += 170
            if number == 3:
                page.insert_text((72, y), "References", fontsize=12, fontname="hebo")
                for i in range(5):
                    page.insert_textbox(pymupdf.Rect(72, y + 10 + 30 * i, 540, y + 40 + 30 * i),
                                        f"[{i + 1}] A. Author. 201{i}. A paper about retrieval number {i}. "
                                        "In Proceedings of a venue that has a long name.", fontsize=9)
        return doc.tobytes()


def test_generated_single_column_paper() -> None:
    paper = parse_pdf(_generated_paper(), name="generated.pdf")
    assert paper.title == "A Study of Retrieval Augmented Generation"
    assert paper.abstract.startswith("We present a study") and "Keywords" not in paper.abstract
    assert [s.title for s in paper.sections] == ["Introduction"] + [
        f"Experiments on corpus {n}" for n in range(2, 9)] + ["References"]
    assert [s.page_start for s in paper.sections] == [1, 1, 2, 2, 3, 3, 4, 4, 4]
    assert "Preprint" not in paper.text and "Ada Lovelace" not in paper.text
    assert not [p for p in paper.text.split("\n\n") if p.strip().isdigit()]
    assert [r[:4] for r in paper.references] == ["[1] ", "[2] ", "[3] ", "[4] ", "[5] "]
    assert paper.references[0].endswith("that has a long name.")
    assert paper.warnings == []


# --------------------------------------------------------------------------------------------------
# Inputs


def test_bytes_and_path_give_the_same_parse() -> None:
    path = PAPERS / "N18-3011.pdf"
    assert parse_pdf(path.read_bytes(), name="upload.pdf") == parsed("N18-3011")


def test_parsing_is_fast() -> None:
    path = PAPERS / "2020.acl-main.207.pdf"  # 13 pages
    best = float("inf")
    for _ in range(2):
        start = time.perf_counter()
        parse_pdf(path)
        best = min(best, time.perf_counter() - start)
    assert best < 2.0


def _blank_pdf(path: Path) -> Path:
    with pymupdf.open() as doc:
        doc.new_page()
        doc.save(path)
    return path


def _scanned_pdf(path: Path) -> Path:
    with pymupdf.open(PAPERS / "N18-3011.pdf") as source, pymupdf.open() as doc:
        page = doc.new_page(width=source[0].rect.width, height=source[0].rect.height)
        page.insert_image(page.rect, pixmap=source[0].get_pixmap(dpi=60))
        doc.save(path)
    return path


def _encrypted_pdf(path: Path, **passwords: str) -> Path:
    with pymupdf.open(PAPERS / "N18-3011.pdf") as doc:
        doc.save(path, encryption=pymupdf.PDF_ENCRYPT_AES_256, **passwords)
    return path


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: p.write_bytes((PAPERS / "N18-3011.pdf").read_bytes()[:80_000]), "damaged or truncated"),
    (lambda p: _encrypted_pdf(p, user_pw="secret", owner_pw="owner"), "is encrypted; remove the password"),
    (lambda p: p.write_text("These are my notes, saved with the wrong name.\n"), "is not a PDF"),
    (lambda p: p.write_text("<!DOCTYPE html><html><body>Sign in</body></html>"), "not a PDF but a web page"),
    (lambda p: p.write_bytes(b""), "is empty"),
    (_blank_pdf, "has no extractable text"),
    (_scanned_pdf, r"has no extractable text \(scanned\?\)"),
], ids=["truncated", "encrypted", "text-file", "html", "zero-bytes", "blank", "scanned"])
def test_bad_input_raises_a_clear_error(tmp_path: Path, capfd: pytest.CaptureFixture[str], make,  # noqa: ANN001
                                        message: str) -> None:
    path = tmp_path / "x.pdf"
    make(path)
    with pytest.raises(PDFError, match=message) as info:
        parse_pdf(path)
    assert str(info.value).startswith("x.pdf ")
    assert capfd.readouterr().err == "", "MuPDF printed to stderr"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PDFError, match="does not exist"):
        parse_pdf(tmp_path / "nowhere.pdf")


def test_bytes_name_the_upload_in_messages() -> None:
    with pytest.raises(PDFError, match="^notes.pdf is not a PDF"):
        parse_pdf(b"just text", name="notes.pdf")


def test_owner_password_alone_does_not_stop_parsing(tmp_path: Path) -> None:
    path = _encrypted_pdf(tmp_path / "restricted.pdf", owner_pw="owner", permissions=int(pymupdf.PDF_PERM_PRINT))
    paper = parse_pdf(path)
    assert paper.title == TITLES["N18-3011"] and len(paper.references) == 27


def test_scanned_pages_in_a_text_pdf_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "with-scan.pdf"
    with pymupdf.open(PAPERS / "N18-3011.pdf") as doc:
        page = doc.new_page()
        page.insert_image(page.rect, pixmap=doc[0].get_pixmap(dpi=50))
        doc.save(path)
    paper = parse_pdf(path)
    assert paper.n_pages == 9 and len(paper.page_offsets) == 9
    assert paper.warnings == ["page(s) 9 have no text layer (scanned?); their content is missing"]
    assert len(paper.references) == 27


@pytest.mark.parametrize(("share", "empty"), [(0.3, "1-7"), (0.9, "1")])
def test_a_truncated_file_is_refused_even_when_it_can_be_repaired(tmp_path: Path, share: float, empty: str,
                                                                 capfd: pytest.CaptureFixture[str]) -> None:
    """Cut to its first 30% the PDF still opens with 13 pages, but 7 of them come out empty: storing what is left
    would pass a fragment off as the paper."""
    data = (PAPERS / "2020.acl-main.207.pdf").read_bytes()
    path = tmp_path / "cut.pdf"
    path.write_bytes(data[: int(len(data) * share)])
    with pytest.raises(PDFError, match=rf"^cut.pdf is damaged or truncated: page\(s\) {empty} of 13 came out empty"):
        parse_pdf(path)
    assert capfd.readouterr().err == ""


def test_a_repaired_file_with_every_page_readable_parses_with_a_warning(tmp_path: Path) -> None:
    data = (PAPERS / "2020.acl-main.447.pdf").read_bytes()
    path = tmp_path / "cut.pdf"
    path.write_bytes(data[: int(len(data) * 0.9)])  # the cross-reference table is lost, every page survives
    paper = parse_pdf(path)
    assert paper.n_pages == 15 and paper.abstract
    assert paper.warnings == ["cut.pdf is damaged (truncated?) and was repaired; some content may be missing"]


def test_a_pdf_whose_pages_mostly_have_no_text_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mostly-scanned.pdf"
    with pymupdf.open(PAPERS / "N18-3011.pdf") as doc:
        picture = doc[0].get_pixmap(dpi=30)
        for _ in range(9):
            page = doc.new_page()
            page.insert_image(page.rect, pixmap=picture)
        doc.save(path)
    with pytest.raises(PDFError, match=r"^mostly-scanned.pdf has text on only 8 of its 17 pages \(scanned\?\)"):
        parse_pdf(path)
    assert parse_pdf(path, min_text_pages=0.4).n_pages == 17


# --------------------------------------------------------------------------------------------------
# The two problem PDFs


ODD = sorted((PAPERS / "odd").glob("*.pdf"))


@pytest.mark.parametrize("path", ODD, ids=[p.name[:30] for p in ODD])
def test_odd_pdfs_parse_or_fail_clearly(path: Path) -> None:
    try:
        paper = parse_pdf(path)
    except PDFError as exc:
        assert path.name in str(exc)
        return
    assert paper.text.strip() and paper.title
    assert paper.warnings or (paper.abstract and paper.references)


def test_editorial_without_abstract_is_a_partial_parse() -> None:
    (path,) = (PAPERS / "odd").glob("index-string-out-of-range-*.pdf")
    paper = parse_pdf(path)
    assert paper.title == "COVID-19 vaccination and treatment in vulnerable populations"
    assert paper.warnings == ["no abstract found"]
    assert paper.sections[0].title == UNTITLED_SECTION
    assert paper.text.startswith("As the COVID-19 pandemic continues to roll on")
    assert [r[:3] for r in paper.references] == ["1. ", "2. ", "3. ", "4. ", "5. "]
    assert "SARS-CoV-2-specific T cells" in paper.references[2]  # soft hyphens at line ends


def test_aaai_paper_with_unnumbered_headings() -> None:
    (path,) = (PAPERS / "odd").glob("value-error-box-diff-page-*.pdf")
    paper = parse_pdf(path)
    assert paper.title == "Novelty Controlled Paraphrase Generation with Retrieval Augmented Conditional Prompt Tuning"
    assert paper.abstract.startswith("Paraphrase generation is a fundamental and long-standing task")
    assert {"introduction", "related work", "conclusion", "references"} <= titles(paper)
    assert "arXiv:2202.00535" not in paper.text  # the stamp in the margin
    assert 50 <= len(paper.references) <= 62
    assert not any("is available in" in r for r in paper.references)


def test_a_pdf_longer_than_the_page_limit_is_refused_before_its_pages_are_read() -> None:
    path = PAPERS / "N18-3011.pdf"
    pages = pymupdf.open(path).page_count
    with pytest.raises(PDFError, match=f"N18-3011.pdf has {pages} pages, more than the {pages - 1}"):
        parse_pdf(path, max_pages=pages - 1)
    assert parse_pdf(path, max_pages=pages).title
