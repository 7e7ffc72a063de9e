"""Answering: a question answered from paper chunks and thoughts, then the thought memory grown in the background.

``ask_stream`` retrieves (one query embedding, both indices) and packs the context, yields the sources at once
(they are known long before the model is free: retrieval takes tens of milliseconds, an answer seconds),
waits for the model in line (yielding its place while it waits), streams an answer with numbered citations
and records the query. Thought writing is queued to a background worker whose LLM calls run at background
priority, so they never go before anyone's answer; ``flush`` waits for the queue (tests, the CLI).

The job of writing a thought lives in the database, not only in the worker's queue: the recorded query, 'pending'
with its sources and share flag, is the job, claimed by the worker of the process that answered (renewed while
it lives). The worker wakes on its own submissions at once; the web app's worker also claims, at start and every
``COPILOT_THOUGHT_POLL_S``, the jobs whose claim ran out (``COPILOT_THOUGHT_LEASE_S``: their replica died after
answering), so a thought is written even when the process that answered is gone, and written once.
"""

from __future__ import annotations

import logging
import os
import queue
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from copilot import grounding, prompts
from copilot.config import Settings
from copilot.embeddings import Embedder
from copilot.followups import FollowUp
from copilot.limits import check_question
from copilot.llm import ChatModel, Priority, Ticket, scheduling
from copilot.retrieval import pack_context, retrieval_options, retrieve_mixture
from copilot.storage import Store
from copilot.thoughts import ThoughtMemory, ThoughtOutcome, ThoughtTaken
from copilot.types import AnswerSources, Grounding, QueuePosition, RetrievedItem, ThoughtJob

log = logging.getLogger(__name__)

DEFAULT_USER = "local"
QUEUE_POLL_S = 1.0  # how often a waiting answer re-reads its place in line


@dataclass
class AskResult:
    """One answered question: what the user saw, what it was built from, and what it cost."""

    query_id: int
    question: str
    answer: str
    sources: list[RetrievedItem]
    timings: dict[str, float] = field(default_factory=dict)
    thought: ThoughtOutcome | None = None  # None while the background worker has not written it
    grounding: Grounding | None = None  # each sentence's support in the sources
    conversation_id: int | None = None  # the kept conversation this turn belongs to (the chat's)
    searched_for: str | None = None  # a follow-up's self-contained retrieval query, when it was one

    def as_dict(self) -> dict[str, Any]:
        checked = self.grounding.as_dict() if self.grounding else {"grounding": [], "grounded": False}
        return {
            "query_id": self.query_id,
            "answer": self.answer,
            "sources": [{"n": n, "kind": s.kind, "id": s.id, "paper_id": s.paper_id, "section": s.section,
                         "page_start": s.page_start, "page_end": s.page_end, "depth": s.depth,
                         "confidence": s.confidence, "score": round(s.score, 4), "recalled_by": s.recalled_by,
                         "label": s.label}
                        for n, s in enumerate(self.sources, start=1)],
            "thought": self.thought.as_dict() if self.thought else {"outcome": "pending"},
            "llm_calls": 1 + (self.thought.llm_calls if self.thought else 0),  # the answer, then the thought
            "timings": self.timings,
            **checked,
        }


def source_text(item: RetrievedItem) -> str:
    """How one source is shown to the LLM: where it comes from, then its text."""
    if item.kind == "thought":
        return f"(earlier finding) {item.text}"
    return f"({item.paper_title or item.paper_id}, {item.section}) {item.text}"


def trim_repetition(text: str) -> str | None:
    """``text`` cut before its first repeated paragraph or sentence, or None when nothing repeats yet."""
    paragraphs = [p.strip() for p in text.split("\n\n")]
    seen: set[str] = set()
    for i, paragraph in enumerate(paragraphs[:-1]):  # the last one may still be growing
        if paragraph and paragraph in seen:
            return "\n\n".join(paragraphs[:i]).strip()
        seen.add(paragraph)
    sentences = [s.strip() for s in text.replace("\n", " ").split(". ")]
    complete = sentences[:-1]
    if len(complete) >= 2 and len(complete[-1]) > 20 and complete[-1] in complete[:-1]:
        cut = text.rfind(complete[-1])
        return text[:cut].strip()
    return None


def stream_until_repeating(llm: ChatModel, messages: list[dict[str, str]], *, max_tokens: int,
                           temperature: float, ticket: Ticket | None = None) -> Iterator[str]:
    """The growing text of one streamed call, cut (and the stream closed) where the model starts repeating
    itself: a small model that loops has nothing more to say. ``ticket``: the slot the caller waited for."""
    text = ""
    stream = llm.stream(messages, max_tokens=max_tokens, temperature=temperature, ticket=ticket)
    for piece in stream:
        text += piece
        trimmed = trim_repetition(text)
        if trimmed is not None:
            stream.close()
            yield trimmed
            return
        yield text


class ThoughtWorker:
    """One background thread that writes thoughts in order, from jobs kept in the database (the answered
    queries). Their LLM calls run at background priority (``Answerer._write_thought``), so a thought never goes
    before a waiting answer.

    ``submit`` queues a job this process answered (already claimed by ``name``) and wakes the thread. While it
    holds jobs, a second thread renews their claims every third of the lease. With ``adopt``, the thread also
    claims, at start and every ``poll_s``, the oldest job nobody holds (a dead replica's), one between each of
    its own.
    """

    def __init__(self, store: Store, write: Callable[[ThoughtJob], None], *, lease_s: float, poll_s: float,
                 adopt: bool = False, done: Callable[[int], None] = lambda query_id: None) -> None:
        self.store = store
        self._done = done  # told of every submitted job once it is over, written here or not
        self.name = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.adopt = adopt
        self._write = write
        self._queue: queue.Queue[int] = queue.Queue()
        self._held: set[int] = set()  # jobs claimed by this worker and not yet done
        self._held_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="thought-writer", daemon=True)
        self._thread.start()
        threading.Thread(target=self._renew, name="thought-lease", daemon=True).start()

    def submit(self, query_id: int) -> None:
        with self._held_lock:
            self._held.add(query_id)
        self._queue.put(query_id)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every submitted thought is written (or was taken over by another worker); False if
        ``timeout`` passed first."""
        if timeout is None:
            self._queue.join()
            return True
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def _run(self) -> None:
        next_sweep = time.monotonic()
        while True:
            if self.adopt and time.monotonic() >= next_sweep:
                adopted = self._guarded(lambda: self.store.queries.claim_next(self.name, self.lease_s))
                if adopted is not None:
                    self._do(adopted)
                # Another left-over job may wait right behind this one: look again after the next own job.
                next_sweep = time.monotonic() + (0.0 if adopted is not None else self.poll_s)
            try:
                wait = max(0.0, next_sweep - time.monotonic()) if self.adopt else None
                query_id = self._queue.get(timeout=wait) if wait != 0.0 else self._queue.get_nowait()
            except queue.Empty:
                continue
            try:
                job = self._guarded(lambda: self.store.queries.claim(query_id, self.name, self.lease_s))
                if job is not None:  # else written meanwhile, or taken over by another worker
                    self._do(job)
            finally:
                with self._held_lock:
                    self._held.discard(query_id)
                self._done(query_id)
                self._queue.task_done()

    def _do(self, job: ThoughtJob) -> None:
        with self._held_lock:
            self._held.add(job.query_id)
        try:
            self._write(job)
        except ThoughtTaken:
            pass  # another worker wrote it first: nothing was stored twice
        except Exception as exc:  # noqa: BLE001 - a failed thought must not stop the worker
            log.exception("thought writing failed")
            # Recorded as dropped, so the job is not retried for ever; if even that fails, the claim runs out and
            # the job is claimed again later.
            self._guarded(lambda: self.store.queries.record_outcome(
                job.query_id, thought_id=None, outcome="dropped", reason=f"error: {exc}"[:300],
                timings=job.timings, llm_calls=1))
        finally:
            with self._held_lock:
                self._held.discard(job.query_id)

    def _renew(self) -> None:
        while True:
            time.sleep(self.lease_s / 3)
            with self._held_lock:
                held = sorted(self._held)
            if held:
                self._guarded(lambda: self.store.queries.renew(held, self.name))

    @staticmethod
    def _guarded(step: Callable[[], Any]) -> Any:  # noqa: ANN401 - what ``step`` returns
        """``step``, or None when the store failed (logged; the job stays pending and is claimed again later)."""
        try:
            return step()
        except Exception as exc:  # noqa: BLE001 - a database that is away now: try again later
            log.warning("a thought job could not be read or recorded: %s", exc)
            return None


class Answerer:
    """Questions in, cited answers out, thoughts remembered (the pipeline under :class:`copilot.engine.Copilot`)."""

    def __init__(self, settings: Settings, store: Store, embedder: Embedder, llm: ChatModel, *,
                 adopt_jobs: bool = False) -> None:
        """``adopt_jobs``: the background worker also writes the thoughts other processes answered and left
        (a replica of the web app; a command that asks one question leaves them to it)."""
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self.llm = llm
        self.memory = ThoughtMemory(store, embedder, llm, settings)
        self._results: dict[int, tuple[AskResult, float]] = {}  # this process's answers whose thought is pending
        self.worker = ThoughtWorker(store, self._write_thought, lease_s=settings.thought_lease_s,
                                    poll_s=settings.thought_poll_s, adopt=adopt_jobs,
                                    done=lambda query_id: self._results.pop(query_id, None))
        self.association = None
        if settings.association:
            from copilot.association import AssociativeScorer, load_adapter

            self.association = AssociativeScorer(embedder, load_adapter(settings.association_adapter or None,
                                                                        getattr(embedder, "model_path", None)))

    def flush(self, timeout: float | None = None) -> bool:
        return self.worker.flush(timeout)

    def retrieve(self, question: str, *, user_id: str, use_thoughts: bool = True, include_public: bool = False,
                 paper_ids: list[str] | None = None, query_vector: np.ndarray | None = None,
                 follow_up: FollowUp | None = None) -> list[RetrievedItem]:
        """The packed sources for ``question``; ``query_vector`` is its embedding when the caller already has it.
        A ``follow_up`` (:mod:`copilot.followups`) is searched for by its self-contained query instead."""
        s = self.settings
        text = follow_up.query if follow_up is not None else question
        vector = self.embedder.encode_query(text) if follow_up is not None or query_vector is None else query_vector
        candidates = retrieve_mixture(self.store, vector, user_id=user_id, k=s.top_k, include_thoughts=use_thoughts,
                                      include_public=include_public, min_confidence=s.min_confidence,
                                      paper_ids=paper_ids,
                                      thought_query_vector=self.associative_vector(vector, text),
                                      query_text=text, **retrieval_options(s))
        return pack_context(candidates, k=s.top_k, budget_tokens=s.context_budget_tokens,
                            dedup_threshold=s.dedup_threshold, count_tokens=self.llm.count_tokens).items

    def ask_stream(self, question: str, *, user_id: str = DEFAULT_USER, use_thoughts: bool = True,
                   write_thought: bool = True, include_public: bool = False,
                   paper_ids: list[str] | None = None, share_thought: bool = False,
                   about_user: str | None = None, query_vector: np.ndarray | None = None,
                   follow_up: FollowUp | None = None, language: str | None = None
                   ) -> Iterator[AnswerSources | QueuePosition | str | AskResult]:
        """Yield the sources (:class:`AnswerSources`, as soon as retrieval is done), the answer's place in line
        while it waits for the model (:class:`QueuePosition`, when it changes), the answer text as it grows,
        then the final :class:`AskResult`.

        ``share_thought`` puts the new thought in the public pool; ``about_user`` (a persona, recalled
        memories) personalises the answer without touching retrieval; ``query_vector`` is the question's
        embedding when the caller has already computed it (the chat recalls memories with it first);
        ``follow_up``: how to search for a question that leans on the turns before it (see :meth:`retrieve`).
        ``language`` is the one the answer is asked in (:func:`copilot.prompts.in_language`): retrieval still
        embeds the question as it was asked (or, for a follow-up, as its self-contained query).
        """
        question = check_question(question, self.settings)
        t0 = time.perf_counter()
        items = self.retrieve(question, user_id=user_id, use_thoughts=use_thoughts, include_public=include_public,
                              paper_ids=paper_ids, query_vector=query_vector, follow_up=follow_up)
        t1 = time.perf_counter()
        yield AnswerSources(items, round(1000 * (t1 - t0), 1))
        # The fixed part first (system prompt, instructions), the question last: see prompts.answer_user.
        messages = [{"role": "system", "content": prompts.ANSWER_SYSTEM},
                    {"role": "user",
                     "content": prompts.answer_user(question, [source_text(i) for i in items], about_user,
                                                          language=language)}]
        answer = ""
        first_word = None
        ticket = self.llm.scheduler.enqueue(user_id, Priority.ANSWER)
        try:
            yield from self._wait_in_line(ticket)
            t_slot = time.perf_counter()
            for answer in stream_until_repeating(self.llm, messages, max_tokens=self.settings.max_answer_tokens,
                                                 temperature=self.settings.temperature, ticket=ticket):
                if first_word is None and answer.strip():
                    first_word = time.perf_counter()
                yield answer
        finally:
            self.llm.scheduler.release(ticket)  # also when the caller stops listening while in line
        answer = answer.strip()
        t2 = time.perf_counter()
        timings = {"retrieve_ms": round(1000 * (t1 - t0), 1), "answer_ms": round(1000 * (t2 - t1), 1),
                   "wait_ms": round(1000 * (t_slot - t1), 1),
                   "first_word_ms": round(1000 * ((first_word or t2) - t0), 1)}
        capped = self.llm.count_tokens(answer) >= self.settings.max_answer_tokens - 1
        try:
            checked: Grounding | None = grounding.check(answer, items, self.embedder,
                                                        self.settings.grounding_threshold, capped=capped)
        except Exception:  # noqa: BLE001 - the answer was streamed already: keep it, unchecked
            log.exception("the grounding check of an answer failed")
            checked = None
        timings["grounding_ms"] = round(1000 * (time.perf_counter() - t2), 1)
        query_id = self._record(user_id, question, answer, items, timings, share_thought)
        result = AskResult(query_id, question, answer, items, timings, grounding=checked,
                           searched_for=follow_up.query if follow_up else None)
        if write_thought:
            self._results[query_id] = (result, t2)
            self.worker.submit(query_id)
        else:
            result.thought = ThoughtOutcome("dropped", "disabled: thoughts are off for this question")
            result.timings["thought_ms"] = 0.0
            self._record_outcome(result)
        yield result

    def _wait_in_line(self, ticket: Ticket) -> Iterator[QueuePosition]:
        """Until ``ticket`` is granted, its place in line: at once, then whenever it changes."""
        scheduler = self.llm.scheduler
        shown: tuple[int, int] | None = None
        while not ticket.granted.is_set():
            position = scheduler.position(ticket)
            if (position.ahead, round(position.estimate_s)) != shown and not ticket.granted.is_set():
                shown = (position.ahead, round(position.estimate_s))
                yield position
            ticket.wait(QUEUE_POLL_S)

    def ask(self, question: str, **kwargs) -> AskResult:  # noqa: ANN003 - see ask_stream
        result = None
        for update in self.ask_stream(question, **kwargs):
            result = update
        assert isinstance(result, AskResult)
        return result

    def _record(self, user_id: str, question: str, answer: str, items: list[RetrievedItem],
                timings: dict[str, float], share_thought: bool = False) -> int:
        """The answered query, which is also the job of writing its thought (claimed by this worker)."""
        retrieved = [{"kind": i.kind, "id": i.id, "depth": i.depth, "confidence": i.confidence,
                      "score": round(i.score, 4), "paper_id": i.paper_id} for i in items]
        return self.store.queries.add(user_id, question, answer, retrieved, timings, public=share_thought,
                                      claim=self.worker.name)

    def _write_thought(self, job: ThoughtJob) -> None:
        """Write the thought of one answered query, from its job (this process's answer, or one a replica that
        died left); the outcome is recorded in the transaction that stores the thought."""
        mine = self._results.pop(job.query_id, None)
        start = time.perf_counter()
        items = [RetrievedItem(r["kind"], int(r["id"]), "", float(r.get("score") or 0.0),
                               depth=int(r.get("depth") or 0), confidence=r.get("confidence"),
                               paper_id=r.get("paper_id")) for r in job.retrieved]
        timings = dict(job.timings)

        def finish(outcome: ThoughtOutcome) -> bool:
            end = time.perf_counter()
            timings["thought_ms"] = round(1000 * (end - start), 1)
            if mine is not None:  # queued behind other thoughts and answers, then written
                timings["thought_lag_ms"] = round(1000 * (end - mine[1]), 1)
            elif job.created_at:
                timings["thought_lag_ms"] = round(1000 * (time.time() - datetime.fromisoformat(job.created_at)
                                                          .timestamp()), 1)
            return self.store.queries.record_outcome(job.query_id, thought_id=outcome.thought_id,
                                                     outcome=outcome.outcome, reason=outcome.reason, timings=timings,
                                                     llm_calls=1 + outcome.llm_calls)

        with scheduling(job.user_id, Priority.BACKGROUND):  # its LLM calls go after every waiting answer
            outcome = self.memory.write(user_id=job.user_id, question=job.question, answer=job.answer, items=items,
                                        public=job.public, finish=finish,
                                        grounding=mine[0].grounding if mine is not None else None)
        if mine is not None:
            mine[0].timings.update(timings)
            mine[0].thought = outcome

    def _record_outcome(self, result: AskResult) -> None:
        """Complete the query's record with its thought outcome, timings and LLM calls."""
        outcome = result.thought
        assert outcome is not None
        self.store.queries.record_outcome(result.query_id, thought_id=outcome.thought_id, outcome=outcome.outcome,
                                          reason=outcome.reason, timings=result.timings,
                                          llm_calls=result.as_dict()["llm_calls"])

    def associative_vector(self, plain: np.ndarray, text: str) -> np.ndarray | None:
        """The combined (plain + learned association) query vector of ``text`` (whose plain vector is ``plain``),
        or None when association is off. The adapted encoder reads ``text`` once per question: thoughts and
        memories of the same turn share that pass."""
        if self.association is None:
            return None
        return self.association.query_vector(text, plain)
