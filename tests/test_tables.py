"""Tables read cell by cell: each becomes Markdown sources under its caption and header, with its region on the page;
its numbers leave the body's text; evidence reads a row with each value's column; the bench scores cells."""

from __future__ import annotations

import json

import pytest

from copilot.bench.tables import TABLES_DIR, parsed_tables, score_table
from copilot.embeddings import load_tokenizer
from copilot.evidence import chunk_sentences, row_sentence
from ingest.chunking import chunk_paper
from ingest.pdf import parse_pdf
from ingest.pdf.tables import _split_tall_row, table_sources
from tests.conftest import TEST_DATA, parsed_paper

SCIBERT = TEST_DATA / "papers" / "more" / "D19-1371.scibert-table-page.pdf"


@pytest.fixture(scope="module")
def scibert():  # noqa: ANN201 - a ParsedPaper
    return parsed_paper(SCIBERT)


def test_every_row_of_the_scibert_results_table_is_a_source_under_its_caption_and_header(
        scibert) -> None:  # noqa: ANN001 - a ParsedPaper
    tables = [n for n in scibert.notes if n.kind == "table" and n.whole]
    first = [n.text for n in tables if n.text.startswith("Table 1: Test performances of all BERT variants")]
    assert len(first) == 3, "13 rows, five a source"
    header = ("| Field | Task | Dataset | SOTA | BERT-Base Frozen | BERT-Base Finetune | SCIBERT Frozen | "
              "SCIBERT Finetune |")
    assert all(text.split("\n")[1] == header for text in first)
    rows = [line for text in first for line in text.split("\n")[3:]]
    assert len(rows) == 13
    assert "| BC5CDR (Li et al., 2016) | 88.857 | 85.08 | 86.72 | 88.73 | 90.01 |" in rows[0]
    assert rows[-1] == "| Average |  |  |  | 73.58 | 77.16 | 76.01 | 79.27 |"
    second = [n for n in tables if n.text.startswith("Table 2: Comparing SCIBERT with the reported BIOBERT")]
    assert len(second) == 1 and "| REL | ChemProt | 76.68 | 83.64 |" in second[0].text
    # Each table has its region on the page, the first above the second.
    assert all(n.page == 1 and n.bbox is not None for n in tables)
    assert max(n.bbox[3] for n in tables if n.text.startswith("Table 1")) < second[0].bbox[1]


def test_a_tables_numbers_leave_the_body_and_its_sources_are_whole_chunks(scibert) -> None:  # noqa: ANN001
    assert "86.72" not in scibert.text and "Finetune" not in scibert.text
    assert "We observe improved results via BERT finetuning" in scibert.text
    chunks = chunk_paper("p", scibert, load_tokenizer())
    tables = [c for c in chunks if c.section == "Table" and "\n|" in c.text]
    assert all(c.bbox is not None for c in tables)
    # A source whose rows would pass the embedder's window is cut between rows, each part under the same caption and
    # header: every row is in one part, and a part passes 240 tokens only when it is one row.
    rows = [line for c in tables for line in c.text.split("\n")[3:]]
    sources = [n.text for n in scibert.notes if n.whole and "\n|" in n.text]
    assert len(tables) == 6 > len(sources) == 4 and sorted(rows) == sorted(
        line for text in sources for line in text.split("\n")[3:])
    assert all(c.text.startswith(("Table 1: ", "Table 2: ")) and "|---|" in c.text for c in tables)
    assert all(c.n_tokens <= 240 or len(c.text.split("\n")) == 4 for c in tables)
    assert not any("88.73" in c.text for c in chunks if c.section != "Table")


def test_a_row_is_read_with_each_values_column() -> None:
    text = ("Table 2: Comparing SciBERT with BioBERT.\n| Task | Dataset | BioBERT | SciBERT |\n|---|---|---|---|\n"
            "|  | BC5CDR | 88.85 | 90.01 |\n| REL | ChemProt | 76.68 | 83.64 |")
    assert chunk_sentences(text) == ["Table 2: Comparing SciBERT with BioBERT.",
                                     "Dataset: BC5CDR; BioBERT: 88.85; SciBERT: 90.01.",
                                     "Task: REL; Dataset: ChemProt; BioBERT: 76.68; SciBERT: 83.64."]
    assert row_sentence(["", "CS"], ["Neural", "84.6"]) == "Neural; CS: 84.6."
    assert chunk_sentences("Plain prose. Two sentences.") == ["Plain prose.", "Two sentences."]


def test_a_word_the_typesetter_split_in_a_cell_is_whole_again() -> None:
    rows = [["Predictor", "What it wraps", "F1"],
            ["SnippetRetrievalPredictor", "wraps models like Con-\ntriever (Izacard et al.,\n2022)", "81.2"],
            ["Vocabulary", "BERT-\nBase and state-of-the-\nart ones | more", "90.1"]]
    (source,) = table_sources(rows)
    assert "| wraps models like Contriever (Izacard et al., 2022) | 81.2 |" in source, source
    assert "| BERT-Base and state-of-the-art ones / more | 90.1 |" in source, source


def test_header_rows_are_joined_and_a_column_of_values_is_cut_into_rows() -> None:
    sources = table_sources([["Model", "BERT-Base", None], ["", "Frozen", "Finetune"], ["SciBERT", "88.7", "90.0"]],
                            "Table 1: Results.")
    assert sources == ["Table 1: Results.\n| Model | BERT-Base Frozen | BERT-Base Finetune |\n|---|---|---|\n"
                       "| SciBERT | 88.7 | 90.0 |"]
    # A table whose first row states values has no header: its columns go unnamed.
    assert table_sources([["Total papers", "81.1M"], ["With PDF", "28.9M"]])[0].startswith("|  |  |\n|---|---|\n")
    # One grid row holding a column of values: cut where the lines part, the header line on a row of its own, and a
    # cell with two runs on each line of values ("41.4", "115.6") is two columns under the header above them.
    cells = [[(10, 8, 0, "Hints"), (20, 8, 0, "None"), (30, 8, 0, "Gold")],
             [(10, 8, 50, "Time"), (20, 8, 50, "41.4"), (20, 8, 80, "115.6"), (30, 8, 50, "40.4"), (30, 8, 80, "60.4")]]
    assert _split_tall_row(cells) == [["Hints", "Time", None], ["None", "41.4", "115.6"], ["Gold", "40.4", "60.4"]]
    # Cells of wrapped prose are not cut.
    prose = [[(10, 8, 0, "A question that"), (20, 8, 0, "wraps")], [(10, 8, 50, "An answer")]]
    assert _split_tall_row(prose) == [["A question that\nwraps", "An answer"]]


def test_the_bench_scores_the_truth_tables_of_the_scibert_page() -> None:
    truth = [t for t in json.loads((TABLES_DIR / "truth.json").read_text())["truth"]
             if t["paper"] == "D19-1371.scibert-table-page"]
    found = parsed_tables(SCIBERT)
    scores = [score_table(t, next(v for (page, n, _), v in found.items() if n == t["table"])) for t in truth]
    right, cells = sum(s[0] for s in scores), sum(s[1] for s in scores)
    assert cells == 93 and right >= 92, scores  # "88.85" with its footnote mark reads "88.857"
    assert all(s[2] == s[3] for s in scores), "every column named as printed"
    assert score_table(truth[0], None)[0] == 0, "a table not found scores none of its cells"


def test_a_figures_caption_is_a_source_of_its_own_with_the_figures_region() -> None:
    from copilot.passages import render_passage

    path = TEST_DATA / "papers" / "N18-3011.pdf"
    parsed = parse_pdf(path)
    figures = [n for n in parsed.notes if n.kind == "figure"]
    assert [n.text for n in figures] == ["Figure 1: Part of the literature graph."]
    figure = figures[0]
    assert figure.page == 1 and figure.whole and "Part of the literature graph" not in parsed.text
    x0, y0, x1, y1 = figure.bbox
    assert y1 - y0 > 150 and x1 - x0 > 150, "the drawing above the caption, not the caption alone"
    chunk = next(c for c in chunk_paper("p", parsed, load_tokenizer()) if c.section == "Figure")
    assert chunk.text == figure.text and chunk.bbox == figure.bbox
    shown = render_passage(path, chunk.text, chunk.page_start, chunk.page_end, dpi=72, region=chunk.bbox, crop=True)
    assert abs(shown.width - (x1 - x0 + 16)) <= 2 and abs(shown.height - (y1 - y0 + 16)) <= 2, "the crop alone"


def test_the_table_questions_load_as_the_bench_reads_them() -> None:
    """Every file of questions in the benchmark's folder is one it can read (20 look-ups on table facts)."""
    from copilot.bench.qa import load_questions

    questions = load_questions(TABLES_DIR)
    assert len(questions) == 20 and {q.kind for q in questions} == {"lookup"}
