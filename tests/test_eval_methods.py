"""The baselines' retrieval, the summary tree, the judge and the verdict, on tiny hand-made corpora."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from copilot.config import Settings
from copilot.embeddings import get_embedder
from copilot import prompts
from copilot.eval.corpus import Bench, verdict_of
from copilot.eval.judge import compare
from copilot.eval.methods import make_methods
from copilot.eval.tasks import Doc, Item, Task
from copilot.eval.tree import build_tree, clusters, parse_choice, walk
from copilot.llm.base import GenerationOptions, Message
from copilot.retrieval import fused_order
from tests.scripted_llm import ScriptedLLM

DOCS = [
    ("p1", "Citation graphs", "SPECTER embeds scientific papers with a transformer trained on a citation graph."),
    ("p1", "Training", "The triplet loss pulls a paper towards the papers it cites and away from others."),
    ("p2", "Corpus", "S2ORC is a corpus of 81 million English academic papers with full text for 8 million."),
    ("p2", "Parsing", "PDFs are parsed into paragraphs, sections, citations and bibliography entries."),
    ("p3", "Faithfulness", "LongEval gives guidelines for human evaluation of faithfulness in summaries."),
    ("p3", "Annotation", "Fine-grained annotation of summary units raises agreement between annotators."),
]


class Replies(ScriptedLLM):
    """Replies from a function of (system prompt, user turn); probes get fixed probabilities."""

    def __init__(self, reply, probabilities: dict[str, float] | None = None) -> None:  # noqa: ANN001
        super().__init__()
        self.reply = reply
        self.probabilities = probabilities

    def _stream(self, messages: list[Message], options: GenerationOptions) -> Iterator[str]:
        self.calls.append(messages)
        if options.probe is not None and self.probabilities is not None:
            options.probe.probabilities = dict(self.probabilities)
        yield self.reply(messages[0]["content"], messages[-1]["content"])


@pytest.fixture(scope="module")
def embedder():  # noqa: ANN201
    return get_embedder(Settings())


def bench(tmp_path: Path, embedder, llm: ScriptedLLM, *, docs=DOCS, **settings) -> Bench:  # noqa: ANN001, ANN003
    docs = [Doc(f"{g}#{i}", g, g.upper(), section, text) for i, (g, section, text) in enumerate(docs)]
    task = Task("synthesis", "generate", docs, [Item("q", "How is SPECTER trained?", "With citations.")], "test")
    return Bench(task, Settings(data_dir=tmp_path, **settings), embedder, llm)


def test_ranked_baselines_find_the_right_passage(tmp_path: Path, embedder) -> None:  # noqa: ANN001
    b = bench(tmp_path, embedder, Replies(lambda s, u: "ok"), top_k=2)
    methods = make_methods(b, ["dense", "bm25", "tfidf", "hybrid"])
    item = Item("q", "What does the triplet loss pull a paper towards?", "")
    for name, method in methods.items():
        method.prepare([item])
        retrieval = method.retrieve(item)
        assert retrieval.items[0].text == DOCS[1][2], name
        assert len(retrieval.items) == 2, f"{name}: top K = 2"
        assert retrieval.ranking[0] == "p1" and len(retrieval.ranking) == len(DOCS)
    # Scope: an item may read only its own documents.
    scoped = Item("q", "What does the triplet loss pull a paper towards?", "", scope=["p2"])
    assert {i.paper_id for i in methods["bm25"].retrieve(scoped).items} == {"p2"}
    b.close()


@pytest.mark.parametrize("fusion", ["rrf", "weighted"])
def test_hybrid_fuses_as_the_product_does(tmp_path: Path, embedder, fusion: str) -> None:  # noqa: ANN001
    b = bench(tmp_path, embedder, Replies(lambda s, u: "ok"), retrieval_fusion=fusion, retrieval_lexical_weight=0.7)
    hybrid = make_methods(b, ["hybrid"])["hybrid"]
    item = Item("q", "corpus of academic papers", "")
    hybrid.prepare([item])
    dense, sparse = hybrid.dense.scores(item), hybrid.bm25.scores(item)
    order = list(np.argsort(-hybrid.scores(item), kind="stable"))
    by_dense = sorted(range(len(DOCS)), key=lambda i: -dense[i])
    by_words = [i for i in sorted(range(len(DOCS)), key=lambda i: -sparse[i]) if sparse[i] > 0]
    assert by_words and len(by_words) < len(DOCS)  # some passages hold none of the words
    # 5×K candidates from each side hold all six passages: the fused order is the product's fusion of both.
    expected = fused_order([[(i, dense[i]) for i in by_dense], [(i, sparse[i]) for i in by_words]], fusion=fusion,
                           weights=(0.3, 0.7))
    assert order == expected
    assert order[0] == 2  # "S2ORC is a corpus of 81 million English academic papers"
    b.close()


def test_full_context_is_reading_order_cut_at_the_budget(tmp_path: Path, embedder) -> None:  # noqa: ANN001
    llm = Replies(lambda s, u: "ok")  # counts a token per word
    docs = DOCS * 3  # 216 words
    b = bench(tmp_path, embedder, llm, docs=docs, context_budget_tokens=100)
    retrieval = make_methods(b, ["full-context"])["full-context"].retrieve(Item("q", "anything", ""))
    # Whole passages in reading order: 12 + 15 + 16 + 10 + 10 + 9 + 12 + 15 = 99 words; the 9th (16 words)
    # would overflow and leaves 1 token of room, too little to be worth a cut passage.
    assert [i.text for i in retrieval.items] == [t for _, _, t in docs[:8]]
    assert sum(i.n_tokens for i in retrieval.items) == 99
    b.close()
    long_doc = ("p9", "Long", " ".join(f"word{i}" for i in range(100)))
    b = bench(tmp_path / "cut", embedder, llm, docs=[DOCS[0], long_doc], context_budget_tokens=100)
    retrieval = make_methods(b, ["full-context"])["full-context"].retrieve(Item("q", "anything", ""))
    # 12 tokens, then the 100-word passage overflows with 88 tokens of room: cut to 0.75 × 88 = 66 words.
    assert [i.n_tokens for i in retrieval.items] == [12, 66]
    assert retrieval.items[1].text.split() == long_doc[2].split()[:66]
    b.close()


def test_summary_tree_and_walk() -> None:
    rng = np.random.default_rng(0)
    centres = np.eye(4, 16)
    vectors = np.concatenate([c + 0.05 * rng.standard_normal((5, 16)) for c in centres]).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    groups = clusters(vectors, 4, seed=0)
    assert groups == [list(range(0, 5)), list(range(5, 10)), list(range(10, 15)), list(range(15, 20))]

    texts = [f"passage {i}" for i in range(20)]
    llm = Replies(lambda s, u: "2" if s == prompts.NAVIGATE_SYSTEM else "a summary")
    tree = build_tree(llm, lambda xs: np.eye(len(xs), 16, dtype=np.float32), texts, vectors,
                      list(range(20)), input_tokens=200, cluster_size=5, max_branch=2)
    assert len(tree.roots) <= 2 and len(tree.summaries) == len(llm.calls) == 4 + 2
    assert sorted(d for r in tree.roots for d in tree.nodes[r].docs) == list(range(20)), "every passage once"
    node, path = walk(llm, tree, "question")
    assert tree.nodes[node].level == 1 and len(path) == 2
    children = tree.nodes[tree.roots[1]].children
    assert node == children[1 if len(children) > 1 else 0], "the walk follows the LLM's picks"
    assert parse_choice("3.", 3) == 2 and parse_choice("I pick 7", 3) == 0 and parse_choice("", 2) == 0


def test_judge_counts_position_bias_as_a_tie() -> None:
    biased = Replies(lambda s, u: "better: 1", {"1": 0.9, "2": 0.1})  # always the first shown
    assert compare(biased, "q", "ref", "answer A", "answer B") == 0.5 and len(biased.calls) == 2
    assert compare(biased, "q", "ref", "same  answer", "same answer") == 0.5 and len(biased.calls) == 2, "no call"

    def fair(system: str, user: str) -> str:  # prefers whichever answer mentions citations
        first = user.split("Answer 1:")[1].split("Answer 2:")[0]
        return "better: 1" if "citation" in first else "better: 2"

    judge = Replies(fair)  # no probabilities: the pick is read from the reply
    assert compare(judge, "q", "ref", "It uses citations.", "It uses magic.") == 1.0
    assert compare(judge, "q", "ref", "It uses magic.", "It uses citations.") == 0.0


def test_verdict_from_probabilities_or_text() -> None:
    assert verdict_of("verdict: true", {"true": 0.3, "false": 0.7}) == "false"
    assert verdict_of("verdict: false", None) == "false"
    assert verdict_of("It is true, not false", None) == "true"
    assert verdict_of("no idea", None) is None
