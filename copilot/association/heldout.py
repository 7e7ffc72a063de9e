"""Held-out benchmarks on the lives: the pooled statements alone, and the same hidden among distractor lines.

A person's statements sit in a real conversation among hundreds of ordinary lines. A model trained only to
tell one statement from another can learn to rank anything personal-sounding high, and the pool of
statements alone would never show it. So every measurement is made twice:

- ``alone``: one pool of every held-out statement (a trigger must find its own among all of them);
- ``distractors``: the same pool, and for each person a seeded sample of ``per_person`` conversational lines
  (LoCoMo turns by default: real-style chat, never trained on) added to that person's search.

Relations (causal, state, goal, value) are kept per query, so a result can be broken down by them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from copilot.association.data import Life, Memory, Query, lives_benchmark

DISTRACTORS_PER_PERSON = 300


def relation_of_queries(lives: Sequence[Life], queries: Sequence[Query]) -> list[str]:
    """The relation of each query's statement (queries from :func:`lives_benchmark` over ``lives``)."""
    by_id: dict[str, str] = {}
    index: dict[str, int] = {}
    for life in lives:
        number = index.setdefault(life.person, 0)
        index[life.person] = number + 1
        by_id[f"{life.person}/{number}"] = life.relation
    return [by_id[q.gold[0]] for q in queries]


def pooled_with_distractors(lives: Sequence[Life], distractors: Sequence[str], per_person: int = DISTRACTORS_PER_PERSON,
                            seed: int = 0, kinds: Sequence[str] = ("trigger", "direct")
                            ) -> tuple[list[Memory], list[Query]]:
    """Every statement of ``lives`` in one pool, plus ``per_person`` distractor lines drawn for each person
    (seeded, without replacement within a person); each person's queries search that person's group."""
    memories, queries = lives_benchmark(lives, pooled=True, kinds=kinds)
    persons = sorted({life.person for life in lives})
    lines = sorted(set(distractors))
    rng = random.Random(seed)
    out_memories: list[Memory] = []
    for person in persons:
        out_memories += [Memory(m.id, m.text, person) for m in memories]
        chosen = rng.sample(lines, min(per_person, len(lines))) if lines else []
        out_memories += [Memory(f"distractor/{j}", text, person) for j, text in enumerate(chosen)]
    out_queries = [Query(q.id, q.text, q.gold, q.gold[0].rsplit("/", 1)[0], q.kind) for q in queries]
    return out_memories, out_queries


def benchmarks(lives: Sequence[Life], distractors: Sequence[str], per_person: int = DISTRACTORS_PER_PERSON,
               seed: int = 0) -> dict[str, tuple[list[Memory], list[Query]]]:
    """``alone`` and ``distractors``, both with triggers and direct questions as queries."""
    out = {"alone": lives_benchmark(lives, pooled=True, kinds=("trigger", "direct"))}
    if distractors:
        out["distractors"] = pooled_with_distractors(lives, distractors, per_person, seed)
    return out
