"""Keeping the library current, as Arxiv Copilot does: the newest papers of the arXiv categories users follow.

A refresh asks arXiv for each category's newest submissions through the library's arXiv client (so it keeps
that client's pacing: one request every 3 s per process, PDF downloads included), adds the papers the
library lacks, and records what it did in the ``refreshes`` table, so the UI can say when the last refresh
ran and what it added. A failing category or paper is reported and the rest still go in. Refreshes can run
on a timer (``COPILOT_REFRESH_HOURS``) in a daemon thread.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from copilot.errors import UserError
from copilot.library import Library
from copilot.storage import Store, utc_now
from copilot.types import Refresh
from ingest.errors import IngestError
from ingest.models import Progress, no_progress

logger = logging.getLogger(__name__)

MAX_FOLLOWED = 20
SHOWN_BAD = 5  # malformed categories an error names (a pasted list may hold thousands)
MAX_PER_CATEGORY = 50

# arXiv archives whose categories carry an upper-case subject class (cs.CL, math.GT, stat.ML, astro-ph.CO).
_UPPER_SUBJECTS = {"cs", "math", "stat", "q-bio", "q-fin", "eess", "econ", "astro-ph", "nlin"}
# Archives with lower-case, possibly hyphenated subjects (physics.acc-ph, cond-mat.stat-mech).
_LOWER_SUBJECTS = {"physics", "cond-mat"}
# Archives that are categories by themselves.
_NO_SUBJECTS = {"gr-qc", "hep-ex", "hep-lat", "hep-ph", "hep-th", "math-ph", "nucl-ex", "nucl-th", "quant-ph"}
_CATEGORY = re.compile(r"(?P<archive>[a-z]+(?:-[a-z]+)?)(?:\.(?P<subject>[a-z]+(?:-[a-z]+)*))?", re.IGNORECASE)


def normalise_category(text: str) -> str:
    """``text`` as arXiv spells the category ("cs.cl" -> "cs.CL"); UserError when it is not one."""
    cleaned = (text or "").strip()
    match = _CATEGORY.fullmatch(cleaned)
    hint = "categories look like cs.CL, cs.IR, stat.ML, physics.optics or hep-th"
    if match is None:
        raise UserError(f"'{cleaned}' is not an arXiv category; {hint}.")
    archive, subject = match.group("archive").lower(), match.group("subject")
    if archive in _NO_SUBJECTS and subject is None:
        return archive
    if archive in _UPPER_SUBJECTS and subject and re.fullmatch(r"[a-z]{2}", subject, re.IGNORECASE):
        return f"{archive}.{subject.upper()}"
    if archive in _LOWER_SUBJECTS and subject:
        return f"{archive}.{subject.lower()}"
    raise UserError(f"'{cleaned}' is not an arXiv category; {hint}.")


def normalise_categories(categories: Sequence[str]) -> list[str]:
    """Every category normalised, in order, each once; one UserError naming all that are not categories."""
    found: list[str] = []
    bad: list[str] = []
    for text in categories:
        try:
            category = normalise_category(text)
        except UserError:
            bad.append(repr((text or "").strip()))
            continue
        if category not in found:
            found.append(category)
    if bad:
        shown = ", ".join(b if len(b) <= 40 else b[:39] + "…" for b in bad[:SHOWN_BAD])
        more = f" and {len(bad) - SHOWN_BAD:,} more" if len(bad) > SHOWN_BAD else ""
        raise UserError(f"Not arXiv categories: {shown}{more}; categories look like cs.CL, cs.IR, stat.ML or "
                         "hep-th.")
    return found


# ----- follows -----------------------------------------------------------------------------------------


def followed_categories(store: Store, user_id: str) -> list[str]:
    """The categories ``user_id`` follows, in the order they were added."""
    return store.follows.of(user_id)


def set_followed_categories(store: Store, user_id: str, categories: Sequence[str]) -> list[str]:
    """Replace what ``user_id`` follows; refuses malformed categories, or more than the most allowed (nothing
    changes then)."""
    if len(categories) > MAX_FOLLOWED * 4:  # far past any list of distinct categories: refused before reading it
        raise UserError(f"Follow at most {MAX_FOLLOWED} categories (this list has {len(categories):,}).")
    wanted = normalise_categories(categories)
    if len(wanted) > MAX_FOLLOWED:
        raise UserError(f"Follow at most {MAX_FOLLOWED} categories.")
    store.follows.replace(user_id, wanted)
    return followed_categories(store, user_id)


def all_followed_categories(store: Store) -> list[str]:
    """Every category some user follows (what a scheduled refresh pulls)."""
    return store.follows.categories()


# ----- refreshing --------------------------------------------------------------------------------------


@dataclass
class RefreshResult:
    """What one refresh did: papers added, papers already there, and failures (category or paper, and why)."""

    added: list[str]
    skipped: int
    errors: list[str]
    started_at: str
    finished_at: str
    categories: list[str] = field(default_factory=list)
    user_id: str | None = None
    id: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def refresh_categories(library: Library, categories: Sequence[str], *, user_id: str | None = None,
                       max_per_category: int = 5, progress: Progress | None = None,
                       max_added: int | None = None) -> RefreshResult:
    """Add the newest ``max_per_category`` submissions of each category that the library does not hold yet
    (``max_added``: stop once that many papers were added, a user's remaining allowance).

    ``library`` is an :class:`copilot.library.Library`; its arXiv client does the pacing. Papers from arXiv are
    public, whoever refreshes. The refresh is recorded (for :func:`last_refresh`) even when everything failed.
    """
    wanted = normalise_categories(categories)
    if not wanted:
        raise UserError("Choose at least one arXiv category to refresh, e.g. cs.CL.")
    if not 1 <= max_per_category <= MAX_PER_CATEGORY:
        raise UserError(f"max_per_category must be between 1 and {MAX_PER_CATEGORY}.")

    report = progress or no_progress
    result = RefreshResult(added=[], skipped=0, errors=[], started_at=utc_now(), finished_at="", categories=wanted,
                           user_id=user_id)
    seen: set[str] = set()
    for i, category in enumerate(wanted):
        report(i / len(wanted), f"Asking arXiv for the newest {category} papers")
        try:
            papers = library.arxiv.by_category(category, max_results=max_per_category)
        except (IngestError, OSError) as exc:
            result.errors.append(f"{category}: {exc}")
            continue
        fresh = []
        for metadata in papers:
            if metadata.arxiv_id in seen:
                continue  # cross-listed in two followed categories
            seen.add(metadata.arxiv_id)
            fresh.append(metadata)  # add_many skips (and reports) what the library already holds, before any download

        def step(fraction: float, message: str, i: int = i, category: str = category) -> None:
            report((i + fraction) / len(wanted), f"{category}: {message}")

        if max_added is not None:
            room = max_added - len(result.added)
            if room <= 0:
                break
            fresh = [m for m in fresh if not library.store.papers.exists(m.arxiv_id)][:room]
        added, failures = library.add_many(fresh, progress=step)
        result.added += [a.paper_id for a in added if a.added]
        result.skipped += sum(not a.added for a in added)
        result.errors += [f"{arxiv_id}: {why}" for arxiv_id, why in failures]
    result.finished_at = utc_now()
    result.id = _record(library.store, result)
    report(1.0, f"Added {len(result.added)} paper(s)")
    return result


def refresh_followed(library: Library, *, max_per_category: int = 5,
                     progress: Progress | None = None) -> RefreshResult | None:
    """Refresh every category any user follows (the scheduled refresh); None when nobody follows any."""
    categories = all_followed_categories(library.store)
    if not categories:
        return None
    return refresh_categories(library, categories, max_per_category=max_per_category, progress=progress)


def _record(store: Store, result: RefreshResult) -> int:
    return store.refreshes.add(user_id=result.user_id, categories=result.categories, added=result.added,
                               skipped=result.skipped, errors=result.errors, started_at=result.started_at,
                               finished_at=result.finished_at)


def last_refresh(store: Store, user_id: str | None = None) -> Refresh | None:
    """The newest refresh the user ran or the scheduler ran for everyone (any refresh when ``user_id`` is None)."""
    return store.refreshes.last(user_id)


# ----- on a timer --------------------------------------------------------------------------------------


class RefreshScheduler:
    """Calls ``fn`` every ``interval_hours`` in a daemon thread; 0 hours means off.

    The first call comes after one interval (``first_delay_s`` to change that), so starting the app never
    waits for arXiv. A failing call is logged and the schedule goes on.
    """

    def __init__(self, interval_hours: float, fn: Callable[[], object], *, first_delay_s: float | None = None
                 ) -> None:
        if interval_hours < 0:
            raise ValueError("interval_hours must be 0 (off) or more")
        self.interval_s = interval_hours * 3600.0
        self.first_delay_s = self.interval_s if first_delay_s is None else max(0.0, first_delay_s)
        self.fn = fn
        self.runs = 0
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> bool:
        """Start the timer; False (and nothing started) when the interval is 0 or it already runs."""
        if self.interval_s <= 0 or self.running:
            return False
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="library-refresh", daemon=True)
        self._thread.start()
        return True

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the timer; a refresh in progress finishes first (waits up to ``timeout`` seconds)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        delay = self.first_delay_s
        while not self._stop.wait(delay):
            try:
                self.fn()
                self.last_error = None
            except Exception as exc:  # noqa: BLE001 - one failed refresh must not end the schedule
                self.last_error = f"{type(exc).__name__}: {exc}"
                logger.exception("scheduled library refresh failed")
            self.runs += 1
            delay = self.interval_s
