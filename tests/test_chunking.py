"""Token-based, section-aware, overlapping chunks with exact provenance."""

import pytest

from copilot.embeddings import load_tokenizer
from ingest.chunking import ABSTRACT_SECTION, ChunkingOptions, chunk_paper, split_spans
from ingest.models import ParsedPaper, Section


@pytest.fixture(scope="module")
def tokenizer():  # noqa: ANN201
    return load_tokenizer()


def sentences(prefix: str, n: int) -> str:
    return " ".join(f"{prefix} sentence number {i} talks about citation graphs and embeddings." for i in range(n))


def make_paper() -> ParsedPaper:
    intro = "Introduction text. " + sentences("Intro", 60)
    method = sentences("Method", 8)
    tiny = "Thanks."
    text = intro + "\n" + method + "\n" + tiny
    a, b = len(intro) + 1, len(intro) + 1 + len(method) + 1
    sections = [Section("1 Introduction", 1, 0, len(intro), 1, 2), Section("2 Method", 1, a, a + len(method), 2, 2),
                Section("Acknowledgments", 1, b, len(text), 3, 3)]
    return ParsedPaper(title="T", abstract=sentences("Abstract", 3), text=text, sections=sections, references=[],
                       n_pages=3, page_offsets=[0, len(intro) // 2, b])


def test_windows_respect_size_and_overlap(tokenizer) -> None:  # noqa: ANN001
    text = sentences("S", 80)
    options = ChunkingOptions(chunk_tokens=64, overlap_tokens=16)
    windows = split_spans(tokenizer, text, options)
    assert len(windows) > 5
    for start, end, n in windows:
        assert 0 < n <= 64
        assert len(tokenizer(text[start:end], add_special_tokens=False)["input_ids"]) <= 64
    for (s1, e1, _), (s2, _, _) in zip(windows, windows[1:], strict=False):
        assert s2 < e1, "consecutive windows overlap"
        assert s2 > s1
    assert windows[0][0] == 0 and windows[-1][1] == len(text.rstrip())
    # Most windows end on a sentence end.
    assert sum(text[e - 1] == "." for _, e, _ in windows) >= len(windows) - 1


def test_chunks_stay_in_their_section_and_keep_provenance(tokenizer) -> None:  # noqa: ANN001
    paper = make_paper()
    chunks = chunk_paper("p1", paper, tokenizer, ChunkingOptions(chunk_tokens=100, overlap_tokens=20))
    assert chunks[0].section == ABSTRACT_SECTION
    assert chunks[0].text == paper.abstract[chunks[0].char_start:chunks[0].char_end]
    body = [c for c in chunks if c.section != ABSTRACT_SECTION]
    by_section = {s.title: s for s in paper.sections}
    for c in body:
        sec = by_section[c.section]
        assert sec.char_start <= c.char_start < c.char_end <= sec.char_end
        assert c.text == paper.text[c.char_start:c.char_end]
        assert 1 <= c.page_start <= c.page_end <= 3
    assert [c.seq for c in chunks] == list(range(len(chunks)))
    assert {c.section for c in body} == {"1 Introduction", "2 Method"}, "the 2-token section is dropped"
    intro = [c for c in body if c.section == "1 Introduction"]
    assert intro[0].page_start == 1 and intro[-1].page_end == 2


def test_a_paper_without_sections_is_one_body(tokenizer) -> None:  # noqa: ANN001
    paper = ParsedPaper(title="", abstract="", text=sentences("X", 30), sections=[], references=[], n_pages=1,
                        page_offsets=[0])
    chunks = chunk_paper("p", paper, tokenizer)
    assert chunks and all(c.section == "Body" for c in chunks)


def test_bad_options() -> None:
    with pytest.raises(ValueError):
        ChunkingOptions(chunk_tokens=100, overlap_tokens=60)
