"""The arXiv client against recorded arXiv API answers: no request leaves the process, no test waits."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from ingest import arxiv_client
from ingest.arxiv_client import ArxivClient, parse_arxiv_id
from ingest.errors import ArxivError, ArxivNotFound, ArxivUnavailable, IngestError, InvalidArxivId
from tests.conftest import TEST_DATA

RECORDINGS_DIR = TEST_DATA / "arxiv_api"
API = "https://export.arxiv.org/api/query?"


def id_url(id_list: str, start: int = 0, max_results: int = 100) -> str:
    return (f"{API}search_query=&id_list={id_list}&sortBy=relevance&sortOrder=descending"
            f"&start={start}&max_results={max_results}")


def query_url(query: str, start: int, max_results: int) -> str:
    return (f"{API}search_query={query}&id_list=&sortBy=relevance&sortOrder=descending"
            f"&start={start}&max_results={max_results}")


def make_response(url: str, status: int, content: bytes, headers: dict[str, str] | None = None) -> requests.Response:
    response = requests.Response()
    response.url = url
    response.status_code = status
    response._content = content
    response.headers.update(headers or {"Content-Type": "application/atom+xml"})
    return response


@pytest.fixture(scope="module")
def recordings() -> dict[str, tuple[int, bytes]]:
    files = sorted(RECORDINGS_DIR.glob("*.json"))
    if not files:
        pytest.fail(f"no recorded arXiv answers in {RECORDINGS_DIR}")
    answers = {}
    for path in files:
        record = json.loads(path.read_text())
        # The bodies were stored as text decoded as ISO-8859-1 (requests' default for this content
        # type), so encoding them back that way gives the exact bytes arXiv sent (UTF-8).
        answers[record["url"]] = (record["status_code"], record["body"].encode("latin-1"))
    return answers


class FakeArxiv:
    """Stands in for ``Session.get``: answers recorded URLs, fails the test on any other."""

    def __init__(self, recordings: dict[str, tuple[int, bytes]]):
        self.recordings = recordings
        self.calls: list[str] = []

    def get(self, url: str, headers: dict | None = None, timeout: float | None = None, **kwargs) -> requests.Response:
        assert timeout is not None, "every arXiv request needs a timeout"
        self.calls.append(url)
        if url not in self.recordings:
            pytest.fail(f"unrecorded arXiv URL requested: {url}")
        status, body = self.recordings[url]
        return make_response(url, status, body)


class Scripted:
    """Stands in for ``Session.get``: plays a list of outcomes (exception to raise, or a response maker)."""

    def __init__(self, outcomes: list):
        self.outcomes = list(outcomes)
        self.calls: list[str] = []

    def get(self, url: str, headers: dict | None = None, timeout: float | None = None, **kwargs) -> requests.Response:
        self.calls.append(url)
        if not self.outcomes:
            pytest.fail(f"more requests than scripted: {url}")
        outcome = self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome(url)


@pytest.fixture(autouse=True)
def offline_and_instant(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """No real request can leave; no real sleeping; a fresh process-wide rate limit; the minimum delay at 0."""

    def refuse(*args, **kwargs):
        pytest.fail("a real HTTP request was attempted")

    monkeypatch.setattr(requests.adapters.HTTPAdapter, "send", refuse)
    sleeps: list[float] = []
    monkeypatch.setattr(arxiv_client, "_sleep", sleeps.append)
    monkeypatch.setattr(arxiv_client, "MIN_DELAY_SECONDS", 0.0)
    monkeypatch.setattr(arxiv_client._RATE_LIMIT, "last_call", None)
    return sleeps


@pytest.fixture
def sleeps(offline_and_instant: list[float]) -> list[float]:
    return offline_and_instant


@pytest.fixture
def fake(recordings) -> FakeArxiv:
    return FakeArxiv(recordings)


@pytest.fixture
def make_client(monkeypatch: pytest.MonkeyPatch, fake: FakeArxiv):
    def make(http=fake, **kwargs) -> ArxivClient:
        kwargs.setdefault("delay_seconds", 0.0)
        client = ArxivClient(**kwargs)
        monkeypatch.setattr(client.session, "get", http.get)
        return client

    return make


# ---------------------------------------------------------------------------------------------
# parse_arxiv_id


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2104.12255", ("2104.12255", None)),
        ("2104.12255v1", ("2104.12255", "v1")),
        ("2104.12255v12", ("2104.12255", "v12")),
        ("0704.0001", ("0704.0001", None)),
        ("1501.00001v3", ("1501.00001", "v3")),
        ("  2104.12255  ", ("2104.12255", None)),
        ("arXiv:2104.12255", ("2104.12255", None)),
        ("arxiv:2104.12255v2", ("2104.12255", "v2")),
        ("ARXIV: 2104.12255", ("2104.12255", None)),
        ("hep-th/9901001", ("hep-th/9901001", None)),
        ("quant-ph/0201082v1", ("quant-ph/0201082", "v1")),
        ("astro-ph/0601001", ("astro-ph/0601001", None)),
        ("math.GT/0309136", ("math/0309136", None)),
        ("math.GT/0309136v2", ("math/0309136", "v2")),
        ("arXiv:hep-th/9901001v3", ("hep-th/9901001", "v3")),
        ("https://arxiv.org/abs/2104.12255", ("2104.12255", None)),
        ("https://arxiv.org/abs/2104.12255v1", ("2104.12255", "v1")),
        ("http://arxiv.org/pdf/2104.12255v1", ("2104.12255", "v1")),
        ("https://arxiv.org/pdf/2104.12255v1.pdf", ("2104.12255", "v1")),
        ("https://www.arxiv.org/abs/2104.12255/", ("2104.12255", None)),
        ("https://export.arxiv.org/abs/2104.12255?context=cs", ("2104.12255", None)),
        ("arxiv.org/abs/hep-th/9901001", ("hep-th/9901001", None)),
        ("https://arxiv.org/abs/quant-ph/0201082v1", ("quant-ph/0201082", "v1")),
        ("https://arxiv.org/pdf/math.GT/0309136.pdf", ("math/0309136", None)),
    ],
)
def test_parse_arxiv_id_accepts(text: str, expected: tuple[str, str | None]) -> None:
    assert parse_arxiv_id(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "", "   ", "abc", "2104", "2104.", "2104.123", "2104.123456", "21041.2255", "210.12255",
        "2104.12255v", "2104.12255v0", "2104.12255vx", "2104.12255 v1", "2104.12255 and more",
        "hep-th/990100", "hep-th/99010011", "hep_th/9901001", "hep-th9901001", "/9901001", "hep-th/",
        "arXiv:", "arXiv:abc", "doi:10.1145/3292500", "10.1145/3292500.3330701",
        "https://example.com/abs/2104.12255", "https://arxiv.org/list/2104.12255",
        "https://arxiv.org/abs/", "ftp://arxiv.org/abs/2104.12255",
    ],
)
def test_parse_arxiv_id_rejects_with_the_accepted_forms(text: str) -> None:
    with pytest.raises(InvalidArxivId) as info:
        parse_arxiv_id(text)
    message = str(info.value)
    assert "not an arXiv identifier" in message
    assert "2104.12255" in message and "hep-th/9901001" in message


def test_parse_arxiv_id_rejects_non_text() -> None:
    with pytest.raises(InvalidArxivId):
        parse_arxiv_id(None)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Look-ups by id, from recorded answers


def test_new_style_id(make_client, fake: FakeArxiv) -> None:
    paper = make_client().by_id("1605.08386")
    assert fake.calls == [id_url("1605.08386")]
    assert paper.arxiv_id == "1605.08386"
    assert paper.version == "v1"
    assert paper.versioned_id == "1605.08386v1"
    assert paper.title == "Heat-bath random walks with Markov bases"
    assert paper.authors == ["Caprice Stanley", "Tobias Windisch"]
    assert paper.abstract.startswith("Graphs on lattice points are studied")
    assert paper.abstract.endswith("is an expander in fixed dimension.")
    assert paper.categories == ["math.CO", "math.ST"]
    assert paper.primary_category == "math.CO"
    assert paper.published == "2016-05-26T17:59:46+00:00"
    assert paper.updated == "2016-05-26T17:59:46+00:00"
    assert paper.pdf_url == "https://arxiv.org/pdf/1605.08386v1"
    assert paper.comment == "20 pages, 3 figures"
    assert paper.doi is None and paper.journal_ref is None


def test_versioned_id_with_prefix(make_client, fake: FakeArxiv) -> None:
    paper = make_client().by_id("arXiv:2104.12255v1")
    assert fake.calls == [id_url("2104.12255v1")]
    assert (paper.arxiv_id, paper.version) == ("2104.12255", "v1")
    assert paper.title == "0"  # a real title that is just "0" survives
    assert paper.authors == ["Quan Thoi Minh Nguyen"]
    assert paper.primary_category == "cs.CR" and paper.categories == ["cs.CR"]
    assert paper.published == "2021-04-20T16:07:14+00:00"
    assert paper.pdf_url == "https://arxiv.org/pdf/2104.12255v1"
    assert paper.comment is None


def test_old_style_id_with_journal_ref(make_client, fake: FakeArxiv) -> None:
    paper = make_client().by_id("astro-ph/0601001")
    assert fake.calls == [id_url("astro-ph%2F0601001")]
    assert (paper.arxiv_id, paper.version) == ("astro-ph/0601001", "v1")
    assert paper.title.startswith("Frequency of Hot Jupiters and Very Hot Jupiters")
    assert paper.authors == ["Andrew Gould", "Susan Dorsher", "B. Scott Gaudi", "Andrzej Udalski"]
    assert paper.journal_ref == "ActaAstron.56:1-50,2006"
    assert paper.abstract.startswith("We derive the frequencies")  # leading blanks gone
    assert "Gould & Morgan (2003)" in paper.abstract and "V_max<17.5" in paper.abstract  # entities decoded
    assert paper.comment.startswith("62 pages including 16 figures")
    assert paper.published == "2006-01-02T14:57:58+00:00"
    assert paper.pdf_url == "https://arxiv.org/pdf/astro-ph/0601001v1"
    assert paper.categories == ["astro-ph"] and paper.primary_category == "astro-ph"


def test_old_style_versioned_url(make_client, fake: FakeArxiv) -> None:
    paper = make_client().by_id("https://arxiv.org/abs/quant-ph/0201082v1")
    assert fake.calls == [id_url("quant-ph%2F0201082v1")]
    assert (paper.arxiv_id, paper.version) == ("quant-ph/0201082", "v1")
    assert paper.title.startswith("Quantum Computers and Quantum Computer Languages")
    assert paper.authors == ["Stephen Blaha"]
    assert paper.categories == ["quant-ph", "cs.PL"]
    assert paper.primary_category == "quant-ph"
    assert paper.published == "2002-01-18T15:08:05+00:00"


def test_doi_and_journal_ref_from_a_search(make_client) -> None:
    papers = {p.arxiv_id: p for p in make_client().search("testing", max_results=10)}
    paper = papers["2005.14124"]
    assert paper.version == "v2"
    assert paper.doi == "10.1145/3395363.3397376"
    assert paper.journal_ref.startswith("In Proc. ACM SIGSOFT International Symposium on Software Testing")
    assert papers["2302.03287"].title == "ChatGPT and Software Testing Education: Promises & Perils"
    assert papers["1205.1866"].doi == "10.5121/vlsic.2012.3205" and papers["1205.1866"].journal_ref is None
    assert papers["2503.05378"].doi is None


def test_two_ids_one_missing(make_client, fake: FakeArxiv) -> None:
    # 0808.05394 has the 5-digit form arXiv only uses from 2015, so arXiv has no such paper.
    with pytest.raises(ArxivNotFound) as info:
        make_client().by_ids(["0808.05394", "1707.08567"])
    assert "0808.05394" in str(info.value)
    assert "1707.08567" not in str(info.value)
    assert fake.calls == [id_url("0808.05394%2C1707.08567")]


def test_two_ids_skipping_the_missing_one(make_client, fake: FakeArxiv) -> None:
    papers = make_client().by_ids(["0808.05394", "arXiv:1707.08567"], skip_missing=True)
    assert fake.calls == [id_url("0808.05394%2C1707.08567")]
    assert [p.versioned_id for p in papers] == ["1707.08567v1"]
    paper = papers[0]
    assert paper.title == "Proceedings of Workshop AEW10: Concepts in Information Theory and Communications"
    assert len(paper.authors) == 34
    assert paper.authors[0] == "Kees A. Schouhamer Immink"
    assert "Dirk Wübben" in paper.authors  # UTF-8 read as such
    assert paper.comment.startswith("44 pages")
    assert paper.primary_category == "cs.IT"


def test_by_ids_keeps_the_order_given_and_checks_every_id_first(make_client, fake: FakeArxiv) -> None:
    with pytest.raises(InvalidArxivId) as info:
        make_client().by_ids(["1605.08386", "abc", "nope/1"])
    assert "'abc'" in str(info.value) and "'nope/1'" in str(info.value)
    assert fake.calls == []
    assert make_client().by_ids([]) == []


# ---------------------------------------------------------------------------------------------
# Errors for ids


def test_malformed_id_fails_before_any_request(make_client, fake: FakeArxiv) -> None:
    with pytest.raises(InvalidArxivId) as info:
        make_client().by_id("abc")
    assert "'abc' is not an arXiv identifier" in str(info.value)
    assert "Accepted forms" in str(info.value)
    assert fake.calls == []


def test_arxivs_own_error_entry_for_a_malformed_id(make_client, fake: FakeArxiv, monkeypatch, sleeps) -> None:
    # Let "abc" past the local check to see how arXiv's answer (HTTP 400 with an error entry) is read.
    monkeypatch.setattr(arxiv_client, "parse_arxiv_id", lambda text: (text, None))
    with pytest.raises(InvalidArxivId) as info:
        make_client(num_retries=3).by_id("abc")
    assert "incorrect id format for abc" in str(info.value)
    assert "Accepted forms" in str(info.value)
    assert fake.calls == [id_url("abc")]  # a rejected request is not retried
    assert sleeps == []


def test_missing_id(make_client, fake: FakeArxiv) -> None:
    with pytest.raises(ArxivNotFound) as info:
        make_client().by_id("0000.0000")
    assert "arXiv has no paper 0000.0000" in str(info.value)
    assert fake.calls == [id_url("0000.0000")]


# ---------------------------------------------------------------------------------------------
# Paging


def test_paging_across_pages(make_client, fake: FakeArxiv) -> None:
    whole = make_client(page_size=100).search("testing", max_results=100)
    assert fake.calls == [query_url("testing", 0, 100)]
    assert len(whole) == 100
    assert len({p.arxiv_id for p in whole}) == 100

    fake.calls.clear()
    paged = make_client(page_size=10).search("testing", max_results=25)
    assert fake.calls == [query_url("testing", 0, 10), query_url("testing", 10, 10), query_url("testing", 20, 10)]
    assert len(paged) == 25
    assert len({p.arxiv_id for p in paged}) == 25
    assert [p.arxiv_id for p in paged] == [p.arxiv_id for p in whole[:25]]


def test_paging_six_pages(make_client, fake: FakeArxiv) -> None:
    papers = make_client(page_size=10).search("testing", max_results=60)
    assert fake.calls == [query_url("testing", start, 10) for start in range(0, 60, 10)]
    assert len(papers) == 60
    assert len({p.versioned_id for p in papers}) == 60


@pytest.mark.parametrize(("max_results", "page"), [(10, 10), (15, 15)])
def test_no_page_larger_than_the_search(make_client, fake: FakeArxiv, max_results: int, page: int) -> None:
    papers = make_client(page_size=100).search("testing", max_results=max_results)
    assert fake.calls == [query_url("testing", 0, page)]
    assert len(papers) == max_results


def test_empty_search_is_refused_without_a_request(make_client, fake: FakeArxiv) -> None:
    with pytest.raises(ArxivError):
        make_client().search("   ")
    with pytest.raises(ValueError):
        make_client().search("testing", max_results=0)
    with pytest.raises(ValueError):
        make_client().search("testing", sort_by="popularity")
    assert fake.calls == []


# ---------------------------------------------------------------------------------------------
# Queries built for authors, categories and sort orders


@pytest.fixture
def empty_feed(recordings) -> Scripted:
    _, body = recordings[id_url("0000.0000")]
    return Scripted([lambda url: make_response(url, 200, body)])


def sent(url: str) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlsplit(url).query, keep_blank_values=True).items()}


@pytest.mark.parametrize(
    ("call", "query", "sort_by"),
    [
        (lambda c: c.by_author("Yann LeCun"), 'au:"Yann LeCun"', "submittedDate"),
        (lambda c: c.by_author('  Yann   "LeCun" '), 'au:"Yann LeCun"', "submittedDate"),
        (lambda c: c.by_author("Hinton"), "au:Hinton", "submittedDate"),
        (lambda c: c.by_category("cs.CL"), "cat:cs.CL", "submittedDate"),
        (lambda c: c.by_category("hep-th", newest_first=False), "cat:hep-th", "relevance"),
        (lambda c: c.search("graph neural networks", sort_by="submittedDate"), "graph neural networks",
         "submittedDate"),
        (lambda c: c.search("testing", sort_by="lastUpdatedDate"), "testing", "lastUpdatedDate"),
    ],
)
def test_queries_sent(make_client, empty_feed: Scripted, call, query: str, sort_by: str) -> None:
    assert call(make_client(http=empty_feed)) == []
    assert len(empty_feed.calls) == 1
    params = sent(empty_feed.calls[0])
    assert params["search_query"] == query
    assert params["sortBy"] == sort_by
    assert params["sortOrder"] == "descending"
    assert params["max_results"] == "10"


def test_bad_author_and_category_are_refused(make_client, empty_feed: Scripted) -> None:
    client = make_client(http=empty_feed)
    with pytest.raises(ArxivError):
        client.by_author('  ""  ')
    with pytest.raises(ArxivError):
        client.by_category("cs.CL OR au:x")
    assert empty_feed.calls == []


# ---------------------------------------------------------------------------------------------
# Failures and retries


def test_connection_error_retries_with_backoff(make_client, sleeps: list[float]) -> None:
    http = Scripted([requests.ConnectionError("Name or service not known")])
    with pytest.raises(ArxivUnavailable) as info:
        make_client(http=http, num_retries=3, backoff_seconds=1.0).by_id("1605.08386")
    assert len(http.calls) == 4  # the first try and three retries
    assert sleeps == [1.0, 2.0, 4.0]
    message = str(info.value)
    assert "arXiv could not be reached" in message
    assert "check your connection" in message
    assert "uploading a PDF still works" in message
    assert "4 tries" in message


@pytest.mark.parametrize("retries", [0, 1, 5])
def test_number_of_tries_follows_the_setting(make_client, sleeps: list[float], retries: int) -> None:
    http = Scripted([requests.ConnectionError("down")])
    with pytest.raises(ArxivUnavailable):
        make_client(http=http, num_retries=retries, backoff_seconds=0.5).search("testing")
    assert len(http.calls) == retries + 1
    assert sleeps == [0.5 * 2**i for i in range(retries)]


def test_recovers_after_server_errors(make_client, recordings, sleeps: list[float]) -> None:
    _, body = recordings[id_url("1605.08386")]
    http = Scripted([
        lambda url: make_response(url, 503, b"Service Unavailable", {"Content-Type": "text/plain"}),
        requests.Timeout("read timed out"),
        lambda url: make_response(url, 200, body),
    ])
    paper = make_client(http=http, num_retries=3, backoff_seconds=1.0).by_id("1605.08386")
    assert paper.title == "Heat-bath random walks with Markov bases"
    assert len(http.calls) == 3
    assert sleeps == [1.0, 2.0]


def test_rate_limited_answer_honours_retry_after(make_client, recordings, sleeps: list[float]) -> None:
    _, body = recordings[id_url("1605.08386")]
    http = Scripted([
        lambda url: make_response(url, 429, b"slow down", {"Retry-After": "10"}),
        lambda url: make_response(url, 200, body),
    ])
    make_client(http=http, num_retries=2, backoff_seconds=1.0).by_id("1605.08386")
    assert sleeps == [10.0]


def html(url: str) -> requests.Response:
    return make_response(url, 200, b"<html><body>arXiv is down for maintenance</body></html>", {})


@pytest.mark.parametrize(
    ("outcome", "tries"),
    [
        (requests.ConnectionError("refused"), 3),
        (requests.Timeout("timed out"), 3),
        (requests.exceptions.ChunkedEncodingError("cut"), 3),
        (requests.exceptions.InvalidURL("bad url"), 1),
        (lambda url: make_response(url, 500, b"oops"), 3),
        (lambda url: make_response(url, 502, b""), 3),
        (lambda url: make_response(url, 429, b""), 3),
        (lambda url: make_response(url, 403, b"Forbidden"), 1),
        (lambda url: make_response(url, 404, b"<html/>"), 1),
        (html, 3),
        (lambda url: make_response(url, 200, b"\x00\x01 not xml"), 3),
    ],
)
def test_failures_become_arxiv_unavailable(make_client, outcome, tries: int) -> None:
    http = Scripted([outcome])
    with pytest.raises(ArxivUnavailable) as info:
        make_client(http=http, num_retries=2).by_id("1605.08386")
    assert len(http.calls) == tries
    assert "uploading a PDF still works" in str(info.value)
    assert isinstance(info.value, IngestError)


def test_empty_later_page_is_retried_then_reported(make_client, recordings, sleeps: list[float]) -> None:
    _, first = recordings[query_url("testing", 0, 10)]
    _, empty = recordings[id_url("0000.0000")]
    http = Scripted([lambda url: make_response(url, 200, first), lambda url: make_response(url, 200, empty)])
    with pytest.raises(ArxivUnavailable) as info:
        make_client(http=http, page_size=10, num_retries=2, backoff_seconds=1.0).search("testing", max_results=20)
    assert http.calls == [query_url("testing", 0, 10)] + [query_url("testing", 10, 10)] * 3
    assert "empty" in str(info.value)
    assert sleeps == [1.0, 2.0]


# ---------------------------------------------------------------------------------------------
# Process-wide rate limit


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake_clock = FakeClock()
    monkeypatch.setattr(arxiv_client, "_now", fake_clock.monotonic)
    monkeypatch.setattr(arxiv_client, "_sleep", fake_clock.sleep)
    return fake_clock


class TimedFake(FakeArxiv):
    def __init__(self, recordings, clock: FakeClock):
        super().__init__(recordings)
        self.clock = clock
        self.times: list[float] = []

    def get(self, url: str, *args, **kwargs) -> requests.Response:
        self.times.append(self.clock.now)
        return super().get(url, *args, **kwargs)


def gaps(times: list[float]) -> list[float]:
    return [round(b - a, 6) for a, b in zip(times, times[1:])]


def test_rate_limit_is_shared_by_all_clients(make_client, recordings, clock: FakeClock, monkeypatch) -> None:
    monkeypatch.setattr(arxiv_client, "MIN_DELAY_SECONDS", 3.0)
    http = TimedFake(recordings, clock)
    first = make_client(http=http, delay_seconds=3.0)
    second = make_client(http=http, delay_seconds=3.0)
    first.by_id("1605.08386")
    second.by_id("2104.12255v1")
    first.by_id("astro-ph/0601001")
    second.search("testing", max_results=10)
    assert len(http.times) == 4
    assert gaps(http.times) == [3.0, 3.0, 3.0]
    assert clock.slept == [3.0, 3.0, 3.0]

    clock.now += 2.0  # time spent elsewhere counts towards the delay
    first.by_id("1605.08386")
    assert gaps(http.times)[-1] == 3.0
    assert clock.slept[-1] == pytest.approx(1.0)

    clock.now += 10.0  # long enough: no waiting at all
    second.by_id("1605.08386")
    assert len(clock.slept) == 4


def test_rate_limit_never_below_the_minimum(make_client, recordings, clock: FakeClock, monkeypatch) -> None:
    monkeypatch.setattr(arxiv_client, "MIN_DELAY_SECONDS", 3.0)
    http = TimedFake(recordings, clock)
    client = make_client(http=http, delay_seconds=0.1)
    assert client.delay_seconds == 3.0
    client.by_id("1605.08386")
    client.by_id("1605.08386")
    assert gaps(http.times) == [3.0]


def test_rate_limit_follows_a_lowered_minimum(make_client, recordings, clock: FakeClock) -> None:
    http = TimedFake(recordings, clock)  # the minimum is 0 here, as in every test
    client = make_client(http=http, delay_seconds=0.5)
    for _ in range(3):
        client.by_id("1605.08386")
    assert gaps(http.times) == [0.5, 0.5]


def test_rate_limit_spaces_pages_and_retries(make_client, recordings, clock: FakeClock, monkeypatch) -> None:
    monkeypatch.setattr(arxiv_client, "MIN_DELAY_SECONDS", 3.0)
    http = TimedFake(recordings, clock)
    papers = make_client(http=http, delay_seconds=3.0, page_size=10).search("testing", max_results=30)
    assert len(papers) == 30
    assert gaps(http.times) == [3.0, 3.0]

    _, body = recordings[id_url("1605.08386")]
    flaky = Scripted([requests.ConnectionError("down"), lambda url: make_response(url, 200, body)])
    times: list[float] = []

    def timed_get(url, *args, **kwargs):
        times.append(clock.now)
        return flaky.get(url, *args, **kwargs)

    flaky_http = type("H", (), {"get": staticmethod(timed_get)})
    make_client(http=flaky_http, delay_seconds=3.0, backoff_seconds=1.0).by_id("1605.08386")
    assert gaps(times) == [3.0]  # the 1 s backoff is not enough on its own: the rate limit adds 2 s


def test_pdf_downloads_take_a_turn_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """``wait_turn`` spaces PDF downloads from API calls by the same process-wide delay."""
    from ingest import arxiv_client as mod

    clock = {"now": 100.0}
    slept: list[float] = []
    monkeypatch.setattr(mod, "_now", lambda: clock["now"])

    def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        clock["now"] += seconds

    monkeypatch.setattr(mod, "_sleep", fake_sleep)
    monkeypatch.setattr(mod._RATE_LIMIT, "last_call", None)
    client = mod.ArxivClient()
    client.wait_turn()
    clock["now"] += 1.0
    client.wait_turn()
    assert slept == [pytest.approx(2.0)]


# ---------------------------------------------------------------------------------------------
# Offline: known within 3 s, remembered for a minute


@pytest.fixture
def fresh_reachability() -> Iterator[None]:
    arxiv_client._REACHABILITY.forget()
    yield
    arxiv_client._REACHABILITY.forget()


def test_an_unreachable_host_fails_at_once_and_is_remembered(fresh_reachability, monkeypatch, fake) -> None:
    from tests.conftest import free_port

    probes = []
    opening = socket.create_connection
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: probes.append(a) or opening(*a, **k))
    client = ArxivClient(check_reachable=True, query_url=f"http://127.0.0.1:{free_port()}/api/query",
                         delay_seconds=0.0)
    monkeypatch.setattr(client.session, "get", fake.get)
    started = time.monotonic()
    with pytest.raises(ArxivUnavailable, match="cannot be reached.*uploading a PDF still works"):
        client.search("testing")
    assert time.monotonic() - started < arxiv_client.REACH_TIMEOUT_SECONDS + 0.5
    started = time.monotonic()
    with pytest.raises(ArxivUnavailable):
        client.by_id("1605.08386")
    with pytest.raises(ArxivUnavailable):
        client.wait_turn()  # a PDF download asks first too
    assert time.monotonic() - started < 1.0 and len(probes) == 1, "remembered: no second probe"
    assert fake.calls == [], "no request was sent"


def test_the_check_gives_up_after_its_timeout(fresh_reachability, monkeypatch) -> None:
    monkeypatch.setattr(arxiv_client, "REACH_TIMEOUT_SECONDS", 0.5)
    def hanging(*args, **kwargs) -> None:  # noqa: ANN002, ANN003 - a host that never answers, then times out
        time.sleep(5)
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket, "create_connection", hanging)
    client = ArxivClient(check_reachable=True)
    started = time.monotonic()
    assert client.reachable() is False
    assert time.monotonic() - started < 3.0, "given up after 0.5 s, well before the hanging host's 5 s"


def test_a_reachable_host_lets_requests_through(fresh_reachability, monkeypatch, fake) -> None:
    probes = []

    class Opened:
        def close(self) -> None:
            pass

    monkeypatch.setattr(socket, "create_connection", lambda address, **k: probes.append(address) or Opened())
    client = ArxivClient(check_reachable=True, delay_seconds=0.0)
    monkeypatch.setattr(client.session, "get", fake.get)
    assert client.by_id("1605.08386").title == "Heat-bath random walks with Markov bases"
    assert probes == [("export.arxiv.org", 443)], "arXiv's API host is the one checked"
    assert ArxivClient().reachable() and len(probes) == 1, "a client made without the check never asks"
    arxiv_client._REACHABILITY.forget()
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    assert ArxivClient(check_reachable=True).reachable() and len(probes) == 1, "behind a proxy only a request tells"
