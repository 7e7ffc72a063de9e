"""Pull one JSON object out of an LLM reply, however the model wrapped it.

Small models rarely return clean JSON: they add prose around it, fence it in Markdown, use single quotes,
Python literals (``True``/``None``), trailing commas, or stop before the closing brace. Every caller that
asks a model for structure goes through :func:`extract_json_object`, so those repairs live in one place.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


class NoJSONObject(ValueError):
    """The reply holds nothing that can be read as a JSON object."""


def _balanced_objects(text: str) -> list[str]:
    """Every top-level ``{...}`` span in ``text``, honouring strings; an unclosed last one is closed."""
    spans: list[str] = []
    depth = 0
    start = -1
    quote: str | None = None
    escaped = False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
            continue
        if ch in "\"'" and depth > 0:
            quote = ch
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append(text[start : i + 1])
    if depth > 0 and start >= 0:
        tail = text[start:]
        if quote:
            tail += quote
        spans.append(tail + "}" * depth)
    return spans


def _parse_candidate(candidate: str) -> dict[str, Any] | None:
    """Try strict JSON, then JSON without trailing commas, then a Python literal."""
    attempts = [candidate, _TRAILING_COMMA.sub(r"\1", candidate)]
    for attempt in attempts:
        try:
            value = json.loads(attempt)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    pythonish = _TRAILING_COMMA.sub(r"\1", candidate)
    pythonish = re.sub(r"\btrue\b", "True", pythonish)
    pythonish = re.sub(r"\bfalse\b", "False", pythonish)
    pythonish = re.sub(r"\bnull\b", "None", pythonish)
    try:
        value = ast.literal_eval(pythonish)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def extract_json_object(text: str) -> dict[str, Any]:
    """The first JSON object found in ``text``; raises :class:`NoJSONObject` when there is none."""
    if not text or not text.strip():
        raise NoJSONObject("the reply is empty")
    sources = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for source in sources:
        for candidate in _balanced_objects(source):
            parsed = _parse_candidate(candidate)
            if parsed is not None:
                return parsed
    raise NoJSONObject(f"no JSON object in the reply: {text[:120]!r}")
