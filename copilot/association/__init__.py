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

Reading a message sentence by sentence. A later message seldom asks only for the memory it needs: "The final was
a mess, we lost on penalties. Anyway, I've been coughing every night." Read whole, its small talk outweighs the
sentence that calls for "damp winters set off my asthma". So recall (:mod:`copilot.memories`) reads the whole
message and each of its sentences of four words or more (:func:`~copilot.association.scoring.message_parts`;
"Hmm." asks for nothing of its own), standardises each part's scores over the user's memories, and gives each
memory its best part (:func:`~copilot.association.scoring.fused_scores`). A message of one sentence is read as
before.

Why the MLP is the default. Both kinds were trained on the same 376 of 470 simulated persons and measured on
the other 94 (930 statements, 2,789 triggers, 930 direct questions), ``report`` (2026-12-07):

| trigger Recall@10 | plain | MLP (w 1) | LoRA (w 3) | plain, by sentence | **MLP, by sentence** |
|---|---|---|---|---|---|
| held-out statements alone | 19.4 | 24.2 | 29.6 | 18.8 | 22.9 |
| among 300 distractor lines per person | 18.3 | 22.8 | 28.6 | 17.8 | 22.0 |
| two statements hidden in a whole real conversation | 47.8 | 53.9 | 61.5 | 49.4 | 55.2 |
| the same, each trigger asked after a real chat turn | 12.5 | 15.5 | 13.1 | 38.4 | **44.2** |

The last column is what the chat does: +31.7 points over plain cosine where users live (McNemar p 1e-239), of
which reading by sentence gives about 26 and the MLP 5.7 more (p 2e-20 against plain cosine read the same way).
Direct questions asked after a chat turn find their memory first 79.3 % of the time against 29.9 % read whole; alone
and among real turns they lose nothing (57.6 and 57.7, 82.6 and 85.5). Reading by sentence costs the simulator's own
two-sentence triggers 0.9 to 1.3 points in the first two rows. The LoRA read by sentence finds more still (51.8
after a chat turn, a scratch run of :func:`~copilot.association.evaluation.evaluate`; ``report`` reads its baseline
whole), but it reads every sentence a second time: 91.5 ms a chat message against the MLP's 36.3 ms, past a budget
of 40 ms a question on 2 cores, and an outside benchmark of real conversations measured it below plain cosine on
whole messages (MLP +4.1, LoRA -8.5). It ships beside the MLP
(``COPILOT_ASSOCIATION_ADAPTER=copilot/association/default_lora``). Earlier tries to raise the figure after a chat
turn by training were not kept (docs/benchmarks.md): each trigger also asked inside another person's line
(``train --chatter 1``), and w chosen on training persons in real conversations (``train --real-turn-persons 40``).
The report compares any two adapters on the same split (``report --adapter A --baseline B``), and ``crossval``
compares the two kinds over folds of persons.

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
conversations, whole and by sentence, per relation, direct questions, LoCoMo evidence recall, read-time cost); a
benchmark of your own: ``python -m copilot.association eval`` (``--whole-message`` to read each query whole). The
measured table is in docs/benchmarks.md ("Associative recall").

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
