"""Training the query adapter: InfoNCE over cached base embeddings, by persons, on a CPU in seconds.

Memories are never re-encoded, so the frozen base vectors of every statement and query are computed once
(:class:`EmbeddingCache`) and every epoch is matrix arithmetic on them. A batch is a set of persons: each
query's positive is its own statement, its negatives are the other statements of the same person (the
hard ones: same life, same vocabulary) and every statement of the other persons in the batch.

The weight w of the combined score is chosen on training persons only, by cross-validation over persons:
each fold is held back in turn, an adapter is fitted on the others, and w is the value that ranks the
held-back triggers best (mean MRR over folds) while keeping direct questions within one Recall@1 point of
plain cosine. The final adapter is then fitted on all training persons with that w.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from copilot.association.adapter import QueryAdapter
from copilot.association.data import Life, Pair, lives_benchmark, pairs_of
from copilot.association.decontam import DEFAULT_THRESHOLD, decontaminate
from copilot.association.embedcache import EmbeddingCache
from copilot.association.evaluation import evaluate

WEIGHT_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0)


@dataclass
class TrainConfig:
    """Everything that decides the trained adapter; saved inside the adapter file."""

    kind: str = "residual_mlp"
    hidden: int = 384
    epochs: int = 40
    lr: float = 1e-3
    weight_decay: float = 0.01
    dropout: float = 0.1
    temperature: float = 0.05
    persons_per_batch: int = 32
    seed: int = 0
    inner_folds: int = 5
    max_direct_drop: float = 1.0  # Recall@1 points direct questions may lose when w is chosen
    decontamination_threshold: float = DEFAULT_THRESHOLD
    weight_grid: tuple[float, ...] = WEIGHT_GRID
    fixed_weight: float | None = None  # skips the search when set
    train_weight: float = 0.0  # > 0: train through the combined query vector E(q) + w·E_θ(q) with this w
    chatter: int = 0  # copies of each trigger asked inside another training person's message (see with_chatter)
    real_turn_persons: int = 0  # > 0: w chosen where users live, on this many training persons (real_turn_weight)


def seed_everything(seed: int, threads: int = 2) -> None:
    """Same seed, same adapter: Python, NumPy and torch RNGs, and a fixed thread count."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(threads)


def info_nce(queries: torch.Tensor, candidates: torch.Tensor, positives: torch.Tensor,
             temperature: float = 0.05) -> torch.Tensor:
    """Mean InfoNCE loss: cross-entropy of each query's cosine logits (÷ temperature) against its positive."""
    logits = F.normalize(queries, dim=-1) @ F.normalize(candidates, dim=-1).T / temperature
    return F.cross_entropy(logits, positives)


def build_net(dim: int, kind: str, hidden: int, dropout: float) -> nn.Module:
    """The trainable adapter; residual forms start as the identity so training begins from the base model."""
    class AdapterNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.kind = kind
            self.drop = nn.Dropout(dropout)
            if kind == "linear":
                self.W = nn.Linear(dim, dim)
                nn.init.zeros_(self.W.weight)
                nn.init.zeros_(self.W.bias)
            else:
                self.fc1 = nn.Linear(dim, hidden)
                self.fc2 = nn.Linear(hidden, dim)
                if kind == "residual_mlp":
                    nn.init.zeros_(self.fc2.weight)
                    nn.init.zeros_(self.fc2.bias)

        def forward(self, q: torch.Tensor) -> torch.Tensor:
            x = self.drop(q)
            if self.kind == "linear":
                return q + self.W(x)
            delta = self.fc2(nn.functional.gelu(self.fc1(x), approximate="tanh"))
            return q + delta if self.kind == "residual_mlp" else delta

        def arrays(self) -> dict[str, np.ndarray]:
            if self.kind == "linear":
                return {"W": _np(self.W.weight), "b": _np(self.W.bias)}
            return {"W1": _np(self.fc1.weight), "b1": _np(self.fc1.bias), "W2": _np(self.fc2.weight),
                    "b2": _np(self.fc2.bias)}

    return AdapterNet()


def _np(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().cpu().numpy().astype(np.float32)


@dataclass
class TrainingSet:
    """Cached vectors of the pairs: ``target[i]`` indexes the statement that query ``i`` should retrieve."""

    queries: np.ndarray
    statements: np.ndarray
    target: np.ndarray
    query_person: np.ndarray
    statement_person: np.ndarray

    @classmethod
    def from_pairs(cls, pairs: Sequence[Pair], cache: EmbeddingCache) -> TrainingSet:
        statements = list(dict.fromkeys((p.person, p.statement) for p in pairs))
        index = {s: i for i, s in enumerate(statements)}
        persons = {name: i for i, name in enumerate(sorted({p.person for p in pairs}))}
        return cls(
            queries=cache.encode([p.query for p in pairs]),
            statements=cache.encode([s for _, s in statements]),
            target=np.array([index[(p.person, p.statement)] for p in pairs], dtype=np.int64),
            query_person=np.array([persons[p.person] for p in pairs], dtype=np.int64),
            statement_person=np.array([persons[name] for name, _ in statements], dtype=np.int64),
        )

    def batches(self, persons_per_batch: int, rng: random.Random) -> list[tuple[np.ndarray, np.ndarray]]:
        """(query rows, statement rows) per batch of persons, in a seeded random order."""
        persons = sorted(set(self.statement_person.tolist()))
        rng.shuffle(persons)
        out = []
        for start in range(0, len(persons), persons_per_batch):
            chosen = np.array(persons[start:start + persons_per_batch])
            out.append((np.flatnonzero(np.isin(self.query_person, chosen)),
                        np.flatnonzero(np.isin(self.statement_person, chosen))))
        return out


def with_chatter(pairs: Sequence[Pair], copies: int, seed: int) -> list[Pair]:
    """``pairs`` and, for each trigger, ``copies`` more in which it is asked inside a message of everyday chatter: a
    seeded trigger or direct question of another training person, before or after it. A later message in a real
    chat carries its own chatter, and an adapter trained only on bare triggers gains nothing there (docs/
    benchmarks.md, "Associative recall"). The chatter comes from the training persons' own lines, never from an
    evaluation set."""
    lines = sorted({(p.person, p.query) for p in pairs})
    if copies <= 0 or len({person for person, _ in lines}) < 2:
        return list(pairs)
    rng = random.Random(seed)
    out = list(pairs)
    for pair in pairs:
        if pair.kind != "trigger":
            continue
        for _ in range(copies):
            person, said = rng.choice(lines)
            while person == pair.person:
                person, said = rng.choice(lines)
            text = f"{said} {pair.query}" if rng.random() < 0.5 else f"{pair.query} {said}"
            out.append(Pair(text, pair.statement, pair.person, "trigger", chatter_of=person))
    return out


def without(pairs: Sequence[Pair], held: set[str]) -> list[Pair]:
    """The pairs that say nothing of the ``held`` persons: neither theirs nor carrying their line as chatter."""
    return [p for p in pairs if p.person not in held and p.chatter_of not in held]


def fit(data: TrainingSet, config: TrainConfig, weight: float = 1.0) -> QueryAdapter:
    """Fit one adapter on ``data`` with InfoNCE; returns it as a read-time :class:`QueryAdapter`."""
    seed_everything(config.seed)
    net = build_net(data.queries.shape[1], config.kind, config.hidden, config.dropout)
    optimizer = torch.optim.AdamW(net.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    queries = torch.from_numpy(data.queries)
    statements = torch.from_numpy(data.statements)
    rng = random.Random(config.seed)
    net.train()
    for _ in range(config.epochs):
        for q_rows, s_rows in data.batches(config.persons_per_batch, rng):
            local = {int(s): i for i, s in enumerate(s_rows)}
            positives = torch.tensor([local[int(t)] for t in data.target[q_rows]])
            adapted = net(queries[q_rows])
            if config.train_weight > 0:
                adapted = queries[q_rows] + config.train_weight * torch.nn.functional.normalize(adapted, dim=-1)
            loss = info_nce(adapted, statements[s_rows], positives, config.temperature)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    net.eval()
    return QueryAdapter(config.kind, net.arrays(), weight)


def fold_rows(adapter: QueryAdapter, lives: Sequence[Life], cache: EmbeddingCache, weights: Sequence[float]
              ) -> list[dict]:
    """Trigger MRR, R@1, R@5 and direct-question R@1 on ``lives`` (pooled) for w = 0 and each weight."""
    memories, queries = lives_benchmark(lives, pooled=True, kinds=("trigger", "direct"))
    weights = list(dict.fromkeys([0.0, *weights]))
    result = evaluate(memories, queries, cache, adapter, {f"w={w}": w for w in weights})
    triggers, direct = result.subset("trigger"), result.subset("direct")
    return [{"weight": w, "trigger_mrr": triggers.mrr(f"w={w}"), "trigger_r1": triggers.percent(f"w={w}", 1),
             "trigger_r5": triggers.percent(f"w={w}", 5), "direct_r1": direct.percent(f"w={w}", 1)}
            for w in weights]


@dataclass
class TrainingRun:
    """The trained adapter and what it took: counts, the weight search, timings."""

    adapter: QueryAdapter
    info: dict = field(default_factory=dict)


def person_folds(persons: Sequence[str], n_folds: int, seed: int) -> list[list[str]]:
    """``n_folds`` disjoint groups of persons after a seeded shuffle of the sorted names."""
    names = sorted(set(persons))
    random.Random(seed).shuffle(names)
    return [sorted(names[i::n_folds]) for i in range(n_folds)]


def choose_weight(pairs: Sequence[Pair], lives: Sequence[Life], cache: EmbeddingCache, config: TrainConfig
                  ) -> tuple[float, list[dict]]:
    """Cross-validated w on training persons: fit on all folds but one, score the held-back fold, average.

    Validation persons never enter here; each fold is searched as one pooled set of statements.
    """
    folds = person_folds([p.person for p in pairs], config.inner_folds, config.seed + 1)
    per_fold: list[list[dict]] = []
    for fold in folds:
        held = set(fold)
        inner = fit(TrainingSet.from_pairs(without(pairs, held), cache), config)
        per_fold.append(fold_rows(inner, [life for life in lives if life.person in held], cache, config.weight_grid))
    rows = [{key: (row[key] if key == "weight" else round(float(np.mean([f[i][key] for f in per_fold])), 4))
             for key in row} for i, row in enumerate(per_fold[0])]
    floor = rows[0]["direct_r1"] - config.max_direct_drop
    allowed = [r for r in rows if r["direct_r1"] >= floor] or rows[:1]
    best = max(allowed, key=lambda r: (r["trigger_mrr"], -r["weight"]))
    return float(best["weight"]), rows


def real_turn_weight(pairs: Sequence[Pair], lives: Sequence[Life], cache: EmbeddingCache, config: TrainConfig,
                     conversations: Sequence[Sequence[str]]) -> tuple[float, list[dict], list[str]]:
    """w chosen where users live, on training persons only: ``config.real_turn_persons`` of them (seeded) are held
    back, an adapter is fitted on the others, and each w of the grid is scored on the held-back persons'
    statements hidden in real conversations, each trigger asked after a chat turn and read sentence by sentence as the
    product reads a message (Recall@10); the best w keeps
    their direct questions within ``max_direct_drop`` Recall@1 points of plain cosine both among real turns and
    among their statements alone."""
    from copilot.association.heldout import among_real_turns

    names = sorted({life.person for life in lives})
    random.Random(config.seed + 7).shuffle(names)
    held = set(names[:config.real_turn_persons])
    inner = fit(TrainingSet.from_pairs(without(pairs, held), cache), config)
    mine = [life for life in lives if life.person in held]
    weights = list(dict.fromkeys([0.0, *config.weight_grid]))
    scorers = {f"w={w}": w for w in weights}
    memories, queries = among_real_turns(mine, conversations, chatty=True)
    triggers = evaluate(memories, [q for q in queries if q.kind == "trigger"], cache, inner, scorers, ks=(10,),
                        by_sentence=scorers)
    memories, queries = among_real_turns(mine, conversations)
    direct = evaluate(memories, [q for q in queries if q.kind == "direct"], cache, inner, scorers, ks=(1,))
    memories, queries = lives_benchmark(mine, pooled=True, kinds=("direct",))
    alone = evaluate(memories, queries, cache, inner, scorers, ks=(1,))
    rows = [{"weight": w, "trigger_r10_real_turns_chat": triggers.percent(f"w={w}", 10),
             "direct_r1_real_turns": direct.percent(f"w={w}", 1), "direct_r1_alone": alone.percent(f"w={w}", 1)}
            for w in weights]
    floors = {key: rows[0][key] - config.max_direct_drop for key in ("direct_r1_real_turns", "direct_r1_alone")}
    allowed = [r for r in rows if all(r[key] >= floor for key, floor in floors.items())] or rows[:1]
    best = max(allowed, key=lambda r: (r["trigger_r10_real_turns_chat"], -r["weight"]))
    return float(best["weight"]), rows, sorted(held)


def train(lives: Sequence[Life], val_persons: Sequence[str], cache: EmbeddingCache, config: TrainConfig,
          evaluation_texts: Sequence[str] = (), conversations: Sequence[Sequence[str]] = ()) -> TrainingRun:
    """Decontaminate, choose w on training persons, fit the final adapter on all training persons. With
    ``config.real_turn_persons`` and real ``conversations`` (distractors only, never trained on), w is chosen where
    users live (:func:`real_turn_weight`); else by cross-validation on the simulated pool, or fixed."""
    started = time.perf_counter()
    held_out = set(val_persons)
    train_lives = [life for life in lives if life.person not in held_out]
    val_lives = [life for life in lives if life.person in held_out]
    held_texts = [t for life in val_lives for t in (life.statement, life.direct_question, *life.triggers)]
    cleaned = decontaminate(with_chatter(pairs_of(train_lives), config.chatter, config.seed),
                            [*held_texts, *evaluation_texts], cache, config.decontamination_threshold)
    encoded = time.perf_counter()
    real_search: list[dict] = []
    real_persons: list[str] = []
    if config.real_turn_persons > 0 and conversations:
        weight, real_search, real_persons = real_turn_weight(cleaned.kept, train_lives, cache, config, conversations)
        search: list[dict] = []
    elif config.fixed_weight is None:
        weight, search = choose_weight(cleaned.kept, train_lives, cache, config)
    else:
        weight, search = config.fixed_weight, []
    adapter = fit(TrainingSet.from_pairs(cleaned.kept, cache), config, weight)
    done = time.perf_counter()
    adapter.config = {
        "train": asdict(config) | {"weight_grid": list(config.weight_grid)},
        "val_persons": sorted(held_out),
        "n_train_persons": len({life.person for life in train_lives}),
        "n_pairs": len(cleaned.kept),
        "n_dropped_by_decontamination": len(cleaned.dropped),
        "weight_search": search,
        **({"real_turn_weight_search": real_search, "real_turn_persons": real_persons} if real_search else {}),
    }
    info = {"encode_s": round(encoded - started, 1), "fit_s": round(done - encoded, 1),
            "dropped": [asdict(p) for p in cleaned.dropped[:20]]}
    return TrainingRun(adapter, info)


FORMS = (("linear", 384), ("residual_mlp", 64), ("residual_mlp", 384), ("residual_mlp", 768), ("mlp", 384))


def compare_forms(pairs: Sequence[Pair], lives: Sequence[Life], cache: EmbeddingCache, seeds: Sequence[int],
                  forms: Sequence[tuple[str, int]] = FORMS) -> list[dict]:
    """Each adapter form's held-back gain over plain cosine, on training persons only, averaged over seeds."""
    rows = []
    for kind, hidden in forms:
        started = time.perf_counter()
        per_seed = []
        for seed in seeds:
            config = TrainConfig(kind=kind, hidden=hidden, seed=seed)
            weight, search = choose_weight(pairs, lives, cache, config)
            best = next(r for r in search if r["weight"] == weight)
            plain = next(r for r in search if r["weight"] == 0.0)
            per_seed.append((weight, best["trigger_mrr"], best["trigger_mrr"] - plain["trigger_mrr"],
                             best["trigger_r1"] - plain["trigger_r1"], best["trigger_r5"] - plain["trigger_r5"],
                             best["direct_r1"] - plain["direct_r1"]))
        mean = np.mean(np.array(per_seed)[:, 1:], axis=0)
        dim = cache.encode([pairs[0].query]).shape[1]
        parameters = dim * dim + dim if kind == "linear" else 2 * dim * hidden + hidden + dim
        rows.append({"form": kind if kind == "linear" else f"{kind} h={hidden}", "parameters": parameters,
                     "weights": "/".join(f"{s[0]:g}" for s in per_seed), "mrr": mean[0], "gain_mrr": mean[1],
                     "gain_r1": mean[2], "gain_r5": mean[3], "direct_r1": mean[4],
                     "fit_s": (time.perf_counter() - started) / len(seeds)})
    return rows
