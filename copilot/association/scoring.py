"""The combined read-time score, and the one query vector through which the product searches by it.

score(q, m) = cos(E(q), E(m)) + w·cos(E_θ(q), E(m)). Memories stay encoded once by the frozen base model;
a query costs one base embedding plus E_θ(q): a second MiniLM pass with the LoRA merged in (the LoRA kind, the
default), or the residual MLP's few matrix products (the ``.npz`` kind). No LLM call.

Because every E(m) is a unit vector, the combined score equals the dot product of E(m) with the single
query vector E(q) + w·E_θ(q). :meth:`AssociativeScorer.query_vectors` returns that vector normalised, which
scales all of one query's scores by the same positive factor, so every index that ranks by cosine returns
the combined-score ranking unchanged: the engine searches thoughts and memories with it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from copilot.association.adapter import QueryAdapter, load_adapter, unit_rows

if TYPE_CHECKING:
    from copilot.association.lora import LoraAdapter
    from copilot.embeddings import Embedder

    Adapter = QueryAdapter | LoraAdapter


def combined_scores(plain_queries: np.ndarray, adapted_queries: np.ndarray, memories: np.ndarray,
                    weight: float) -> np.ndarray:
    """Score matrix ``(n_queries, n_memories)``; all inputs are unit rows, ``weight`` is w."""
    scores = plain_queries @ memories.T
    if weight:
        scores = scores + weight * (adapted_queries @ memories.T)
    return scores


MAX_PARTS = 8  # sentences a message is read in; a longer one is read in as many runs of consecutive sentences
# A sentence of fewer words ("Hmm.", "Thanks!", "Wow, really?") asks for nothing of its own and is not read apart:
# chosen among 1, 3, 4 and 5 words (and 12, 16, 20 characters) on training persons, never on the test persons.
MIN_WORDS = 4
FUSED_FROM = 3  # fewer memories than this are ranked by the whole message: standardised over two, every part ties
_HAN_KANA = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # scripts written without spaces
_WORD = re.compile(f"[{_HAN_KANA}]|[^\\W{_HAN_KANA}]+(?:['’][^\\W{_HAN_KANA}]+)*")  # "I've" is one word


def message_parts(text: str) -> list[str]:
    """What recall reads of a message: the whole message, then each of its sentences of at least :data:`MIN_WORDS`
    words (a Chinese or Japanese character counts as one) when it has several (at most :data:`MAX_PARTS`, runs of
    consecutive sentences past that). A later message that needs a memory seldom asks
    only for it: "Sorry I vanished, the kids were sick all week. I've been coughing every night too." Read whole,
    its small talk outweighs the one sentence that calls for "damp winters set off my asthma"."""
    from copilot.grounding import split_sentences  # nltk's Punkt, loaded on first use

    sentences = [s for s in split_sentences(text) if s.strip()]
    if len(sentences) <= 1:
        return [text]
    sentences = [s for s in sentences if len(_WORD.findall(s)) >= MIN_WORDS]
    if not sentences:
        return [text]
    if len(sentences) > MAX_PARTS:
        sentences = [" ".join(sentences[int(run[0]):int(run[-1]) + 1])
                     for run in np.array_split(np.arange(len(sentences)), MAX_PARTS)]
    return [text, *sentences]


def fused_scores(part_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each memory's score over a message's parts (:func:`message_parts`), and the part that gave it.

    ``part_scores`` has one row per part and one column per memory, the whole message first. Each row is
    standardised over the memories (mean 0, standard deviation 1) and a memory takes its best row: a sentence of
    small talk resembles many chat lines a little and singles none out, while the sentence that calls for a memory
    ranks it far above the rest. Raw cosines would let the small talk win, because it shares the register of a
    user's other lines. One part, or fewer than :data:`FUSED_FROM` memories, gives the whole message's scores."""
    scores = np.asarray(part_scores, dtype=np.float64)
    if scores.ndim != 2 or not scores.shape[0]:
        raise ValueError("part_scores needs one row per part of the message.")
    if scores.shape[0] == 1 or scores.shape[1] < FUSED_FROM:
        return scores[0], np.zeros(scores.shape[1], dtype=int)
    z = (scores - scores.mean(1, keepdims=True)) / (scores.std(1, keepdims=True) + 1e-9)
    best = z.argmax(0)
    return z[best, np.arange(z.shape[1])], best


def sentence_query_vectors(sentences: Sequence[str], encode_queries: Callable[[Sequence[str]], np.ndarray],
                           associate: Callable[[np.ndarray, str], np.ndarray | None]) -> list[np.ndarray]:
    """The query vector of each sentence of a message as recall searches with it: the sentences encoded in one
    batch, then each one's combined vector from ``associate(plain, text)``, or its plain one when that gives None
    (association off). One row at a time: a batched product wakes numpy's BLAS threads, which then spin and take
    the cores the next encoding needs."""
    if not sentences:
        return []
    plain = encode_queries(list(sentences))
    return [v if (c := associate(v, s)) is None else c for s, v in zip(sentences, plain, strict=True)]


def combined_query_vectors(plain_queries: np.ndarray, adapter: Adapter, weight: float,
                           texts: Sequence[str] | None = None) -> np.ndarray:
    """E(q) + w·E_θ(q): one vector per query whose dot product with E(m) is the combined score (``texts``: the
    queries themselves, which the LoRA kind reads)."""
    plain = np.asarray(plain_queries, dtype=np.float32)
    if not weight or not len(plain):
        return plain
    return (plain + weight * adapter.adapt(plain, texts)).astype(np.float32, copy=False)


RECENT = 32  # questions whose adapted vector is kept


class AssociativeScorer:
    """Scores stored memory vectors against a query with the combined score, and gives its query vectors."""

    def __init__(self, embedder: Embedder, adapter: Adapter | None = None, weight: float | None = None) -> None:
        self.embedder = embedder
        model_path = getattr(embedder, "model_path", None)
        self.adapter = adapter if adapter is not None else load_adapter(base_model=model_path)
        if getattr(self.adapter, "base_model", "") is None and model_path is not None:
            self.adapter.base_model = model_path  # a LoRA applies to the embedder's own model
        self.weight = float(self.adapter.weight if weight is None else weight)
        self._recent: dict[str, np.ndarray] = {}
        self._recent_lock = threading.Lock()
        if self.adapter.dimension != embedder.dimension:
            raise ValueError(f"The adapter expects {self.adapter.dimension}-d vectors, the embedder gives "
                             f"{embedder.dimension}-d ones.")

    def plain_query_vectors(self, texts: Sequence[str]) -> np.ndarray:
        """E(q) from the base model."""
        return self.embedder.encode_documents(texts)

    def score(self, query_text: str, memory_vectors: np.ndarray) -> np.ndarray:
        """Combined scores of one query against ``memory_vectors`` (unit rows, shape ``(n, dim)``)."""
        plain = self.plain_query_vectors([query_text])
        memories = np.asarray(memory_vectors, dtype=np.float32).reshape(-1, self.adapter.dimension)
        return combined_scores(plain, self.adapter.adapt(plain, [query_text]), memories, self.weight)[0]

    def rank(self, query_text: str, memory_vectors: np.ndarray, k: int = 10) -> list[int]:
        """Indices of the ``k`` best memories for ``query_text``, best first."""
        scores = self.score(query_text, memory_vectors)
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k] if k else np.array([], dtype=int)
        return [int(i) for i in top[np.argsort(-scores[top], kind="stable")]]

    def query_vector(self, text: str, plain: np.ndarray) -> np.ndarray:
        """The combined unit query vector of one question (``plain``: its E(q), shape ``(dim,)``).

        The last few questions' E_θ(q) are kept, so the memories and the thoughts recalled for the same turn
        pay for one adapted pass, not two."""
        with self._recent_lock:
            adapted = self._recent.get(text)
        if adapted is None:
            adapted = self.adapter.adapt(plain[None, :], [text])[0]
            with self._recent_lock:
                self._recent[text] = adapted
                while len(self._recent) > RECENT:
                    self._recent.pop(next(iter(self._recent)))
        if not self.weight:
            return unit_rows(np.asarray(plain, dtype=np.float32)[None, :])[0]
        return unit_rows((np.asarray(plain, dtype=np.float32) + self.weight * adapted)[None, :])[0]

    def query_vectors(self, plain: np.ndarray, texts: Sequence[str] | None = None) -> np.ndarray:
        """Unit vectors, one per row E(q) of ``plain`` (the encodings of ``texts``), whose cosine ranking is the
        combined-score ranking. The LoRA kind reads ``texts`` a second time; the ``.npz`` kind needs only
        ``plain``."""
        return unit_rows(combined_query_vectors(plain, self.adapter, self.weight, texts))
