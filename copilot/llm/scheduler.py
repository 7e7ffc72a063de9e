"""Who uses the model next: answers before background work, users in turn, one LLM call at a time per slot.

With one embedded model on two cores, every call waits for the one before it. Five users asking at once saw
answers after 85 s at the median and 149 s at p95, partly because thought writing (background work the user
never waits for) held the model between their answers, and one user's questions could run back to back
while others waited. The scheduler grants the model's slots per LLM call:

- by **priority** first: an answer, a draft or an idea (``Priority.ANSWER``) always goes before background
  thought writing (``Priority.BACKGROUND``); a background call already running is never interrupted, so an
  answer waits at most for the rest of that one call (a thought of several calls lets answers in between);
- then **round-robin over users** within a priority: users take turns in the order they joined the line, and a
  user with more calls waiting goes to the back after each turn, so one user's ten questions take turns with
  everybody else's;
- background work also waits until no answer has ended for ``background_idle_s`` (1 s): a user who asks again
  right after an answer (a follow-up, a script, the benchmark) would otherwise find a thought call just started
  and wait for it.

A waiting caller can read its place (``position``): how many calls go before it, and an estimate of the wait
from a running average of call durations per priority. The embedded model has one slot; a remote endpoint
that serves requests in parallel may have more (``COPILOT_LLM_SLOTS``).

Which user and priority a call runs for comes from the call (``ChatModel.stream(..., user=, priority=)``), or
else from :func:`scheduling`, a context that a thread (the thought writer) or one request handler sets once.
"""

from __future__ import annotations

import contextvars
import itertools
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import IntEnum

from copilot.types import QueuePosition


class Priority(IntEnum):
    """Lower goes first."""

    ANSWER = 0  # a user is waiting for it: answers, drafts, ideas, personas
    BACKGROUND = 1  # nobody waits for it: thought writing


ANONYMOUS = ""
# Before any call has finished, a wait is estimated from these (seconds per call; the embedded model's answer
# of about 1,000 context tokens and 200 words, and its thought call).
INITIAL_ESTIMATE_S = {Priority.ANSWER: 10.0, Priority.BACKGROUND: 4.0}
AVERAGE_WEIGHT = 0.2  # weight of the newest call in the running average of durations
BACKGROUND_IDLE_S = 1.0  # background work starts only once no answer has ended for this long

_current: contextvars.ContextVar[tuple[str, Priority]] = contextvars.ContextVar(
    "llm_caller", default=(ANONYMOUS, Priority.ANSWER))


@contextmanager
def scheduling(user: str = ANONYMOUS, priority: Priority = Priority.ANSWER) -> Iterator[None]:
    """LLM calls made in this context (this thread, this handler) run for ``user`` at ``priority``."""
    token = _current.set((user, Priority(priority)))
    try:
        yield
    finally:
        _current.reset(token)


def current_caller() -> tuple[str, Priority]:
    """(user, priority) of LLM calls made here, as :func:`scheduling` set them (default: anonymous answer)."""
    return _current.get()


@dataclass(eq=False)
class Ticket:
    """One LLM call's place in line; ``granted`` is set when it may use the model."""

    user: str
    priority: Priority
    seq: int
    enqueued_at: float
    granted: threading.Event = field(default_factory=threading.Event)
    started_at: float | None = None
    done: bool = False
    behind_background: bool = False  # its wait overlapped a running background call

    def wait(self, timeout: float | None = None) -> bool:
        """Block until granted (True) or ``timeout`` seconds pass (False)."""
        return self.granted.wait(timeout)


@dataclass
class SchedulerStats:
    """What the scheduler has done since it started (or since ``reset_stats``)."""

    granted: dict[str, int] = field(default_factory=lambda: {p.name.lower(): 0 for p in Priority})
    answers_waited_behind_background: int = 0
    max_answer_wait_s: float = 0.0


class LLMScheduler:
    """Grants ``slots`` concurrent LLM calls by (priority, round-robin over users). Thread-safe.

    ``clock`` is injectable so tests can run the estimates deterministically.
    """

    def __init__(self, slots: int = 1, clock: Callable[[], float] = time.monotonic,
                 background_idle_s: float = BACKGROUND_IDLE_S) -> None:
        if slots < 1:
            raise ValueError("an LLM needs at least one slot")
        self.slots = slots
        self.background_idle_s = background_idle_s
        self._clock = clock
        self._last_answer_end = float("-inf")
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._seq = itertools.count()
        # Per priority: users in turn order (least recently served first), each with their waiting calls.
        self._waiting: dict[Priority, OrderedDict[str, deque[Ticket]]] = {p: OrderedDict() for p in Priority}
        self._running: list[Ticket] = []
        self._average_s = dict(INITIAL_ESTIMATE_S)
        self._stats = SchedulerStats()

    # ----- the one way in and out --------------------------------------------------------------------------

    def enqueue(self, user: str = ANONYMOUS, priority: Priority = Priority.ANSWER) -> Ticket:
        """Join the line (granted at once when a slot is free and nobody is before it); never blocks."""
        with self._lock:
            ticket = Ticket(user, Priority(priority), next(self._seq), self._clock())
            self._waiting[ticket.priority].setdefault(user, deque()).append(ticket)
            self._grant()
            if not ticket.granted.is_set() and ticket.priority == Priority.ANSWER and self._background_running():
                ticket.behind_background = True
            return ticket

    def release(self, ticket: Ticket) -> None:
        """The call is over (or given up while waiting); its slot goes to the next in line. Idempotent."""
        with self._lock:
            if ticket.done:
                return
            ticket.done = True
            if ticket in self._running:
                self._running.remove(ticket)
                assert ticket.started_at is not None
                if ticket.priority == Priority.ANSWER:
                    self._last_answer_end = self._clock()
                took = self._clock() - ticket.started_at
                old = self._average_s[ticket.priority]
                self._average_s[ticket.priority] = (1 - AVERAGE_WEIGHT) * old + AVERAGE_WEIGHT * took
            else:
                queue = self._waiting[ticket.priority].get(ticket.user)
                if queue is not None and ticket in queue:
                    queue.remove(ticket)
                    if not queue:
                        del self._waiting[ticket.priority][ticket.user]
            self._grant()

    def grant_due(self) -> None:
        """Grant what has become due with time alone (background work after the idle wait); a timer calls it."""
        with self._lock:
            self._timer = None
            self._grant()

    @contextmanager
    def slot(self, user: str = ANONYMOUS, priority: Priority = Priority.ANSWER) -> Iterator[Ticket]:
        """Hold a slot for the body of the ``with``: waits in line first."""
        ticket = self.enqueue(user, priority)
        try:
            ticket.wait()
            yield ticket
        finally:
            self.release(ticket)

    # ----- what a waiting caller sees ------------------------------------------------------------------------

    def position(self, ticket: Ticket) -> QueuePosition:
        """How many calls will be served before ``ticket`` (running ones included) and about how long that takes."""
        with self._lock:
            if ticket.granted.is_set() or ticket.done:
                return QueuePosition(ahead=0, running=0, estimate_s=0.0)
            order = self._order()
            before = order[:order.index(ticket)]
            now = self._clock()
            running_left = sum(max(0.0, self._average_s[t.priority] - (now - (t.started_at or now)))
                               for t in self._running)
            queued = sum(self._average_s[t.priority] for t in before)
            # With several slots the work ahead is shared between them.
            estimate = (running_left + queued) / self.slots
            return QueuePosition(ahead=len(before), running=len(self._running), estimate_s=round(estimate, 1))

    def waiting(self, priority: Priority = Priority.ANSWER) -> int:
        """How many calls at ``priority`` wait for a slot now (what a bounded line is measured by)."""
        with self._lock:
            return sum(len(queue) for queue in self._waiting[Priority(priority)].values())

    def average_s(self, priority: Priority) -> float:
        """The running average of call durations at ``priority`` (the initial estimate before any call)."""
        with self._lock:
            return self._average_s[Priority(priority)]

    def stats(self) -> SchedulerStats:
        with self._lock:
            return SchedulerStats(dict(self._stats.granted), self._stats.answers_waited_behind_background,
                                  self._stats.max_answer_wait_s)

    def reset_stats(self) -> None:
        with self._lock:
            self._stats = SchedulerStats()

    # ----- inside the lock -------------------------------------------------------------------------------------

    def _holding_background(self) -> bool:
        """True while an answer ended too recently for background work to start; arms a timer to look again."""
        wait = self._last_answer_end + self.background_idle_s - self._clock()
        if wait <= 0:
            return False
        if self._timer is None:
            self._timer = threading.Timer(wait, self.grant_due)
            self._timer.daemon = True
            self._timer.start()
        return True

    def _background_running(self) -> bool:
        return any(t.priority == Priority.BACKGROUND for t in self._running)

    def _order(self) -> list[Ticket]:
        """Every waiting ticket in the order it would be granted if nobody else came."""
        order: list[Ticket] = []
        for priority in Priority:
            queues = [list(q) for q in self._waiting[priority].values()]
            # Round-robin: each user's first call in turn order, then each one's second, and so on.
            for round_ in itertools.zip_longest(*queues):
                order += [t for t in round_ if t is not None]
        return order

    def _grant(self) -> None:
        while len(self._running) < self.slots:
            ticket = self._next()
            if ticket is None:
                return
            ticket.started_at = self._clock()
            self._running.append(ticket)
            self._stats.granted[ticket.priority.name.lower()] += 1
            if ticket.priority == Priority.ANSWER:
                self._stats.answers_waited_behind_background += ticket.behind_background
                self._stats.max_answer_wait_s = max(self._stats.max_answer_wait_s,
                                                    ticket.started_at - ticket.enqueued_at)
            else:
                for waiting in self._waiting[Priority.ANSWER].values():  # none, unless slots are shared
                    for t in waiting:
                        t.behind_background = True
            ticket.granted.set()

    def _next(self) -> Ticket | None:
        for priority in Priority:
            users = self._waiting[priority]
            if users and priority == Priority.BACKGROUND and self._holding_background():
                return None
            if users:
                user, queue = next(iter(users.items()))
                ticket = queue.popleft()
                if queue:
                    users.move_to_end(user)  # this user has had their turn
                else:
                    del users[user]
                return ticket
        return None
