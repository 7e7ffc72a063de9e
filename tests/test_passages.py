"""A cited chunk found again on its PDF page: the highlight covers the chunk's words, on the chunk's page, and
nothing much else; the engine shows only what the user may see, and says so when the PDF is gone."""

from __future__ import annotations

import shutil
import statistics
from pathlib import Path

import pymupdf
import pytest

from copilot.embeddings import load_tokenizer
from copilot.errors import NotFound, UserError
from copilot.passages import chunk_words, locate, norm, page_words, render_passage
from ingest.chunking import ChunkingOptions, chunk_paper
from tests.conftest import parsed_paper
from tests.library_support import make_copilot
from tests.scripted_llm import ScriptedLLM
from tests.ui_harness import TEST_PAPERS

PAPERS = ["2020.acl-main.207", "2020.acl-main.447", "2023.eacl-main.121", "N18-3011"]


@pytest.fixture(scope="module")
def chunked() -> dict[str, list]:
    """Each shared paper's chunks as the library cuts them (the embedder's tokenizer, default options)."""
    tokenizer = load_tokenizer()
    return {name: chunk_paper(name, parsed_paper(TEST_PAPERS / f"{name}.pdf"), tokenizer, ChunkingOptions())
            for name in PAPERS}


def test_words_compare_across_ligatures_hyphens_and_line_ends() -> None:
    assert norm("classiﬁcation,") == "classification" and norm("Document-level") == "documentlevel"
    assert chunk_words("state-of-the-art ﬁndings (see §3).") == ["stateoftheart", "findings", "see", "3"]
    raw = [(0, 0, 10, 5, "in-", 1, 0, 0), (0, 6, 10, 11, "cluding", 1, 1, 0), (12, 6, 20, 11, "pre-", 1, 1, 1),
           (21, 6, 30, 11, "trained", 1, 1, 2)]
    words = page_words(raw, 3)
    assert [w.text for w in words] == ["including", "pre", "trained"], "only a line-end hyphenation is joined"
    assert len(words[0].boxes) == 2 and words[0].page == 3


def test_every_chunk_of_the_shared_papers_is_highlighted_on_its_page(chunked: dict[str, list]) -> None:
    coverages, off_page, total = [], 0, 0
    for name, chunks in chunked.items():
        with pymupdf.open(TEST_PAPERS / f"{name}.pdf") as doc:
            words = {i + 1: page_words(doc[i].get_text("words"), i + 1) for i in range(doc.page_count)}
            for chunk in chunks:
                near = {p: w for p, w in words.items() if chunk.page_start - 1 <= p <= chunk.page_end + 1}
                found = locate(chunk.text, near)
                if chunk.section == "Table":
                    # A table's rows are read across its columns, which the page's word order need not follow, and
                    # each part of a long table repeats its header: its words, in any order, are on its page.
                    on_page = {w.text for w in words[chunk.page_start]}
                    distinct = set(chunk_words(chunk.text))
                    share = len(distinct & on_page) / len(distinct)
                    assert share >= 0.8 and found.best_page == chunk.page_start, (name, chunk.seq, share)
                    continue
                coverages.append(found.coverage)
                total += 1
                assert found.coverage >= 0.85, (name, chunk.seq, found.coverage)
                assert found.best_page is not None
                off_page += not chunk.page_start <= found.best_page <= chunk.page_end
                for page, rects in found.rects.items():
                    bounds = doc[page - 1].rect
                    assert all(bounds.contains(pymupdf.Rect(r)) for r in rects), "highlights lie on the page"
    assert statistics.mean(coverages) >= 0.98, statistics.mean(coverages)
    # The passage is where the chunk says it is, but for a few whose stored page the parser put one off.
    assert off_page <= 0.03 * total, (off_page, total)


def _covered(word: tuple, rects: list) -> bool:
    """Is most of this word's box (x0, y0, x1, y1) under one of the highlight rectangles?"""
    area = (word[2] - word[0]) * (word[3] - word[1])
    for x0, y0, x1, y1 in rects:
        w, h = min(x1, word[2]) - max(x0, word[0]), min(y1, word[3]) - max(y0, word[1])
        if w > 0 and h > 0 and w * h > 0.5 * area:
            return True
    return False


def test_the_highlight_covers_the_chunk_and_little_else(chunked: dict[str, list]) -> None:
    """Read back from the page, independently of the matcher: the words under the highlight are the chunk's."""
    for name, chunks in chunked.items():
        with pymupdf.open(TEST_PAPERS / f"{name}.pdf") as doc:
            for chunk in chunks[1::8]:
                if chunk.bbox is not None and "\n|" in chunk.text:
                    continue  # a table read cell by cell: its region is highlighted (the test below)
                near = {p: page_words(doc[p - 1].get_text("words"), p)
                        for p in range(max(1, chunk.page_start - 1), min(doc.page_count, chunk.page_end + 1) + 1)}
                found = locate(chunk.text, near)
                wanted = set(chunk_words(chunk.text))
                clipped = [w for page, rects in found.rects.items() for w in doc[page - 1].get_text("words")
                           if _covered(w[:4], rects)]
                under = [w.text for w in page_words(clipped, 1)]
                # A word hyphenated at a line end whose other half is on an unhighlighted line reads as a half.
                inside = sum(1 for w in under if w in wanted or any(x.startswith(w) or x.endswith(w) for x in wanted))
                assert under and inside / len(under) >= 0.9, (name, chunk.seq, inside, len(under))
                assert len(set(under) & wanted) >= 0.85 * len(wanted), (name, chunk.seq)


def test_a_table_read_cell_by_cell_has_its_region_highlighted(chunked: dict[str, list]) -> None:
    """A table's source is its rows under its caption and header, not the page's order of words: the passage view
    highlights the table's region, which holds the values of the source's rows."""
    tables = [c for c in chunked["N18-3011"] if c.section == "Table" and "\n|" in c.text]
    assert tables and all(c.bbox is not None for c in tables)
    chunk = next(c for c in tables if "Without LM" in c.text)
    shown = render_passage(TEST_PAPERS / "N18-3011.pdf", chunk.text, chunk.page_start, chunk.page_end, dpi=72,
                           region=chunk.bbox)
    assert shown.pages == [chunk.page_start] and shown.located.rects == {chunk.page_start: [chunk.bbox]}
    with pymupdf.open(TEST_PAPERS / "N18-3011.pdf") as doc:
        under = {w[4] for w in doc[chunk.page_start - 1].get_text("words") if _covered(w[:4], [chunk.bbox])}
    assert {"49.9", "54.1", "55.2"} <= under, under
    image = pymupdf.Pixmap(shown.png)
    x0, y0, x1, y1 = chunk.bbox
    samples = [image.pixel(int(x), int(y0) + 2) for x in range(int(x0) + 2, int(x1) - 2)]
    assert sum(1 for r, g, b in samples if r > 200 and g > 170 and b < 120) >= 0.4 * len(samples)


def test_the_rendered_page_shows_the_highlight(chunked: dict[str, list]) -> None:
    chunk = chunked["N18-3011"][5]
    shown = render_passage(TEST_PAPERS / "N18-3011.pdf", chunk.text, chunk.page_start, chunk.page_end, dpi=72)
    assert shown.png.startswith(b"\x89PNG") and shown.pages == [chunk.page_start]
    image = pymupdf.Pixmap(shown.png)
    with pymupdf.open(TEST_PAPERS / "N18-3011.pdf") as doc:
        width, height = doc[0].rect.width, doc[0].rect.height
    assert (image.width, image.height) == (shown.width, shown.height)
    assert abs(image.width - width) <= 1 and abs(image.height - height) <= 1, "one pixel a point at 72 DPI"
    rect = shown.located.rects[chunk.page_start][len(shown.located.rects[chunk.page_start]) // 2]
    samples = [image.pixel(int(x), int((rect[1] + rect[3]) / 2)) for x in range(int(rect[0]) + 1, int(rect[2]) - 1)]
    yellow = sum(1 for r, g, b in samples if r > 200 and g > 170 and b < 120)
    assert yellow >= 0.4 * len(samples), "the highlighted line is marked in yellow between its letters"
    clear = image.pixel(5, 5)
    assert clear == (255, 255, 255), "the margin is not"


def test_a_chunk_over_a_page_break_shows_both_pages(chunked: dict[str, list]) -> None:
    chunk = next(c for c in chunked["2020.acl-main.207"] if c.page_end > c.page_start)
    shown = render_passage(TEST_PAPERS / "2020.acl-main.207.pdf", chunk.text, chunk.page_start, chunk.page_end,
                           dpi=36)
    assert shown.pages == [chunk.page_start, chunk.page_end]
    with pymupdf.open(TEST_PAPERS / "2020.acl-main.207.pdf") as doc:
        width, height = doc[0].rect.width / 2, doc[0].rect.height / 2
    assert abs(shown.width - width) <= 1 and shown.height > 2 * height, "two pages, one below the other"


def test_the_engine_shows_only_what_the_user_may_see(tmp_path: Path) -> None:
    copilot = make_copilot(tmp_path, ScriptedLLM())
    upload = tmp_path / "graph.pdf"
    shutil.copy(TEST_PAPERS / "N18-3011.pdf", upload)
    paper_id = copilot.library.add_pdf(upload, user_id="ada").paper_id
    chunk = copilot.store.chunks.of_paper(paper_id)[6]

    passage = copilot.source_page("ada", chunk.id)
    assert passage.paper_id == paper_id and passage.section == chunk.section and passage.text == chunk.text
    assert passage.pages and chunk.page_start - 1 <= passage.pages[0] <= chunk.page_end + 1
    assert passage.coverage >= 0.85 and passage.png.startswith(b"\x89PNG")
    with pymupdf.open(TEST_PAPERS / "N18-3011.pdf") as doc:
        assert abs(passage.width - doc[0].rect.width * copilot.settings.passage_dpi / 72) <= 1

    with pytest.raises(NotFound) as other:
        copilot.source_page("bob", chunk.id)
    with pytest.raises(NotFound) as missing:
        copilot.source_page("ada", 10_000)
    assert str(other.value) == f"No source #{chunk.id} in your library.", "another user's chunk reads as missing"
    assert str(missing.value) == "No source #10000 in your library."

    paper = copilot.store.papers.get(paper_id)
    Path(paper.pdf_path).unlink()
    with pytest.raises(UserError, match="no longer stored"):
        copilot.source_page("ada", chunk.id)


def test_a_huge_page_renders_no_larger_than_the_cap(tmp_path: Path) -> None:
    """An uploaded PDF may declare a page of 200 x 200 inches: rendered at the setting's DPI it would be a 1.4 GB
    pixmap, so its longest side is capped."""
    from copilot.passages import MAX_SIDE_PX

    doc = pymupdf.open()
    page = doc.new_page(width=14_400, height=14_400)
    text = "Dense retrieval finds passages with learned embeddings of questions and passages."
    page.insert_text((72, 200), text, fontsize=60)
    pdf = tmp_path / "huge.pdf"
    doc.save(pdf)
    doc.close()
    shown = render_passage(pdf, text, 1, 1, dpi=110)
    assert max(shown.width, shown.height) <= MAX_SIDE_PX and shown.pages == [1]
    assert shown.located.coverage > 0.8, "the passage is still found and highlighted"
