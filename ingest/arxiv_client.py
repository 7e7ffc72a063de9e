"""arXiv look-ups: identifiers, id look-ups and searches, mapped to :class:`PaperMetadata`.

Built on the ``arxiv`` package (its ``Search``, paging and Atom parser), with three things added:

* one process-wide rate limit: at least :data:`MIN_DELAY_SECONDS` between two requests to arXiv,
  whichever :class:`ArxivClient` makes them;
* retries with exponential backoff on network errors, HTTP 429 and 5xx, and unreadable answers;
* errors a user can act on: every failure is an :class:`~ingest.errors.ArxivError`, never a raw
  ``requests`` or ``arxiv`` exception.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterable

import arxiv
import requests
from arxiv import _feed
from lxml import etree

from ingest.errors import ArxivError, ArxivNotFound, ArxivUnavailable, InvalidArxivId, IngestError
from ingest.models import PaperMetadata

logger = logging.getLogger(__name__)

__all__ = ["ACCEPTED_FORMS", "ArxivClient", "MIN_DELAY_SECONDS", "SORT_BY", "parse_arxiv_id"]

ACCEPTED_FORMS = (
    "Accepted forms: 2104.12255, 2104.12255v1, arXiv:2104.12255, hep-th/9901001, quant-ph/0201082v1, "
    "math.GT/0309136, or a link such as https://arxiv.org/abs/2104.12255 or https://arxiv.org/pdf/2104.12255v1."
)

# arXiv asks for no more than one request every three seconds. Clients cannot go below this;
# tests lower it to run without waiting.
MIN_DELAY_SECONDS = 3.0

# A request that gets no answer within this many seconds counts as failed (and is retried).
DEFAULT_TIMEOUT_SECONDS = 30.0
# The longest wait a Retry-After header can impose before the next try.
MAX_RETRY_AFTER_SECONDS = 60.0
# A client made with ``check_reachable``: before it speaks to arXiv, a connection to arXiv's host must open within
# this many seconds; the outcome is remembered this long, so that offline every later action fails at once.
REACH_TIMEOUT_SECONDS = 3.0
REACH_MEMORY_SECONDS = 60.0

SORT_BY: dict[str, arxiv.SortCriterion] = {
    "relevance": arxiv.SortCriterion.Relevance,
    "lastupdateddate": arxiv.SortCriterion.LastUpdatedDate,
    "updated": arxiv.SortCriterion.LastUpdatedDate,
    "submitteddate": arxiv.SortCriterion.SubmittedDate,
    "submitted": arxiv.SortCriterion.SubmittedDate,
    "published": arxiv.SortCriterion.SubmittedDate,
}

_USER_AGENT = f"paper-copilot arxiv.py/{arxiv.__version__}"

# ---------------------------------------------------------------------------------------------
# Identifiers

_VERSION = r"(?:[vV](?P<version>[1-9][0-9]*))?"
_NEW_ID = r"(?P<new>[0-9]{4}\.[0-9]{4,5})"
_OLD_ID = r"(?P<archive>[a-zA-Z]+(?:-[a-zA-Z]+)?)(?:\.(?P<subject>[a-zA-Z]{2}))?/(?P<number>[0-9]{7})"
_ID = rf"(?:{_NEW_ID}|{_OLD_ID}){_VERSION}"
_BARE_RE = re.compile(rf"(?:arxiv:\s*)?{_ID}", re.IGNORECASE)
_URL_RE = re.compile(
    rf"(?:https?://)?(?:www\.|export\.)?arxiv\.org/(?:abs|pdf)/{_ID}(?:\.pdf)?/?(?:[?#].*)?",
    re.IGNORECASE,
)


def parse_arxiv_id(text: str) -> tuple[str, str | None]:
    """Split an arXiv identifier into ``(id without version, "vN" or None)``.

    Accepts new-style ids (``2104.12255``, ``2104.12255v1``, ``0704.0001``), old-style ids
    (``hep-th/9901001``, ``quant-ph/0201082v1``, ``math.GT/0309136``), each with an optional
    ``arXiv:`` prefix, and arxiv.org ``abs``/``pdf`` links. An old-style id loses its subject class
    (``math.GT/0309136`` -> ``math/0309136``), which is how arXiv names the paper.

    Only the form is checked: whether arXiv has such a paper is for arXiv to say.
    Raises :class:`InvalidArxivId` for anything else.
    """
    if not isinstance(text, str):
        raise InvalidArxivId(f"{text!r} is not an arXiv identifier. {ACCEPTED_FORMS}")
    cleaned = text.strip()
    match = _BARE_RE.fullmatch(cleaned) or _URL_RE.fullmatch(cleaned)
    if match is None:
        shown = cleaned if cleaned else "(empty)"
        raise InvalidArxivId(f"'{shown}' is not an arXiv identifier. {ACCEPTED_FORMS}")
    if match.group("new"):
        base = match.group("new")
    else:
        base = f"{match.group('archive').lower()}/{match.group('number')}"
    version = match.group("version")
    return base, (f"v{version}" if version else None)


def _split_entry_id(short_id: str) -> tuple[str, str | None]:
    """The id and version of an entry arXiv returned (``1605.08386v1`` -> ``("1605.08386", "v1")``)."""
    try:
        return parse_arxiv_id(short_id)
    except InvalidArxivId:
        match = re.fullmatch(r"(.*?)(v[0-9]+)?", short_id)
        assert match is not None  # the pattern matches every string
        return match.group(1), match.group(2)


# ---------------------------------------------------------------------------------------------
# Process-wide rate limit


def _now() -> float:
    return time.monotonic()


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


class _RateLimit:
    """When this process last spoke to arXiv; ``lock`` lets one request through at a time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last_call: float | None = None


_RATE_LIMIT = _RateLimit()


# ---------------------------------------------------------------------------------------------
# Answers


class _RetryableFailure(Exception):
    """One try failed in a way that another try may fix."""

    def __init__(self, detail: str, retry_after: float | None = None):
        super().__init__(detail)
        self.detail = detail
        self.retry_after = retry_after


_ATOM = "{http://www.w3.org/2005/Atom}"
_ERROR_ID_PREFIXES = ("https://arxiv.org/api/errors", "http://arxiv.org/api/errors")


def _inspect(content: bytes) -> tuple[bool, list[str]]:
    """Whether ``content`` is an Atom feed, and the messages of arXiv's error entries in it.

    arXiv reports a bad request as a feed holding one entry whose id points to its error page;
    the ``arxiv`` package drops such entries (they have no publication date), so they are read here.
    """
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, recover=True)
    try:
        root = etree.fromstring(content, parser=parser)
    except etree.XMLSyntaxError:
        return False, []
    if root is None or root.tag != f"{_ATOM}feed":
        return False, []
    errors: list[str] = []
    for entry in root.iterfind(f"{_ATOM}entry"):
        entry_id = (entry.findtext(f"{_ATOM}id") or "").strip()
        if entry_id.startswith(_ERROR_ID_PREFIXES):
            summary = " ".join((entry.findtext(f"{_ATOM}summary") or "").split())
            errors.append(summary or entry_id)
    return True, errors


def _raise_api_error(messages: list[str]) -> None:
    message = "; ".join(messages)
    if "id format" in message.lower() or "invalid id" in message.lower():
        raise InvalidArxivId(f"arXiv rejected the identifier ({message}). {ACCEPTED_FORMS}")
    raise ArxivError(f"arXiv rejected the request: {message}.")


def _retry_after(response: requests.Response) -> float | None:
    value = response.headers.get("Retry-After") if response.headers else None
    if value is None:
        return None
    try:
        return max(0.0, min(float(value), MAX_RETRY_AFTER_SECONDS))
    except ValueError:
        return None


class _Reachability:
    """Whether a host accepted a connection lately: one short probe, remembered for :data:`REACH_MEMORY_SECONDS`
    by every client of this process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.probing = threading.Lock()  # one probe at a time: callers meanwhile wait for its answer
        self.known: dict[tuple[str, int], tuple[bool, float]] = {}

    def _remembered(self, host: str, port: int) -> bool | None:
        with self.lock:
            known = self.known.get((host, port))
        return known[0] if known is not None and time.monotonic() - known[1] < REACH_MEMORY_SECONDS else None

    def check(self, host: str, port: int) -> bool:
        remembered = self._remembered(host, port)
        if remembered is not None:
            return remembered
        with self.probing:
            remembered = self._remembered(host, port)
            return remembered if remembered is not None else self._probe(host, port)

    def _probe(self, host: str, port: int) -> bool:
        opened: list[bool] = []

        def probe() -> None:  # name resolution has no timeout of its own: the thread is waited for, not joined
            try:
                socket.create_connection((host, port), timeout=REACH_TIMEOUT_SECONDS).close()
                opened.append(True)
            except OSError:
                opened.append(False)

        worker = threading.Thread(target=probe, name="arxiv-reachable", daemon=True)
        worker.start()
        worker.join(REACH_TIMEOUT_SECONDS)
        reachable = bool(opened and opened[0])
        with self.lock:
            self.known[(host, port)] = (reachable, time.monotonic())
        if not reachable:
            logger.warning("arXiv's host %s:%d accepted no connection within %g s", host, port,
                           REACH_TIMEOUT_SECONDS)
        return reachable

    def forget(self) -> None:
        with self.lock:
            self.known.clear()


_REACHABILITY = _Reachability()


def _unreachable() -> ArxivUnavailable:
    return ArxivUnavailable(
        f"arXiv cannot be reached from this server (no connection within {REACH_TIMEOUT_SECONDS:g} s). Please try "
        "again in a minute; uploading a PDF still works."
    )


def _unavailable(detail: str, tries: int) -> ArxivUnavailable:
    tried = "1 try" if tries == 1 else f"{tries} tries"
    return ArxivUnavailable(
        f"arXiv could not be reached ({detail}; {tried}). Please check your connection and try again "
        "in a minute; uploading a PDF still works."
    )


class _PoliteClient(arxiv.Client):
    """``arxiv.Client`` with the process-wide rate limit, backoff, timeouts and readable errors.

    The package's paging (``results``) is kept; fetching one page (``_parse_feed``) is replaced.
    """

    def __init__(self, page_size: int, delay_seconds: float, num_retries: int, backoff_seconds: float,
                 timeout_seconds: float):
        super().__init__(page_size=page_size, delay_seconds=delay_seconds, num_retries=num_retries)
        self.backoff_seconds = backoff_seconds
        self.timeout_seconds = timeout_seconds

    def _format_url(self, search: arxiv.Search, start: int, page_size: int) -> str:
        # No page larger than the whole search: 10 results take one request for 10, not 100.
        if search.max_results:
            page_size = min(page_size, search.max_results)
        return super()._format_url(search, start, page_size)

    def _parse_feed(self, url: str, first_page: bool = True, _try_index: int = 0) -> _feed.ParsedFeed:
        tries = self.num_retries + 1
        for attempt in range(tries):
            try:
                return self._try_once(url, first_page)
            except _RetryableFailure as failure:
                if attempt + 1 >= tries:
                    logger.warning("arXiv request failed %d times, giving up: %s (%s)", tries, failure.detail, url)
                    raise _unavailable(failure.detail, tries) from failure
                wait = self.backoff_seconds * (2**attempt)
                if failure.retry_after is not None:
                    wait = max(wait, failure.retry_after)
                logger.info("arXiv request failed (%s); retrying in %.1f s: %s", failure.detail, wait, url)
                if wait > 0:
                    _sleep(wait)
        raise AssertionError("unreachable")  # the loop returns or raises

    def wait_turn(self) -> None:
        """Wait until this process may speak to arXiv again, and take the turn (used before PDF downloads)."""
        delay = max(self.delay_seconds, MIN_DELAY_SECONDS)
        with _RATE_LIMIT.lock:
            if _RATE_LIMIT.last_call is not None:
                wait = _RATE_LIMIT.last_call + delay - _now()
                if wait > 0:
                    _sleep(wait)
            _RATE_LIMIT.last_call = _now()

    def _get(self, url: str) -> requests.Response:
        """One GET, at least the configured delay after the previous request of this process."""
        delay = max(self.delay_seconds, MIN_DELAY_SECONDS)
        with _RATE_LIMIT.lock:
            if _RATE_LIMIT.last_call is not None:
                wait = _RATE_LIMIT.last_call + delay - _now()
                if wait > 0:
                    logger.debug("Waiting %.2f s before the next arXiv request", wait)
                    _sleep(wait)
            try:
                logger.info("arXiv request: %s", url)
                return self._session.get(url, headers={"user-agent": _USER_AGENT}, timeout=self.timeout_seconds)
            finally:
                _RATE_LIMIT.last_call = _now()

    def _try_once(self, url: str, first_page: bool) -> _feed.ParsedFeed:
        try:
            response = self._get(url)
        except requests.Timeout as exc:
            raise _RetryableFailure(f"no answer within {self.timeout_seconds:g} s") from exc
        except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError,
                requests.exceptions.ContentDecodingError) as exc:
            raise _RetryableFailure(f"network error: {type(exc).__name__}") from exc
        except requests.RequestException as exc:
            raise _unavailable(f"request failed: {type(exc).__name__}", 1) from exc

        status = response.status_code
        content = response.content or b""
        if status == 429 or status >= 500:
            raise _RetryableFailure(f"HTTP {status}", _retry_after(response))
        is_feed, api_errors = _inspect(content)
        if api_errors:
            _raise_api_error(api_errors)
        if status != 200:
            raise _unavailable(f"HTTP {status}", 1)
        if not is_feed:
            raise _RetryableFailure("the answer was not an arXiv feed")
        feed = _feed.parse(content)
        if feed.malformed:
            raise _RetryableFailure("the answer could not be read")
        if not feed.results and not first_page:
            # arXiv sometimes answers a page it announced with nothing; asking again usually works.
            raise _RetryableFailure("a page of results came back empty")
        return feed


# ---------------------------------------------------------------------------------------------
# The client


def _to_metadata(result: arxiv.Result) -> PaperMetadata:
    arxiv_id, version = _split_entry_id(result.get_short_id())
    categories = list(result.categories)
    primary = result.primary_category or (categories[0] if categories else "")
    if primary and primary not in categories:
        categories.insert(0, primary)
    return PaperMetadata(
        arxiv_id=arxiv_id,
        version=version,
        title=" ".join(result.title.split()),
        authors=[author.name.strip() for author in result.authors if author.name.strip()],
        abstract=" ".join(result.summary.split()),
        categories=categories,
        primary_category=primary,
        published=result.published.isoformat(),
        updated=result.updated.isoformat(),
        pdf_url=result.pdf_url or f"https://arxiv.org/pdf/{arxiv_id}{version or ''}",
        doi=(result.doi or "").strip() or None,
        journal_ref=" ".join((result.journal_ref or "").split()) or None,
        comment=" ".join((result.comment or "").split()) or None,
    )


def _dedupe(papers: Iterable[PaperMetadata]) -> list[PaperMetadata]:
    seen: set[str] = set()
    unique: list[PaperMetadata] = []
    for paper in papers:
        if paper.arxiv_id not in seen:
            seen.add(paper.arxiv_id)
            unique.append(paper)
    return unique


_CATEGORY_RE = re.compile(r"[a-zA-Z]+(?:-[a-zA-Z]+)?(?:\.[a-zA-Z]+(?:-[a-zA-Z]+)?)?")


class ArxivClient:
    """Looks papers up on arXiv and searches it.

    ``delay_seconds`` is the least time between two requests of this process to arXiv (never below
    :data:`MIN_DELAY_SECONDS`); a failing request is tried ``num_retries`` more times, waiting
    ``backoff_seconds``, then twice as long each time; searches fetch ``page_size`` results a request.
    """

    def __init__(self, delay_seconds: float = 3.0, num_retries: int = 3, page_size: int = 100, *,
                 backoff_seconds: float = 2.0, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
                 check_reachable: bool = False, query_url: str | None = None):
        if num_retries < 0:
            raise ValueError("num_retries must be 0 or more")
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        self._client = _PoliteClient(page_size=page_size, delay_seconds=delay_seconds, num_retries=num_retries,
                                     backoff_seconds=backoff_seconds, timeout_seconds=timeout_seconds)
        if query_url:
            self._client.query_url_format = query_url.split("?", 1)[0] + "?{}"
        self.check_reachable = check_reachable

    def reachable(self) -> bool:
        """Whether arXiv's API host accepts a connection (within :data:`REACH_TIMEOUT_SECONDS`, remembered for
        :data:`REACH_MEMORY_SECONDS`); True without asking for a client made without ``check_reachable``."""
        if not self.check_reachable:
            return True
        address = self._client.query_url_format.split("?", 1)[0]
        if requests.utils.get_environ_proxies(address):
            return True  # requests go through a proxy: only a request can tell
        url = urllib.parse.urlsplit(address)
        port = url.port or (443 if url.scheme == "https" else 80)
        return _REACHABILITY.check(url.hostname or "", port)

    def _require_reachable(self) -> None:
        if not self.reachable():
            raise _unreachable()

    @property
    def session(self) -> requests.Session:
        """The HTTP session every request goes through."""
        return self._client._session

    @property
    def delay_seconds(self) -> float:
        return max(self._client.delay_seconds, MIN_DELAY_SECONDS)

    @property
    def num_retries(self) -> int:
        return self._client.num_retries

    @property
    def page_size(self) -> int:
        return self._client.page_size

    def wait_turn(self) -> None:
        """Take this process's next turn to speak to arXiv (PDF downloads are as polite as API calls)."""
        self._require_reachable()
        self._client.wait_turn()

    # -- look-ups by id --------------------------------------------------------------------

    def by_ids(self, ids: list[str], *, skip_missing: bool = False) -> list[PaperMetadata]:
        """The papers with these identifiers, in the order given (each paper once).

        A versioned id gives that version, an unversioned one the latest. Raises
        :class:`InvalidArxivId` (before any request) for a malformed id, and :class:`ArxivNotFound`
        naming every id arXiv does not have, unless ``skip_missing`` leaves those out instead.
        """
        if isinstance(ids, str):
            ids = [ids]
        wanted: list[tuple[str, str | None]] = []
        bad: list[str] = []
        for text in ids:
            try:
                parsed = parse_arxiv_id(text)
            except InvalidArxivId:
                bad.append(repr(text) if not isinstance(text, str) else f"'{text.strip()}'")
                continue
            if parsed not in wanted:
                wanted.append(parsed)
        if bad:
            noun = "is not an arXiv identifier" if len(bad) == 1 else "are not arXiv identifiers"
            raise InvalidArxivId(f"{', '.join(bad)} {noun}. {ACCEPTED_FORMS}")
        if not wanted:
            return []

        id_list = [f"{arxiv_id}{version or ''}" for arxiv_id, version in wanted]
        found = self._run(arxiv.Search(id_list=id_list, max_results=None))

        papers: list[PaperMetadata] = []
        missing: list[str] = []
        for (arxiv_id, version), shown in zip(wanted, id_list):
            match = next((p for p in found if p.arxiv_id == arxiv_id and (version is None or p.version == version)),
                         None)
            if match is None:
                missing.append(shown)
            elif match not in papers:
                papers.append(match)
        if missing and not skip_missing:
            if len(missing) == 1:
                raise ArxivNotFound(f"arXiv has no paper {missing[0]}. Check the identifier (for example 2104.12255 "
                                    "or hep-th/9901001).")
            raise ArxivNotFound(f"arXiv has no papers {', '.join(missing)}. Check the identifiers (for example "
                                "2104.12255 or hep-th/9901001).")
        return papers

    def by_id(self, id: str) -> PaperMetadata:  # noqa: A002 - the name callers use
        """The paper with this identifier; see :meth:`by_ids`."""
        return self.by_ids([id])[0]

    # -- searches --------------------------------------------------------------------------

    def search(self, query: str, max_results: int = 10, sort_by: str = "relevance") -> list[PaperMetadata]:
        """Papers matching free text (arXiv's query syntax such as ``ti:`` or ``AND`` also works).

        ``sort_by`` is ``"relevance"``, ``"lastUpdatedDate"`` (or ``"updated"``) or
        ``"submittedDate"`` (or ``"submitted"``); results come best or newest first.
        """
        text = " ".join((query or "").split())
        if not text:
            raise ArxivError("Type something to search arXiv for.")
        try:
            criterion = SORT_BY[sort_by.replace("_", "").lower()]
        except (KeyError, AttributeError):
            raise ValueError(f"sort_by must be one of relevance, lastUpdatedDate, submittedDate; not {sort_by!r}") \
                from None
        return self._search(text, max_results, criterion)

    def by_author(self, name: str, max_results: int = 10) -> list[PaperMetadata]:
        """Papers by an author, newest first (``"Yann LeCun"`` searches ``au:"Yann LeCun"``)."""
        cleaned = " ".join((name or "").replace('"', " ").split())
        if not cleaned:
            raise ArxivError("Type an author's name to search arXiv for.")
        term = f'au:"{cleaned}"' if " " in cleaned else f"au:{cleaned}"
        return self._search(term, max_results, arxiv.SortCriterion.SubmittedDate)

    def by_category(self, category: str, max_results: int = 10, newest_first: bool = True) -> list[PaperMetadata]:
        """Papers in an arXiv category such as ``cs.CL`` or ``hep-th``.

        Newest submissions first, or arXiv's relevance order with ``newest_first=False``.
        """
        cleaned = (category or "").strip()
        if not _CATEGORY_RE.fullmatch(cleaned):
            raise ArxivError(f"'{cleaned}' is not an arXiv category; categories look like cs.CL, hep-th or math.GT.")
        criterion = arxiv.SortCriterion.SubmittedDate if newest_first else arxiv.SortCriterion.Relevance
        return self._search(f"cat:{cleaned}", max_results, criterion)

    # -- plumbing --------------------------------------------------------------------------

    def _search(self, query: str, max_results: int, criterion: arxiv.SortCriterion) -> list[PaperMetadata]:
        if isinstance(max_results, bool) or not isinstance(max_results, int) or max_results < 1:
            raise ValueError(f"max_results must be a whole number of at least 1, not {max_results!r}")
        search = arxiv.Search(query=query, max_results=max_results, sort_by=criterion,
                              sort_order=arxiv.SortOrder.Descending)
        return _dedupe(self._run(search))

    def _run(self, search: arxiv.Search) -> list[PaperMetadata]:
        self._require_reachable()
        try:
            results = list(self._client.results(search))
        except IngestError:
            raise
        except (requests.RequestException, arxiv.ArxivError) as exc:
            raise _unavailable(f"{type(exc).__name__}: {exc}", 1) from exc
        except (ValueError, etree.LxmlError) as exc:
            raise ArxivUnavailable(
                f"arXiv sent an answer that could not be read ({exc}). Please try again in a minute; "
                "uploading a PDF still works."
            ) from exc
        return [_to_metadata(result) for result in results]
