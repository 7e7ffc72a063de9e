"""Reading the data: simulated lives (statement, triggers, direct question) and LoCoMo conversations.

Everything here turns files into plain records: :class:`Life` rows for training, and :class:`Memory` /
:class:`Query` records, the one format every evaluation runs on (a query searches only the memories of its
own group).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from copilot.config import DATA_ROOT

DEFAULT_LIVES_DIR = Path(__file__).resolve().parent / "lives"  # the simulated lives the shipped adapter learned from


def locomo_path(root: Path = DATA_ROOT) -> Path:
    """LoCoMo under ``root``: the whole set (``locomo10.json``) where the data root has it, else the excerpt of two
    conversations kept with the tests (LoCoMo is CC BY-NC 4.0: tests/data/LICENSES.md)."""
    whole = root / "locomo" / "locomo10.json"
    return whole if whole.exists() else root / "locomo" / "locomo-2conv.json"


DEFAULT_LOCOMO = locomo_path()
LIFE_KEYS = ("person", "statement", "relation", "time_gap", "triggers", "direct_question")
RELATIONS = ("causal", "state", "goal", "value")


@dataclass(frozen=True)
class Life:
    """One statement a person made, with the later messages that should bring it back."""

    person: str
    statement: str
    relation: str
    time_gap: str
    triggers: tuple[str, ...]
    direct_question: str

    def as_json(self) -> str:
        record = asdict(self)
        record["triggers"] = list(self.triggers)
        return json.dumps(record, ensure_ascii=False)


@dataclass(frozen=True)
class Memory:
    id: str
    text: str
    group: str


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    gold: tuple[str, ...]
    group: str
    kind: str = "query"


@dataclass(frozen=True)
class Pair:
    """A training example: a query text that should retrieve ``statement`` of ``person``."""

    query: str
    statement: str
    person: str
    kind: str  # "trigger" or "direct"
    chatter_of: str = ""  # the person whose line the query also carries (training.with_chatter), if any


def parse_life(record: dict) -> Life:
    """A validated :class:`Life`; raises ``ValueError`` naming the first problem."""
    missing = [k for k in LIFE_KEYS if k not in record]
    if missing:
        raise ValueError(f"missing key(s) {missing}")
    triggers = record["triggers"]
    if not isinstance(triggers, list) or not triggers or not all(isinstance(t, str) and t.strip() for t in triggers):
        raise ValueError("triggers must be a non-empty list of strings")
    texts = [record["person"], record["statement"], record["direct_question"], record["time_gap"]]
    if not all(isinstance(t, str) and t.strip() for t in texts):
        raise ValueError("person, statement, time_gap and direct_question must be non-empty strings")
    if record["relation"] not in RELATIONS:
        raise ValueError(f"relation {record['relation']!r} is not one of {RELATIONS}")
    return Life(record["person"].strip(), record["statement"].strip(), record["relation"],
                record["time_gap"].strip(), tuple(t.strip() for t in triggers), record["direct_question"].strip())


def read_jsonl(path: str | Path) -> list[dict]:
    """Every JSON object of a JSON Lines file (blank lines skipped)."""
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write_jsonl(path: str | Path, records: Iterable[dict]) -> int:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            n += 1
    return n


def load_lives(source: str | Path) -> list[Life]:
    """All lives of one ``.jsonl`` file, or of every ``lives_*.jsonl`` file in a directory (sorted)."""
    source = Path(source)
    files = sorted(source.glob("lives_*.jsonl")) if source.is_dir() else [source]
    if not files:
        raise FileNotFoundError(f"No lives_*.jsonl files in {source}.")
    return [parse_life(record) for path in files for record in read_jsonl(path)]


def persons_of(lives: Sequence[Life]) -> list[str]:
    return sorted({life.person for life in lives})


def split_persons(persons: Sequence[str], n_val: int, seed: int) -> tuple[list[str], list[str]]:
    """(train, validation) persons: a seeded shuffle of the sorted names, so a person is never on both sides."""
    names = sorted(set(persons))
    if not 0 < n_val < len(names):
        raise ValueError(f"Cannot hold out {n_val} of {len(names)} persons.")
    random.Random(seed).shuffle(names)
    return sorted(names[n_val:]), sorted(names[:n_val])


def pairs_of(lives: Iterable[Life], kinds: Sequence[str] = ("trigger", "direct")) -> list[Pair]:
    """Training pairs: each trigger and the direct question, each pointing at its statement."""
    pairs: list[Pair] = []
    for life in lives:
        if "trigger" in kinds:
            pairs.extend(Pair(t, life.statement, life.person, "trigger") for t in life.triggers)
        if "direct" in kinds:
            pairs.append(Pair(life.direct_question, life.statement, life.person, "direct"))
    return pairs


def lives_benchmark(lives: Sequence[Life], pooled: bool, kinds: Sequence[str] = ("trigger",)
                    ) -> tuple[list[Memory], list[Query]]:
    """Statements as memories and triggers (or direct questions) as queries.

    ``pooled=False`` searches a person's own statements (group = person); ``pooled=True`` searches every
    statement of every person given (one group), a harder pool than ten candidates.
    """
    memories: list[Memory] = []
    queries: list[Query] = []
    index: dict[str, int] = {}
    for life in lives:
        group = "all" if pooled else life.person
        number = index.setdefault(life.person, 0)
        index[life.person] = number + 1
        memory_id = f"{life.person}/{number}"
        memories.append(Memory(memory_id, life.statement, group))
        texts = [("trigger", t) for t in life.triggers] if "trigger" in kinds else []
        texts += [("direct", life.direct_question)] if "direct" in kinds else []
        queries.extend(Query(f"{memory_id}/{kind}{j}", text, (memory_id,), group, kind)
                       for j, (kind, text) in enumerate(texts))
    return memories, queries


def _locomo_turns(sample: dict) -> list[dict]:
    conversation = sample["conversation"]
    return [turn for key, value in conversation.items() if key.startswith("session_") and isinstance(value, list)
            for turn in value]


def _evidence_ids(evidence: Iterable[str]) -> list[str]:
    """Evidence ids, tolerating the few entries that pack several ids into one string."""
    ids: list[str] = []
    for item in evidence:
        ids.extend(part.strip() for part in str(item).replace(",", ";").split(";") if part.strip())
    return ids


def locomo_benchmark(path: str | Path = DEFAULT_LOCOMO) -> tuple[list[Memory], list[Query]]:
    """Each conversation's turns ("Speaker: text") as memories, its questions as queries, evidence as gold.

    Questions whose evidence names no turn of their conversation are left out: they cannot be scored.
    """
    with open(path, encoding="utf-8") as handle:
        samples = json.load(handle)
    memories: list[Memory] = []
    queries: list[Query] = []
    for number, sample in enumerate(samples):
        group = str(sample.get("sample_id", number))
        ids = set()
        for turn in _locomo_turns(sample):
            memories.append(Memory(f"{group}/{turn['dia_id']}", f"{turn['speaker']}: {turn['text']}", group))
            ids.add(turn["dia_id"])
        for j, qa in enumerate(sample["qa"]):
            gold = tuple(dict.fromkeys(f"{group}/{e}" for e in _evidence_ids(qa.get("evidence", [])) if e in ids))
            if gold:
                queries.append(Query(f"{group}/q{j}", str(qa["question"]), gold, group, "locomo"))
    return memories, queries


def read_memories(path: str | Path) -> list[Memory]:
    return [Memory(str(r["id"]), str(r["text"]), str(r.get("group", ""))) for r in read_jsonl(path)]


def read_queries(path: str | Path) -> list[Query]:
    return [Query(str(r["id"]), str(r["text"]), tuple(str(g) for g in r["gold"]), str(r.get("group", "")))
            for r in read_jsonl(path)]


def write_benchmark(memories: Sequence[Memory], queries: Sequence[Query], memories_path: str | Path,
                    queries_path: str | Path) -> None:
    """Write the eval command's two input files."""
    write_jsonl(memories_path, ({"id": m.id, "text": m.text, "group": m.group} for m in memories))
    write_jsonl(queries_path, ({"id": q.id, "text": q.text, "gold": list(q.gold), "group": q.group}
                               for q in queries))

