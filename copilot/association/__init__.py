"""Associative recall: a learned query-side encoder that brings back a memory the query never names.

A smell of madeleine brings back a childhood afternoon that shares no words with it. Here the "smell" is a
new message ("I've been coughing every night this week") and the memory is something said months ago ("I
have asthma and damp winters set it off"). Plain sentence embeddings match wording and topic, so they
often miss such links; this package learns them from simulated lives without touching stored memories.

Model. The frozen base embedder E (all-MiniLM-L6-v2) encodes memories and the plain query. The shipped
adapter is a query-side LoRA (:mod:`copilot.association.lora`): rank-r deltas in BERT's projections of a
copy of MiniLM, which reads the question a second time as E_θ(q); the score is

    score(q, m) = cos(E(q), E(m)) + w·cos(E_θ(q), E(m)).

Memories are never re-encoded; reading costs one extra MiniLM pass over the question (the deltas are merged
into the copy's weights at load time) and no LLM call. Because the score is linear in E(m) it equals a cosine
with the single vector E(q) + w·E_θ(q), so :meth:`AssociativeScorer.query_vector` turns a question into that
one, and every existing index ranks by the combined score unchanged.

Why a LoRA. The older adapter, a residual MLP on the 384-d output vector (``default_adapter.npz``, kept as a
fallback kind), can only move a finished embedding; it cannot change how the encoder reads the words of a
message, and on held-out persons it gained little. A LoRA inside the encoder can. Training
(:mod:`copilot.association.lora_training`) is InfoNCE at τ 0.05 on the summed score, in batches of persons
(negatives: the other statements of the same person and of the other persons in the batch), with one
trigger and the direct question of every statement per epoch; it is short and stops early on validation
persons whose statements are hidden among distractor lines, because longer training learns the training
persons and loses transfer. Test persons (94 of 470, split by person with seed 0) are never seen.

Reproduce the shipped adapter, from the repository root::

    python -m copilot.association train --out copilot/association/default_lora

Figures: ``python -m copilot.association report`` (held-out persons alone and among distractors, per
relation, direct questions, LoCoMo evidence recall, read-time cost); a benchmark of your own:
``python -m copilot.association eval``. The measured table is in the README ("Associative recall").

Use at read time (the engine does this when ``COPILOT_ASSOCIATION`` is on)::

    from copilot.association import AssociativeScorer, load_adapter
    scorer = AssociativeScorer(embedder, load_adapter())
    vector = scorer.query_vector("text", embedder.encode_query("text"))   # search any index with it
    scores = scorer.score("text", memory_vectors)
"""

from copilot.association.adapter import DEFAULT_ADAPTER_PATH, AdapterFileError, QueryAdapter, load_adapter
from copilot.association.lora import LoraAdapter
from copilot.association.scoring import AssociativeScorer, combined_query_vectors, combined_scores

__all__ = [
    "DEFAULT_ADAPTER_PATH",
    "AdapterFileError",
    "AssociativeScorer",
    "LoraAdapter",
    "QueryAdapter",
    "combined_query_vectors",
    "combined_scores",
    "load_adapter",
]
