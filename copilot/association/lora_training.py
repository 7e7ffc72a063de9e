"""Training the query-side LoRA: InfoNCE over batches of persons, the step and the read-time w chosen by held-back
persons.

Each step takes ``persons_per_batch`` persons. For every statement of theirs one trigger is drawn (a new one
each epoch) and its direct question is kept, so plain look-up is trained too and does not decay. The
candidates are every statement of those persons, as frozen vectors from :class:`EmbeddingCache`: the other
statements of the same person are the hard negatives, the other persons' the easy ones. The loss is
cross-entropy over the LoRA's own term, ``cos(E_θ(q), m) / τ`` with τ = 0.05 (``loss="association"``), or
over the summed score ``(cos(E(q), m) + w·cos(E_θ(q), m)) / τ`` (``loss="summed"``). E(q) is frozen, and
only the LoRA deltas of E_θ are trainable (peft ``LoraConfig`` on BERT's projections).

Which loss is the default was measured (docs/benchmarks.md, "Associative recall"). With the summed score, the plain term
already ranks most candidates, and what the deltas learned did not hold for new persons: +0.4 Recall@10 on
the test persons after 40 steps, and lower validation recall after 80 steps at a higher learning rate. On the
LoRA's own term, recall on the held-back persons rose steadily for hundreds of steps. The read-time score is
always the summed one. The step is chosen at ``weight``; the read-time w is chosen afterwards on the same
validation persons (:func:`choose_read_weight`), unless ``read_weight`` fixes it.

Every ``eval_every`` steps the adapter is scored on validation persons, who are training persons held back
from fitting, with their statements hidden among distractor lines, and the best state is kept. What is scored
and kept is an exponential moving average of the deltas (``ema``), which smooths the step-to-step noise of
small batches. Training stops after ``patience`` scorings without a gain. The test persons never enter here.

With ``n_val_persons`` 0 nothing is held back: a refit on every training person for ``max_steps`` steps, at a
fixed read-time w, keeping the last averaged deltas. :func:`refit_config` derives it from a validated run's
record: the same recipe, as many epochs as the kept step, the chosen w; the test persons still never enter.

``members`` LoRAs are fitted this way, each from its own initialisation and batch order on the same persons.
Their mean (:func:`averaged_lora`: the exact mean of their deltas, one LoRA of the summed rank, merged at load
like any other, so reading costs the same) ships if it validates at least as well as the best member alone;
otherwise that member ships. The default fits one member: two double the training time (about two hours on two
cores). The recipe's choices (all six layers, r 32, key added, the moving average) were each measured on the
validation persons (docs/benchmarks.md, "Associative recall").
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from copilot.association.data import Life, pairs_of
from copilot.association.decontam import DEFAULT_THRESHOLD, decontaminate
from copilot.association.embedcache import EmbeddingCache
from copilot.association.evaluation import UNTRAINED, evaluate
from copilot.association.heldout import DISTRACTORS_PER_PERSON, pooled_with_distractors
from copilot.association.lora import load_base_transformer, save_lora


@dataclass
class LoraTrainConfig:
    """Everything that decides the trained LoRA; saved in its ``association.json``."""

    r: int = 32
    alpha: int = 64
    lora_dropout: float = 0.1
    targets: tuple[str, ...] = ("query", "key", "value", "dense")  # "dense": attention output and feed-forward
    layers: tuple[int, ...] | None = None  # BERT layers that get deltas; None: all six
    lr: float = 5e-4
    weight: float = 1.0  # w of the summed loss and of choosing the step; the shipped w is chosen after (READ_WEIGHTS)
    temperature: float = 0.05
    persons_per_batch: int = 16
    triggers_per_statement: int = 1
    direct: bool = True
    max_steps: int = 800
    eval_every: int = 25
    patience: int = 8
    seed: int = 0
    n_val_persons: int = 40  # training persons held back to choose the step and w; 0: a refit on all of them
    distractors_per_person: int = DISTRACTORS_PER_PERSON
    max_direct_drop: float = 1.0
    train_fraction: float = 1.0  # share of the fitting persons used (the data-size curve)
    loss: str = "association"  # "association": InfoNCE on the LoRA's term alone; "summed": on the summed score
    negatives: str = "batch"  # "batch": the batch persons' statements; "pool": every fitting person's statement
    ema: float = 0.99  # decay of an exponential moving average of the deltas, which is what is validated; 0: none
    members: int = 1  # LoRAs fitted from their own initialisation and batch order; more than 1: their mean ships
    read_weight: float | None = None  # the shipped w; None: chosen on the validation persons (READ_WEIGHTS)
    decontamination_threshold: float = DEFAULT_THRESHOLD


def refit_config(validated: dict) -> LoraTrainConfig:
    """The refit of a validated one-member run, from its ``association.json`` record: the same recipe on every
    training person (the validation persons join the fitting ones) for as many epochs as the run's kept step, at
    the w chosen on validation."""
    train = validated.get("train") or {}
    step = validated.get("best_step")
    if not validated.get("val_persons") or not isinstance(step, int) or step < 1 or \
            train.get("members") != 1 or train.get("train_fraction") != 1.0 or validated.get("weight") is None:
        raise ValueError("A refit needs the record of a validated one-member LoRA run on all its training persons, "
                         "with a kept step after 0.")
    per_batch = train["persons_per_batch"]
    fitted = validated["n_fit_persons"] + len(validated["val_persons"])
    epochs = step / math.ceil(validated["n_fit_persons"] / per_batch)
    recipe = {f.name: tuple(train[f.name]) if isinstance(train.get(f.name), list) else train[f.name]
              for f in fields(LoraTrainConfig) if f.name in train}
    return LoraTrainConfig(**recipe | {"n_val_persons": 0, "max_steps": round(epochs * math.ceil(fitted / per_batch)),
                                       "weight": validated["weight"], "read_weight": validated["weight"]})


def seed_everything(seed: int, threads: int = 2) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(threads)


def build_lora_model(base: Any, config: LoraTrainConfig) -> Any:
    """The peft model around a fresh copy of MiniLM; the deltas start at zero (B = 0), so step 0 is E."""
    from peft import get_peft_model

    return get_peft_model(base, lora_config(base, config))


def lora_config(base: Any, config: LoraTrainConfig) -> Any:
    from peft import LoraConfig

    return LoraConfig(r=config.r, lora_alpha=config.alpha, lora_dropout=config.lora_dropout,
                      target_modules=list(config.targets), bias="none", layers_to_transform=lora_layers(base, config))


def lora_layers(base: Any, config: LoraTrainConfig) -> list[int]:
    """The BERT layers that get deltas: ``config.layers``, or every layer (never the unused pooler)."""
    return list(config.layers) if config.layers else list(range(base.config.num_hidden_layers))


BUCKET = 32  # texts a layer pass reads at once during training


class SplitEncoder:
    """MiniLM read in two parts: the frozen part below the first layer with deltas (the embeddings, and any
    layers under ``cut``) runs once per text and its output is kept, in eval mode; the layers with deltas run at
    every step, on texts grouped by length. With deltas in the top two layers a step of 320 questions is about
    three times cheaper than the whole pass; the length groups make any step two to three times cheaper again."""

    def __init__(self, bert: Any, tokenizer: Any, max_tokens: int, cut: int) -> None:
        self.bert, self.tokenizer, self.max_tokens, self.cut = bert, tokenizer, max_tokens, cut
        self.states: dict[str, Any] = {}

    def _mask(self, attention: Any, h: Any) -> Any:
        """The layers' attention mask for 2-D padding ``attention``, as BERT's own forward builds it."""
        from transformers.masking_utils import create_bidirectional_mask

        return create_bidirectional_mask(config=self.bert.config, inputs_embeds=h, attention_mask=attention)

    def _ensure(self, texts: Sequence[str]) -> None:
        import torch

        missing = list(dict.fromkeys(t for t in texts if t not in self.states))
        if not missing:
            return
        was_training = self.bert.training
        self.bert.eval()
        with torch.no_grad():
            for start in range(0, len(missing), 64):
                part = missing[start:start + 64]
                batch = self.tokenizer(part, padding=True, truncation=True, max_length=self.max_tokens,
                                       return_tensors="pt")
                h = self.bert.embeddings(input_ids=batch["input_ids"], token_type_ids=batch.get("token_type_ids"))
                mask = self._mask(batch["attention_mask"], h)
                for layer in self.bert.encoder.layer[:self.cut]:
                    h = layer(h, mask)
                for text, row, n in zip(part, h, batch["attention_mask"].sum(1).tolist(), strict=True):
                    self.states[text] = row[:n].clone()
        self.bert.train(was_training)

    def __call__(self, texts: Sequence[str]) -> Any:
        """Unit sentence vectors of ``texts`` through the upper layers (autograd kept for the deltas).

        The texts run in groups of ``BUCKET`` of similar length: a question is about 16 tokens, a batch's longest
        about 43, and padding every text to the longest would more than double the work."""
        import torch

        self._ensure(texts)
        rows = [self.states[t] for t in texts]
        order = sorted(range(len(rows)), key=lambda i: rows[i].shape[0])
        pooled = torch.cat([self._upper([rows[i] for i in order[start:start + BUCKET]])
                            for start in range(0, len(order), BUCKET)])
        back = torch.empty(len(order), dtype=torch.long)
        back[torch.tensor(order)] = torch.arange(len(order))
        return pooled[back]

    def _upper(self, rows: Sequence[Any]) -> Any:
        import torch
        import torch.nn.functional as F

        length = max(r.shape[0] for r in rows)
        h = torch.zeros(len(rows), length, rows[0].shape[1])
        attention = torch.zeros(len(rows), length, dtype=torch.long)
        for i, r in enumerate(rows):
            h[i, :r.shape[0]] = r
            attention[i, :r.shape[0]] = 1
        mask = self._mask(attention, h)
        for layer in self.bert.encoder.layer[self.cut:]:
            h = layer(h, mask)
        weights = attention.unsqueeze(-1).to(h.dtype)
        return F.normalize((h * weights).sum(1) / torch.clamp(weights.sum(1), min=1e-9), dim=-1)


@dataclass
class Batch:
    texts: list[str]
    plain: np.ndarray
    candidates: np.ndarray
    positives: np.ndarray


def person_batches(lives: Sequence[Life], cache: EmbeddingCache, config: LoraTrainConfig, rng: random.Random,
                   allowed: set[tuple[str, str]] | None = None) -> list[Batch]:
    """One epoch of batches: persons shuffled, a trigger drawn per statement, its direct question kept.

    The candidates are the batch persons' statements (``negatives="batch"``) or every statement of ``lives``
    (``"pool"``: the frozen vectors cost one matrix product, and the search at read time is over many persons).
    ``allowed``: (query, statement) pairs that survived decontamination; others are skipped.
    """
    if config.negatives not in ("batch", "pool"):
        raise ValueError(f"Unknown LoRA negatives {config.negatives!r}: 'batch' or 'pool'.")
    by_person: dict[str, list[Life]] = {}
    for life in lives:
        by_person.setdefault(life.person, []).append(life)
    persons = sorted(by_person)
    everyone = [life for p in persons for life in by_person[p]]
    offset = dict(zip(persons, np.cumsum([0] + [len(by_person[p]) for p in persons]).tolist(), strict=False))
    pool = cache.encode([life.statement for life in everyone]) if config.negatives == "pool" else None
    rng.shuffle(persons)
    out = []
    for start in range(0, len(persons), config.persons_per_batch):
        chosen = persons[start:start + config.persons_per_batch]
        statements = [life for p in chosen for life in by_person[p]]
        index = [offset[p] + j for p in chosen for j in range(len(by_person[p]))]
        texts, positives = [], []
        for i, life in enumerate(statements):
            picks = rng.sample(list(life.triggers), min(config.triggers_per_statement, len(life.triggers)))
            if config.direct:
                picks.append(life.direct_question)
            for text in picks:
                if allowed is None or (text, life.statement) in allowed:
                    texts.append(text)
                    positives.append(i if pool is None else index[i])
        if texts:
            candidates = cache.encode([life.statement for life in statements]) if pool is None else pool
            out.append(Batch(texts, cache.encode(texts), candidates, np.array(positives, dtype=np.int64)))
    return out


def summed_info_nce(plain: Any, adapted: Any, candidates: Any, positives: Any, weight: float,
                    temperature: float, plain_term: bool = True) -> Any:
    """InfoNCE over (cos(E(q), m) + w·cos(E_θ(q), m)) / τ; all rows are unit vectors. Without ``plain_term``
    (the ablation "association term alone"), over cos(E_θ(q), m) / τ."""
    import torch.nn.functional as F

    if not plain_term:
        return F.cross_entropy(adapted @ candidates.T / temperature, positives)
    logits = (plain @ candidates.T + weight * (adapted @ candidates.T)) / temperature
    return F.cross_entropy(logits, positives)


class _Probe:
    """Encodes texts with the model being trained (eval mode, no gradient), as a read-time adapter would."""

    kind = "lora"

    def __init__(self, model: Any, encode: Callable[[Sequence[str]], Any], weight: float) -> None:
        self.model, self.encode, self.weight = model, encode, weight
        self.config: dict = {}

    def adapt(self, plain: np.ndarray, texts: Sequence[str] | None) -> np.ndarray:
        import torch

        assert texts is not None
        was_training = self.model.training
        self.model.eval()
        with torch.no_grad():
            out = [self.encode(list(texts[i:i + 64])).numpy() for i in range(0, len(texts), 64)]
        self.model.train(was_training)
        return np.concatenate(out) if out else np.zeros_like(plain)


READ_WEIGHTS = (0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)


def validation_rows(probe: Any, val_lives: Sequence[Life], distractors: Sequence[str], cache: EmbeddingCache,
                    config: LoraTrainConfig, weights: Sequence[float]) -> tuple[list[dict], dict]:
    """The validation persons' statements among distractors, searched once: for each w of the summed score its
    trigger Recall@10 and MRR and its direct-question Recall@1, and plain cosine's two recalls."""
    memories, queries = pooled_with_distractors(val_lives, distractors, config.distractors_per_person, config.seed)
    result = evaluate(memories, queries, cache, probe, {UNTRAINED: 0.0} | {f"w={w}": w for w in weights})
    triggers, direct = result.subset("trigger"), result.subset("direct")
    rows = [{"weight": w, "trigger_r10": triggers.percent(f"w={w}", 10),
             "trigger_mrr": round(triggers.mrr(f"w={w}"), 4), "direct_r1": direct.percent(f"w={w}", 1)}
            for w in weights]
    return rows, {"plain_trigger_r10": triggers.percent(UNTRAINED, 10), "plain_direct_r1": direct.percent(UNTRAINED, 1)}


def validation_score(probe: _Probe, val_lives: Sequence[Life], distractors: Sequence[str], cache: EmbeddingCache,
                     config: LoraTrainConfig) -> dict:
    """Trigger Recall@10 and MRR with distractors, direct-question Recall@1, plain and adapted (at ``weight``)."""
    rows, plain = validation_rows(probe, val_lives, distractors, cache, config, [config.weight])
    return {key: value for key, value in rows[0].items() if key != "weight"} | plain


def choose_read_weight(probe: Any, val_lives: Sequence[Life], distractors: Sequence[str], cache: EmbeddingCache,
                       config: LoraTrainConfig, weights: Sequence[float] = READ_WEIGHTS) -> tuple[float, list[dict]]:
    """w of the read-time score cos(E(q), m) + w·cos(E_θ(q), m), chosen on the validation persons among
    distractors: the best trigger Recall@10 (then MRR, then the smaller w) among the weights whose
    direct-question Recall@1 stays within ``max_direct_drop`` of plain cosine (none: the w that keeps direct
    questions best). ``probe``: anything with ``adapt(plain, texts)``, the model being trained or a saved
    adapter."""
    rows, plain = validation_rows(probe, val_lives, distractors, cache, config, weights)
    floor = plain["plain_direct_r1"] - config.max_direct_drop
    allowed = [r for r in rows if r["direct_r1"] >= floor] or [max(rows, key=lambda r: (r["direct_r1"], -r["weight"]))]
    best = max(allowed, key=lambda r: (r["trigger_r10"], r["trigger_mrr"], -r["weight"]))
    return float(best["weight"]), rows


class MovingAverage:
    """An exponential moving average of the trainable deltas (decay ``decay``, warmed up as (1 + t) / (10 + t) over
    the first steps); :meth:`applied` swaps it into the model for a validation and back. ``decay`` 0: the model
    itself is validated."""

    def __init__(self, model: Any, decay: float) -> None:
        self.decay = decay
        self.params = {n: p for n, p in model.named_parameters() if p.requires_grad}
        self.shadow = {n: p.detach().clone() for n, p in self.params.items()} if decay else {}

    def update(self, step: int) -> None:
        import torch

        if not self.decay:
            return
        decay = min(self.decay, (1 + step) / (10 + step))
        with torch.no_grad():
            for name, p in self.params.items():
                self.shadow[name].mul_(decay).add_(p.detach(), alpha=1 - decay)

    @contextmanager
    def applied(self) -> Iterator[None]:
        import torch

        if not self.decay:
            yield
            return
        raw = {n: p.detach().clone() for n, p in self.params.items()}
        with torch.no_grad():
            for name, p in self.params.items():
                p.copy_(self.shadow[name])
        try:
            yield
        finally:
            with torch.no_grad():
                for name, p in self.params.items():
                    p.copy_(raw[name])


@dataclass
class LoraRun:
    model: Any
    weight: float
    info: dict = field(default_factory=dict)


def split_validation(train_lives: Sequence[Life], n_val: int, seed: int) -> tuple[list[Life], list[Life]]:
    """(fitting lives, validation lives): validation persons are a seeded draw of the training persons."""
    persons = sorted({life.person for life in train_lives})
    random.Random(seed + 1).shuffle(persons)
    val = set(persons[:n_val])
    return [x for x in train_lives if x.person not in val], [x for x in train_lives if x.person in val]


@dataclass
class _Data:
    """What every member of one training reads: the persons, the kept pairs, the distractors."""

    fit_lives: list[Life]
    val_lives: list[Life]
    allowed: set[tuple[str, str]]
    distractors: Sequence[str]


def _fit_member(member: int, data: _Data, cache: EmbeddingCache, config: LoraTrainConfig, model_path: str | Path,
                states: dict[str, Any], started: float, progress: Callable[[str], None]) -> tuple[Any, dict, list]:
    """One LoRA fitted from its own initialisation and batch order; (its best state, best row, history)."""
    import torch
    from peft import get_peft_model_state_dict, set_peft_model_state_dict

    seed_everything(config.seed + member)
    tokenizer, base, max_tokens = load_base_transformer(model_path)
    model = build_lora_model(base, config)
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=config.lr)
    encode = SplitEncoder(model.base_model.model, tokenizer, max_tokens, min(lora_layers(base, config)))
    encode.states = states  # the frozen part's outputs do not depend on the deltas: shared by the members
    probe = _Probe(model, encode, config.weight)
    average = MovingAverage(model, config.ema)
    rng = random.Random(config.seed + member)
    label = f"member {member} " if config.members > 1 else ""
    history: list[dict] = []
    validating = bool(data.val_lives)
    best = validation_score(probe, data.val_lives, data.distractors, cache, config) if validating else {}
    best |= {"step": 0}
    history.append(best)
    best_state = {k: v.detach().clone() for k, v in get_peft_model_state_dict(model).items()}
    progress(f"{label}step 0: {best}")
    step, stale, losses = 0, 0, []
    floor = best["plain_direct_r1"] - config.max_direct_drop if validating else 0.0
    while step < config.max_steps and stale < config.patience:
        for batch in person_batches(data.fit_lives, cache, config, rng, data.allowed):
            adapted = encode(batch.texts)
            loss = summed_info_nce(torch.from_numpy(batch.plain), adapted, torch.from_numpy(batch.candidates),
                                   torch.from_numpy(batch.positives), config.weight, config.temperature,
                                   plain_term=config.loss == "summed")
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
            step += 1
            average.update(step)
            if step % config.eval_every == 0 or step == config.max_steps:
                with average.applied():
                    scored = validation_score(probe, data.val_lives, data.distractors, cache, config) \
                        if validating else {}
                    row = scored | {
                        "step": step, "loss": round(float(np.mean(losses[-config.eval_every:])), 4),
                        "s": round(time.perf_counter() - started, 1)}
                    history.append(row)
                    progress(f"{label}step {step}: {row}")
                    if validating:
                        improved = row["direct_r1"] >= floor and (row["trigger_r10"], row["trigger_mrr"]) > (
                            best["trigger_r10"], best["trigger_mrr"])
                    else:  # a refit keeps the last (averaged) deltas
                        improved = step == config.max_steps
                    if improved:
                        best, stale = row, 0
                        best_state = {k: v.detach().clone() for k, v in get_peft_model_state_dict(model).items()}
                    elif validating:
                        stale += 1
            if step >= config.max_steps or stale >= config.patience:
                break
    set_peft_model_state_dict(model, best_state)
    model.eval()
    return model, best, history


def averaged_lora(states: Sequence[dict], config: LoraTrainConfig, model_path: str | Path) -> Any:
    """One peft model whose deltas are the mean of the members' deltas, exactly: their LoRAs side by side (peft's
    ``add_weighted_adapter``, ``cat``: rank = the members' ranks summed, each B·A weighted 1/n)."""
    from peft import get_peft_model, set_peft_model_state_dict

    _, base, _ = load_base_transformer(model_path)
    names = [f"member{i}" for i in range(len(states))]
    model = get_peft_model(base, lora_config(base, config), adapter_name=names[0])
    for name in names[1:]:
        model.add_adapter(name, lora_config(base, config))
    for name, state in zip(names, states, strict=True):
        set_peft_model_state_dict(model, state, adapter_name=name)
    model.add_weighted_adapter(names, [1 / len(names)] * len(names), "default", combination_type="cat")
    model.set_adapter("default")
    for name in names:
        model.delete_adapter(name)
    model.eval()
    return model


def train_lora(lives: Sequence[Life], test_persons: Sequence[str], cache: EmbeddingCache, config: LoraTrainConfig,
               model_path: str | Path, distractors: Sequence[str], evaluation_texts: Sequence[str] = (),
               progress: Callable[[str], None] = lambda _: None) -> LoraRun:
    """Fit ``config.members`` query-side LoRAs on the training persons, each keeping the state that validates best
    and stopping early; with more than one, ship the mean of their deltas. Then choose the read-time w."""
    from peft import get_peft_model_state_dict

    if config.loss not in ("summed", "association"):
        raise ValueError(f"Unknown LoRA training loss {config.loss!r}: 'summed' or 'association'.")
    if config.members < 1:
        raise ValueError("A LoRA training needs at least one member.")
    if config.n_val_persons == 0 and (config.read_weight is None or config.members > 1):
        raise ValueError("A LoRA refit without validation persons needs a fixed read weight (--weight) and one member.")
    started = time.perf_counter()
    held = set(test_persons)
    train_lives = [x for x in lives if x.person not in held]
    fit_lives, val_lives = split_validation(train_lives, config.n_val_persons, config.seed)
    if config.train_fraction < 1.0:
        persons = sorted({x.person for x in fit_lives})
        random.Random(config.seed + 2).shuffle(persons)
        keep = set(persons[:max(1, round(config.train_fraction * len(persons)))])
        fit_lives = [x for x in fit_lives if x.person in keep]
    test_texts = [t for x in lives if x.person in held for t in (x.statement, x.direct_question, *x.triggers)]
    val_texts = [t for x in val_lives for t in (x.statement, x.direct_question, *x.triggers)]
    cleaned = decontaminate(pairs_of(fit_lives), [*test_texts, *val_texts, *evaluation_texts], cache,
                            config.decontamination_threshold)
    data = _Data(fit_lives, val_lives, {(p.query, p.statement) for p in cleaned.kept}, distractors)
    cache.encode([t for x in [*fit_lives, *val_lives] for t in (x.statement, x.direct_question, *x.triggers)])
    cache.encode(list(distractors))
    encoded = time.perf_counter()

    states: dict[str, Any] = {}
    members = [_fit_member(m, data, cache, config, model_path, states, encoded, progress)
               for m in range(config.members)]
    tokenizer, _, max_tokens = load_base_transformer(model_path)

    def probe_of(model: Any) -> _Probe:
        encode = SplitEncoder(model.base_model.model, tokenizer, max_tokens,
                              min(lora_layers(model.base_model.model, config)))
        encode.states = states
        return _Probe(model, encode, config.weight)

    def score(row: dict) -> tuple[float, float]:
        return row["trigger_r10"], row["trigger_mrr"]

    # A refit has one member and no validation figures to compare.
    best_member = max(range(len(members)), key=lambda i: score(members[i][1])) if len(members) > 1 else 0
    model, shipped, ensemble = members[best_member][0], "member", {}
    if config.members > 1:
        mean = averaged_lora([get_peft_model_state_dict(m) for m, _, _ in members], config, model_path)
        ensemble = validation_score(probe_of(mean), val_lives, distractors, cache, config)
        progress(f"mean of {config.members} members: {ensemble}")
        if score(ensemble) >= score(members[best_member][1]) and ensemble["direct_r1"] >= \
                ensemble["plain_direct_r1"] - config.max_direct_drop:
            model, shipped = mean, "mean"
    probe = probe_of(model)
    if config.read_weight is None:
        weight, weight_rows = choose_read_weight(probe, val_lives, distractors, cache, config)
        progress(f"read weight {weight}: {weight_rows}")
    else:
        weight, weight_rows = config.read_weight, []
    done = time.perf_counter()
    n_parameters = sum(p.numel() for name, p in model.named_parameters() if "lora_" in name)
    layers = lora_layers(model.base_model.model, config)
    info = {"train": asdict(config) | {"targets": list(config.targets), "layers": layers}, "test_persons": sorted(held),
            "val_persons": sorted({x.person for x in val_lives}), "n_fit_persons": len({x.person for x in fit_lives}),
            "n_pairs": len(cleaned.kept), "n_dropped_by_decontamination": len(cleaned.dropped),
            "best_step": members[0][1]["step"], "validation": members[0][2], "read_weight_search": weight_rows,
            "n_parameters": int(n_parameters), "dimension": 384, "encode_s": round(encoded - started, 1),
            "fit_s": round(done - encoded, 1)}
    if config.members > 1:
        info |= {"best_step": [best["step"] for _, best, _ in members], "validation": [h for _, _, h in members],
                 "members_validation": [best for _, best, _ in members], "mean_validation": ensemble,
                 "shipped": "mean" if shipped == "mean" else f"member {best_member}"}
    return LoraRun(model, weight, info)


def save_run(run: LoraRun, path: str | Path, extra: dict | None = None, validation: dict | None = None) -> Path:
    return save_lora(run.model, path, run.weight, run.info | (extra or {}), float16=True, validation=validation)
