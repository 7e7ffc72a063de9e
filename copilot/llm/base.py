"""The one small interface every LLM backend implements.

Messages go in (OpenAI-style ``{"role", "content"}`` dicts); text comes out whole or as a stream of pieces.
Backends stay thin: they translate this call into their library's call and translate that library's
failures into :class:`LLMError`, whose message tells a user what to change. Every call waits for a slot of
the model's :class:`~copilot.llm.scheduler.LLMScheduler` (answers before background work, users in turn).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TypedDict, Unpack

from copilot.config import Settings
from copilot.errors import ComponentError
from copilot.llm.scheduler import LLMScheduler, Priority, Ticket, current_caller

Message = dict[str, str]


class LLMError(ComponentError):
    """An LLM backend could not answer; the message says what a user can do about it."""


@dataclass
class ChoiceProbe:
    """Asks a backend for the model's own probabilities of ``choices`` right after ``marker`` in its reply.

    A tiny model states confidences by copying numbers from its examples; the probability it gives "yes"
    after "answered:" is a far better signal and costs nothing extra: it is read during the same call.
    Backends that cannot read token probabilities leave ``probabilities`` as None.
    """

    marker: str
    choices: tuple[str, ...] = ("yes", "no")
    probabilities: dict[str, float] | None = None


@dataclass
class TokenTrace:
    """Asks a backend for the model's own probability of each token it writes, filled in during the same call.

    ``tokens`` holds ``(text, log-probability)`` pairs in the reply's order, the probability being the model's
    before sampling (temperature and penalties change which token is drawn, not how sure the model was). A
    number the model read in its sources it writes with confidence; a number it guesses it writes with a low
    probability. Backends that cannot read token probabilities leave ``tokens`` empty. ``most``: the tokens
    worth reading; past them the backend stops (``full`` says it did), as a caller that reads short replies only
    need not pay for a long one's.
    """

    tokens: list[tuple[str, float]] = field(default_factory=list)
    most: int | None = None
    full: bool = False

    def add(self, text: str, log_probability: float) -> None:
        """One written token, unless ``most`` are held already (then the trace is ``full``)."""
        if self.most is not None and len(self.tokens) >= self.most:
            self.full = True
            return
        self.tokens.append((text, log_probability))

    @property
    def text(self) -> str:
        return "".join(text for text, _ in self.tokens)


@dataclass
class GenerationOptions:
    """Per-call knobs shared by all backends."""

    max_tokens: int = 384
    temperature: float = 0.2
    stop: list[str] | None = None
    probe: ChoiceProbe | None = None
    grammar: str | None = None  # GBNF; backends that cannot constrain decoding ignore it
    trace: TokenTrace | None = None
    # Texts the reply may not open with (an answer's bare "[1]"); backends that cannot constrain decoding ignore it.
    never_opens: tuple[str, ...] = ()


class CallOptions(TypedDict, total=False):
    """The keyword options of :meth:`ChatModel.stream`, which :meth:`ChatModel.chat` passes on as they are."""

    max_tokens: int
    temperature: float
    stop: list[str] | None
    probe: ChoiceProbe | None
    grammar: str | None
    trace: TokenTrace | None
    never_opens: tuple[str, ...]
    user: str | None
    priority: Priority | None
    ticket: Ticket | None


@dataclass
class UsageCounter:
    """Calls and tokens spent, so tasks and evaluations can report their cost."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ChatModel(ABC):
    """A chat LLM: ``stream`` is the primitive, ``chat`` collects it."""

    name: str = "llm"
    licence: str | None = None  # the model's terms, where the backend knows them (the embedded models do)

    def __init__(self, slots: int = 1) -> None:
        self.usage = UsageCounter()
        self._usage_lock = threading.Lock()
        self.scheduler = LLMScheduler(slots)

    @classmethod
    def from_settings(cls, settings: Settings) -> ChatModel:
        """The model ``settings`` configure; every backend registered in :data:`copilot.llm.BACKENDS` has one."""
        raise NotImplementedError(f"{cls.__name__} is not built from settings.")

    @abstractmethod
    def _stream(self, messages: list[Message], options: GenerationOptions) -> Iterator[str]:
        """Yield text pieces of the reply; raise :class:`LLMError` on failure."""

    @abstractmethod
    def count_tokens(self, text: str) -> int:
        """Tokens ``text`` takes in this model's context (an estimate for remote models)."""

    def prepare(self, *, never_opens: tuple[str, ...] = ()) -> None:  # noqa: B027 - most backends need nothing
        """Read ahead what later calls with these options need (llama.cpp: the tokens an opening rules out, a scan
        of its whole vocabulary), so that a user's first question does not wait for it."""

    def stream(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 384,
        temperature: float = 0.2,
        stop: list[str] | None = None,
        probe: ChoiceProbe | None = None,
        grammar: str | None = None,
        trace: TokenTrace | None = None,
        never_opens: tuple[str, ...] = (),
        user: str | None = None,
        priority: Priority | None = None,
        ticket: Ticket | None = None,
    ) -> Iterator[str]:
        """Stream the reply to ``messages`` piece by piece, counting the call and its tokens.

        The call first waits for a slot of ``self.scheduler`` as ``user`` at ``priority`` (default: what
        :func:`~copilot.llm.scheduler.scheduling` set here), unless the caller already holds ``ticket`` (it
        waited itself, showing its place in line); the slot is released when the stream ends or is closed.
        """
        options = GenerationOptions(max_tokens=max_tokens, temperature=temperature, stop=stop, probe=probe,
                                    grammar=grammar, trace=trace, never_opens=never_opens)
        if ticket is None:
            default_user, default_priority = current_caller()
            ticket = self.scheduler.enqueue(default_user if user is None else user,
                                            default_priority if priority is None else priority)
        pieces: list[str] = []
        counted = False
        try:
            ticket.wait()
            prompt_tokens = sum(self.count_tokens(m.get("content", "")) for m in messages)
            counted = True
            for piece in self._stream(messages, options):
                if piece:
                    pieces.append(piece)
                    yield piece
        finally:
            self.scheduler.release(ticket)
            if counted:
                with self._usage_lock:
                    self.usage.calls += 1
                    self.usage.prompt_tokens += prompt_tokens
                    self.usage.completion_tokens += self.count_tokens("".join(pieces)) if pieces else 0

    def chat(self, messages: list[Message], **options: Unpack[CallOptions]) -> str:
        """The whole reply to ``messages``, with :meth:`stream`'s options (``probe`` and ``trace``, when given, are
        filled in where the backend can)."""
        return "".join(self.stream(messages, **options))

    def describe(self) -> str:
        """A short human-readable name for logs and the doctor."""
        return self.name
