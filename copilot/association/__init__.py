"""Associative recall: a learned query-side encoder that brings back a memory the query never names.

A smell of madeleine brings back a childhood afternoon that shares no words with it. Here the "smell" is a
new message ("I've been coughing every night this week") and the memory is something said months ago ("I
have asthma and damp winters set it off"). Plain sentence embeddings match wording and topic, so they
often miss such links; this package learns them from simulated lives without touching stored memories.

Model. The frozen base embedder E (all-MiniLM-L6-v2) encodes memories and the plain query. A query-side
adapter gives E_θ(q), and the score is

    score(q, m) = cos(E(q), E(m)) + w·cos(E_θ(q), E(m)).

Two kinds of adapter ship (:mod:`copilot.association.adapter`):

- ``default_adapter.npz``, the default: a residual MLP on the 384-d output vector,
  E_θ(q) = normalise(E(q) + W2·gelu(W1·E(q) + b1) + b2), a few matrix products per question;
- ``default_lora``: a query-side LoRA (:mod:`copilot.association.lora`), rank-32 deltas in the attention and
  feed-forward projections of all six BERT layers of a copy of MiniLM, which reads the question a second time.

Memories are never re-encoded and no LLM is called. Because the score is linear in E(m) it equals a cosine
with the single vector E(q) + w·E_θ(q), so :meth:`AssociativeScorer.query_vector` turns a question into that
one, and every existing index ranks by the combined score unchanged.

Why the MLP is the default. Both kinds were trained on the same 376 of 470 simulated persons and measured on
the other 94 (930 statements, 2,789 triggers), ``report`` (2026-12-05):

| trigger Recall@10 | plain | MLP (w 1) | LoRA (w 3) |
|---|---|---|---|
| held-out statements alone | 19.4 | 24.2 | 29.6 |
| among 300 distractor lines per person | 18.3 | 22.8 | 28.6 |
| two statements hidden in a whole real conversation | 47.8 | 53.9 | 61.5 |
| the same, each trigger asked after a real chat turn | 12.5 | **15.5** | 13.1 |

The first three pools ask the simulator's own trigger lines, which the adapters were trained on; the LoRA wins
there. A later message in a real chat carries its own chatter, and there (the last row, McNemar MLP against
LoRA p 5e-5) the LoRA gains almost nothing while the MLP keeps +3.0 (p 1e-13), as on an outside benchmark of
real conversations (MLP +4.1, LoRA -8.5). Direct questions (Recall@1) lose nothing: 82.6 plain and 85.5 with the
MLP among real turns, 57.6 and 57.7 alone. The MLP also costs 0.1 ms a question against the LoRA's 7 ms.
Two tries to raise the real-conversation figure were not kept (docs/benchmarks.md): training with each trigger
also asked inside another person's line (``train --chatter 1``), and w chosen on training persons in real
conversations (``train --real-turn-persons 40``), which cost the test persons' direct questions 3 points.
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

Figures: ``python -m copilot.association report --adapter copilot/association/default_adapter.npz
--baseline copilot/association/default_lora`` (held-out persons alone, among distractors and in real
conversations, per relation, direct questions, LoCoMo evidence recall, read-time cost); a benchmark of your own:
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
