"""Personal memories: what a user said about themselves, kept once and recalled when a later message calls for it.

A memory is embedded once when kept and never re-encoded. Recall ranks a user's memories by the association
score when it is on (a learned adapter over the plain embedding), else by plain cosine, and reads a message of
several sentences sentence by sentence as well as whole (``COPILOT_RECALL_BY_SENTENCE``; from three memories on),
so that a memory one sentence calls for is not drowned by the rest. ``about`` is the text that
personalises an answer: the user's persona plus the memories the message recalls strongly enough.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from copilot.association.scoring import FUSED_FROM, fused_scores, message_parts, sentence_query_vectors
from copilot.config import Settings
from copilot.embeddings import Embedder
from copilot.errors import NotFound
from copilot.limits import LimitExceeded, check_memory
from copilot.storage import Store
from copilot.types import Memory, VectorFilter

MEMORY_MIN_SCORE = 0.3  # below this a remembered statement is unrelated to the message
PERSONA_CHARS = 300  # how much of the persona goes into an answer's prompt
RECALLED = 10  # memories recalled for a message, of which the first ``USED`` strong enough personalise the answer
USED = 2

AssociativeVector = Callable[[np.ndarray, str], "np.ndarray | None"]


class PersonalMemories:
    """Each user's memories: keep, recall, and what they add to an answer's prompt."""

    def __init__(self, store: Store, embedder: Embedder, settings: Settings, associative: AssociativeVector) -> None:
        """``associative``: the combined query vector for a plain one and its text, or None when association
        is off."""
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.associative = associative

    def remember(self, text: str, *, user_id: str) -> int:
        """Keep something a user said about themselves. Refused past the memory limits (length, count per user)."""
        text = check_memory(self.store, self.settings, user_id, text)
        return self.store.memories.add(user_id, text, self.embedder.encode_documents([text]))

    def list(self, user_id: str) -> list[Memory]:
        """The user's memories, newest first."""
        return self.store.memories.list(user_id)

    def forget(self, memory_id: int, user_id: str) -> None:
        """Delete one of the user's memories with its vector; another user's is never touched."""
        if not self.store.memories.delete(int(memory_id), user_id):
            raise NotFound(f"No memory #{int(memory_id)} of yours.")

    def recall(self, message: str, *, user_id: str, k: int = 5,
               query_vector: np.ndarray | None = None) -> list[dict[str, Any]]:
        """The user's memories that ``message`` calls for (``query_vector``: its embedding, when the caller has
        it)."""
        mine = VectorFilter(owner=user_id)
        count = self.store.count("memories", mine)
        if not count:
            return []
        plain = query_vector if query_vector is not None else self.embedder.encode_query(message)
        by_sentence = self.settings.recall_by_sentence and count >= FUSED_FROM
        parts = message_parts(message) if by_sentence else [message]
        combined = self.associative(plain, message)
        queries = [plain if combined is None else combined,
                   *sentence_query_vectors(parts[1:], self.embedder.encode_queries, self.associative)]
        if len(parts) == 1:
            hits, cues = self.store.search("memories", queries[0], k, mine), {}
        else:
            hits, cues = self._fused(queries, parts, k, mine)
        if not hits:
            return []
        texts = {m.id: m.text for m in self.store.memories.get_many([i for i, _ in hits], user_id)}
        how = "association" if combined is not None else "embedding"
        return [{"id": i, "text": texts[i], "score": round(score, 4), "recalled_by": how, "cue": cues.get(i)}
                for i, score in hits if i in texts]  # one deleted meanwhile is left out

    def _fused(self, queries: list[np.ndarray], parts: list[str], k: int, mine: VectorFilter
               ) -> tuple[list[tuple[int, float]], dict[int, str]]:
        """The ``k`` memories best for any part of a message (:func:`fused_scores` over all the user's memories),
        each with its cosine to the whole message or to the part that ranked it, whichever is higher (what
        :meth:`about` asks to be strong enough), and that part where it is a sentence and the higher of the two."""
        every = self.settings.max_memories_per_user  # all of the user's, even if one was added since they were counted
        rows = [dict(self.store.search("memories", query, every, mine)) for query in queries]
        ids = [i for i in rows[0] if all(i in row for row in rows[1:])]  # a memory added or deleted meanwhile: left
        if not ids:
            return [], {}
        scores = np.array([[row[i] for i in ids] for row in rows])
        fused, best = fused_scores(scores)
        order = np.argsort(-fused, kind="stable")[:k]
        # A filler sentence ("Hmm.") can rank a memory first by a small margin: its cosine says nothing then, and the
        # whole message's does.
        by_part = {j: bool(best[j]) and scores[best[j], j] > scores[0, j] for j in order}
        hits = [(ids[j], float(max(scores[0, j], scores[best[j], j]))) for j in order]
        return hits, {ids[j]: parts[best[j]] for j in order if by_part[j]}

    def about(self, user_id: str, message: str, vector: np.ndarray) -> tuple[str | None, list[dict[str, Any]]]:
        """The persona plus the memories this message calls for, as one text for the prompt (None when there is
        neither), and those memories."""
        recalled = self.recall(message, user_id=user_id, k=RECALLED, query_vector=vector)
        # the cosine, not the fused rank, says whether a memory is strong enough: a short sentence may single out a
        # weak one, which must not keep a strong one out
        memories = [m for m in recalled if m["score"] >= MEMORY_MIN_SCORE][:USED]
        profile = self.store.profiles.get(user_id)
        parts = [profile.persona[:PERSONA_CHARS]] if profile and profile.persona else []
        parts += [m["text"] for m in memories]
        return (" ".join(parts) or None), memories

    def keep_statements(self, user_id: str, message: str) -> None:
        """Keep what the user said about themselves in ``message``; past the memory limits nothing more is kept
        (the answer stands)."""
        from copilot.tasks.profile import extract_self_statements  # the tasks take the engine: imported on use

        for statement in extract_self_statements(message):
            try:
                self.remember(statement, user_id=user_id)
            except LimitExceeded:
                continue
