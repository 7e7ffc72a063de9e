"""Every error a user can see, under one root, so the web app and the command line catch one type.

- :class:`CopilotError` is the root: its message is one line a person can act on; the traceback stays in the log.
- :class:`UserError` is a request the instance refuses (bad input, over a limit, nothing to work from). It is also a
  ``ValueError``, so code that validates input keeps reading naturally.
- The storage, embedding and LLM layers raise their own subclasses (``StorageError``, ``EmbeddingError``,
  ``LLMError``) for a component that cannot work.

``ingest`` is a library of its own that imports nothing from here; its errors have their own root,
:class:`ingest.errors.IngestError`. :data:`SHOWN` names the two roots the shells show as they are.
"""

from __future__ import annotations

import re
import unicodedata

from ingest.errors import IngestError


class CopilotError(Exception):
    """Something this instance cannot do; the message says why, in one line."""


class UserError(CopilotError, ValueError):
    """A request refused as asked: the message names what is wrong and what to do instead."""


class NotFound(UserError, LookupError):
    """The user asked for a record that does not exist, or that is not theirs."""


class ComponentError(CopilotError, RuntimeError):
    """A part of the stack (database, embedder, LLM) cannot work; the message says what to fix."""


SHOWN: tuple[type[Exception], ...] = (CopilotError, IngestError)


# A file path: absolute (two or more parts), a file URL, or from the home or working directory ("~/x", "./data/x"),
# not part of a web URL: the web page shows its last part.
_SERVER_PATH = re.compile(r"(?:file://|(?<![\w:/.~-])(?:~|\.{1,2})?)(?:/[\w.@+~-]+)+/([\w.@+~-]+)")


def without_paths(text: str) -> str:
    """``text`` with every absolute file path replaced by its file name ("/tmp/gradio/2f81…/paper.pdf does not
    exist" -> "paper.pdf does not exist"): a web page never shows where the server keeps its files."""
    return _SERVER_PATH.sub(lambda m: m.group(1), text)


def plural(n: int, noun: str) -> str:
    """"1 paper", "2 papers"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def one_line(exc: BaseException) -> str:
    """The message a shell shows for ``exc``: its text, or its class name when it has none."""
    return str(exc) or exc.__class__.__name__


# Terminal escape sequences: CSI (ESC [ ... final byte) and OSC (ESC ] ... BEL or ESC \), removed whole.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x9b[0-?]*[ -/]*[@-~]|\x1b[@-~]")


def printable(text: str | None) -> str:
    """``text`` without terminal escape sequences or other control characters (newlines and tabs stay)."""
    return "".join(c for c in _ESCAPES.sub("", text or "") if c in "\n\t" or unicodedata.category(c)[0] != "C")
