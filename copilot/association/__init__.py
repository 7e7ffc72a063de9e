"""Associative recall: a learned query-side encoder that brings back a memory the query never names.

A smell of madeleine brings back a childhood afternoon that shares no words with it. Here the "smell" is a
new message ("I've been coughing every night this week") and the memory is something said months ago ("I
have asthma and damp winters set it off"). Plain sentence embeddings match wording and topic, so they
often miss such links; this package learns them from simulated lives without touching stored memories.

Model. The frozen base embedder E (all-MiniLM-L6-v2) encodes memories and the plain query. A small
query-side adapter gives E_θ(q) = normalise(E(q) + W2·gelu(W1·E(q) + b1) + b2), and the score is

    score(q, m) = cos(E(q), E(m)) + w·cos(E_θ(q), E(m)).

Memories are never re-encoded; reading costs one base embedding plus two 384×384 matrix products and no
LLM call. Because the score is linear in E(m) it equals a cosine with the single vector E(q) + w·E_θ(q),
so :meth:`AssociativeScorer.query_vectors` turns a query's plain vector into that one, and every existing
index ranks by the combined score unchanged.

Why a residual MLP. The skip connection starts the adapter at the identity (its output layer is zero at
initialisation), so training moves away from the plain ranking only as far as the data support, and the
plain term in the score keeps ordinary look-up intact. Compared on training persons only (``python -m
copilot.association compare --seeds 3``: 5-fold cross-validation over the 120 training persons, each fold
searched as one pool of 240 statements, mean of 3 seeds), gain in trigger MRR over plain cosine 0.188:

    linear residual (q + Wq + b)    148k params   +0.021   w chosen 3 / 1.5 / 2
    residual MLP, hidden 64          50k params   +0.020   w chosen 2 / 1.5 / 1.5
    residual MLP, hidden 384        296k params   +0.020   w chosen 1.5 / 1.5 / 1.5
    residual MLP, hidden 768        591k params   +0.018   w chosen 1 / 1 / 0.75
    MLP without the skip            296k params   +0.015   w chosen 0.25 / 0.5 / 0.75

The skip connection is what matters; the residual forms tie within noise. The 384-wide residual MLP is
shipped: its chosen w was the same for every seed, direct-question Recall@1 moved by only -0.1 points, and
the hidden layer leaves room for more simulated lives; the linear form would do as well today. Fine-tuning
a copy of the transformer as the query tower was not tried: every training step would re-run it on a CPU,
and each read would pay a second transformer pass instead of a few matrix products.

Training (:mod:`copilot.association.training`): InfoNCE at temperature 0.05 on trigger → statement and
direct question → statement pairs; a batch is 32 persons, so each query's negatives are the other
statements of its own person plus every statement of the other persons in the batch. Base embeddings are
computed once. Training pairs within cosine 0.9 of any evaluation text (held-out lives, LoCoMo turns and
questions) are dropped first (16 of 4,796). w is chosen by 5-fold cross-validation over training persons:
the best trigger MRR while direct questions keep Recall@1 within one point. Validation persons (30 of 150,
split by person with seed 0) are never seen.

The shipped ``default_adapter.npz`` (1.2 MB, w = 1.0) is reproduced by, from the repository root::

    python -m copilot.association train --out copilot/association/default_adapter.npz

(about 3 minutes on 2 CPU cores: 2 minutes of base embeddings, 30 seconds of fitting). Figures:
``python -m copilot.association report``; a benchmark of your own: ``python -m copilot.association eval``.

Measured with the shipped adapter (``report``), on the 30 validation persons (900 triggers):

    searching a person's own 10 statements    Recall@1 35.2 → 37.3, @5 83.9 → 85.9 (McNemar p 0.056, 0.057);
                                              @10 is 100 for both by construction
    searching all 300 held-out statements     Recall@1 7.6 → 8.9 (p 0.058), @5 23.9 → 27.3 (p 0.0003),
                                              @10 35.8 → 38.4 (p 0.026)
    LoCoMo evidence, 1,978 questions          Recall@10 42.9 → 43.7 (@1 14.2 → 14.7, @5 33.5 → 34.1)
    one query's encoding                      ×1.01 to ×1.03 with the adapter applied (≈0.1–0.35 ms);
                                              no LLM module loaded

Use at read time (the engine does this when ``COPILOT_ASSOCIATION`` is on)::

    from copilot.association import AssociativeScorer, load_adapter
    scorer = AssociativeScorer(embedder, load_adapter())
    vector = scorer.query_vectors(embedder.encode_queries(["text"]))[0]   # search any index with it
    scores = scorer.score("text", memory_vectors)
"""

from copilot.association.adapter import DEFAULT_ADAPTER_PATH, AdapterFileError, QueryAdapter, load_adapter
from copilot.association.scoring import AssociativeScorer, combined_query_vectors, combined_scores

__all__ = [
    "DEFAULT_ADAPTER_PATH",
    "AdapterFileError",
    "AssociativeScorer",
    "QueryAdapter",
    "combined_query_vectors",
    "combined_scores",
    "load_adapter",
]
