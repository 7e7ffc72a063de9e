"""The methods compared, each turning a question into the context the LLM answers from.

Every method answers with the same LLM, the same prompt and the same token budget (``Bench.answer``); they
differ only in what they put in the context:

- ``thought-retriever``: the real engine (:class:`copilot.engine.Copilot`): chunks and thoughts together,
  after a warm-up on simulated questions that grows the thought memory;
- ``dense``, ``bm25``, ``tfidf``, ``hybrid`` (dense and BM25 fused as the product fuses them): passages ranked
  by one scorer, packed like the product packs (top K, near-duplicates skipped, the budget);
- ``full-context``: the passages in reading order, cut at the budget;
- ``raptor``: retrieval over every node of a summary tree (passages and cluster summaries of all levels);
- ``memwalker``: the LLM walks the same summary tree from the root and reads the passages under its pick;
- ``no-retrieval``: the question alone.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from copilot import prompts as product_prompts
from copilot.engine import Copilot
from copilot.eval.corpus import Bench, Cost, Meter, Retrieval
from copilot.eval.tasks import Item
from copilot.eval.tree import SummaryTree, build_tree, walk
from copilot.retrieval import (CANDIDATE_FACTOR, RRF_K, fused_order, pack_context, retrieval_options,
                               retrieve_mixture, thought_scope)
from copilot.tasks.warmup import simulated_questions
from copilot.types import RetrievedItem

THOUGHT_RETRIEVER = "thought-retriever"
METHODS = (THOUGHT_RETRIEVER, "dense", "bm25", "tfidf", "hybrid", "full-context", "raptor", "memwalker",
           "no-retrieval")


def parse_methods(spec: str) -> list[str]:
    """``all`` or a comma list, in the canonical order; unknown names are an error."""
    if spec.strip() == "all":
        return list(METHODS)
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in METHODS]
    if unknown or not names:
        raise ValueError(f"unknown method(s) {', '.join(unknown) or '(none)'}; choose from all, {', '.join(METHODS)}")
    return [m for m in METHODS if m in names]


def top(scores: np.ndarray, scope: np.ndarray, n: int) -> list[tuple[int, float]]:
    """The ``n`` best passages of ``scope`` by ``scores`` (ties keep reading order)."""
    local = scores[scope]
    order = np.argsort(-local, kind="stable")[:n]
    return [(int(scope[j]), float(local[j])) for j in order]


class Method:
    """A way to build the context of one question; ``prepare`` does any per-corpus work up front."""

    name = "method"

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.build = Cost()

    def prepare(self, items: Sequence[Item]) -> None:  # noqa: B027 - most methods need nothing
        """Index the corpus, build trees, warm up a memory: whatever a method needs before its first question."""

    def retrieve(self, item: Item) -> Retrieval:
        raise NotImplementedError

    def memory(self) -> dict[str, float | int]:
        """What the method keeps beyond the passages (thoughts, summaries): count and size."""
        return {"items": 0, "kb": 0.0}


class NoRetrieval(Method):
    name = "no-retrieval"

    def retrieve(self, item: Item) -> Retrieval:
        return Retrieval()


class FullContext(Method):
    """The corpus in reading order until the budget is spent; the passage that overflows is cut to fit."""

    name = "full-context"

    def retrieve(self, item: Item) -> Retrieval:
        b = self.bench
        budget = b.settings.context_budget_tokens
        items, used = [], 0
        for index in b.scope_indices(item.scope):
            entry = b.item(int(index), 0.0)
            tokens = b.llm.count_tokens(entry.text)
            if used + tokens > budget:
                room_words = int(0.75 * (budget - used))
                if room_words >= 20:
                    entry.text = " ".join(entry.text.split()[:room_words])
                    entry.n_tokens = b.llm.count_tokens(entry.text)
                    items.append(entry)
                break
            entry.n_tokens = tokens
            items.append(entry)
            used += tokens
        ranking = [i.paper_id or "" for i in items]
        return Retrieval(items, ranking)


class Ranked(Method):
    """A method defined by a score per passage; the top 5×K go to the product's packing."""

    def scores(self, item: Item) -> np.ndarray:
        raise NotImplementedError

    def retrieve(self, item: Item) -> Retrieval:
        b = self.bench
        scope = b.scope_indices(item.scope)
        ranked = top(self.scores(item), scope, len(scope))
        context = b.pack(ranked[:CANDIDATE_FACTOR * b.settings.top_k])
        return Retrieval(context, b.groups_of([i for i, _ in ranked]))


class Dense(Ranked):
    name = "dense"

    def scores(self, item: Item) -> np.ndarray:
        return self.bench.vectors @ self.bench.embedder.encode_query(item.query)


class BM25(Ranked):
    """Okapi BM25 (the ``bm25s`` package, Lucene variant, English stop words)."""

    name = "bm25"

    def prepare(self, items: Sequence[Item]) -> None:
        # bm25s and scikit-learn load scipy (seconds): imported by the method that uses them, not by the
        # dashboard, which imports the runner.
        import bm25s

        logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG
        self._bm25s = bm25s
        self.index = bm25s.BM25()
        self.index.index(bm25s.tokenize(self.bench.texts, stopwords="en", show_progress=False), show_progress=False)

    def scores(self, item: Item) -> np.ndarray:
        tokens = self._bm25s.tokenize([item.query], stopwords="en", show_progress=False, return_ids=False)[0]
        if not tokens:
            return np.zeros(len(self.bench.texts))
        return np.asarray(self.index.get_scores(tokens), dtype=np.float64)


class TfIdf(Ranked):
    """Cosine over TF-IDF vectors (scikit-learn; sublinear term frequency, English stop words)."""

    name = "tfidf"

    def prepare(self, items: Sequence[Item]) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer  # scipy: see BM25.prepare

        self.vectorizer = TfidfVectorizer(stop_words="english", sublinear_tf=True)
        self.matrix = self.vectorizer.fit_transform(self.bench.texts)

    def scores(self, item: Item) -> np.ndarray:
        return np.asarray((self.matrix @ self.vectorizer.transform([item.query]).T).toarray()).ravel()


class Hybrid(Ranked):
    """Dense and BM25 fused as the product fuses them (``copilot.retrieval.fused_order`` over the top 5×K of each,
    by ``COPILOT_RETRIEVAL_FUSION`` and ``COPILOT_RETRIEVAL_LEXICAL_WEIGHT``); the passages below those
    follow in reciprocal-rank-fusion order of the full rankings."""

    name = "hybrid"

    def prepare(self, items: Sequence[Item]) -> None:
        self.dense, self.bm25 = Dense(self.bench), BM25(self.bench)
        self.bm25.prepare(items)

    def scores(self, item: Item) -> np.ndarray:
        b = self.bench
        dense, lexical = self.dense.scores(item), self.bm25.scores(item)
        fused = np.zeros(len(b.texts))
        for scores in (dense, lexical):
            ranks = np.empty(len(scores), dtype=np.int64)
            ranks[np.argsort(-scores, kind="stable")] = np.arange(1, len(scores) + 1)
            fused += 1.0 / (RRF_K + ranks)
        scope, n = b.scope_indices(item.scope), CANDIDATE_FACTOR * b.settings.top_k
        matched = [(i, score) for i, score in top(lexical, scope, n) if score > 0]  # as a full-text index finds
        weight = b.settings.retrieval_lexical_weight
        order = fused_order([top(dense, scope, n), matched], fusion=b.settings.retrieval_fusion,
                            weights=(1.0 - weight, weight))
        fused[order] = 1.0 + np.arange(len(order), 0, -1)  # the fused candidates first, in their order
        return fused


# ----- the summary-tree baselines ------------------------------------------------------------------------------

class Trees:
    """Summary trees per scope, built once per bench and shared by RAPTOR and MemWalker."""

    def __init__(self, bench: Bench, *, cluster_size: int = 8, max_branch: int = 8) -> None:
        self.bench = bench
        self.cluster_size = cluster_size
        self.max_branch = max_branch
        self.trees: dict[tuple[str, ...], SummaryTree] = {}
        self.cost = Cost()

    @staticmethod
    def key(scope: Sequence[str] | None) -> tuple[str, ...]:
        return tuple(scope) if scope is not None else ("*",)

    def get(self, scope: Sequence[str] | None) -> SummaryTree:
        key = self.key(scope)
        if key not in self.trees:
            b = self.bench
            with Meter(b.llm) as meter:
                self.trees[key] = build_tree(
                    b.llm, b.embedder.encode_documents, b.texts, b.vectors, b.scope_indices(scope).tolist(),
                    input_tokens=b.settings.context_budget_tokens, cluster_size=self.cluster_size,
                    max_branch=self.max_branch, seed=b.seed)
            self.cost += meter.cost
        return self.trees[key]

    def memory(self) -> dict[str, float | int]:
        summaries = [n for t in self.trees.values() for n in t.summaries]
        kb = sum(len(n.text.encode("utf-8")) + n.vector.nbytes for n in summaries) / 1024
        return {"items": len(summaries), "kb": round(kb, 1)}


class TreeMethod(Method):
    def __init__(self, bench: Bench, trees: Trees) -> None:
        super().__init__(bench)
        self.trees = trees

    def prepare(self, items: Sequence[Item]) -> None:
        for item in items:
            self.trees.get(item.scope)

    def memory(self) -> dict[str, float | int]:
        return self.trees.memory()


class Raptor(TreeMethod):
    """RAPTOR's collapsed tree: passages and summaries of every level ranked together by cosine."""

    name = "raptor"

    def retrieve(self, item: Item) -> Retrieval:
        b = self.bench
        tree = self.trees.get(item.scope)
        query = b.embedder.encode_query(item.query)
        scores = np.array([float(n.vector @ query) for n in tree.nodes])
        order = np.argsort(-scores, kind="stable")
        candidates = []
        for j in order[:CANDIDATE_FACTOR * b.settings.top_k]:
            node = tree.nodes[int(j)]
            if node.level == 0:
                entry = b.item(node.docs[0], scores[j])
            else:
                entry = RetrievedItem("chunk", -1 - int(j), node.text, float(scores[j]), depth=node.level,
                                      paper_title="summary", section=f"level {node.level}")
            candidates.append((entry, node.vector))
        s = b.settings
        context = pack_context(candidates, k=s.top_k, budget_tokens=s.context_budget_tokens,
                               dedup_threshold=s.dedup_threshold, count_tokens=b.llm.count_tokens).items
        ranking = [g for j in order for g in b.groups_of(tree.nodes[int(j)].docs)]
        return Retrieval(context, ranking)


class MemWalker(TreeMethod):
    """MemWalker's navigation: the LLM picks a child by its summary at each level, then reads the passages
    under the node it reached (ranked by cosine, packed to the budget)."""

    name = "memwalker"

    def retrieve(self, item: Item) -> Retrieval:
        b = self.bench
        tree = self.trees.get(item.scope)
        if tree.summaries:
            node, _ = walk(b.llm, tree, item.query)
            docs = np.array(tree.nodes[node].docs)
        else:  # too few passages to summarise: the root holds the passages themselves
            docs = b.scope_indices(item.scope)
        ranked = top(b.vectors @ b.embedder.encode_query(item.query), docs, len(docs))
        return Retrieval(b.pack(ranked), b.groups_of([i for i, _ in ranked]))


# ----- Thought-Retriever -----------------------------------------------------------------------------------------

@dataclass
class WarmupQuestion:
    text: str
    scope: list[str] | None


@dataclass
class WarmupPlan:
    """Simulated questions in the order they are asked (round robin over scopes)."""

    questions: list[WarmupQuestion] = field(default_factory=list)
    cost: Cost = field(default_factory=Cost)


class ThoughtRetriever(Method):
    """The real engine: ``Copilot.retrieve`` (chunks and thoughts, one query vector, the product's packing).

    The memory grows by asking questions through ``Copilot.ask`` (answer, then the thought call); during
    scoring nothing is written, so a score reflects exactly the memory it was measured with.
    """

    name = THOUGHT_RETRIEVER

    def __init__(self, bench: Bench, *, user_id: str = "eval") -> None:
        super().__init__(bench)
        self.copilot = Copilot(bench.settings, bench.store, bench.embedder, bench.llm)
        self.user_id = user_id

    def plan_warmup(self, items: Sequence[Item], per_scope: int, *, questions_per_passage: int = 2) -> WarmupPlan:
        """Simulated questions from random passages of each item's scope (never from a reference).

        Like the product's warm-up of a new paper, but from body passages only: the abstract is what
        abstract-single asks for.
        """
        b = self.bench
        scopes: list[list[str] | None] = []
        for item in items:
            if item.scope not in scopes:
                scopes.append(item.scope)
        plan = WarmupPlan()
        per: list[list[WarmupQuestion]] = []
        with Meter(b.llm) as meter:
            for n, scope in enumerate(scopes):
                rng = random.Random(b.seed * 1000 + n)
                passages = b.scope_indices(scope).tolist()
                rng.shuffle(passages)
                found: list[str] = []
                for index in passages:
                    if len(found) >= per_scope:
                        break
                    prompt = product_prompts.warmup_from_paragraph(b.task.docs[index].text, questions_per_passage)
                    questions, _ = simulated_questions(b.llm, prompt, questions_per_passage, temperature=0.0)
                    found += [q for q in questions if q not in found]
                per.append([WarmupQuestion(q, scope) for q in found[:per_scope]])
        for round_ in range(max((len(p) for p in per), default=0)):
            plan.questions += [p[round_] for p in per if round_ < len(p)]
        plan.cost = meter.cost
        self.build += meter.cost
        return plan

    def ask(self, question: str, scope: list[str] | None, *, user_id: str | None = None) -> str:
        """One question through the product's pipeline (answer, then its thought); returns the outcome."""
        with Meter(self.bench.llm) as meter:
            result = self.copilot.ask(question, user_id=user_id or self.user_id, paper_ids=scope)
            self.copilot.flush()
        if user_id is None or user_id == self.user_id:
            self.build += meter.cost
        return result.thought.outcome if result.thought else "pending"

    def retrieve(self, item: Item, *, user_id: str | None = None) -> Retrieval:
        user = user_id or self.user_id
        c = self.copilot
        vector = c.embedder.encode_query(item.query)
        context = c.retrieve(item.query, user_id=user, paper_ids=item.scope, query_vector=vector, whole_chunks=True)
        if not item.gold:  # only claim checking scores a ranking of the whole corpus
            return Retrieval(context, [])
        candidates = retrieve_mixture(c.store, vector, user_id=user, k=len(self.bench.texts),
                                      min_confidence=c.settings.min_confidence, paper_ids=item.scope,
                                      thought_query_vector=c.associative_vector(vector, item.query),
                                      query_text=item.query,
                                      **retrieval_options(c.settings))
        ranking: list[str] = []
        for entry, _ in candidates:
            ranking += [entry.paper_id or ""] if entry.kind == "chunk" else self.thought_groups(entry.id)
        return Retrieval(context, ranking)

    def thought_groups(self, thought_id: int) -> list[str]:
        """The documents a thought was built from, through its provenance (thoughts of thoughts included)."""
        return self.bench.store.thoughts.papers_behind(thought_id)

    def n_thoughts(self, user_id: str | None = None) -> int:
        """Thoughts the user's questions can retrieve (confident and not flagged)."""
        return self.bench.store.count("thoughts", thought_scope(user_id or self.user_id, include_public=False,
                                                                min_confidence=self.bench.settings.min_confidence))

    def memory(self) -> dict[str, float | int]:
        size, count = self.bench.store.thoughts.footprint(self.user_id)
        return {"items": count, "retrievable": self.n_thoughts(), "kb": round(size / 1024, 1)}


def make_methods(bench: Bench, names: Sequence[str]) -> dict[str, Method]:
    """The methods ``names`` over ``bench`` (the tree baselines share one set of trees)."""
    trees = Trees(bench)
    makers = {THOUGHT_RETRIEVER: lambda: ThoughtRetriever(bench), "dense": lambda: Dense(bench),
              "bm25": lambda: BM25(bench), "tfidf": lambda: TfIdf(bench), "hybrid": lambda: Hybrid(bench),
              "full-context": lambda: FullContext(bench), "raptor": lambda: Raptor(bench, trees),
              "memwalker": lambda: MemWalker(bench, trees), "no-retrieval": lambda: NoRetrieval(bench)}
    return {name: makers[name]() for name in names}
