"""``python -m copilot.bench followups``: does a follow-up question find its passage with the conversation's context?

The follow-up set (``tests/data/followups.jsonl``) holds pairs over the four shared papers: a first question that
names its subject ("How is SPECTER trained?") and a follow-up that only points back at it ("On what GPU was it
trained?"), with the paper and a gold string that the right passage contains. The papers are added through the
product's library into a temporary data directory (as the lookup benchmark does). The first question is
retrieved as the chat retrieves it; its packed sources are the previous turn's. The follow-up is then retrieved
once per method:

- ``alone``: as asked, which is what the chat did before conversations were kept;
- ``subject terms``: the rewritten query of :func:`copilot.followups.follow_up` (the question plus the earlier
  question's subject terms), for both the lexical and the dense search, which is what the chat does;
- ``alone + subject terms``: both searches fused by reciprocal rank (:func:`fuse_rankings`, the rewritten one
  first, so that it wins a tie): a hedge the chat could take instead;
- ``alone + previous sources``: as asked, with the previous answer's top 3 chunks fused in as a second ranking
  (by their cosine to the question), the other way of carrying context the issue of follow-ups suggests.

Scores, over the 5 first packed items (the product's packing, near-duplicates skipped, the token budget left out):
Recall@5, the share of follow-ups with a chunk of the right paper holding the gold among them; paper@5, the share
with any chunk of the right paper among them; and share@5, the mean fraction of them that come from the right
paper. A question the rewriting does not take for a follow-up is searched for as asked by every method.

``--detection`` measures only whether a question is taken for a follow-up (:func:`copilot.followups.is_follow_up`,
no library needed): the share of the set's follow-ups taken for ones, and the share of the self-contained questions
of ``tests/data/self_contained.jsonl`` wrongly taken for ones. Those hold a pronoun or a demonstrative, as
researchers write them ("What does S2ORC contain and how big is it?").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from copilot.bench.lookup import UNLIMITED_BUDGET, first_hit, library_of
from copilot.config import Settings
from copilot.followups import FollowUp, follow_up, is_follow_up
from copilot.retrieval import Candidate, chunk_items, fused_order, pack_context, retrieve_mixture
from copilot.storage import Store
from copilot.types import RetrievedItem

FOLLOWUP_SET = Path(__file__).resolve().parents[2] / "tests" / "data" / "followups.jsonl"
SELF_CONTAINED_SET = FOLLOWUP_SET.with_name("self_contained.jsonl")
USER = "lookup"
K = 8  # items packed, as the chat packs
AT = 5  # the items scored
CARRIED = 3  # the previous answer's chunks carried by ``alone + previous sources``
METHODS = ("alone", "subject terms", "alone + subject terms", "alone + previous sources")


@dataclass(frozen=True)
class Pair:
    """A first question naming its subject, a follow-up pointing back at it, the paper (file stem) and a gold
    string of the passage that answers the follow-up."""

    id: str
    paper: str
    first: str
    follow_up: str
    gold: str


def load_pairs(path: Path = FOLLOWUP_SET) -> list[Pair]:
    return [Pair(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def fuse_rankings(*rankings: list[Candidate]) -> list[Candidate]:
    """Several candidate lists of one question (a follow-up as asked, and with its conversation's subject) as one,
    by reciprocal rank: what any of them ranks high stays high, and what both find rises; a tie goes to the
    ranking given first."""
    found: dict[tuple[str, int], Candidate] = {}
    for ranking in rankings:
        for item, vector in ranking:
            found.setdefault((item.kind, item.id), (item, vector))
    order = fused_order([[((i.kind, i.id), 0.0) for i, _ in ranking] for ranking in rankings], fusion="rrf",
                        weights=[1.0] * len(rankings))
    return [found[key] for key in order]


def _mixture(store: Store, encode: Callable[[str], np.ndarray], text: str, k: int, options: dict
             ) -> list[Candidate]:
    return retrieve_mixture(store, encode(text), user_id=USER, k=k, include_thoughts=False, query_text=text,
                            **options)


def _previous_sources(store: Store, encode: Callable[[str], np.ndarray], question: str, chunk_ids: Sequence[int]
                      ) -> list[Candidate]:
    """The previous answer's chunks, best cosine to ``question`` first: a ranking to fuse with the question's."""
    query = encode(question)
    carried = chunk_items(store, [(int(i), 0.0) for i in chunk_ids])
    for item, vector in carried:
        item.score = float(vector @ query)
    return sorted(carried, key=lambda pair: pair[0].score, reverse=True)


def candidates(store: Store, encode: Callable[[str], np.ndarray], question: str, method: str,
               follow: FollowUp | None, previous: Sequence[RetrievedItem], *, k: int, options: dict
               ) -> list[Candidate]:
    """The follow-up's ranked candidates by ``method`` (see the module docstring)."""
    if follow is None or method == "alone":
        return _mixture(store, encode, question, k, options)
    if method == "subject terms":
        return _mixture(store, encode, follow.query, k, options)
    if method == "alone + subject terms":
        return fuse_rankings(_mixture(store, encode, follow.query, k, options),
                             _mixture(store, encode, question, k, options))
    chunk_ids = [i.id for i in previous if i.kind == "chunk"][:CARRIED]
    return fuse_rankings(_mixture(store, encode, question, k, options),
                         _previous_sources(store, encode, question, chunk_ids))


def score(store: Store, encode: Callable[[str], np.ndarray], pairs: Sequence[Pair], paper_ids: dict[str, str],
          methods: Sequence[str] = METHODS, *, k: int = K, dedup_threshold: float = 0.85,
          options: dict | None = None) -> list[dict]:
    """Recall@5, paper@5 and share@5 of each method over ``pairs`` (``paper_ids``: file stem -> stored id), as
    ``{"method", "recall_at_5", "paper_at_5", "share_at_5", "rewritten"}`` rows in the order of ``methods``
    (``rewritten``: how many follow-ups were taken for ones)."""
    options = options or {}

    def pack(found: list[Candidate]) -> list[RetrievedItem]:
        return pack_context(found, k=k, budget_tokens=UNLIMITED_BUDGET, dedup_threshold=dedup_threshold).items

    firsts = [pack(_mixture(store, encode, pair.first, k, options)) for pair in pairs]
    contexts = [follow_up(pair.follow_up, [pair.first]) for pair in pairs]
    rows = []
    for method in methods:
        hits = papers = 0
        share = 0.0
        for pair, follow, first in zip(pairs, contexts, firsts, strict=True):
            found = candidates(store, encode, pair.follow_up, method, follow, first, k=k, options=options)
            items = pack(found)[:AT]
            wanted = paper_ids[pair.paper]
            hits += first_hit(items, pair.gold, wanted) is not None
            papers += any(i.kind == "chunk" and i.paper_id == wanted for i in items)
            share += sum(i.kind == "chunk" and i.paper_id == wanted for i in items) / AT
        n = max(len(pairs), 1)
        rows.append({"method": method, "recall_at_5": round(hits / n, 4), "paper_at_5": round(papers / n, 4),
                     "share_at_5": round(share / n, 4), "rewritten": sum(c is not None for c in contexts)})
    return rows


def run(settings: Settings, methods: Sequence[str] = METHODS, path: Path = FOLLOWUP_SET, limit: int | None = None,
        log: Callable[[str], None] = lambda message: None) -> tuple[list[dict], dict]:
    """Build the library, score ``methods`` (on the first ``limit`` pairs when given); returns the rows and what
    they were measured on."""
    from copilot.retrieval import retrieval_options

    pairs = load_pairs(path)[:limit]
    papers = sorted({p.paper for p in pairs})
    with library_of(papers, settings, log=log) as (library, ids):
        rows = score(library.store, library.embedder.encode_query, pairs, ids, methods,
                     dedup_threshold=settings.dedup_threshold, options=retrieval_options(settings))
        about = {"pairs": len(pairs), "papers": len(papers),
                 "chunks": sum(len(library.store.chunks.of_paper(i)) for i in ids.values()),
                 "retrieval": settings.retrieval}
    return rows, about


def detection(pairs_path: Path = FOLLOWUP_SET, standalone_path: Path = SELF_CONTAINED_SET) -> dict:
    """How often follow-ups are taken for ones, and self-contained questions wrongly so, with the misses."""
    follow_ups = [pair.follow_up for pair in load_pairs(pairs_path)]
    standalone = [json.loads(line)["question"] for line in standalone_path.read_text().splitlines() if line.strip()]
    taken = [q for q in follow_ups if is_follow_up(q)]
    wrongly = [q for q in standalone if is_follow_up(q)]
    return {"follow_ups": len(follow_ups), "follow_ups_taken": len(taken),
            "follow_up_rate": round(len(taken) / max(len(follow_ups), 1), 4),
            "self_contained": len(standalone), "self_contained_taken": len(wrongly),
            "false_follow_up_rate": round(len(wrongly) / max(len(standalone), 1), 4),
            "missed": [q for q in follow_ups if q not in taken], "wrongly_taken": wrongly}


def markdown(rows: Sequence[dict], about: dict) -> str:
    rewritten = rows[0]["rewritten"] if rows else 0
    lines = [f"{about['pairs']} follow-ups over {about['papers']} papers ({about['chunks']} chunks), "
             f"{about['retrieval']} retrieval; {rewritten} taken for follow-ups.", "",
             "| follow-up searched with | Recall@5 | right paper in top 5 | top 5 from the right paper |",
             "|---|---|---|---|"]
    lines += [f"| {r['method']} | {r['recall_at_5']:.3f} | {r['paper_at_5']:.3f} | {r['share_at_5']:.3f} |"
              for r in rows]
    return "\n".join(lines)
