"""The one LLM call of a draft: capped, streamed, stopped when the model repeats itself, and its reply cleaned
of an added heading, a repeated paragraph and an unfinished last sentence."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from copilot.answering import stream_until_repeating
from copilot.tasks.writing.model import OnText

if TYPE_CHECKING:
    from copilot.engine import Copilot

DRAFT_MAX_TOKENS = 300
_HEADING = re.compile(r"^\s*(?:#+\s*|\*\*)?(abstract|related work|synthesis|summary)\s*(?:\*\*)?\s*[:.]?\s*\n?",
                      re.IGNORECASE)


def finish_text(text: str) -> str:
    """The reply without a heading the model added, cut before a repeated paragraph and after its last complete
    sentence."""
    text = _HEADING.sub("", text.strip(), count=1).strip()
    paragraphs = [p.strip() for p in text.split("\n\n")]
    repeat = next((i for i, p in enumerate(paragraphs) if p and p in paragraphs[:i]), None)
    if repeat is not None:  # a small model that repeats a paragraph has nothing more to say
        text = "\n\n".join(paragraphs[:repeat]).strip()
    if text and text[-1] not in ".!?)]\"'" and re.search(r"[.!?]\s", text):
        ends = [m.end() for m in re.finditer(r"[.!?](?:\s*\[[\d,\s–-]+\])?(?=\s)", text)]
        if ends:
            text = text[:ends[-1]]
    return text.strip()


def generate(copilot: Copilot, system: str, user: str, *, on_text: OnText | None = None,
             max_tokens: int = DRAFT_MAX_TOKENS, shots: Sequence[tuple[str, str]] = ()) -> tuple[str, int]:
    """One capped, streamed call; stops when the model starts repeating itself. Returns (text, LLM calls).

    ``shots`` are example (user, assistant) turns shown first: a small model copies a shown format far better
    than it follows a described one.
    """
    messages = [{"role": "system", "content": system}]
    for example, reply in shots:
        messages += [{"role": "user", "content": example}, {"role": "assistant", "content": reply}]
    messages.append({"role": "user", "content": user})
    text = ""
    for text in stream_until_repeating(copilot.llm, messages, max_tokens=max_tokens,
                                       temperature=copilot.settings.temperature):
        if on_text is not None:
            on_text(text)
    return finish_text(text), 1
