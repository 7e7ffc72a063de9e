"""Keeping the library current: followed categories, refreshes from recorded arXiv answers, the timer, the CLI."""

from __future__ import annotations

import json
import textwrap
import threading
import time
from pathlib import Path

import pymupdf
import pytest
import requests
from click.testing import CliRunner

from copilot import cli as cli_module
from copilot.config import Settings
from copilot.tasks.refresh import (
    MAX_FOLLOWED,
    RefreshScheduler,
    all_followed_categories,
    followed_categories,
    last_refresh,
    normalise_category,
    refresh_categories,
    refresh_followed,
    set_followed_categories,
)
from copilot.storage import Store
from copilot import library as library_module
from ingest.errors import DownloadError
from copilot.library import Library
from tests.library_support import HashEmbedder, recorded_client


def make_pdf(path: Path, title: str, body: str) -> None:
    """A small real PDF: a title, an abstract and an introduction."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), title, fontsize=16, fontname="hebo")
    page.insert_text((72, 110), "Abstract", fontsize=12, fontname="hebo")
    page.insert_text((72, 128), "We study how software is tested in practice.", fontsize=10)
    page.insert_text((72, 160), "1 Introduction", fontsize=12, fontname="hebo")
    y = 178
    for line in textwrap.wrap(body, 90):
        page.insert_text((72, y), line, fontsize=10)
        y += 13
    doc.save(path)


class Downloads:
    """Stands in for ``download_pdf``: writes a distinct small PDF per URL, after the client's turn to ask."""

    def __init__(self, client, tmp_path: Path, failing: set[str] | None = None) -> None:  # noqa: ANN001
        self.client = client
        self.tmp_path = tmp_path
        self.failing = failing or set()
        self.urls: list[str] = []

    def __call__(self, url: str, dest: Path, before_request=None, **kwargs) -> tuple[Path, str]:  # noqa: ANN001, ANN003
        assert before_request == self.client.wait_turn, "downloads are paced like API requests"
        before_request()
        self.urls.append(url)
        if url in self.failing:
            raise DownloadError(f"{url} is not a PDF")
        source = self.tmp_path / f"download-{len(self.urls)}.pdf"
        make_pdf(source, f"Paper at {url}", f"This paper, found at {url}, studies how deep learning models are "
                 "tested. " * 8)
        from ingest.download import stage_upload

        return stage_upload(source, dest)


@pytest.fixture
def library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Library:
    settings = Settings(data_dir=tmp_path / "data")
    lib = Library.open(settings, embedder=HashEmbedder(), arxiv=recorded_client(monkeypatch))
    lib.downloads = Downloads(lib.arxiv, tmp_path)  # type: ignore[attr-defined]
    monkeypatch.setattr(library_module, "download_pdf", lib.downloads)
    yield lib
    lib.store.close()


def test_categories_are_validated_and_normalised() -> None:
    cases = {"cs.CL": "cs.CL", " cs.cl ": "cs.CL", "stat.ml": "stat.ML", "hep-th": "hep-th", "quant-ph": "quant-ph",
             "physics.optics": "physics.optics", "cond-mat.stat-mech": "cond-mat.stat-mech",
             "astro-ph.co": "astro-ph.CO", "q-bio.NC": "q-bio.NC", "math.GT": "math.GT"}
    assert {text: normalise_category(text) for text in cases} == cases
    for bad in ("", "cs", "cs.", "cs..CL", "cs.CLX", "foo.BAR", "hep-th.XX", "cs.C1", "cs.CL;DROP", "stat ML"):
        with pytest.raises(ValueError, match="not an arXiv category"):
            normalise_category(bad)


def test_follows_are_per_user_and_replaced_whole(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.db", tmp_path / "i")
    assert followed_categories(store, "ada") == []
    assert set_followed_categories(store, "ada", ["cs.cl", "cs.IR", "cs.CL"]) == ["cs.CL", "cs.IR"]
    set_followed_categories(store, "bob", ["stat.ML", "cs.CL"])
    assert followed_categories(store, "bob") == ["stat.ML", "cs.CL"]
    with pytest.raises(ValueError, match="'nope', 'cs'"):
        set_followed_categories(store, "ada", ["stat.ML", "nope", "cs"])
    assert followed_categories(store, "ada") == ["cs.CL", "cs.IR"], "a refused change changes nothing"
    with pytest.raises(ValueError, match=str(MAX_FOLLOWED)):
        set_followed_categories(store, "ada", [f"math.{a}{b}" for a in "ABCDE" for b in "ABCDE"])
    assert set_followed_categories(store, "ada", ["math.GT"]) == ["math.GT"]
    assert all_followed_categories(store) == ["cs.CL", "math.GT", "stat.ML"]
    assert set_followed_categories(store, "ada", []) == []
    store.close()


def test_refresh_adds_the_newest_papers_once_and_is_recorded(library: Library) -> None:
    steps: list[tuple[float, str]] = []
    result = refresh_categories(library, ["cs.cl"], user_id="ada", max_per_category=3,
                                progress=lambda f, m: steps.append((f, m)))
    url = library.arxiv.recorded.urls[0]
    assert "cat%3Acs.CL" in url or "cat:cs.CL" in url
    assert "sortBy=submittedDate" in url and "sortOrder=descending" in url and "max_results=3" in url
    assert result.categories == ["cs.CL"] and result.errors == [] and result.skipped == 0
    assert result.added == ["2202.12139", "2405.13786", "2005.14124"], "newest first, as arXiv answered"
    assert len(library.downloads.urls) == 3
    assert result.started_at <= result.finished_at and result.id is not None
    assert {p.id for p in library.list(user_id="bob")} == set(result.added), "arXiv papers are public"
    assert steps[-1][0] == 1.0 and all(0 <= f <= 1 for f, _ in steps)

    recorded = last_refresh(library.store, "ada")
    assert recorded.n_added == 3 and recorded.added == result.added and recorded.categories == ["cs.CL"]
    assert last_refresh(library.store, "bob") is None, "a user's own refresh is theirs; scheduled ones are everyone's"

    again = refresh_categories(library, ["cs.CL"], user_id="ada", max_per_category=3)
    assert again.added == [] and again.skipped == 3 and len(library.downloads.urls) == 3, "nothing downloaded twice"
    assert last_refresh(library.store, "ada").id == again.id


def test_a_refresh_stops_at_the_users_remaining_allowance(library: Library) -> None:
    result = refresh_categories(library, ["cs.CL"], user_id="ada", max_per_category=3, max_added=2)
    assert result.added == ["2202.12139", "2405.13786"] and len(library.downloads.urls) == 2
    again = refresh_categories(library, ["cs.CL"], user_id="ada", max_per_category=3, max_added=1)
    assert again.added == ["2005.14124"], "papers already held cost nothing"


def test_a_failing_category_or_paper_does_not_stop_the_rest(library: Library, monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    served = library.arxiv.session.get

    def get(url: str, **kwargs) -> requests.Response:  # noqa: ANN003
        if "cs.IR" in url:
            raise requests.ConnectionError("network is unreachable")
        return served(url, **kwargs)

    monkeypatch.setattr(library.arxiv.session, "get", get)
    library.downloads.failing = {"https://arxiv.org/pdf/2202.12139v1"}
    result = refresh_categories(library, ["cs.IR", "cs.CL"], max_per_category=3)
    assert len(result.errors) == 2
    assert result.errors[0].startswith("cs.IR: arXiv could not be reached")
    assert result.errors[1].startswith("2202.12139: ") and "not a PDF" in result.errors[1]
    assert len(result.added) == 2 and "2202.12139" not in result.added
    assert last_refresh(library.store).errors == result.errors
    with pytest.raises(ValueError, match="at least one"):
        refresh_categories(library, [])
    with pytest.raises(ValueError, match="between 1 and"):
        refresh_categories(library, ["cs.CL"], max_per_category=0)


def test_scheduled_refresh_pulls_every_followed_category(library: Library) -> None:
    assert refresh_followed(library) is None, "nobody follows anything yet"
    set_followed_categories(library.store, "ada", ["cs.CL"])
    set_followed_categories(library.store, "bob", ["cs.CL", "stat.ML"])
    result = refresh_followed(library, max_per_category=2)
    assert result.categories == ["cs.CL", "stat.ML"] and result.user_id is None
    assert len(result.added) == 2, "the same recorded papers under both categories are added once"
    assert last_refresh(library.store, "ada").id == result.id == last_refresh(library.store, "bob").id


def test_scheduler_runs_on_its_timer_and_survives_failures() -> None:
    assert RefreshScheduler(0, lambda: None).start() is False, "0 hours is off"
    with pytest.raises(ValueError):
        RefreshScheduler(-1, lambda: None)
    calls: list[float] = []
    done = threading.Event()

    def flaky() -> None:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise RuntimeError("arXiv is down")
        if len(calls) >= 3:
            done.set()

    scheduler = RefreshScheduler(0.05 / 3600, flaky, first_delay_s=0)
    assert scheduler.start() is True and scheduler.start() is False
    assert done.wait(5), "the schedule goes on after a failure"
    scheduler.stop()
    assert not scheduler.running and scheduler.runs >= 3 and scheduler.last_error is None
    count = len(calls)
    time.sleep(0.15)
    assert len(calls) == count, "stopped means stopped"
    late = RefreshScheduler(1, flaky)
    assert late.first_delay_s == 3600, "the first refresh waits one interval, so start-up never waits for arXiv"


def test_refresh_hours_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COPILOT_REFRESH_HOURS", raising=False)
    assert Settings().refresh_hours == 0
    monkeypatch.setenv("COPILOT_REFRESH_HOURS", "6")
    assert Settings().refresh_hours == 6.0
    monkeypatch.setenv("COPILOT_REFRESH_HOURS", "-1")
    with pytest.raises(ValueError, match="refresh_hours"):
        Settings()


def test_refresh_command(library: Library, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    runner = CliRunner()
    data_dir = ["--data-dir", str(tmp_path / "other")]
    bad = runner.invoke(cli_module.cli, ["refresh", "--category", "foo.bar", *data_dir])
    assert bad.exit_code == 1 and "error: Not arXiv categories: 'foo.bar'" in bad.output
    assert "Traceback" not in bad.output
    none = runner.invoke(cli_module.cli, ["refresh", *data_dir])
    assert none.exit_code == 1 and "no categories" in none.output

    monkeypatch.setattr(Library, "open", classmethod(lambda cls, settings, **kw: library))
    monkeypatch.setattr(library.store, "close", lambda: None)
    added = runner.invoke(cli_module.cli, ["refresh", "--category", "cs.CL", "--max", "2", "--json"])
    assert added.exit_code == 0, added.output
    record = json.loads(added.output)
    assert record["categories"] == ["cs.CL"] and len(record["added"]) == 2 and record["errors"] == []
    set_followed_categories(library.store, "ada", ["cs.CL"])
    followed = runner.invoke(cli_module.cli, ["refresh", "--user", "ada", "--max", "2"])
    assert followed.exit_code == 0 and "cs.CL: 0 added, 2 already there" in followed.output


def test_a_pasted_list_of_thousands_of_names_gets_a_short_error_and_changes_nothing(library: Library) -> None:
    from copilot.errors import UserError

    set_followed_categories(library.store, "ada", ["cs.CL"])
    with pytest.raises(UserError) as many:
        set_followed_categories(library.store, "ada", [f"name{i}" for i in range(2000)])
    assert "at most" in str(many.value) and "2,000" in str(many.value) and len(str(many.value)) < 120
    with pytest.raises(UserError) as bad:
        set_followed_categories(library.store, "ada", [f"not a category {i} " + "x" * 300 for i in range(30)])
    message = str(bad.value)
    assert message.count("not a category") == 5 and "and 25 more" in message and len(message) < 400
    assert followed_categories(library.store, "ada") == ["cs.CL"]
