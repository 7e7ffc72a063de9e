"""The LLM scheduler: answers before background work, users in turn, places in line, and the engine's use of it.

The scheduler's own tests are deterministic: tickets are granted (or not) synchronously inside ``enqueue`` and
``release``, and the clock is a fake one. The engine tests use the scripted test-double LLM, whose thought call
waits on a gate, so a thought call is "running" for exactly as long as a test wants.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest

from copilot.config import Settings
from copilot.engine import AskResult, Copilot
from copilot.llm import ChoiceProbe, LLMScheduler, Priority, scheduling
from copilot.storage import Store
from copilot.types import AnswerSources, QueuePosition
from tests.scripted_llm import ScriptedLLM

ANSWER, BACKGROUND = Priority.ANSWER, Priority.BACKGROUND


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def granted_order(scheduler: LLMScheduler, tickets: list, first) -> list:  # noqa: ANN001
    """Release ``first`` and then whatever is running, one call at a time; the order tickets were granted in."""
    order = []
    running = first
    while True:
        scheduler.release(running)
        now = [t for t in tickets if t.granted.is_set() and not t.done]
        if not now:
            return order
        assert len(now) == 1, "one slot: one call at a time"
        running = now[0]
        order.append(running)


def test_background_work_waits_while_answers_are_queued() -> None:
    scheduler = LLMScheduler(slots=1, background_idle_s=0.0)
    running = scheduler.enqueue("ada", ANSWER)
    assert running.granted.is_set(), "a free slot is granted at once"
    thought = scheduler.enqueue("ada", BACKGROUND)
    answers = [scheduler.enqueue("bob", ANSWER), scheduler.enqueue("cy", ANSWER)]
    assert not thought.granted.is_set() and not any(a.granted.is_set() for a in answers)
    order = granted_order(scheduler, [thought, *answers], running)
    assert order == [*answers, thought], "the thought queued first still goes after both answers"
    assert scheduler.stats().granted == {"answer": 3, "background": 1}
    assert scheduler.stats().answers_waited_behind_background == 0


def test_users_are_served_round_robin() -> None:
    scheduler = LLMScheduler(slots=1, background_idle_s=0.0)
    busy = scheduler.enqueue("zoe", ANSWER)
    ada = [scheduler.enqueue("ada", ANSWER) for _ in range(4)]  # one user asks four times first
    bob = scheduler.enqueue("bob", ANSWER)
    cy = scheduler.enqueue("cy", ANSWER)
    late = scheduler.enqueue("dan", ANSWER)
    order = granted_order(scheduler, [*ada, bob, cy, late], busy)
    assert order == [ada[0], bob, cy, late, ada[1], ada[2], ada[3]]


def test_a_user_with_more_questions_goes_to_the_back_after_each_turn() -> None:
    scheduler = LLMScheduler(slots=1, background_idle_s=0.0)
    busy = scheduler.enqueue("zoe", ANSWER)
    ada1, bob1 = scheduler.enqueue("ada", ANSWER), scheduler.enqueue("bob", ANSWER)
    ada2 = scheduler.enqueue("ada", ANSWER)
    scheduler.release(busy)
    assert ada1.granted.is_set()
    cy1 = scheduler.enqueue("cy", ANSWER)  # arrives while ada's first answer runs
    ada3 = scheduler.enqueue("ada", ANSWER)
    # After her turn ada queues behind bob; cy joins the rotation after her; ada's third waits a full round.
    assert granted_order(scheduler, [bob1, ada2, cy1, ada3], ada1) == [bob1, ada2, cy1, ada3]


def test_an_answer_waits_at_most_for_the_running_thought_call() -> None:
    scheduler = LLMScheduler(slots=1, background_idle_s=0.0)
    thought_call = scheduler.enqueue("ada", BACKGROUND)
    assert thought_call.granted.is_set(), "with nobody waiting, background work uses the idle model"
    answer = scheduler.enqueue("bob", ANSWER)
    assert not answer.granted.is_set(), "a running call is never interrupted"
    more_thoughts = [scheduler.enqueue(u, BACKGROUND) for u in ("ada", "cy", "dan")]
    scheduler.release(thought_call)
    assert answer.granted.is_set(), "the answer goes as soon as the one running thought call ends"
    assert not any(t.granted.is_set() for t in more_thoughts)
    stats = scheduler.stats()
    assert stats.answers_waited_behind_background == 1
    scheduler.release(answer)
    assert more_thoughts[0].granted.is_set()


def test_an_answer_granted_at_once_did_not_wait_behind_a_thought() -> None:
    scheduler = LLMScheduler(slots=2, background_idle_s=0.0)
    thought_call = scheduler.enqueue("ada", BACKGROUND)
    answer = scheduler.enqueue("bob", ANSWER)
    assert thought_call.granted.is_set() and answer.granted.is_set(), "two slots: both run"
    waiting = scheduler.enqueue("cy", ANSWER)
    assert not waiting.granted.is_set()
    scheduler.release(answer)
    assert waiting.granted.is_set()
    assert scheduler.stats().answers_waited_behind_background == 1, "cy waited while a thought call ran"


def test_positions_and_estimates() -> None:
    clock = FakeClock()
    scheduler = LLMScheduler(slots=1, clock=clock, background_idle_s=0.0)
    running = scheduler.enqueue("ada", ANSWER)
    clock.now = 12.0
    scheduler.release(running)  # the running average moves from its initial 10 s towards 12 s
    average = scheduler.average_s(ANSWER)
    assert average == pytest.approx(0.8 * 10.0 + 0.2 * 12.0)
    running = scheduler.enqueue("ada", ANSWER)
    thought = scheduler.enqueue("ada", BACKGROUND)
    bob, cy = scheduler.enqueue("bob", ANSWER), scheduler.enqueue("cy", ANSWER)
    clock.now = 15.0  # the running answer has run 3 s
    assert scheduler.position(running) == QueuePosition(0, 0, 0.0), "a granted call waits for nothing"
    assert scheduler.position(bob) == QueuePosition(ahead=0, running=1, estimate_s=round(average - 3, 1))
    assert scheduler.position(cy) == QueuePosition(ahead=1, running=1, estimate_s=round(2 * average - 3, 1))
    assert scheduler.position(thought).ahead == 2, "background work is behind every waiting answer"
    scheduler.release(running)
    assert scheduler.position(cy).ahead == 0
    scheduler.release(cy)  # cy gives up while waiting: the place goes to the next in line
    scheduler.release(bob)
    assert thought.granted.is_set()


def test_background_work_waits_until_answers_have_paused() -> None:
    clock = FakeClock()
    scheduler = LLMScheduler(slots=1, clock=clock, background_idle_s=1.0)
    answer = scheduler.enqueue("ada", ANSWER)
    thought = scheduler.enqueue("ada", BACKGROUND)
    clock.now = 5.0
    scheduler.release(answer)
    assert not thought.granted.is_set(), "the model is free, but an answer has only just ended"
    clock.now = 5.5
    follow_up = scheduler.enqueue("ada", ANSWER)  # ada asks again right after her answer
    assert follow_up.granted.is_set(), "her follow-up finds the model free, not busy with a thought"
    clock.now = 9.0
    scheduler.release(follow_up)
    clock.now = 9.9
    scheduler.grant_due()
    assert not thought.granted.is_set()
    clock.now = 10.0
    scheduler.grant_due()  # what the scheduler's timer calls once the idle wait has passed
    assert thought.granted.is_set()
    assert scheduler.stats().answers_waited_behind_background == 0
    scheduler.release(thought)


def test_the_idle_wait_ends_by_itself() -> None:
    scheduler = LLMScheduler(slots=1, background_idle_s=0.2)
    scheduler.release(scheduler.enqueue("ada", ANSWER))
    thought = scheduler.enqueue("ada", BACKGROUND)
    assert not thought.granted.is_set()
    assert thought.wait(timeout=5), "a timer grants the background call once answers have paused"
    scheduler.release(thought)


def test_with_two_slots_the_wait_is_shared() -> None:
    clock = FakeClock()
    scheduler = LLMScheduler(slots=2, clock=clock, background_idle_s=0.0)
    a, b = scheduler.enqueue("ada", ANSWER), scheduler.enqueue("bob", ANSWER)
    c = scheduler.enqueue("cy", ANSWER)
    assert a.granted.is_set() and b.granted.is_set() and not c.granted.is_set()
    assert scheduler.position(c).estimate_s == pytest.approx(10.0), "two 10 s calls ahead, two slots"


def test_never_more_calls_than_slots_under_many_threads() -> None:
    scheduler = LLMScheduler(slots=2, background_idle_s=0.0)
    inside, most, lock = 0, 0, threading.Lock()
    rng = random.Random(0)
    plan = [(f"user{rng.randrange(5)}", rng.choice([ANSWER, BACKGROUND])) for _ in range(200)]

    def call(user: str, priority: Priority) -> None:
        nonlocal inside, most
        with scheduler.slot(user, priority):
            with lock:
                inside += 1
                most = max(most, inside)
            time.sleep(0.0005)
            with lock:
                inside -= 1

    threads = [threading.Thread(target=call, args=p) for p in plan]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    assert most == 2 and inside == 0
    assert sum(scheduler.stats().granted.values()) == 200


def test_chat_model_calls_take_their_caller_from_the_context() -> None:
    llm = ScriptedLLM(answers=["first"], thoughts=[("thought: a fact.\nanswered: yes\n", 0.9)])
    llm.gate = threading.Event()  # the thought call holds the model until the gate opens
    done: list[str] = []

    def write_thought() -> None:
        with scheduling("ada", BACKGROUND):
            llm.chat([{"role": "user", "content": "q"}], probe=ChoiceProbe("answered:"))

    thread = threading.Thread(target=write_thought)
    thread.start()
    deadline = time.monotonic() + 5
    while not llm.calls and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [(t.user, t.priority) for t in llm.scheduler._running] == [("ada", BACKGROUND)]
    answering = threading.Thread(target=lambda: done.append(llm.chat([{"role": "user", "content": "q"}],
                                                                      user="bob")))
    answering.start()
    time.sleep(0.2)
    assert not done, "the answer waits for the running background call"
    llm.gate.set()
    answering.join(5)
    thread.join(5)
    assert done == ["first "]
    stats = llm.scheduler.stats()
    assert stats.granted == {"answer": 1, "background": 1} and stats.answers_waited_behind_background == 1


# ----- the engine ---------------------------------------------------------------------------------------------

CHUNKS = ["S2ORC is a large corpus of 81.1 million English-language academic papers spanning many disciplines.",
          "SPECTER learns document embeddings with a triplet loss over the citation graph of scientific papers."]


@pytest.fixture
def copilot(tmp_path: Path):  # noqa: ANN201 - yields a Copilot on a scripted LLM
    from copilot.embeddings import get_embedder

    settings = Settings(data_dir=tmp_path, min_confidence=0.3, relevance_weight=0.0)
    embedder = get_embedder(settings)
    store = Store(tmp_path / "c.db", tmp_path / "i")
    store.db["papers"].insert({"id": "p1", "title": "Paper One"})
    store.insert_with_vectors("chunks", [{"paper_id": "p1", "seq": i, "section": "Intro", "text": t, "page_start": 1,
                                          "page_end": 1, "n_tokens": len(t.split())} for i, t in enumerate(CHUNKS)],
                              embedder.encode_documents(CHUNKS))
    llm = ScriptedLLM(answers=["S2ORC is a corpus of papers [1].", "SPECTER uses a triplet loss [2]."],
                      thoughts=[("thought: S2ORC is a corpus of 81.1M English academic papers with full text.\n"
                                 "answered: yes\n", 0.9),
                                ("thought: SPECTER is trained with a triplet loss over citations of papers.\n"
                                 "answered: yes\n", 0.9)])
    yield Copilot(settings, store, embedder, llm)
    store.close()


def test_sources_come_first_then_the_place_in_line_then_the_answer(copilot: Copilot) -> None:
    llm = copilot.llm
    llm.gate = threading.Event()  # the thought call runs until the test lets it finish
    first = copilot.ask("What is S2ORC?", user_id="ada")
    deadline = time.monotonic() + 10
    while llm.scheduler.stats().granted["background"] < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [(t.user, t.priority) for t in llm.scheduler._running] == [("ada", BACKGROUND)], \
        "ada's thought call is running, at background priority"
    calls_before = len(llm.calls)

    updates = copilot.ask_stream("How is SPECTER trained?", user_id="bob")
    sources = next(updates)
    assert isinstance(sources, AnswerSources) and sources.items, "sources before any LLM call"
    assert "triplet" in sources.items[0].text
    assert len(llm.calls) == calls_before
    place = next(updates)
    assert place == QueuePosition(ahead=0, running=1, estimate_s=place.estimate_s) and place.estimate_s > 0
    llm.gate.set()  # the thought call ends; bob's answer goes before any other background work
    rest = list(updates)
    texts = [u for u in rest if isinstance(u, str)]
    result = rest[-1]
    assert isinstance(result, AskResult) and texts and texts[-1].strip() == result.answer
    assert result.answer.startswith("SPECTER uses a triplet loss")
    assert {"retrieve_ms", "wait_ms", "first_word_ms", "answer_ms"} <= set(result.timings)
    assert copilot.llm.scheduler.stats().answers_waited_behind_background == 1
    assert copilot.flush(timeout=30)
    assert first.thought is not None and result.thought is not None, first.thought
    assert first.timings["thought_lag_ms"] >= first.timings["thought_ms"] > 0
    assert first.thought.llm_calls == 1 and llm.scheduler.stats().granted == {"answer": 2, "background": 2}


def test_an_answer_that_stops_listening_leaves_the_line(copilot: Copilot) -> None:
    llm = copilot.llm
    busy = llm.scheduler.enqueue("zoe", ANSWER)  # the model is busy with someone else's answer
    updates = copilot.ask_stream("What is S2ORC?", user_id="ada")
    assert isinstance(next(updates), AnswerSources)
    assert isinstance(next(updates), QueuePosition)
    updates.close()  # the user left (closed the tab) while waiting
    after = llm.scheduler.enqueue("bob", ANSWER)
    llm.scheduler.release(busy)
    assert after.granted.is_set(), "ada's abandoned place does not hold the model"
    llm.scheduler.release(after)
