"""A first visit: every tab says what to do first, the dashboard shows a hint until it has something to chart, and
the engine's library rules behind the Library tab (filter, remove several, BibTeX import) on a small store."""

from __future__ import annotations

from pathlib import Path

import gradio as gr
import pytest

from copilot.config import Settings
from copilot.errors import NotFound, UserError
from copilot.library import Library
from copilot.limits import LimitExceeded
from copilot.ui.dashboard_charts import TIME_AXIS_FORMAT, charts_shown, evolution_frame, growth_frame
from copilot.ui.dashboard_tab import EMPTY_HINT, summary_markdown
from ingest.errors import ArxivUnavailable
from tests.library_support import add_paper, make_copilot
from tests.scripted_llm import ScriptedLLM
from tests.ui_harness import metadata

NO_STATS = {"thoughts": 0, "queries": 0, "utilisation": 0.0, "by_depth": {}}


def test_every_tab_says_what_to_do_first(tmp_path: Path) -> None:
    from copilot.ui import build_app

    demo = build_app(Settings(data_dir=tmp_path / "data", llm_backend="local", users="session"), warm_up=False)
    props = {c["props"]["elem_id"]: c["props"] for c in demo.config["components"] if c["props"].get("elem_id")}
    assert "Library" in props["chatbot"]["placeholder"]  # Chat
    assert "draft" in props["draft-output"]["value"]  # Write
    assert "Find trends and ideas" in props["ideas-output"]["value"]  # Ideas
    assert props["profile-hint"]["value"].startswith("*Start here") and props["persona"]["placeholder"]  # Profile
    assert props["dashboard-summary"]["value"] == EMPTY_HINT  # Dashboard
    assert props["dashboard-charts"]["visible"] is False, "no empty charts before there is anything to chart"
    assert props["library-hint"]["value"].startswith("**Start here:**")  # Library (shown on an empty library)
    assert props["plot-growth"]["x_axis_format"] == TIME_AXIS_FORMAT and "%H:%M" in TIME_AXIS_FORMAT
    widths = props["papers-table"]["column_widths"]
    headers = props["papers-table"]["value"]["headers"]
    assert widths[headers.index("authors")] == "22%" and widths[headers.index("year")] == "6%"


def test_the_dashboard_hint_gives_way_to_charts() -> None:
    assert summary_markdown(NO_STATS, []) == EMPTY_HINT
    assert not charts_shown(growth_frame([]), evolution_frame([]))
    one = [{"id": 1, "depth": 1, "created_at": "2026-11-29T10:00:00+00:00", "confidence": 0.7}]
    assert charts_shown(growth_frame(one, now="2026-11-29T10:00:02+00:00"), evolution_frame([]))
    payload = gr.LinePlot(x="thoughts", y="quality", color="signal").postprocess(
        evolution_frame([{"thoughts": 0, "quality": 0.5, "signal": "eval"}]))
    assert charts_shown(growth_frame([]), payload), "an evaluation run alone is worth charting"
    assert summary_markdown(NO_STATS | {"queries": 1}, []) != EMPTY_HINT


class FakeArxiv:
    """By-id look-ups only, counted; ``offline`` fails as arXiv does."""

    def __init__(self, known: list[str]) -> None:
        self.known = {i: metadata(i, f"Paper {i}", "http://127.0.0.1:9/none.pdf") for i in known}
        self.offline = False
        self.calls = 0

    def by_ids(self, ids: list[str], *, skip_missing: bool = False) -> list:
        self.calls += 1
        if self.offline:
            raise ArxivUnavailable("arXiv could not be reached.")
        return [self.known[i] for i in ids if i in self.known]


@pytest.fixture
def copilot(tmp_path: Path):  # noqa: ANN201 - a Copilot over a small store, with a fake arXiv
    engine = make_copilot(tmp_path, ScriptedLLM([]), max_arxiv_adds_per_day=2, bibtex_max_kb=1)
    engine.library = Library.open(engine.settings, store=engine.store, embedder=engine.embedder,
                                  arxiv=FakeArxiv([]))
    add_paper(engine, "2301.00001", "Construction of the Literature Graph", arxiv_id="2301.00001",
              authors=["Waleed Ammar", "Kurt Gödel"], sections=[("Intro", "graphs of papers")])
    add_paper(engine, "pdf-aaa", "LongEval guidelines", user_id="ada", authors=["Kalpesh Krishna"],
              sections=[("Intro", "human evaluation")])
    add_paper(engine, "pdf-bbb", "SPECTER", user_id="ada", sections=[("Intro", "citations")])
    add_paper(engine, "pdf-ccc", "Someone else's upload", user_id="bob", sections=[("Intro", "other")])
    return engine


def test_filtering_matches_id_title_and_authors(copilot) -> None:  # noqa: ANN001
    ids = lambda query: [p.id for p in copilot.papers("ada", query)]  # noqa: E731
    assert ids("") == [p.id for p in copilot.papers("ada")] and len(ids("")) == 3
    assert ids("krishna") == ["pdf-aaa"]
    assert ids("GODEL") == ["2301.00001"]  # case and accents aside
    assert ids("2301.00001") == ["2301.00001"]
    assert ids("literature graph") == ["2301.00001"] and ids("graph specter") == []
    assert ids("someone") == [], "another user's upload is never matched"


def test_an_overlong_filter_is_refused_in_one_line(copilot) -> None:  # noqa: ANN001
    limit = copilot.settings.max_filter_chars
    with pytest.raises(UserError, match=f"at most {limit} characters"):
        copilot.papers("ada", "a " * limit)
    assert copilot.papers("ada", "a " * 20) == copilot.papers("ada", "a"), "a repeated word filters as one"


def test_removing_several_checks_every_id_first(copilot) -> None:  # noqa: ANN001
    with pytest.raises(NotFound, match="pdf-ccc.*nothing was removed"):
        copilot.remove_many(["pdf-aaa", "pdf-ccc"], "ada", may_remove_public=False)
    with pytest.raises(UserError, match="shared by everyone"):
        copilot.remove_many(["pdf-aaa", "2301.00001"], "ada", may_remove_public=False)
    assert len(copilot.papers("ada")) == 3, "a refused list removes none"
    result = copilot.remove_many(["pdf-aaa", "pdf-bbb", "pdf-aaa"], "ada", may_remove_public=False)
    assert result["removed"] == ["pdf-aaa", "pdf-bbb"] and result["chunks_removed"] == 2
    assert [p.id for p in copilot.papers("ada")] == ["2301.00001"]
    assert [p.id for p in copilot.papers("bob", "someone")] == ["pdf-ccc"]


def test_a_paper_gone_meanwhile_is_reported_and_the_rest_still_go(copilot, monkeypatch) -> None:  # noqa: ANN001
    remove = copilot.library.remove

    def gone_first(paper_id: str, **kwargs) -> object:  # another tab removed pdf-aaa after the check
        if paper_id == "pdf-aaa":
            remove(paper_id, **kwargs)
        return remove(paper_id, **kwargs)

    monkeypatch.setattr(copilot.library, "remove", gone_first)
    result = copilot.remove_many(["pdf-aaa", "pdf-bbb"], "ada", may_remove_public=False)
    assert result["removed"] == ["pdf-bbb"] and len(result["failed"]) == 1 and "pdf-aaa" in result["failed"][0]
    assert [p.id for p in copilot.papers("ada")] == ["2301.00001"]


BIB = """@article{stored, title = {Graph}, eprint = {2301.00001}, archivePrefix = {arXiv}}
@misc{missing, title = {Nowhere}, url = {https://arxiv.org/abs/2301.09999}}
@article{doi, title = {With a DOI}, doi = {10.18653/v1/2020.acl-main.207}}
"""


def test_import_finds_stored_papers_without_arxiv_and_reports_the_rest(copilot) -> None:  # noqa: ANN001
    arxiv = copilot.library.arxiv
    entries = copilot.import_bibtex(BIB, "ada", quotas=True)
    assert [(e.key, e.status, e.paper_id) for e in entries] == [
        ("stored", "already in the library", "2301.00001"), ("missing", "not found", None),
        ("doi", "DOI only", None)]
    assert arxiv.calls == 1, "only the paper not stored is looked up"
    arxiv.offline = True
    entries = copilot.import_bibtex(BIB, "ada", quotas=True)
    assert entries[0].status == "already in the library" and entries[1].status == "failed"
    assert "unavailable" in entries[1].detail


def test_import_limits_refuse_the_whole_file_first(copilot) -> None:  # noqa: ANN001
    arxiv = copilot.library.arxiv
    three_new = "\n".join(f"@misc{{k{i}, eprint = {{2302.0000{i}}}}}" for i in range(3))
    with pytest.raises(LimitExceeded, match="3 arXiv papers not in the library, more than the 2"):
        copilot.import_bibtex(three_new, "ada", quotas=True)
    assert arxiv.calls == 0, "refused before any arXiv request"
    with pytest.raises(UserError, match="at most 1 KB"):
        copilot.import_bibtex("@misc{k, note = {" + "x" * 2000 + "}}", "ada")
    with pytest.raises(UserError, match="not a BibTeX file"):
        copilot.import_bibtex(b"%PDF-1.4 binary".decode(), "ada")
    with pytest.raises(UserError, match="malformed"):
        copilot.import_bibtex("@misc{k, title = {unclosed}\n@misc{j, title = {x}}", "ada")
    assert len(copilot.papers("ada")) == 3


def test_the_time_axis_spans_at_least_ten_minutes() -> None:
    import pandas as pd

    one = [{"id": 1, "depth": 1, "created_at": "2026-11-29T10:00:00+00:00", "confidence": 0.7}]
    frame = growth_frame(one, now="2026-11-29T10:00:02+00:00")
    assert list(frame["thoughts"]) == [0, 0, 1, 1], "empty before the first thought, then one"
    assert frame["time"].max() - frame["time"].min() == pd.Timedelta(minutes=10)
    assert frame["time"].iloc[1] == pd.Timestamp("2026-11-29T10:00:00+00:00")
    later = growth_frame(one, now="2026-11-29T11:00:00+00:00")
    assert list(later["thoughts"]) == [0, 1, 1] and later["time"].min() == pd.Timestamp("2026-11-29T10:00:00+00:00")
