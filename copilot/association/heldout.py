"""Held-out benchmarks on the lives: the pooled statements alone, and the same hidden among distractor lines.

A person's statements sit in a real conversation among hundreds of ordinary lines. A model trained only to
tell one statement from another can learn to rank anything personal-sounding high, and the pool of
statements alone would never show it. So every measurement is made twice:

- ``alone``: one pool of every held-out statement (a trigger must find its own among all of them);
- ``distractors``: the same pool, and for each person a seeded sample of ``per_person`` conversational lines
  (LoCoMo turns by default: real-style chat, never trained on) added to that person's search;
- ``real_turns``: where users live, one user's long history of which a few lines matter. Each group is one whole
  real conversation (every turn of a LoCoMo conversation, a few hundred) with ``cues`` held-out statements of one
  person inserted; their triggers and direct questions search that group only. The statements no longer compete
  with each other in the simulator's own register, only with real chat turns. LoCoMo is never trained on;
- ``real_turns_chat``: the same groups, each trigger and direct question asked after a real chat turn (a seeded
  turn of another conversation, then the trigger or question), as a later message that needs a cue carries its own
  chatter. A simulated
  trigger alone is in the register the adapters trained on; this is the measure that agrees with an outside
  benchmark of real conversations (docs/benchmarks.md, "Associative recall");
- ``real_turns_matched`` and ``real_turns_chat_matched``: the same two, with ``OTHER_STATEMENTS`` statements of
  other persons also in each group. Among real turns alone a simulated statement stands out by its form, and a
  ranking that never reads the query finds most cues there; here a cue shares its form with a hundred lines that
  are not it.

Relations (causal, state, goal, value) are kept per query, so a result can be broken down by them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from copilot.association.data import Life, Memory, Query, lives_benchmark

DISTRACTORS_PER_PERSON = 300
CUES_PER_CONVERSATION = 2  # held-out statements hidden in one real conversation
OTHER_STATEMENTS = 100  # other persons' statements also hidden in each conversation of the matched pools


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


def _utterance(turn: str) -> str:
    """A LoCoMo turn without its "Speaker: " prefix."""
    return turn.split(": ", 1)[1] if ": " in turn else turn


def among_real_turns(lives: Sequence[Life], conversations: Sequence[Sequence[str]],
                     cues: int = CUES_PER_CONVERSATION, seed: int = 0, chatty: bool = False, others: int = 0
                     ) -> tuple[list[Memory], list[Query]]:
    """Each person's statements, ``cues`` at a time (seeded order), hidden in a whole real conversation (the
    conversations taken in turn); each statement's triggers and direct question search its own group. Memory ids
    are those of :func:`lives_benchmark`, so :func:`relation_of_queries` applies. ``chatty``: each trigger and
    direct question after a seeded turn of another conversation (of the same one when there is only one; the
    questions' turns drawn apart, so the triggers are those of the pool without them). ``others``: as many
    statements of other persons (seeded, ids "other/…") also hidden in each group, so that a cue shares its form
    with lines that are not it; the queries and the rest of each group are the same as without them."""
    by_person: dict[str, list[tuple[str, Life]]] = {}
    for life in lives:
        mine = by_person.setdefault(life.person, [])
        mine.append((f"{life.person}/{len(mine)}", life))
    rng = random.Random(seed)
    chatter = random.Random(seed + 1)
    asking = random.Random(seed + 3)
    picker = random.Random(seed + 2)  # its own draws: the groups and queries stay those without ``others``
    everyone = [(person, life.statement) for person in sorted(by_person) for _, life in by_person[person]]
    memories: list[Memory] = []
    queries: list[Query] = []
    groups = 0
    for person in sorted(by_person):
        statements = by_person[person]
        rng.shuffle(statements)
        for start in range(0, len(statements), cues):
            group = f"real/{groups}"
            turns = conversations[groups % len(conversations)]
            elsewhere = conversations[(groups + 1) % len(conversations)]
            groups += 1
            # What was said, without "Speaker: ": a user's memories carry no name, and a prefix only the turns had
            # would tell them from the statements by its form.
            memories += [Memory(f"turn/{j}", _utterance(text), group) for j, text in enumerate(turns)]
            if others:
                theirs = [j for j, (who, _) in enumerate(everyone) if who != person]
                memories += [Memory(f"other/{j}", everyone[j][1], group)
                             for j in sorted(picker.sample(theirs, min(others, len(theirs))))]
            for memory_id, life in statements[start:start + cues]:
                memories.append(Memory(memory_id, life.statement, group))
                if chatty:
                    queries += [Query(f"{memory_id}/trigger{j}", f"{_utterance(chatter.choice(elsewhere))} {text}",
                                      (memory_id,), group, "trigger") for j, text in enumerate(life.triggers)]
                    queries.append(Query(f"{memory_id}/direct", f"{_utterance(asking.choice(elsewhere))} "
                                   f"{life.direct_question}", (memory_id,), group, "direct"))
                    continue
                queries += [Query(f"{memory_id}/trigger{j}", text, (memory_id,), group, "trigger")
                            for j, text in enumerate(life.triggers)]
                queries.append(Query(f"{memory_id}/direct", life.direct_question, (memory_id,), group, "direct"))
    return memories, queries


def benchmarks(lives: Sequence[Life], distractors: Sequence[str], per_person: int = DISTRACTORS_PER_PERSON,
               seed: int = 0, conversations: Sequence[Sequence[str]] = ()) -> dict[str, tuple[list[Memory],
                                                                                              list[Query]]]:
    """``alone``, ``distractors`` and ``real_turns`` (given conversations), with triggers and direct questions;
    ``real_turns_chat`` (given conversations), the same asked inside chat turns; both again ``_matched``."""
    out = {"alone": lives_benchmark(lives, pooled=True, kinds=("trigger", "direct"))}
    if distractors:
        out["distractors"] = pooled_with_distractors(lives, distractors, per_person, seed)
    if conversations:
        for suffix, others in (("", 0), ("_matched", OTHER_STATEMENTS)):
            out["real_turns" + suffix] = among_real_turns(lives, conversations, seed=seed, others=others)
            out["real_turns_chat" + suffix] = among_real_turns(lives, conversations, seed=seed, chatty=True,
                                                               others=others)
    return out
