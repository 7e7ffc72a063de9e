"""A comparison table across papers: limits, cells filled from each paper's own evidence (scripted LLM, real
embedder, real store), "not stated", a marked unsupported cell, exports, quotas, the CLI, and the bench's grading."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from copilot import cli as cli_module
from copilot.bench.compare import grade
from copilot.config import Settings
from copilot.embeddings import Embedder
from copilot.engine import Copilot
from copilot.errors import UserError
from copilot.limits import LimitExceeded
from copilot.llm import LLMError
from copilot.storage import Store
from copilot.tasks.compare import (
    DEFAULT_ASPECTS,
    Comparison,
    aspect_question,
    check_request,
    parse_aspects,
)
from copilot.types import ComparisonCell
from tests.library_support import add_paper
from tests.scripted_llm import ScriptedLLM

SPECTER = [("Method", "SPECTER pretrains a Transformer with a triplet margin loss on the citation graph, so that a "
                      "paper is closer to the papers it cites than to others."),
           ("Training", "We train the model on a single Titan V GPU for 2 epochs with a batch size of 4.")]
S2ORC = [("Corpus", "S2ORC is a corpus of 81.1M English academic papers from many disciplines, built from "
                    "Semantic Scholar's literature graph."),
         ("Parsing", "Full text is extracted from 8.1M PDFs with GROBID and from 1.5M LaTeX sources.")]


def replies(messages: list[dict[str, str]]) -> str:
    """The scripted model's cell, by the question and the paper it reads."""
    text = messages[-1]["content"]
    if "method or approach" in text:
        return ("A Transformer trained with a triplet margin loss on citations [1]." if "SPECTER" in text else
                "GROBID parsing of 8.1M PDFs and 1.5M LaTeX sources [1].")
    if "datasets or data" in text:
        return "The citation graph of papers [1]." if "SPECTER" in text else "12.5M papers crawled from arXiv [1]."
    return "not stated"


@pytest.fixture
def copilot(tmp_path: Path, embedder: Embedder) -> Copilot:
    settings = Settings(data_dir=tmp_path / "data", association=False, llm_backend="local", recheck_samples=0)
    c = Copilot(settings, Store.open(settings), embedder, ScriptedLLM([replies] * 20))
    add_paper(c, "specter", "SPECTER: Document-level Representation Learning", sections=SPECTER,
              abstract="We propose SPECTER, which pretrains a Transformer with a triplet margin loss on citations.")
    add_paper(c, "s2orc", "S2ORC: The Semantic Scholar Open Research Corpus", sections=S2ORC,
              abstract="S2ORC gathers 81.1M papers; its full text comes from GROBID parsing of 8.1M PDFs and 1.5M "
                       "LaTeX sources.")
    add_paper(c, "private", "Someone else's upload", sections=SPECTER, user_id="bob")
    yield c
    c.store.close()


def test_a_comparison_is_two_to_ten_papers_by_at_most_eight_short_aspects() -> None:
    assert check_request(["a", "b", "a"], None) == (["a", "b"], list(DEFAULT_ASPECTS))
    assert check_request(["a", "b"], ["  data ", "data", "method"])[1] == ["data", "method"]
    for papers, aspects, message in ((["a"], None, "at least 2 papers"), ([str(i) for i in range(11)], None,
                                                                        "at most 10 papers"),
                                     (["a", "b"], [f"aspect {i}" for i in range(9)], "at most 8 aspects"),
                                     (["a", "b"], ["x" * 61], "at most 60 characters")):
        with pytest.raises(UserError, match=message):
            check_request(papers, aspects)
    assert parse_aspects("task, data;\nmain result,") == ["task", "data", "main result"]
    assert aspect_question("Method") == "How does the paper's method or approach work, in a few words?"
    assert aspect_question("licence") == "What does the paper say about its licence?"


def test_cells_come_from_each_papers_own_evidence_and_stream_in(copilot: Copilot) -> None:
    updates = list(copilot.compare("local", ["specter", "s2orc"], ["method", "data"]))
    assert isinstance(updates[0], Comparison) and not updates[0].cells or updates[0] is updates[-1]
    cells = [u for u in updates if isinstance(u, ComparisonCell)]
    assert [(c.paper_id, c.aspect) for c in cells] == [("specter", "method"), ("specter", "data"),
                                                       ("s2orc", "method"), ("s2orc", "data")]
    table = updates[-1]
    method = table.cell("specter", "method")
    assert method.stated and method.supported and method.llm_calls == 1
    assert method.evidence and method.evidence[0].paper_id == "specter" and "triplet margin loss" in \
        method.evidence[0].quote and method.evidence[0].page == 1
    assert table.cell("s2orc", "method").evidence[0].paper_id == "s2orc", "a cell reads only its own paper"
    # A cell whose facts the paper does not state is kept, marked, with them named.
    invented = table.cell("s2orc", "data")
    assert invented.stated and not invented.supported and "12.5M" in " ".join(invented.missing)
    assert invented.shown().startswith("⚠️ ")
    assert table.llm_calls <= 4, "one short model call a cell at most"
    markdown = table.to_markdown()
    assert markdown.startswith("| Paper | method | data |\n|---|---|---|\n| SPECTER")
    assert "triplet margin loss" in markdown and "⚠️ not supported by the paper" in markdown
    rows = list(csv.reader(io.StringIO(table.to_csv())))
    assert rows[0][:6] == ["paper_id", "title", "method", "method supported", "method evidence", "method page"]
    assert rows[1][0] == "specter" and rows[1][3] == "yes" and rows[2][7] == "no"
    assert table.bibtex().count("@") == 2


def test_a_cell_whose_fact_the_model_wrote_unsure_is_marked_with_its_evidence(copilot: Copilot) -> None:
    """The check answers pass reads the cell too: a number the model wrote with a low probability (a guess, or read
    from the wrong row) marks the cell, which keeps its evidence for the reader to judge."""
    copilot.llm.probabilities = {"8.1M": 0.1}
    table = [u for u in copilot.compare("local", ["specter", "s2orc"], ["method"]) if isinstance(u, Comparison)][-1]
    unsure, sure = table.cell("s2orc", "method"), table.cell("specter", "method")
    assert unsure.stated and not unsure.supported and unsure.unsure == ["8.1M"] and unsure.missing == []
    assert unsure.evidence and "8.1M PDFs" in unsure.evidence[0].quote and unsure.shown().startswith("⚠️ ")
    assert unsure.as_dict()["unsure"] == ["8.1M"]
    assert "the model was not sure of 8.1M" in table.to_markdown()
    assert sure.supported and sure.unsure == []
    copilot.settings.fact_min_probability = 0  # the rule off: the same cell stands
    table = [u for u in copilot.compare("local", ["specter", "s2orc"], ["method"]) if isinstance(u, Comparison)][-1]
    assert table.cell("s2orc", "method").supported and table.cell("s2orc", "method").unsure == []


def test_a_paper_that_does_not_state_an_aspect_says_so(copilot: Copilot) -> None:
    table = [u for u in copilot.compare("local", ["specter", "s2orc"], ["licence"]) if isinstance(u, Comparison)][-1]
    for paper in ("specter", "s2orc"):
        cell = table.cell(paper, "licence")
        assert not cell.stated and cell.shown() == "not stated" and cell.evidence == []
        assert cell.as_dict()["text"] == "not stated"


def test_papers_the_user_may_not_see_and_spent_allowances_are_refused_before_any_cell(copilot: Copilot) -> None:
    calls = len(copilot.llm.calls)
    with pytest.raises(UserError, match="private"):
        list(copilot.compare("local", ["specter", "private"], ["method"]))
    copilot.settings.compare_cells_per_day = 3
    with pytest.raises(LimitExceeded, match="daily allowance of 3 comparison cells"):
        list(copilot.compare("local", ["specter", "s2orc"], ["method", "data"], quotas=True))
    assert len(copilot.llm.calls) == calls, "nothing was asked of the model"
    # A guest's cells also count against its client address: a fresh guest session is no fresh allowance.
    copilot.settings.compare_cells_per_day, copilot.settings.address_compare_cells_per_day = 100, 6
    list(copilot.compare("guest-a", ["specter", "s2orc"], ["licence", "code"], quotas=True, address="10.0.0.9"))
    with pytest.raises(LimitExceeded, match="Guests from your network made 4 comparison cells"):
        list(copilot.compare("guest-b", ["specter", "s2orc"], ["licence", "code"], quotas=True, address="10.0.0.9"))
    # A guest refused by its own allowance keeps its address's: nothing was counted there either.
    copilot.settings.compare_cells_per_day, copilot.settings.address_compare_cells_per_day = 2, 100
    with pytest.raises(LimitExceeded, match="daily allowance of 2"):
        list(copilot.compare("guest-c", ["specter", "s2orc"], ["licence", "code"], quotas=True, address="10.0.0.8"))
    assert copilot.store.usage.count_since("address:10.0.0.8", "compare_cell", 3600) == 0
    for wrong in ("specter", ["specter", 7], ["x" * 101, "s2orc"]):
        with pytest.raises(UserError, match="lists of texts|at most 100 characters"):
            list(copilot.compare("local", wrong, ["method"]))  # type: ignore[arg-type]


def test_the_cells_a_table_leaves_unfilled_are_given_back(copilot: Copilot) -> None:
    """A model that fails half-way, or a caller that stops listening, spends only the cells that were filled."""
    def failing(messages: list[dict[str, str]]) -> str:
        raise LLMError("The local model failed: out of memory")

    copilot.settings.compare_cells_per_day = copilot.settings.address_compare_cells_per_day = 8
    copilot.llm.answers = [replies, failing]
    filled = []
    with pytest.raises(LLMError, match="out of memory"):
        for update in copilot.compare("guest-a", ["specter", "s2orc"], ["method", "data"], quotas=True,
                                      address="10.0.0.9"):
            filled += [update] if isinstance(update, ComparisonCell) else []
    assert 1 <= len(filled) < 4 and len(copilot.llm.calls) == 2
    usage = copilot.store.usage
    assert usage.count_since("guest-a", "compare_cell", 3600) == len(filled)
    assert usage.count_since("address:10.0.0.9", "compare_cell", 3600) == len(filled)
    copilot.llm.answers = [replies] * 4
    updates = copilot.compare("local", ["specter", "s2orc"], ["method", "data"], quotas=True)
    assert isinstance(next(updates), Comparison) and isinstance(next(updates), ComparisonCell)
    updates.close()  # the user left after the first cell
    assert usage.count_since("local", "compare_cell", 3600) == 1


def test_the_cli_prints_the_table_and_writes_csv_and_bibtex(copilot: Copilot, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Copilot, "open", classmethod(lambda cls, settings, **kw: copilot))
    monkeypatch.setattr(copilot.store, "close", lambda: None)
    out = CliRunner().invoke(cli_module.cli, ["compare", "specter", "s2orc", "--aspect", "method", "--json",
                                              "--csv", str(tmp_path / "t.csv"), "--bibtex", str(tmp_path / "t.bib")])
    assert out.exit_code == 0, out.output
    shown = json.loads(out.stdout)
    assert shown["aspects"] == ["method"] and len(shown["cells"]) == 2 and shown["llm_calls"] == 2
    assert (tmp_path / "t.csv").read_text().startswith("paper_id,title,method")
    assert (tmp_path / "t.bib").read_text().count("@") == 2
    refused = CliRunner().invoke(cli_module.cli, ["compare", "specter"])
    assert refused.exit_code == 1 and "error: Choose at least 2 papers to compare." in refused.output


def test_the_bench_grades_right_cells_and_not_stated() -> None:
    truth = {"aspects": ["method", "hardware"],
             "papers": {"a": {"method": ["triplet"], "hardware": None}, "b": {"method": ["grobid"], "hardware": None}}}
    from copilot.tasks.writing import Citation

    papers = [Citation(1, "a", "A", "", None, None), Citation(2, "b", "B", "", None, None)]
    table = Comparison(papers, ["method", "hardware"], [
        ComparisonCell("a", "method", "A triplet loss", True, True, llm_calls=1, seconds=2.0),
        ComparisonCell("a", "hardware", "not stated", False, seconds=0.1),
        ComparisonCell("b", "method", "A Transformer", True, False, llm_calls=1, seconds=3.0),
        ComparisonCell("b", "hardware", "8 GPUs", True, False, llm_calls=1, seconds=2.0)])
    found = grade(truth, table)
    assert (found["cell_accuracy"], found["not_stated_correct"], found["supported_share"]) == (0.5, 0.5, 0.333)
    assert found["llm_calls"] == 3 and found["cell_p50_s"] == 2.0
