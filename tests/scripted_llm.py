"""A scripted test double of the LLM interface (tests only): replies are given in advance."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator

from copilot.llm.base import ChatModel, GenerationOptions, Message
from copilot.llm.scheduler import LLMScheduler

Reply = str | Callable[[list[Message]], str]


def thought_reply(thought: str, answered: str = "yes") -> str:
    """The reply a thought call expects (``copilot.thoughts.parse_thought_reply`` reads it)."""
    return f"thought: {thought}\nanswered: {answered}\n"


class ScriptedLLM(ChatModel):
    """Answers calls in order from ``replies``; thought calls (recognised by their few-shot prompt) from
    ``thoughts``, each a (reply text, probability of "yes" or None) pair. A recheck (an answer written again at
    :data:`copilot.answering.RECHECK_TEMPERATURE`) gets the next of ``rechecks`` when given, else the last answer
    again, as a model that read its answer in the sources would; rechecks (the last call's messages again, at that
    temperature) are listed in ``rechecked``, not in ``calls``. ``probabilities``: the probability the model gives
    some words of its answers (the others 0.99), written to a :class:`~copilot.llm.base.TokenTrace` where a call
    asks for one, as the embedded model does; without it, none is written, as by a remote model."""

    name = "scripted"

    def __init__(self, answers: list[Reply] | None = None, thoughts: list[tuple[str, float | None]] | None = None,
                 rechecks: list[str] | None = None, probabilities: dict[str, float] | None = None) -> None:
        super().__init__()
        self.probabilities = probabilities
        self.answers = list(answers or [])
        self.thoughts = list(thoughts or [])
        self.rechecks = list(rechecks or [])
        self.calls: list[list[Message]] = []
        self.never_opens: list[tuple[str, ...]] = []  # what each answer and recheck kept from opening with
        self.rechecked: list[list[Message]] = []
        self.prepared: list[tuple[str, ...]] = []  # what the engine had the model read ahead (prepare)
        self.last_answer = ""
        self.gate: threading.Event | None = None  # when set, thought calls wait for it
        # Thoughts start as soon as the model is free (the product waits 1 s after an answer; its own tests
        # are in test_scheduler.py), so tests need not wait for them.
        self.scheduler = LLMScheduler(background_idle_s=0.0)

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def prepare(self, *, never_opens: tuple[str, ...] = ()) -> None:
        self.prepared.append(never_opens)

    def _stream(self, messages: list[Message], options: GenerationOptions) -> Iterator[str]:
        from copilot.answering import RECHECK_TEMPERATURE

        if options.probe is None:
            self.never_opens.append(options.never_opens)
        if options.probe is None and options.temperature == RECHECK_TEMPERATURE and self.calls \
                and messages == self.calls[-1]:
            self.rechecked.append(messages)
            reply = self.rechecks.pop(0) if self.rechecks else self.last_answer
            for word in reply.split(" "):
                yield word + " "
            return
        self.calls.append(messages)
        if options.probe is not None:
            if self.gate is not None:
                self.gate.wait(timeout=30)
            reply, p_yes = self.thoughts.pop(0)
            if p_yes is not None:
                options.probe.probabilities = {"yes": p_yes, "no": 1 - p_yes}
        else:
            reply = self.answers.pop(0) if self.answers else "The sources do not say."
            reply = reply(messages) if callable(reply) else reply
            self.last_answer = reply
        for word in reply.split(" "):
            if options.trace is not None and self.probabilities is not None and options.probe is None:
                options.trace.add(word + " ", math.log(self.probabilities.get(word.strip(".,"), 0.99)))
            yield word + " "
