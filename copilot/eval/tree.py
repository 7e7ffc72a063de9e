"""A summary tree over a corpus, shared by the RAPTOR-style and MemWalker-style baselines.

Leaves are the passages. Each level clusters the nodes below it by their embeddings (k-means, about
``cluster_size`` nodes per cluster) and asks the LLM for a summary of each cluster; levels are added until at
most ``max_branch`` nodes are left, which become the root's children. RAPTOR retrieves over every node of
every level at once (the "collapsed tree"); MemWalker lets the LLM walk down from the root.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from copilot import prompts
from copilot.llm import ChatModel


@dataclass
class Node:
    text: str
    vector: np.ndarray
    level: int  # 0 = a passage
    children: list[int] = field(default_factory=list)  # node indices one level down
    docs: list[int] = field(default_factory=list)  # passage indices under this node, in corpus order


@dataclass
class SummaryTree:
    nodes: list[Node]
    roots: list[int]  # the top level's nodes

    @property
    def summaries(self) -> list[Node]:
        return [n for n in self.nodes if n.level > 0]


def clip_words(text: str, n_words: int) -> str:
    words = text.split()
    return text if len(words) <= n_words else " ".join(words[:n_words]) + " …"


def clusters(vectors: np.ndarray, n_clusters: int, seed: int) -> list[list[int]]:
    """Row indices grouped by k-means, each group in index order, groups ordered by their first row."""
    from sklearn.cluster import KMeans  # it loads scipy (seconds): only when a tree is built

    labels = KMeans(n_clusters=n_clusters, n_init=4, random_state=seed).fit_predict(vectors)
    groups = [sorted(np.flatnonzero(labels == c).tolist()) for c in range(n_clusters)]
    return sorted((g for g in groups if g), key=lambda g: g[0])


def summarise(llm: ChatModel, texts: list[str], input_tokens: int) -> str:
    """One summary call; the passages share ``input_tokens`` (each is cut to its share, by words)."""
    share_words = max(20, int(0.75 * input_tokens / max(1, len(texts))))
    messages = [{"role": "system", "content": prompts.SUMMARY_SYSTEM},
                {"role": "user", "content": prompts.summary_user([clip_words(t, share_words) for t in texts])}]
    return llm.chat(messages, max_tokens=prompts.SUMMARY_MAX_TOKENS, temperature=0.0).strip()


def build_tree(llm: ChatModel, encode: Callable[[Sequence[str]], np.ndarray], texts: list[str], vectors: np.ndarray,
               doc_indices: list[int], *, input_tokens: int, cluster_size: int = 8, max_branch: int = 8,
               seed: int = 0) -> SummaryTree:
    """The tree over passages ``doc_indices`` (``texts``/``vectors`` are indexed by passage index).

    ``encode`` embeds summaries (``Embedder.encode_documents``).
    """
    nodes = [Node(texts[i], vectors[i], 0, docs=[i]) for i in doc_indices]
    level_ids = list(range(len(nodes)))
    level = 0
    while len(level_ids) > max_branch:
        level += 1
        n_clusters = min(len(level_ids) - 1, max(2, math.ceil(len(level_ids) / cluster_size)))
        matrix = np.stack([nodes[i].vector for i in level_ids])
        groups = [[level_ids[j] for j in g] for g in clusters(matrix, n_clusters, seed)]
        summaries = [summarise(llm, [nodes[i].text for i in g], input_tokens) or nodes[g[0]].text for g in groups]
        summary_vectors = encode(summaries)
        next_ids = []
        for group, summary, vector in zip(groups, summaries, summary_vectors, strict=True):
            docs = sorted(d for i in group for d in nodes[i].docs)
            nodes.append(Node(summary, vector, level, children=group, docs=docs))
            next_ids.append(len(nodes) - 1)
        level_ids = next_ids
    return SummaryTree(nodes, level_ids)


def parse_choice(reply: str, n: int) -> int:
    """The 0-based option a navigation reply names (the first number in range), else the first option."""
    for match in re.findall(r"\d+", reply):
        if 1 <= int(match) <= n:
            return int(match) - 1
    return 0


def walk(llm: ChatModel, tree: SummaryTree, query: str, *, summary_words: int = 60) -> tuple[int, list[int]]:
    """MemWalker's descent: at each level the LLM picks one child by its summary; returns (node, path).

    It stops at a node whose children are passages (or at a passage, for a corpus too small to summarise).
    """
    options = tree.roots
    path: list[int] = []
    while True:
        if len(options) == 1:
            chosen = options[0]
        else:
            summaries = [clip_words(tree.nodes[i].text, summary_words) for i in options]
            reply = llm.chat([{"role": "system", "content": prompts.NAVIGATE_SYSTEM},
                              {"role": "user", "content": prompts.navigate_user(query, summaries)}],
                             max_tokens=3, temperature=0.0, grammar=prompts.navigate_grammar(len(options)))
            chosen = options[parse_choice(reply, len(options))]
        path.append(chosen)
        node = tree.nodes[chosen]
        if node.level <= 1:
            return chosen, path
        options = node.children
