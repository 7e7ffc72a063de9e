"""Associative recall: a learned query-side encoder that brings back a memory the query never names.

A smell of madeleine brings back a childhood afternoon that shares no words with it. Here the "smell" is a
new message ("I've been coughing every night this week") and the memory is something said months ago ("I
have asthma and damp winters set it off"). Plain sentence embeddings match wording and topic, so they
often miss such links; this package learns them from simulated lives without touching stored memories.

Model. The frozen base embedder E (all-MiniLM-L6-v2) encodes memories and the plain query. A query-side
adapter gives E_θ(q), and the score is

    score(q, m) = cos(E(q), E(m)) + w·cos(E_θ(q), E(m)).

Two kinds of adapter ship (:mod:`copilot.association.adapter`):

- ``default_lora``, the default: a query-side LoRA (:mod:`copilot.association.lora`), rank-32 deltas in the
  attention and feed-forward projections of all six BERT layers of a copy of MiniLM, which reads the
  question a second time (one extra MiniLM pass, as long again as the plain encoding; the deltas are merged at
  load time);
- ``default_adapter.npz``, the light fallback: a residual MLP on the 384-d output vector,
  E_θ(q) = normalise(E(q) + W2·gelu(W1·E(q) + b1) + b2), a few matrix products per question.

Memories are never re-encoded and no LLM is called. Because the score is linear in E(m) it equals a cosine
with the single vector E(q) + w·E_θ(q), so :meth:`AssociativeScorer.query_vector` turns a question into that
one, and every existing index ranks by the combined score unchanged.

Why the LoRA is the default. Both kinds were trained on the same 376 of 470 simulated persons and measured on
the other 94 (930 statements, 2,789 triggers), whose statements were also hidden among 300 distractor lines
per person. Trigger Recall@10 with distractors: plain 18.0, MLP 23.2 (+5.1, exact McNemar p 9e-24), LoRA
28.0 (+10.0, p 1.5e-38); alone: 19.4, 24.2 and 29.6 (+10.2). Direct questions and LoCoMo look-up lose nothing.
The report compares any two adapters on the same split (``report --adapter A --baseline B``), and
``crossval`` compares the two kinds over folds of persons.

Training. Both use InfoNCE at τ 0.05 in batches of persons (negatives: the other statements of the same
person and of the other persons in the batch) on triggers and direct questions, after dropping pairs within
cosine 0.9 of an evaluation text. The MLP (:mod:`copilot.association.training`) trains on cached base
embeddings. The LoRA (:mod:`copilot.association.lora_training`) trains on its own term with one trigger and
the direct question per statement per epoch. A validated run keeps the moving average of its deltas at the
step that validates best on 40 of the training persons held back among distractors, then chooses the read-time
w on them. The shipped LoRA is the refit that follows: every training person, as many epochs, that w, the
last averaged deltas (the validated run's record: ``default_lora/validation_run.json``).

Reproduce the shipped adapters, from the repository root::

    python -m copilot.association train --kind residual_mlp --weight 1.0 --out copilot/association/default_adapter.npz
    python -m copilot.association train --out copilot/association/default_lora \\
        --refit-of copilot/association/default_lora/validation_run.json
    python -m copilot.association train --out DIR    # the validated run before it: step 625 of 21 batches, w 3

Figures: ``python -m copilot.association report --baseline copilot/association/default_adapter.npz
--adapter copilot/association/default_lora`` (held-out persons alone and among distractors, per relation,
direct questions, LoCoMo evidence recall, read-time cost); a benchmark of your own:
``python -m copilot.association eval``. The measured table is in docs/benchmarks.md ("Associative recall").

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
