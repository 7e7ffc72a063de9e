"""The limits of a shared instance: each a setting with a sensible default, each hit one clear line.

A check runs before anything is spent or stored, so a refused request loses nothing already kept and costs no
model call. Text limits (question and memory length, readable text) hold everywhere. Per-user quotas (uploads,
arXiv additions, questions per minute) are for an instance that serves several people: the web app in
``session`` or ``hf`` users mode applies them; a single-user instance and the command line do not.

A new guest costs a visitor nothing (drop the cookie), so guests also share two further bounds: the allowance of
their client address (questions per minute, memories and uploads per day, all guests from that address together)
and the instance's cap on what all guests together store (PDF bytes, rows). A signed-in user keeps their own.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

from copilot.config import Settings
from copilot.errors import UserError, printable
from copilot.llm import ChatModel, Priority
from copilot.storage import Store


class LimitExceeded(UserError):
    """A request over one of the instance's limits; the message names the limit and what to do."""


def readable(text: str | None) -> str:
    """``text`` without control characters (NUL bytes, escape sequences; newlines and tabs stay), stripped."""
    return printable(text).strip()


def has_words(text: str) -> bool:
    """Whether ``text`` holds a letter or a digit (a lone accent, an escape sequence or punctuation does not)."""
    return any(unicodedata.category(c)[0] in "LN" for c in text)


def check_question(text: str | None, settings: Settings) -> str:
    """The question as it will be asked, or a one-line :class:`ValueError` when it cannot be."""
    raw = (text or "").strip()
    question = readable(raw)
    if not has_words(question):
        raise UserError("The question has no readable text: type a question." if raw else "Ask a question first.")
    if len(question) > settings.max_question_chars:
        raise LimitExceeded(f"Questions are limited to {settings.max_question_chars:,} characters (this one has "
                            f"{len(question):,}): shorten it or ask about one part at a time.")
    return question


def check_memory(store: Store, settings: Settings, user_id: str, text: str | None) -> str:
    """The memory as it will be kept, or why it cannot be: too long, or the user already keeps the most allowed."""
    memory = readable(text)
    if not has_words(memory):
        raise UserError("Nothing to remember: type a fact about you.")
    if len(memory) > settings.max_memory_chars:
        raise LimitExceeded(f"A memory is limited to {settings.max_memory_chars} characters (this one has "
                            f"{len(memory):,}): keep one fact per memory.")
    if store.memories.count(user_id) >= settings.max_memories_per_user:
        raise LimitExceeded(f"You keep {settings.max_memories_per_user} memories, the most allowed: delete some in "
                            "the Profile tab first.")
    if is_guest(user_id):
        check_guest_storage(store, settings, new_rows=1)
    return memory


def admit_question(store: Store, settings: Settings, user_id: str) -> None:
    """Count one question (or draft) of ``user_id``, unless they already asked the most allowed this minute."""
    used = store.usage.admit(user_id, "question", limit=settings.questions_per_minute, window_s=60)
    if used is not None:
        raise LimitExceeded(f"You asked {used} questions in the last minute, the most allowed "
                            f"({settings.questions_per_minute}): wait a moment and ask again.")


def admit_page(store: Store, settings: Settings, user_id: str) -> None:
    """Count one passage rendered on its PDF page for ``user_id``, unless they had the most allowed this minute."""
    used = store.usage.admit(user_id, "page", limit=settings.pages_per_minute, window_s=60)
    if used is not None:
        raise LimitExceeded(f"You opened {used} cited pages in the last minute, the most allowed "
                            f"({settings.pages_per_minute}): wait a moment and open it again.")


GUEST_PREFIX = "guest-"
# action -> (setting of the address's allowance, window in seconds, what the allowance counts, the count it adds to)
ADDRESS_ALLOWANCES = {
    "question": ("address_questions_per_minute", 60, "questions in the last minute", "question"),
    "memory": ("address_memories_per_day", 24 * 3600, "memories in the last 24 hours", "memory"),
    "upload": ("address_uploads_per_day", 24 * 3600, "uploads in the last 24 hours", "upload"),
    # every job that asks arXiv (a search; adding papers, examples, a BibTeX import, a refresh) is one request
    "search": ("address_arxiv_per_minute", 60, "arXiv requests in the last minute", "arxiv"),
    "arxiv_add": ("address_arxiv_adds_per_day", 24 * 3600, "arXiv papers added in the last 24 hours", "arxiv_add"),
    "compare_cell": ("address_compare_cells_per_day", 24 * 3600, "comparison cells in the last 24 hours",
                     "compare_cell"),
}
ADDRESS_ALLOWANCES["arxiv_job"] = ADDRESS_ALLOWANCES["search"]  # adding, examples, imports, refreshes ask arXiv too


def is_guest(user_id: str) -> bool:
    return user_id.startswith(GUEST_PREFIX)


def admit_address(store: Store, settings: Settings, address: str, action: str, n: int = 1) -> None:
    """Count ``n`` uses of ``action`` by the guests of one client ``address`` together, unless that passes the
    address's allowance (actions without one are not counted)."""
    if action not in ADDRESS_ALLOWANCES or n <= 0:
        return
    setting, window_s, what, bucket = ADDRESS_ALLOWANCES[action]
    limit = getattr(settings, setting)
    used = store.usage.admit(f"address:{address}", bucket, limit=limit, window_s=window_s, amount=n)
    if used is not None:
        raise LimitExceeded(f"Guests from your network made {used} {what}, the most allowed together ({limit}): "
                            "sign in to use your own allowance, or try again later.")


def check_guest_storage(store: Store, settings: Settings, new_bytes: int = 0, new_rows: int = 0) -> None:
    """Refuse what would take all guests together past the instance's stored bytes or rows."""
    files, rows = store.guests.footprint(GUEST_PREFIX)
    used = sum(_size(p) for p in files)
    if new_bytes and used + new_bytes > settings.guest_storage_mb * 1024 * 1024:
        raise LimitExceeded(f"Guests' uploads fill this demo's storage ({settings.guest_storage_mb:,} MB): sign in "
                            "to keep your own papers, or try again after old guest data expires.")
    if rows >= settings.guest_rows or rows + new_rows > settings.guest_rows:
        raise LimitExceeded(f"Guests' data fills this demo's storage ({settings.guest_rows:,} rows): sign in to keep "
                            "your own, or try again after old guest data expires.")


def admit_answer(llm: ChatModel, settings: Settings) -> None:
    """Refuse a new answer while ``COPILOT_QUEUE_SIZE`` answers already wait for the model: the visitor is told the
    demo is busy instead of waiting without end."""
    waiting = llm.scheduler.waiting(Priority.ANSWER)
    if waiting >= settings.queue_size:
        raise LimitExceeded(f"The demo is busy: {waiting} answers are waiting for the model. Please try again in a "
                            "minute.")


def admit_search(store: Store, settings: Settings, user_id: str, n: int = 1) -> None:
    """Count ``n`` arXiv requests of ``user_id`` (searches, look-ups of typed ids, a refresh's categories), unless
    that passes the most allowed per minute."""
    if n <= 0:
        return
    used = store.usage.admit(user_id, "search", limit=settings.searches_per_minute, window_s=60, amount=n)
    if used is not None:
        raise LimitExceeded(f"That takes {n} arXiv request(s) and you ran {used} in the last minute; the most "
                            f"allowed is {settings.searches_per_minute}: wait a moment and try again.")


def admit_arxiv_adds(store: Store, settings: Settings, user_id: str, n: int) -> None:
    """Count ``n`` papers ``user_id`` adds from arXiv, unless that passes their daily allowance."""
    if n <= 0:
        return
    limit = settings.max_arxiv_adds_per_day
    used = store.usage.admit(user_id, "arxiv_add", limit=limit, window_s=24 * 3600, amount=n)
    if used is not None:
        raise LimitExceeded(f"Adding {n} paper(s) would pass your daily allowance of {limit} arXiv additions "
                            f"({used} used in the last 24 hours): add fewer, or come back tomorrow.")


def admit_compare_cells(store: Store, settings: Settings, user_id: str, n: int, address: str | None = None) -> None:
    """Count ``n`` cells of a comparison table ``user_id`` asks for, unless that passes their daily allowance, and,
    for a guest from client ``address``, the allowance of that address's guests (counted first; given back when the
    user's own allowance refuses). :func:`refund_compare_cells` gives back the cells a table leaves unfilled."""
    address = address if address is not None and is_guest(user_id) else None
    if address is not None:
        admit_address(store, settings, address, "compare_cell", n)
    limit = settings.compare_cells_per_day
    used = store.usage.admit(user_id, "compare_cell", limit=limit, window_s=24 * 3600, amount=n)
    if used is not None:
        if address is not None:
            refund_address(store, address, "compare_cell", n)
        raise LimitExceeded(f"A table of {n} cells would pass your daily allowance of {limit} comparison cells "
                            f"({used} used in the last 24 hours): compare fewer papers or aspects, or come back "
                            "tomorrow.")


def refund_compare_cells(store: Store, user_id: str, n: int, address: str | None = None) -> None:
    """Give back ``n`` comparison cells :func:`admit_compare_cells` counted and a table never filled (it failed, or
    was left, half-way): the user's, and the client ``address``'s when they were counted there too (a guest's)."""
    store.usage.refund(user_id, "compare_cell", n)
    if address is not None and is_guest(user_id):
        refund_address(store, address, "compare_cell", n)


def refund_address(store: Store, address: str, action: str, n: int) -> None:
    """Give back ``n`` uses of ``action`` counted against a client ``address`` (see :func:`admit_address`)."""
    if action in ADDRESS_ALLOWANCES:
        store.usage.refund(f"address:{address}", ADDRESS_ALLOWANCES[action][3], n)


def arxiv_additions_left(store: Store, settings: Settings, user_id: str) -> int:
    """How many more arXiv papers ``user_id`` may add in the current 24 hours."""
    return max(0, settings.max_arxiv_adds_per_day - store.usage.count_since(user_id, "arxiv_add", 24 * 3600))


def arxiv_allowance_left(store: Store, settings: Settings, user_id: str) -> int:
    """How many more arXiv papers ``user_id`` may add today (a refresh stops there); refused at none."""
    left = arxiv_additions_left(store, settings, user_id)
    if left <= 0:
        raise LimitExceeded(f"You added {settings.max_arxiv_adds_per_day} arXiv papers in the last 24 hours, your "
                            "daily allowance: come back tomorrow.")
    return left


def check_uploads(store: Store, settings: Settings, user_id: str, files: list[Path]) -> None:
    """Refuse a batch of uploads that would pass the user's paper count or total upload size."""
    stored = store.papers.upload_files(user_id)
    if len(stored) + len(files) > settings.max_papers_per_user:
        room = max(0, settings.max_papers_per_user - len(stored))
        raise LimitExceeded(f"Your library holds {len(stored)} uploads and the most allowed is "
                            f"{settings.max_papers_per_user}: remove some first (room for {room} more).")
    used = sum(_size(p) for p in stored)
    new = sum(_size(str(p)) for p in files)
    limit = settings.max_upload_mb_per_user * 1024 * 1024
    if used + new > limit:
        raise LimitExceeded(f"These uploads ({new / 2**20:.1f} MB) would pass your {settings.max_upload_mb_per_user} MB "
                            f"of uploads ({used / 2**20:.1f} MB used): remove some papers first.")
    if is_guest(user_id):
        check_guest_storage(store, settings, new_bytes=new)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0
