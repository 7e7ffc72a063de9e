"""One task's corpus, stored the way the product stores a library, plus what every method shares.

The passages go into a fresh :class:`copilot.store.Store` as papers and chunks with their embeddings, so the
Thought-Retriever runs on the real engine unchanged, and the baselines read the very same passages and
vectors. Answering (same prompt, same token budget, same output cap for every method) also lives here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from copilot.config import Settings
from copilot.embeddings import Embedder
from copilot.engine import source_text, trim_repetition
from copilot import prompts
from copilot.eval.tasks import Item, Task
from copilot.llm import ChatModel, ChoiceProbe
from copilot.retrieval import pack_context
from copilot.storage import Store, utc_now
from copilot.types import Chunk, Paper, RetrievedItem


@dataclass
class Cost:
    """LLM work and time of one step, read from the model's usage counter."""

    seconds: float = 0.0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __iadd__(self, other: Cost) -> Cost:
        self.seconds += other.seconds
        self.llm_calls += other.llm_calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        return self

    def as_dict(self) -> dict[str, float | int]:
        return {"seconds": round(self.seconds, 2), "llm_calls": self.llm_calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens}


class Meter:
    """``with Meter(llm) as m:`` measures the LLM calls, tokens and seconds spent inside the block."""

    def __init__(self, llm: ChatModel) -> None:
        self.llm = llm
        self.cost = Cost()

    def __enter__(self) -> Meter:
        u = self.llm.usage
        self._start = (time.perf_counter(), u.calls, u.prompt_tokens, u.completion_tokens)
        return self

    def __exit__(self, *exc: object) -> None:
        u = self.llm.usage
        t0, calls, prompt, completion = self._start
        self.cost = Cost(time.perf_counter() - t0, u.calls - calls, u.prompt_tokens - prompt,
                         u.completion_tokens - completion)


@dataclass
class Answer:
    """One answer: its text, the verdict (claims), what producing it cost, and whether it was reused."""

    text: str
    verdict: str | None
    cost: Cost
    reused: bool = False


@dataclass
class Retrieval:
    """What a method hands the LLM (``items``, in citation order) and its ranking of documents (for Recall@k)."""

    items: list[RetrievedItem] = field(default_factory=list)
    ranking: list[str] = field(default_factory=list)


def embedding_text(task: Task, index: int) -> str:
    """What is embedded and indexed for a passage: its heading (section or title), then its text."""
    doc = task.docs[index]
    heading = doc.section if task.name == "abstract-single" else doc.title
    return f"{heading}. {doc.text}" if heading else doc.text


class Bench:
    """A task's corpus in a store, the shared models, and the one answering function every method uses."""

    def __init__(self, task: Task, settings: Settings, embedder: Embedder, llm: ChatModel, *, seed: int = 0) -> None:
        self.task = task
        self.settings = settings
        self.embedder = embedder
        self.llm = llm
        self.seed = seed
        self.store = Store.open(settings)
        self.texts = [embedding_text(task, i) for i in range(len(task.docs))]
        self.vectors = embedder.encode_documents(self.texts)
        self.chunk_ids = self._store_corpus()
        self.index_of = {chunk_id: i for i, chunk_id in enumerate(self.chunk_ids)}
        self._groups = np.array([d.group for d in task.docs])
        self._answers: dict[tuple[str, str], Answer] = {}

    def _store_corpus(self) -> list[int]:
        docs = self.task.docs
        papers = [Paper(id=g, title=t, source="eval", added_at=utc_now()) for g, t in self.task.groups.items()]
        chunks = [Chunk(paper_id=d.group, seq=i, section=d.section, text=d.text, page_start=1, page_end=1,
                        char_start=0, char_end=len(d.text), n_tokens=len(d.text.split()))
                  for i, d in enumerate(docs)]
        with self.store.transaction():
            self.store.papers.add_many(papers)
            return self.store.chunks.add(chunks, self.vectors)

    def close(self) -> None:
        self.store.close()

    # ----- passages ----------------------------------------------------------------------------------------

    def scope_indices(self, scope: Sequence[str] | None) -> np.ndarray:
        """Indices of the passages an item may read."""
        if scope is None:
            return np.arange(len(self.task.docs))
        return np.flatnonzero(np.isin(self._groups, list(scope)))

    def item(self, index: int, score: float) -> RetrievedItem:
        doc = self.task.docs[index]
        return RetrievedItem("chunk", self.chunk_ids[index], doc.text, float(score), depth=0, paper_id=doc.group,
                             paper_title=doc.title, section=doc.section)

    def pack(self, ranked: Sequence[tuple[int, float]]) -> list[RetrievedItem]:
        """The product's packing (top K, near-duplicates skipped, token budget) over ranked passages."""
        s = self.settings
        candidates = [(self.item(i, score), self.vectors[i]) for i, score in ranked]
        return pack_context(candidates, k=s.top_k, budget_tokens=s.context_budget_tokens,
                            dedup_threshold=s.dedup_threshold, count_tokens=self.llm.count_tokens).items

    def groups_of(self, indices: Sequence[int]) -> list[str]:
        return [self.task.docs[i].group for i in indices]

    # ----- answering ---------------------------------------------------------------------------------------

    def answer(self, item: Item, context: list[RetrievedItem]) -> Answer:
        """The answer to ``item`` from ``context``: the same prompt, budget and output cap for every method.

        Decoding is greedy, so the same prompt always gets the same reply: a prompt seen before (two methods
        that retrieved the same passages, a memory whose thoughts did not make it into the context) reuses
        the reply and the cost it was measured with instead of running the model again.
        """
        messages, options = self._prompt(item, context)
        key = (item.id, json.dumps(messages))
        if key in self._answers:
            return replace(self._answers[key], reused=True)
        probe = ChoiceProbe(prompts.CLAIM_MARKER, choices=("true", "false")) if self.task.kind == "claims" else None
        with Meter(self.llm) as meter:
            reply = self.llm.chat(messages, temperature=0.0, probe=probe, **options)
        if probe is not None:
            result = Answer(reply.strip(), verdict_of(reply, probe.probabilities), meter.cost)
        else:
            trimmed = trim_repetition(reply)
            result = Answer((trimmed if trimmed is not None else reply).strip(), None, meter.cost)
        self._answers[key] = result
        return result

    def _prompt(self, item: Item, context: list[RetrievedItem]) -> tuple[list[dict[str, str]], dict[str, Any]]:
        sources = [source_text(i) for i in context]
        if self.task.kind == "claims":
            return ([{"role": "system", "content": prompts.CLAIM_SYSTEM},
                     {"role": "user", "content": prompts.claim_user(item.query, sources)}],
                    {"max_tokens": 6, "grammar": prompts.CLAIM_GRAMMAR})
        system = prompts.ABSTRACT_SYSTEM if self.task.name == "abstract-single" else prompts.SYNTHESIS_SYSTEM
        return ([{"role": "system", "content": system},
                 {"role": "user", "content": prompts.task_user(item.query, sources)}],
                {"max_tokens": self.settings.max_answer_tokens})


def verdict_of(reply: str, probabilities: dict[str, float] | None) -> str | None:
    """The model's verdict: its more probable choice where the backend reads probabilities, else what it wrote."""
    if probabilities:
        return max(probabilities, key=probabilities.get)
    text = reply.lower()
    found = [(text.find(word), word) for word in ("true", "false") if word in text]
    return min(found)[1] if found else None
