"""Drafting abstracts, syntheses and related work: every branch with a scripted LLM. The real model drafts both in the
browser walk (``tests/test_browser.py``), which checks what it wrote."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from copilot import cli as cli_module
from copilot.engine import Copilot
from copilot.errors import UserError
from copilot.tasks.writing import (
    RELATED_NEEDS_TITLE_OR_ABSTRACT,
    SYNTHESIS_NEEDS_PAPERS,
    Citation,
    DraftError,
    bibtex_entries,
    draft_abstract,
    draft_related_work,
    draft_synthesis,
    resolve_citations,
)
from tests.library_support import add_paper, make_copilot, recorded_client
from tests.scripted_llm import ScriptedLLM

SPECTER_ABSTRACT = (
    "We propose SPECTER, a new method to generate document-level embeddings of scientific papers by pretraining "
    "a Transformer on the citation graph. We also introduce SciDocs, a benchmark of seven document-level tasks.")
SPECTER_BODY = [
    ("Introduction", "Representation learning of scientific documents matters for search and recommendation. "
                     "We propose SPECTER, a new method to generate document-level embeddings of scientific papers by "
                     "pretraining a Transformer on the citation graph. Existing models such as SciBERT work on "
                     "tokens and sentences rather than whole documents."),
    ("Training details", "SPECTER uses a triplet margin loss where a query paper should be closer to a paper it "
                         "cites than to a paper it does not cite. Hard negatives are papers cited by a cited paper "
                         "but not by the query."),
    ("Results", "On SciDocs, SPECTER outperforms SciBERT and Citeomatic on classification, citation prediction, "
                "user activity and recommendation, with an average score of 80.0."),
    ("Conclusion", "SPECTER produces general purpose embeddings of papers without task-specific fine-tuning, and "
                   "future work could use more citation signals."),
    ("Acknowledgements", "We thank the THANKSLEAK reviewers for their comments on this work and the paper."),
    ("References", "Beltagy, Lo and Cohan. SciBERT: a pretrained language model for scientific text REFLEAK 2019."),
    ("Baseline details", "Appendix A gives APPENDIXLEAK hyperparameters of every baseline we compared against."),
]


@pytest.fixture
def copilot(tmp_path: Path, llm: ScriptedLLM) -> Copilot:
    c = make_copilot(tmp_path, llm)
    add_paper(c, "2004.07180", "SPECTER: Document-level Representation Learning using Citation-informed Transformers",
              abstract=SPECTER_ABSTRACT, sections=SPECTER_BODY, arxiv_id="2004.07180",
              authors=["Arman Cohan", "Sergey Feldman", "Iz Beltagy"], published="2020-04-15T00:00:00+00:00",
              category="cs.CL")
    add_paper(c, "graph", "Construction of the Literature Graph in Semantic Scholar",
              abstract="We describe a deployed system that organizes scientific literature into a graph of papers, "
                       "authors and entities.",
              sections=[("Introduction", "The literature graph links papers, authors, citations and entities such "
                                         "as methods and datasets extracted from the text of scientific papers.")],
              authors=["Waleed Ammar", "Dirk Groeneveld"], published="2018-05-01", doi="10.18653/v1/N18-3011",
              journal_ref="NAACL 2018")
    add_paper(c, "2020.s2orc", "S2ORC: 100% {open} corpus & tools_v1 #1",
              abstract="S2ORC is a large corpus of English academic papers with full text and citation links.",
              sections=[("Introduction", "The corpus provides full text, citation contexts and a citation graph of "
                                         "scientific papers for many disciplines.")],
              arxiv_id="1911.02782", authors=["Kyle Lo", "Lucy Lu Wang"], published="2019-11-07", category="cs.CL")
    add_paper(c, "pdf-ada", "Private notes on citation graph embeddings of scientific papers",
              abstract="Ada's unpublished notes.",
              sections=[("Introduction", "Citation graph embeddings of scientific papers with a Transformer "
                                         "pretrained on the citation graph, for recommendation and search.")],
              user_id="ada")
    yield c
    c.store.close()


def prompt_of(llm: ScriptedLLM, call: int = -1) -> str:
    return "\n".join(m["content"] for m in llm.calls[call])


# ----- the abstract of one paper ------------------------------------------------------------------------


def test_abstract_prompt_never_holds_the_abstract(copilot: Copilot, llm: ScriptedLLM) -> None:
    llm.answers = ["Abstract: SPECTER embeds papers with a citation-informed Transformer and beats SciBERT."]
    draft = draft_abstract(copilot, "2004.07180", user_id="bob")
    prompt = prompt_of(llm)
    assert SPECTER_ABSTRACT not in prompt
    for sentence in re.split(r"(?<=\.)\s+", SPECTER_ABSTRACT):
        assert sentence not in prompt, "a body sentence copying the abstract was kept"
    assert "Representation learning of scientific documents" in prompt and "triplet margin loss" in prompt
    for leak in ("REFLEAK", "APPENDIXLEAK", "THANKSLEAK"):
        assert leak not in prompt, f"{leak}: references, appendix and acknowledgements are not the paper's content"
    assert draft.kind == "abstract" and draft.llm_calls == 1 and len(llm.calls) == 1
    assert draft.text == "SPECTER embeds papers with a citation-informed Transformer and beats SciBERT."
    assert draft.citations == [] and [s.paper_id for s in draft.sources] == ["2004.07180"]
    assert draft.paper_ids == ["2004.07180"]
    assert set(draft.timings) == {"select_ms", "draft_ms", "total_ms", "grounding_ms"}


def test_abstract_keeps_to_the_budget_in_reading_order(tmp_path: Path) -> None:
    llm = ScriptedLLM(["An abstract."])
    c = make_copilot(tmp_path, llm, context_budget_tokens=100)
    add_paper(c, "p", "A paper", abstract=SPECTER_ABSTRACT, sections=SPECTER_BODY)
    draft_abstract(c, "p", user_id="local")
    user_turn = llm.calls[0][-1]["content"]
    excerpts = re.findall(r"^\((.+?)\) (.*)$", user_turn, re.MULTILINE)
    assert excerpts and sum(len(text.split()) for _, text in excerpts) <= 100
    order = [name for name, _ in SPECTER_BODY]
    assert [order.index(name) for name, _ in excerpts] == sorted(order.index(name) for name, _ in excerpts)
    assert excerpts[0][0] == "Introduction", "the introduction's opening is where an abstract comes from"
    c.store.close()


def test_a_paper_without_body_text_is_refused(tmp_path: Path) -> None:
    c = make_copilot(tmp_path, ScriptedLLM())
    add_paper(c, "thin", "Only an abstract", abstract=SPECTER_ABSTRACT, sections=[("References", "A. 2019.")])
    with pytest.raises(DraftError, match="no body text"):
        draft_abstract(c, "thin", user_id="local")
    c.store.close()


# ----- visibility ---------------------------------------------------------------------------------------


def test_another_users_upload_cannot_be_drafted_over(copilot: Copilot, llm: ScriptedLLM) -> None:
    with pytest.raises(DraftError, match="No paper 'pdf-ada'"):
        draft_abstract(copilot, "pdf-ada", user_id="bob")
    with pytest.raises(DraftError, match="No paper 'pdf-ada'"):
        draft_synthesis(copilot, ["2004.07180", "pdf-ada"], user_id="bob")
    with pytest.raises(DraftError, match="No paper 'pdf-ada'"):
        draft_related_work(copilot, "Citation embeddings", "", user_id="bob", paper_ids=["pdf-ada"])
    assert llm.calls == [], "nothing reached the model"

    llm.answers = ["Related work [1]."]
    draft = draft_related_work(copilot, "Citation graph embeddings of scientific papers",
                               "A Transformer pretrained on the citation graph for recommendation.", user_id="bob")
    assert "pdf-ada" not in draft.paper_ids and "Private notes" not in prompt_of(llm)
    llm.answers = ["Related work [1]."]
    own = draft_related_work(copilot, "Citation graph embeddings of scientific papers",
                             "A Transformer pretrained on the citation graph for recommendation.", user_id="ada")
    assert "pdf-ada" in own.paper_ids, "the owner drafts over their own upload"
    assert draft_abstract(copilot, "pdf-ada", user_id="ada").sources[0].paper_id == "pdf-ada"


# ----- citations ----------------------------------------------------------------------------------------


def test_synthesis_citations_are_renumbered_and_checked(copilot: Copilot, llm: ScriptedLLM) -> None:
    llm.answers = ["Graphs of papers [2] feed embeddings [1, 3]. A corpus [3] and a survey [7] (Smith et al., 2021) "
                   "help."]
    draft = draft_synthesis(copilot, ["2004.07180", "graph", "2020.s2orc", "graph"], user_id="local")
    assert draft.kind == "synthesis" and draft.paper_ids == ["2004.07180", "graph", "2020.s2orc"]
    assert draft.text == "Graphs of papers [1] feed embeddings [2, 3]. A corpus [3] and a survey help."
    assert [(c.n, c.paper_id) for c in draft.citations] == [(1, "graph"), (2, "2004.07180"), (3, "2020.s2orc")]
    assert any("[7]" in note and "(Smith et al., 2021)" in note for note in draft.notes)
    prompt = prompt_of(llm)
    assert "[1] SPECTER" in prompt and "[2] Construction of the Literature Graph" in prompt
    assert SPECTER_ABSTRACT in prompt, "a synthesis reads each paper's abstract"


def test_drafts_mark_unsupported_sentences_and_never_link_what_no_source_holds(copilot: Copilot, llm: ScriptedLLM
                                                                               ) -> None:
    llm.answers = ["S2ORC is a corpus of English academic papers [3]. The literature graph was built by NVIDIA in "
                   "1997 [2]. See https://example.org/invented and doi:10.1234/made.up for details."]
    draft = draft_synthesis(copilot, ["2004.07180", "graph", "2020.s2orc"], user_id="local")
    assert "example.org" not in draft.text and "10.1234" not in draft.text
    assert draft.text.count("(link removed: not in the sources)") == 2
    assert any("Removed 2 link(s)" in note for note in draft.notes)
    weak = draft.checked.unsupported
    assert any("NVIDIA" in s.missing and "1997" in s.missing for s in weak)
    assert "in 1997 [1]. ⚠️" in draft.to_markdown() or "in 1997 [2]. ⚠️" in draft.to_markdown()
    shown = draft.as_dict()
    assert shown["grounded"] is False and any("NVIDIA" in u["missing"] for u in shown["unsupported"])
    assert not any("S2ORC is a corpus" in u["sentence"] for u in shown["unsupported"]), "a supported one is clean"


def test_list_labels_are_dropped_and_named_papers_cited(copilot: Copilot, llm: ScriptedLLM) -> None:
    llm.answers = ["[1] S2ORC is a corpus of papers.\n[2] The literature graph links papers [1]."]
    draft = draft_synthesis(copilot, ["graph", "2020.s2orc"], user_id="local")
    assert draft.text == "S2ORC [1] is a corpus of papers.\nThe literature graph links papers [2]."
    assert [c.paper_id for c in draft.citations] == ["2020.s2orc", "graph"]


def test_resolve_citations_forms() -> None:
    sources = [Citation(i, f"p{i}", f"T{i}", "", None, None) for i in (1, 2, 3, 4)]
    text, cited, removed = resolve_citations("A [3-4]; B [2; 3]; C [1][1]. D [2020] E [0].", sources)
    assert text == "A [1, 2]; B [1, 3]; C [4][4]. D [2020] E."
    assert [c.paper_id for c in cited] == ["p3", "p4", "p2", "p1"] and removed == ["[0]"]


def test_uncited_draft_lists_its_sources_honestly(copilot: Copilot, llm: ScriptedLLM) -> None:
    llm.answers = ["These papers build tools for scholarly search from citation data."]
    draft = draft_synthesis(copilot, ["2004.07180", "graph"], user_id="local")
    assert draft.citations == [] and [s.paper_id for s in draft.sources] == ["2004.07180", "graph"]
    assert any("cited no source" in note for note in draft.notes)
    markdown = draft.to_markdown()
    assert "## References" not in markdown and "## Sources" in markdown and "cites none of them" in markdown
    assert "- Arman Cohan, Sergey Feldman et al. (2020). *SPECTER" in markdown
    assert draft.bibtex().count("@") == 2, "the BibTeX covers the papers used"


# ----- BibTeX and Markdown ------------------------------------------------------------------------------

_ENTRY = re.compile(r"@(article|misc)\{([a-z0-9]+),\n((?:  [A-Za-z]+ = \{.*\},?\n)+)\}")


def balanced(text: str) -> bool:
    depth = 0
    for i, ch in enumerate(text):
        if ch in "{}" and i and text[i - 1] == "\\":
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def test_bibtex_is_well_formed_escaped_and_stable(copilot: Copilot, llm: ScriptedLLM) -> None:
    llm.answers = ["Embeddings [1] use graphs [2] and corpora [3]."]
    draft = draft_synthesis(copilot, ["2004.07180", "graph", "2020.s2orc"], user_id="local")
    bib = draft.bibtex()
    entries = bib.strip().split("\n\n")
    assert len(entries) == 3
    parsed = [_ENTRY.fullmatch(e) for e in entries]
    assert all(parsed), bib
    assert all(balanced(e) for e in entries)
    assert [m.group(1) for m in parsed] == ["misc", "article", "misc"]  # a journal reference makes an article
    keys = [m.group(2) for m in parsed]
    assert keys == ["cohan2020specter", "ammar2018construction", "lo2019s2orc"]
    assert r"title = {{S2ORC: 100\% \{open\} corpus \& tools\_v1 \#1}}" in bib
    assert "author = {Arman Cohan and Sergey Feldman and Iz Beltagy}" in bib
    assert "eprint = {2004.07180}" in bib and "primaryClass = {cs.CL}" in bib and "journal = {NAACL 2018}" in bib
    assert draft.bibtex() == bib, "keys and entries do not change between calls"
    twin = [Citation(1, "a", "Same Title", "Kim", 2020, None, author_list=["Jo Kim"]),
            Citation(2, "b", "Same Title", "Kim", 2020, "https://x.org/a_b", author_list=["Jo Kim"])]
    assert re.findall(r"@misc\{(\w+),", bibtex_entries(twin)) == ["kim2020same", "kim2020samea"]
    assert "note = {Paper Copilot library: a}" in bibtex_entries(twin)
    assert "url = {https://x.org/a_b}" in bibtex_entries(twin), "URLs are verbatim in BibTeX"


def test_markdown_and_json_export(copilot: Copilot, llm: ScriptedLLM) -> None:
    llm.answers = ["Embeddings [2] build on graphs [1]."]
    draft = draft_synthesis(copilot, ["graph", "2004.07180"], user_id="local")
    markdown = draft.to_markdown()
    lines = markdown.splitlines()
    assert lines[0].startswith("# Synthesis: Construction of the Literature Graph")
    assert "Embeddings [1] build on graphs [2]." in markdown
    refs = markdown.split("## References\n\n")[1].splitlines()
    assert refs[0].startswith("[1] Arman Cohan, Sergey Feldman et al. (2020). *SPECTER")
    assert refs[0].endswith("https://arxiv.org/abs/2004.07180")
    assert refs[1].startswith("[2] Waleed Ammar and Dirk Groeneveld (2018). *Construction")
    assert refs[1].endswith("https://doi.org/10.18653/v1/N18-3011")
    record = json.loads(json.dumps(draft.as_dict()))
    assert record["text"] == draft.text and record["llm_calls"] == 1
    assert [c["paper_id"] for c in record["citations"]] == ["2004.07180", "graph"]
    assert record["references"] == draft.references_markdown() and record["bibtex"] == draft.bibtex()


def test_repetition_heading_and_unfinished_sentence_are_cut(copilot: Copilot, llm: ScriptedLLM) -> None:
    llm.answers = ["**Synthesis**\nGraphs help search [1].\n\nGraphs help search [1].\n\nMore text here"]
    seen: list[str] = []
    draft = draft_synthesis(copilot, ["graph", "2020.s2orc"], user_id="local", on_text=seen.append)
    assert draft.text == "Graphs help search [1]."
    assert seen, "the text is shown as it grows"
    llm.answers = ["Graphs help search [1]. Embeddings help recommendation [1]. And then the"]
    assert draft_synthesis(copilot, ["graph", "2020.s2orc"], user_id="local").text == \
        "Graphs help search [1]. Embeddings help recommendation [1]."


# ----- related work -------------------------------------------------------------------------------------

TITLE = "Citation graph embeddings for paper recommendation"
ABSTRACT = "We pretrain a Transformer on the citation graph of scientific papers to recommend papers."


def test_related_work_groups_chunks_by_paper(copilot: Copilot, llm: ScriptedLLM) -> None:
    llm.answers = ["Citation embeddings [1] and literature graphs [2] relate to our work, as do corpora [3]."]
    draft = draft_related_work(copilot, TITLE, ABSTRACT, user_id="local")
    assert draft.kind == "related" and draft.llm_calls == 1
    assert len(draft.paper_ids) == len(set(draft.paper_ids)), "one source per paper"
    assert set(draft.paper_ids) == {"2004.07180", "graph", "2020.s2orc"}, "every matching paper the user sees"
    assert [c.paper_id for c in draft.citations] == draft.paper_ids[:3]
    prompt = prompt_of(llm)
    assert TITLE in prompt and ABSTRACT in prompt and "REFLEAK" not in prompt
    assert "arxiv_ms" not in draft.timings and draft.notes == []
    scoped = draft_related_work(copilot, TITLE, ABSTRACT, user_id="local", paper_ids=["graph"])
    assert scoped.paper_ids == ["graph"]


def test_related_work_adds_arxiv_results(copilot: Copilot, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    client = recorded_client(monkeypatch)
    llm.answers = ["Our library [1] and the testing study [4] relate."]
    draft = draft_related_work(copilot, TITLE, ABSTRACT, user_id="local", search_arxiv=True, arxiv_client=client)
    found = [s for s in draft.sources if s.origin == "arxiv"]
    assert len(found) == 3 and all(s.url and s.url.startswith("https://arxiv.org/abs/") for s in found)
    assert found[0].title.startswith("Testing Deep Learning Models")
    assert [c.origin for c in draft.citations] == ["library", "arxiv"]
    assert "Deep Learning (DL) has revolutionized" in prompt_of(llm), "an arXiv abstract is a source"
    assert "search_query=Citation" in client.recorded.urls[0] and "arxiv_ms" in draft.timings
    assert draft.notes == []


def test_related_work_offline_falls_back_to_the_library(copilot: Copilot, llm: ScriptedLLM,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    client = recorded_client(monkeypatch, None)
    llm.answers = ["Embeddings [1]."]
    draft = draft_related_work(copilot, TITLE, ABSTRACT, user_id="local", search_arxiv=True, arxiv_client=client)
    assert draft.text == "Embeddings [1]." and all(s.origin == "library" for s in draft.sources)
    assert any("arXiv search failed" in note and "library only" in note for note in draft.notes)
    assert "## References" in draft.to_markdown() and "> arXiv search failed" in draft.to_markdown()


def test_related_work_needs_a_library_and_a_title(tmp_path: Path) -> None:
    c = make_copilot(tmp_path, ScriptedLLM())
    with pytest.raises(DraftError, match="library is empty"):
        draft_related_work(c, TITLE, ABSTRACT, user_id="local")
    with pytest.raises(DraftError, match="title or abstract"):
        draft_related_work(c, " ", "", user_id="local")
    with pytest.raises(DraftError, match="at least two different papers"):
        draft_synthesis(c, [], user_id="local")
    c.store.close()


def test_a_synthesis_needs_two_different_papers(copilot: Copilot, llm: ScriptedLLM) -> None:
    for ids in (["graph"], ["graph", " graph "], ["2004.07180", "arXiv:2004.07180"]):
        with pytest.raises(DraftError) as raised:
            draft_synthesis(copilot, ids, user_id="local")
        assert str(raised.value) == SYNTHESIS_NEEDS_PAPERS == \
            "Choose at least two different papers to write a synthesis of."
    assert isinstance(raised.value, UserError) and llm.calls == [], "refused before any LLM call"


def test_related_work_needs_a_title_or_an_abstract(copilot: Copilot, llm: ScriptedLLM) -> None:
    with pytest.raises(UserError) as raised:
        draft_related_work(copilot, " ", " \n", user_id="local")
    assert str(raised.value) == RELATED_NEEDS_TITLE_OR_ABSTRACT == \
        "Give your paper's title or abstract to write its related work."
    llm.answers = ["Related [1].", "Related [1]."]
    assert draft_related_work(copilot, TITLE, "", user_id="local").text == "Related [1].", "a title alone is enough"
    assert draft_related_work(copilot, "", ABSTRACT, user_id="local").text == "Related [1].", "so is an abstract"


# ----- the command line ---------------------------------------------------------------------------------


def test_cli_errors_and_export(copilot: Copilot, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch,
                               tmp_path: Path) -> None:
    monkeypatch.setattr(Copilot, "open", classmethod(lambda cls, settings: copilot))
    monkeypatch.setattr(copilot.store, "close", lambda: None)
    runner = CliRunner()
    missing = runner.invoke(cli_module.cli, ["draft", "abstract", "nope"])
    assert missing.exit_code == 1 and "error: No paper 'nope'" in missing.output
    assert "Traceback" not in missing.output
    both = runner.invoke(cli_module.cli, ["draft", "abstract", "2004.07180", "--papers", "graph"])
    assert both.exit_code == 2 and "either PAPER_ID or --papers" in both.output
    llm.answers = ["Graphs [1] and embeddings [2]."]
    out = tmp_path / "synthesis.md"
    result = runner.invoke(cli_module.cli, ["draft", "abstract", "--papers", "graph,2004.07180", "--json", "--out",
                                            str(out)])
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    assert record["kind"] == "synthesis" and [c["paper_id"] for c in record["citations"]] == ["graph", "2004.07180"]
    assert out.read_text().startswith("# Synthesis:") and "## References" in out.read_text()
    llm.answers = ["Related [1]."]
    related = runner.invoke(cli_module.cli, ["draft", "related", "--title", TITLE, "--abstract", ABSTRACT])
    assert related.exit_code == 0 and related.output.startswith("# Related Work: ")
