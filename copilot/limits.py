"""The limits of a shared instance: each a setting with a sensible default, each hit one clear line.

A check runs before anything is spent or stored, so a refused request loses nothing already kept and costs no
model call. Text limits (question and memory length, readable text) hold everywhere. Per-user quotas (uploads,
arXiv additions, questions per minute) are for an instance that serves several people: the web app in
``session`` or ``hf`` users mode applies them; a single-user instance and the command line do not.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

from copilot.config import Settings
from copilot.errors import UserError
from copilot.llm import ChatModel, Priority
from copilot.storage import Store


class LimitExceeded(UserError):
    """A request over one of the instance's limits; the message names the limit and what to do."""


def readable(text: str | None) -> str:
    """``text`` without control characters (NUL bytes, escapes; newlines and tabs stay), stripped."""
    return "".join(c for c in (text or "") if c in "\n\t" or unicodedata.category(c)[0] != "C").strip()


def check_question(text: str | None, settings: Settings) -> str:
    """The question as it will be asked, or a one-line :class:`ValueError` when it cannot be."""
    raw = (text or "").strip()
    question = readable(raw)
    if not question:
        raise UserError("The question has no readable text: type a question." if raw else "Ask a question first.")
    if len(question) > settings.max_question_chars:
        raise LimitExceeded(f"Questions are limited to {settings.max_question_chars:,} characters (this one has "
                            f"{len(question):,}): shorten it or ask about one part at a time.")
    return question


def check_memory(store: Store, settings: Settings, user_id: str, text: str | None) -> str:
    """The memory as it will be kept, or why it cannot be: too long, or the user already keeps the most allowed."""
    memory = readable(text)
    if not memory:
        raise UserError("Nothing to remember.")
    if len(memory) > settings.max_memory_chars:
        raise LimitExceeded(f"A memory is limited to {settings.max_memory_chars} characters (this one has "
                            f"{len(memory):,}): keep one fact per memory.")
    if store.memories.count(user_id) >= settings.max_memories_per_user:
        raise LimitExceeded(f"You keep {settings.max_memories_per_user} memories, the most allowed: delete some in "
                            "the Profile tab first.")
    return memory


def admit_question(store: Store, settings: Settings, user_id: str) -> None:
    """Count one question (or draft) of ``user_id``, unless they already asked the most allowed this minute."""
    used = store.usage.admit(user_id, "question", limit=settings.questions_per_minute, window_s=60)
    if used is not None:
        raise LimitExceeded(f"You asked {used} questions in the last minute, the most allowed "
                            f"({settings.questions_per_minute}): wait a moment and ask again.")


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


def _size(path: str) -> int:
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0
