"""``python -m copilot.bench lookup`` (``make bench-lookup``): can retrieval find a fact the question names?

The lookup set (``tests/data/lookup.jsonl``) holds questions over the four shared papers, each about one findable
fact (an acronym's expansion, a number, a name) with a gold string that the right passage contains. The papers
are added through the product's library into a temporary data directory, and each question goes through the
product's retrieval (``retrieve_mixture`` then ``pack_context``, scoped to the whole library) once per method:
``dense``, ``lexical`` and ``hybrid`` (fused as ``COPILOT_RETRIEVAL_FUSION`` and
``COPILOT_RETRIEVAL_LEXICAL_WEIGHT`` choose; ``hybrid-rrf`` and ``hybrid-weighted`` name a fusion, when asked for).

A hit is a packed chunk of the question's paper whose text contains the gold (case-insensitive, whitespace
normalised). Recall@8 is the share of questions with a hit among the 8 packed items; MRR the mean of 1/rank of
the first hit (0 without one). Packing is the product's (near-duplicates skipped) with the token budget left out,
so that 8 items are kept whatever the backend's budget.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import SecretStr

from copilot.config import DATA_ROOT, Settings
from copilot.retrieval import LEXICAL_WEIGHT, Fusion, RetrievalMode, pack_context, retrieve_mixture
from copilot.storage import Store
from copilot.types import RetrievedItem

LOOKUP_SET = Path(__file__).resolve().parents[2] / "tests" / "data" / "lookup.jsonl"
PAPERS_DIR = DATA_ROOT / "papers"
USER = "lookup"
K = 8
UNLIMITED_BUDGET = 10**9
# Each method as the product's retrieval mode and fusion (``hybrid``: the fusion the settings choose).
METHODS: dict[str, tuple[RetrievalMode, Fusion]] = {
    "dense": ("dense", "rrf"), "lexical": ("lexical", "rrf"), "hybrid": ("hybrid", "rrf"),
    "hybrid-rrf": ("hybrid", "rrf"), "hybrid-weighted": ("hybrid", "weighted"),
}
DEFAULT_METHODS = ("dense", "lexical", "hybrid")


@dataclass(frozen=True)
class Question:
    """One lookup question: the paper it is about (its file stem), the fact it asks for."""

    id: str
    paper: str
    question: str
    gold: str
    kind: str = ""


def load_questions(path: Path = LOOKUP_SET) -> list[Question]:
    return [Question(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def normalise(text: str) -> str:
    """Lower-cased, every run of whitespace one space: how golds are matched."""
    return re.sub(r"\s+", " ", text).strip().lower()


def first_hit(items: Sequence[RetrievedItem], gold: str, paper_id: str) -> int | None:
    """The 1-based rank of the first chunk of ``paper_id`` that contains ``gold``; None without one."""
    wanted = normalise(gold)
    for rank, item in enumerate(items, start=1):
        if item.kind == "chunk" and item.paper_id == paper_id and wanted in normalise(item.text):
            return rank
    return None


def score(store: Store, encode: Callable[[str], np.ndarray], questions: Sequence[Question],
          paper_ids: dict[str, str], methods: Sequence[str] = DEFAULT_METHODS, *, user_id: str = USER, k: int = K,
          dedup_threshold: float = 0.85, fusion: Fusion = "weighted", lexical_weight: float = LEXICAL_WEIGHT
          ) -> list[dict]:
    """Recall@k and MRR of each method over ``questions`` (``paper_ids``: file stem -> stored paper id), as
    ``{"method", "recall_at_8", "mrr"}`` rows in the order of ``methods``. ``hybrid`` fuses by ``fusion``
    (``hybrid-weighted`` always by the weighted sum), with ``lexical_weight`` as the lexical share of a weighted
    fusion."""
    vectors = [encode(q.question) for q in questions]
    rows = []
    for method in methods:
        mode, method_fusion = METHODS[method]
        ranks = []
        for question, vector in zip(questions, vectors, strict=True):
            candidates = retrieve_mixture(store, vector, user_id=user_id, k=k, include_thoughts=False,
                                          query_text=question.question, mode=mode,
                                          fusion=fusion if method == "hybrid" else method_fusion,
                                          lexical_weight=lexical_weight)
            packed = pack_context(candidates, k=k, budget_tokens=UNLIMITED_BUDGET, dedup_threshold=dedup_threshold)
            ranks.append(first_hit(packed.items, question.gold, paper_ids[question.paper]))
        n = max(len(ranks), 1)
        rows.append({"method": method, "recall_at_8": round(sum(r is not None for r in ranks) / n, 4),
                     "mrr": round(sum(1.0 / r for r in ranks if r is not None) / n, 4)})
    return rows


def findable(store: Store, questions: Sequence[Question], paper_ids: dict[str, str]) -> int:
    """How many questions have their gold in some chunk of their paper (the most any method can reach)."""
    found = 0
    for question in questions:
        chunks = store.chunks.of_paper(paper_ids[question.paper])
        found += first_hit([RetrievedItem("chunk", c.id or 0, c.text, 0.0, paper_id=c.paper_id) for c in chunks],
                           question.gold, paper_ids[question.paper]) is not None
    return found


@contextmanager
def library_of(papers: Sequence[str], settings: Settings, papers_dir: Path = PAPERS_DIR,
               log: Callable[[str], None] = lambda message: None) -> Iterator[tuple[object, dict[str, str]]]:
    """The papers (file stems in ``papers_dir``) added through the product's library into a temporary data
    directory, as the library (its ``store`` and ``embedder``) and the stored id of each stem."""
    from copilot.library import Library

    with tempfile.TemporaryDirectory(prefix="lookup-") as tmp:
        library = Library.open(settings.model_copy(update={"data_dir": Path(tmp), "database_url": SecretStr("")}))
        try:
            ids = {}
            for stem in papers:
                result = library.add_pdf(papers_dir / f"{stem}.pdf", user_id=USER)
                ids[stem] = result.paper_id
                log(f"added {stem}: {result.n_chunks} chunks")
            yield library, ids
        finally:
            library.store.close()


def run(settings: Settings, methods: Sequence[str] = DEFAULT_METHODS, path: Path = LOOKUP_SET,
        log: Callable[[str], None] = lambda message: None) -> tuple[list[dict], dict]:
    """Build the library, score ``methods``; returns the rows and what they were measured on."""
    questions = load_questions(path)
    papers = sorted({q.paper for q in questions})
    with library_of(papers, settings, log=log) as (library, ids):
        rows = score(library.store, library.embedder.encode_query, questions, ids, methods,
                     dedup_threshold=settings.dedup_threshold, fusion=settings.retrieval_fusion,
                     lexical_weight=settings.retrieval_lexical_weight)
        about = {"questions": len(questions), "papers": len(papers),
                 "chunks": sum(len(library.store.chunks.of_paper(i)) for i in ids.values()),
                 "findable": findable(library.store, questions, ids)}
    return rows, about


def markdown(rows: Sequence[dict], about: dict) -> str:
    lines = [f"{about['questions']} questions over {about['papers']} papers ({about['chunks']} chunks); "
             f"{about['findable']} have their gold in a chunk of their paper.", "",
             "| method | Recall@8 | MRR |", "|---|---|---|"]
    lines += [f"| {r['method']} | {r['recall_at_8']:.3f} | {r['mrr']:.3f} |" for r in rows]
    return "\n".join(lines)
