"""The query-side LoRA: zero deltas are the frozen encoder, saved deltas come back merged, the product applies them
(and only when association is on), the training loss is InfoNCE on the LoRA's term or on the summed score, and the
read-time w is chosen on validation persons."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from copilot.association import AssociativeScorer, load_adapter
from copilot.association.adapter import (
    DEFAULT_ADAPTER_PATH,
    DEFAULT_LORA_PATH,
    DEFAULT_MLP_PATH,
    AdapterFileError,
    QueryAdapter,
    unit_rows,
)
from copilot.association.cli import cli
from copilot.association.data import Life
from copilot.association.embedcache import EmbeddingCache
from copilot.association.heldout import pooled_with_distractors, relation_of_queries
from copilot.association.lora import (
    CONFIG_FILE,
    LORA_KIND,
    PEFT_FILES,
    VALIDATION_FILE,
    load_base_transformer,
    load_lora,
    mean_pooled,
    save_lora,
)
from copilot.association.lora_training import (
    BUCKET,
    READ_WEIGHTS,
    LoraTrainConfig,
    SplitEncoder,
    build_lora_model,
    refit_config,
    summed_info_nce,
)
from copilot.association.report import both_sides
from copilot.config import Settings
from copilot.embeddings import Embedder, get_embedder
from copilot.engine import Copilot
from copilot.storage import Store
from tests.scripted_llm import ScriptedLLM

TEXTS = ["I've been coughing every night this week.", "Can you plan my week?", "Where is my sister moving?"]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    torch.set_num_threads(2)
    return get_embedder(Settings())


@pytest.fixture(scope="module")
def lora_dir(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Path:
    """A small LoRA (r 4 on query and value) with random, clearly non-zero deltas, saved as the product saves one."""
    torch.manual_seed(0)
    _, base, _ = load_base_transformer(embedder.model_path)
    model = build_lora_model(base, LoraTrainConfig(r=4, alpha=8, targets=("query", "value")))
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, 0, 0.2)
    return save_lora(model, tmp_path_factory.mktemp("lora") / "adapter", 0.75,
                     {"dimension": 384, "n_parameters": 1, "test_persons": ["p1"]})


def test_zero_deltas_read_like_the_frozen_encoder(embedder: Embedder) -> None:
    tokenizer, base, max_tokens = load_base_transformer(embedder.model_path)
    model = build_lora_model(base, LoraTrainConfig(r=4))
    model.eval()
    with torch.no_grad():
        ours = mean_pooled(model, tokenizer, TEXTS, max_tokens).numpy()
    assert np.allclose(ours, embedder.encode_documents(TEXTS), atol=1e-5)


def test_split_reading_of_the_top_layers_equals_the_whole_pass(embedder: Embedder) -> None:
    """Training runs the frozen lower layers once per text and only the layers with deltas at each step."""
    torch.manual_seed(1)
    tokenizer, base, max_tokens = load_base_transformer(embedder.model_path)
    model = build_lora_model(base, LoraTrainConfig(r=4, layers=(4, 5), targets=("query", "value", "dense")))
    for name, p in model.named_parameters():
        assert "lora" not in name or ".layer.4." in name or ".layer.5." in name
        if "lora_B" in name:
            torch.nn.init.normal_(p, 0, 0.1)
    model.eval()
    split = SplitEncoder(model.base_model.model, tokenizer, max_tokens, 4)
    with torch.no_grad():
        assert np.allclose(split(TEXTS).numpy(), mean_pooled(model, tokenizer, TEXTS, max_tokens).numpy(), atol=1e-5)
    assert len(split.states) == len(TEXTS)
    # More texts than one length group, long and short mixed: each vector comes back in its text's place.
    texts = [f"{TEXTS[i % 3]} {'and then some more words ' * (i % 7)}{i}" for i in range(2 * BUCKET + 5)]
    with torch.no_grad():
        whole = mean_pooled(model, tokenizer, texts, max_tokens).numpy()
        assert np.allclose(split(texts).numpy(), whole, atol=1e-5)


def test_saved_lora_loads_merged_and_changes_only_the_question(lora_dir: Path, embedder: Embedder) -> None:
    assert sorted(p.name for p in lora_dir.iterdir()) == ["adapter_config.json", "adapter_model.safetensors",
                                                           "association.json"]
    adapter = load_adapter(lora_dir, embedder.model_path)
    assert adapter.kind == LORA_KIND and adapter.weight == 0.75 and adapter.config["test_persons"] == ["p1"]
    plain = embedder.encode_queries(TEXTS)
    adapted = adapter.adapt(plain, TEXTS)
    assert adapted.shape == plain.shape and np.allclose(np.linalg.norm(adapted, axis=1), 1.0, atol=1e-5)
    assert np.all(np.sum(adapted * plain, axis=1) < 0.999), "the deltas must change the reading"
    assert np.allclose(embedder.encode_queries(TEXTS), plain), "the frozen encoder is never patched"
    with pytest.raises(ValueError, match="text"):
        adapter.adapt(plain, None)
    with pytest.raises(AdapterFileError, match="lacks"):
        load_lora(lora_dir.parent)
    again = load_adapter(lora_dir, embedder.model_path)
    assert np.allclose(again.adapt(plain, TEXTS), adapted)
    assert again._encoder[1] is adapter._encoder[1], "one merged copy per process and files, not per engine"


def test_scorer_sums_the_plain_and_the_adapted_reading(lora_dir: Path, embedder: Embedder) -> None:
    adapter = load_adapter(lora_dir)
    scorer = AssociativeScorer(embedder, adapter)
    assert adapter.base_model == embedder.model_path
    memories = embedder.encode_documents(["I have asthma and damp winters set it off.", "I like jazz."])
    plain = embedder.encode_query(TEXTS[0])
    adapted = adapter.encode([TEXTS[0]])[0]
    expected = plain @ memories.T + 0.75 * (adapted @ memories.T)
    assert np.allclose(scorer.score(TEXTS[0], memories), expected, atol=1e-5)
    vector = scorer.query_vector(TEXTS[0], plain)
    combined = (plain + 0.75 * adapted) / np.linalg.norm(plain + 0.75 * adapted)
    assert np.allclose(vector, combined, atol=1e-5) and not np.allclose(vector, plain, atol=1e-3)
    assert np.allclose(scorer.query_vectors(plain[None, :], [TEXTS[0]])[0], vector, atol=1e-5)


@pytest.mark.parametrize("association", [True, False])
def test_the_product_applies_the_lora_only_when_association_is_on(tmp_path: Path, lora_dir: Path,
                                                                   embedder: Embedder, association: bool) -> None:
    settings = Settings(association=association, association_adapter=str(lora_dir))
    copilot = Copilot(settings, Store(tmp_path / "c.db", tmp_path / "i"), embedder, ScriptedLLM())
    copilot.remember("I have asthma and damp winters set it off.", user_id="ada")
    plain = embedder.encode_query(TEXTS[0])
    hits = copilot.recall(TEXTS[0], user_id="ada", k=1)
    memory = embedder.encode_documents(["I have asthma and damp winters set it off."])[0]
    if association:
        assert copilot.association.adapter.kind == LORA_KIND
        combined = copilot.associative_vector(plain, TEXTS[0])
        assert hits[0]["recalled_by"] == "association"
        assert hits[0]["score"] == pytest.approx(float(combined @ memory), abs=1e-3)
        assert abs(float(combined @ memory) - float(plain @ memory)) > 1e-3
    else:
        assert copilot.association is None and copilot.associative_vector(plain, TEXTS[0]) is None
        assert hits[0]["recalled_by"] == "embedding"
        assert hits[0]["score"] == pytest.approx(float(plain @ memory), abs=1e-3)


def test_summed_info_nce_hand_example() -> None:
    plain = torch.tensor([[1.0, 0.0]])
    adapted = torch.tensor([[0.0, 1.0]])
    candidates = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    # scores: plain 1 and 0, adapted 0 and 1; with w 0.5 the logits are [1, 0.5] / 0.05 = [20, 10]
    loss = summed_info_nce(plain, adapted, candidates, torch.tensor([1]), 0.5, 0.05).item()
    assert math.isclose(loss, math.log1p(math.exp(10)), rel_tol=1e-5)
    right = summed_info_nce(plain, adapted, candidates, torch.tensor([1]), 2.0, 0.05).item()
    assert right < loss, "a larger w lets the adapted reading win"
    # The association term alone (τ 1): logits [0, 1], whatever the plain reading and w say.
    alone = summed_info_nce(plain, adapted, candidates, torch.tensor([1]), 0.5, 1.0, plain_term=False).item()
    assert math.isclose(alone, math.log1p(math.exp(-1)), rel_tol=1e-5)


def test_batches_point_each_question_at_its_statement_among_the_batch_or_the_whole_pool() -> None:
    """Every trigger and direct question of a batch is paired with its own statement's row, whether the candidates
    are the batch persons' statements or every fitting person's; no person is split over two batches."""
    import random

    from copilot.association.lora_training import person_batches

    lives = [Life(p, f"{p} said {i}", "state", "later", (f"{p} t{i}a", f"{p} t{i}b"), f"{p} q{i}?")
             for p in ("ann", "bo", "cy", "di", "ed") for i in range(3)]
    cache = EmbeddingCache(lambda texts: np.stack([np.full(4, float(len(t))) for t in texts]), "fake")
    owner = {t: life.statement for life in lives for t in (*life.triggers, life.direct_question)}
    for negatives, n_candidates in (("batch", None), ("pool", 15)):
        config = LoraTrainConfig(persons_per_batch=2, negatives=negatives)
        batches = person_batches(lives, cache, config, random.Random(0))
        assert [len(b.texts) for b in batches] == [12, 12, 6]
        seen = set()
        for batch in batches:
            statements = [life.statement for life in lives] if negatives == "pool" else list(dict.fromkeys(
                owner[t] for t in batch.texts))
            assert len(batch.candidates) == (n_candidates or len(statements))
            for text, row in zip(batch.texts, batch.positives, strict=True):
                assert statements[row] == owner[text]
            seen |= {t.split()[0] for t in batch.texts}
        assert seen == {"ann", "bo", "cy", "di", "ed"}
    with pytest.raises(ValueError, match="Unknown LoRA negatives"):
        person_batches(lives, cache, LoraTrainConfig(negatives="everyone"), random.Random(0))


def test_the_moving_average_of_the_deltas_is_validated_and_the_model_gets_its_own_back() -> None:
    from copilot.association.lora_training import MovingAverage

    model = torch.nn.Linear(2, 1, bias=False)
    frozen = torch.nn.Parameter(torch.ones(1), requires_grad=False)
    model.register_parameter("frozen", frozen)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[0.0, 0.0]]))
    average = MovingAverage(model, 0.5)
    assert set(average.shadow) == {"weight"}
    with torch.no_grad():
        model.weight.fill_(10.0)
    average.update(1)  # warming up: decay (1 + 1) / (10 + 1) = 2/11, so 0 → 9/11 · 10
    assert torch.allclose(average.shadow["weight"], torch.full((1, 2), 90 / 11))
    average.shadow["weight"].zero_()
    for step, value in ((20, 4.0), (21, 8.0)):  # warmed up: the decay is 0.5
        with torch.no_grad():
            model.weight.fill_(value)
        average.update(step)
    # 0 → 0.5·0 + 0.5·4 = 2 → 0.5·2 + 0.5·8 = 5
    with average.applied():
        assert torch.equal(model.weight, torch.tensor([[5.0, 5.0]]))
    assert torch.equal(model.weight, torch.tensor([[8.0, 8.0]])) and torch.equal(frozen, torch.ones(1))
    off = MovingAverage(model, 0.0)
    off.update(1)
    with off.applied():
        assert torch.equal(model.weight, torch.tensor([[8.0, 8.0]]))


def test_the_mean_of_several_loras_is_one_lora_whose_deltas_are_their_mean(tmp_path: Path,
                                                                           embedder: Embedder) -> None:
    from peft import get_peft_model_state_dict

    from copilot.association.lora_training import averaged_lora

    config = LoraTrainConfig(r=4, alpha=8, targets=("query", "value"), layers=(4, 5))
    merged, states = [], []
    for seed in (1, 2, 3):
        torch.manual_seed(seed)
        _, base, _ = load_base_transformer(embedder.model_path)
        model = build_lora_model(base, config)
        for name, p in model.named_parameters():
            if "lora_B" in name:
                torch.nn.init.normal_(p, 0, 0.2)
        states.append({k: v.clone() for k, v in get_peft_model_state_dict(model).items()})
        merged.append(model.merge_and_unload().state_dict())
    mean = averaged_lora(states, config, embedder.model_path)
    assert mean.peft_config["default"].r == 12 and list(mean.peft_config) == ["default"]
    path = save_lora(mean, tmp_path / "mean", 2.0, {"dimension": 384})
    lora = load_lora(path, embedder.model_path)
    _, model, _, _ = lora._load()
    ours = model.state_dict()
    for key in ("encoder.layer.4.attention.self.query.weight", "encoder.layer.5.attention.self.value.weight"):
        expected = sum(m[key] for m in merged) / 3
        assert torch.allclose(ours[key], expected, atol=1e-6)
        assert not torch.allclose(ours[key], merged[0][key], atol=1e-3)
    key = "encoder.layer.3.attention.self.query.weight"
    assert torch.equal(ours[key], merged[0][key]), "layers without deltas are untouched"


def test_a_training_of_two_members_ships_their_mean_and_records_each(tmp_path: Path, embedder: Embedder) -> None:
    from copilot.association.lora_training import save_run, train_lora

    lives = [Life(p, f"{p} keeps {thing}.", "state", "later", (f"What about the {thing}, {p}?",),
                  f"What does {p} keep?") for p in ("ann", "bo", "cy", "di", "ed", "flo")
             for thing in ("bees", "a boat", "old maps")]
    config = LoraTrainConfig(r=2, alpha=4, targets=("query",), layers=(5,), max_steps=2, eval_every=1,
                             n_val_persons=2, persons_per_batch=2, members=2, ema=0.9, distractors_per_person=2)
    lines = ["Did you watch the game last night?", "Pass me the salt, please.", "It rained all day here."]
    lines_seen: list[str] = []
    run = train_lora(lives, ["flo"], EmbeddingCache.for_embedder(embedder), config, embedder.model_path, lines,
                     progress=lines_seen.append)
    info = run.info
    assert info["n_fit_persons"] == 3 and len(info["val_persons"]) == 2 and info["test_persons"] == ["flo"]
    assert len(info["best_step"]) == 2 and [len(h) for h in info["validation"]] == [3, 3]
    assert len(info["members_validation"]) == 2 and "trigger_r10" in info["mean_validation"]
    assert any(line.startswith("member 1 step 2:") for line in lines_seen)
    # The mean ships unless one member alone validates better.
    mean = info["shipped"] == "mean"
    better = max((m["trigger_r10"], m["trigger_mrr"]) for m in info["members_validation"])
    row = info["mean_validation"]
    assert mean == ((row["trigger_r10"], row["trigger_mrr"]) >= better
                    and row["direct_r1"] >= row["plain_direct_r1"] - config.max_direct_drop)
    assert run.model.peft_config["default"].r == (4 if mean else 2)
    assert info["n_parameters"] == (2 if mean else 1) * 2 * (2 * 384)
    assert run.weight in [row["weight"] for row in info["read_weight_search"]]
    adapter = load_lora(save_run(run, tmp_path / "mean"), embedder.model_path)
    assert adapter.encode(["What about the bees, ann?"]).shape == (1, 384)
    with pytest.raises(ValueError, match="at least one member"):
        train_lora(lives, ["flo"], EmbeddingCache.for_embedder(embedder), LoraTrainConfig(members=0),
                   embedder.model_path, lines)


def test_a_refit_fits_everyone_keeps_the_last_averaged_deltas_and_repeats_them_from_its_seed(
        tmp_path: Path, embedder: Embedder) -> None:
    from peft import get_peft_model_state_dict

    from copilot.association.lora_training import save_run, train_lora

    lives = [Life(p, f"{p} keeps {thing}.", "state", "later", (f"What about the {thing}, {p}?",),
                  f"What does {p} keep?") for p in ("ann", "bo", "cy", "di")
             for thing in ("bees", "a boat")]
    config = LoraTrainConfig(r=2, alpha=4, targets=("query",), layers=(5,), max_steps=3, eval_every=2,
                             n_val_persons=0, persons_per_batch=2, read_weight=2.0, lr=1e-2, patience=1)
    lines_seen: list[str] = []
    run = train_lora(lives, ["di"], EmbeddingCache.for_embedder(embedder), config, embedder.model_path, [],
                     progress=lines_seen.append)
    info = run.info
    assert info["n_fit_persons"] == 3 and info["val_persons"] == [] and run.weight == 2.0
    assert info["best_step"] == 3 and [row["step"] for row in info["validation"]] == [0, 2, 3]
    assert all("trigger_r10" not in row for row in info["validation"]) and info["read_weight_search"] == []
    assert any(line.startswith("step 3:") for line in lines_seen)
    deltas = [v for k, v in get_peft_model_state_dict(run.model).items() if "lora_B" in k]
    assert deltas and all(float(v.abs().sum()) > 0 for v in deltas), "three steps moved B away from zero"
    again = get_peft_model_state_dict(train_lora(lives, ["di"], EmbeddingCache.for_embedder(embedder), config,
                                                 embedder.model_path, []).model)
    first = get_peft_model_state_dict(run.model)
    assert again.keys() == first.keys() and all(torch.equal(again[k], first[k]) for k in first), \
        "the same seed trains the same deltas"
    validated = {"best_step": 2, "val_persons": ["bo"]}
    path = save_run(run, tmp_path / "refit", validation=validated)
    assert sorted(p.name for p in path.iterdir()) == sorted([*PEFT_FILES, CONFIG_FILE, VALIDATION_FILE])
    assert json.loads((path / VALIDATION_FILE).read_text()) == validated and load_lora(path).weight == 2.0
    assert VALIDATION_FILE not in {p.name for p in save_run(run, path).iterdir()}, "only a refit keeps one"
    for bad in (LoraTrainConfig(n_val_persons=0), LoraTrainConfig(n_val_persons=0, read_weight=1.0, members=2)):
        with pytest.raises(ValueError, match="refit without validation persons"):
            train_lora(lives, ["di"], EmbeddingCache.for_embedder(embedder), bad, embedder.model_path, [])


def test_a_refit_is_derived_from_a_validated_record_and_refuses_any_other() -> None:
    validated = {"kind": LORA_KIND, "val_persons": ["v1", "v2", "v3"], "n_fit_persons": 9, "best_step": 6,
                 "weight": 1.5, "test_persons": ["t"],
                 "train": asdict(LoraTrainConfig(r=4, persons_per_batch=4, layers=(4, 5))) | {"targets": ["query"]}}
    refit = refit_config(validated)
    # 6 steps of 3 batches an epoch (9 persons, 4 a step) are 2 epochs; 12 persons make 3 batches an epoch.
    assert (refit.n_val_persons, refit.max_steps, refit.read_weight, refit.weight) == (0, 6, 1.5, 1.5)
    assert (refit.r, refit.targets, refit.layers, refit.persons_per_batch) == (4, ("query",), (4, 5), 4)
    longer = refit_config(validated | {"n_fit_persons": 14, "best_step": 8})
    assert longer.max_steps == 10, "8 steps of 4 batches are 2 epochs; 17 persons make 5 batches an epoch"
    for bad in ({"val_persons": []}, {"best_step": 0}, {"best_step": [6, 6]}, {"weight": None},
                {"train": validated["train"] | {"members": 2}},
                {"train": validated["train"] | {"train_fraction": 0.5}}):
        with pytest.raises(ValueError, match="validated one-member LoRA run"):
            refit_config(validated | bad)


def test_train_refit_of_takes_the_recipe_of_a_validated_record_only(tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["train", "--out", str(tmp_path / "out"), "--refit-of", str(DEFAULT_LORA_PATH / VALIDATION_FILE)]
    result = runner.invoke(cli, [*base, "--r", "4", "--max-steps", "9"])
    assert result.exit_code == 2 and "drop --r, --max-steps" in result.output
    result = runner.invoke(cli, [*base, "--kind", "residual_mlp"])
    assert result.exit_code == 2 and "drop --kind" in result.output
    result = runner.invoke(cli, ["train", "--out", str(tmp_path / "out"), "--refit-of", str(DEFAULT_LORA_PATH)])
    assert result.exit_code == 1 and "validated one-member LoRA run" in result.output, "a refit is not refitted"
    (tmp_path / "bad.json").write_text("{}")
    result = runner.invoke(cli, [*base[:3], "--refit-of", str(tmp_path / "bad.json")])
    assert result.exit_code == 1 and "Cannot refit from" in result.output
    assert not (tmp_path / "out").exists()


def test_distractors_join_each_persons_search() -> None:
    lives = [Life(p, f"{p} statement {i}", ("causal", "state")[i % 2], "later", ("t1", "t2"), "q?")
             for p in ("x", "y") for i in range(2)]
    memories, queries = pooled_with_distractors(lives, [f"line {j}" for j in range(10)], per_person=3, seed=1)
    groups = {m.group for m in memories}
    assert groups == {"x", "y"} and len(memories) == 2 * (4 + 3)
    assert all(q.group == q.gold[0].split("/")[0] for q in queries) and len(queries) == 4 * 3
    assert relation_of_queries(lives, queries)[:3] == ["causal"] * 3


def test_both_kinds_ship_and_the_lora_is_the_refit_of_the_run_that_validated_best() -> None:
    """The default is the residual MLP (it wins in real conversations); the shipped LoRA refits the validated
    recipe on every training person, at its kept step and best w."""
    assert DEFAULT_ADAPTER_PATH == DEFAULT_MLP_PATH and load_adapter().kind == "residual_mlp"
    assert load_adapter(DEFAULT_LORA_PATH).kind == LORA_KIND
    config = json.loads((DEFAULT_LORA_PATH / "association.json").read_text())
    validated = json.loads((DEFAULT_LORA_PATH / VALIDATION_FILE).read_text())
    size = sum(p.stat().st_size for p in DEFAULT_LORA_PATH.iterdir())
    assert config["kind"] == LORA_KIND and size < 5 * 1024 * 1024 and len(config["test_persons"]) == 94
    assert sorted(config["test_persons"]) == sorted(validated["test_persons"]), "the same held-out persons"
    lora = load_adapter(DEFAULT_LORA_PATH)
    search = {row["weight"]: row for row in validated["read_weight_search"]}
    assert lora.weight in READ_WEIGHTS and max(search.values(), key=lambda r: (r["trigger_r10"], r["trigger_mrr"])) == \
        search[lora.weight], "w is the one that validated best"
    fitted = validated["n_fit_persons"] + len(validated["val_persons"])
    assert config["train"]["n_val_persons"] == 0 and config["val_persons"] == [] and config["n_fit_persons"] == fitted
    per_batch = config["train"]["persons_per_batch"]
    epochs = validated["best_step"] / math.ceil(validated["n_fit_persons"] / per_batch)
    assert config["best_step"] == config["train"]["max_steps"] == round(epochs * math.ceil(fitted / per_batch)), \
        "the refit runs as many epochs as the validated run kept"
    refit_only = {"max_steps", "n_val_persons", "read_weight", "weight"}
    assert {k: v for k, v in config["train"].items() if k not in refit_only} == \
        {k: v for k, v in validated["train"].items() if k not in refit_only}, "the same recipe"
    assert json.loads(json.dumps(asdict(refit_config(validated)))) == config["train"], "train --refit-of makes it"
    assert config["train"]["loss"] == "association"
    mlp = load_adapter(DEFAULT_MLP_PATH)
    assert mlp.kind == "residual_mlp"
    assert sorted(lora.config["test_persons"]) == sorted(mlp.config["val_persons"]), "the same split"


def test_eval_command_keeps_its_json_keys(tmp_path: Path, lora_dir: Path) -> None:
    memories = [{"id": "a1", "text": "The cat sat on the mat.", "group": "a"},
                {"id": "a2", "text": "I filed my taxes in April.", "group": "a"}]
    queries = [{"id": "q1", "text": "Where did the cat sit?", "gold": ["a1"], "group": "a"}]
    m_path, q_path = tmp_path / "m.jsonl", tmp_path / "q.jsonl"
    m_path.write_text("".join(json.dumps(m) + "\n" for m in memories))
    q_path.write_text("".join(json.dumps(q) + "\n" for q in queries))
    result = CliRunner().invoke(cli, ["eval", "--memories", str(m_path), "--queries", str(q_path), "--k", "10",
                                      "--json", "--adapter", str(lora_dir)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    keys = {"recall@1", "recall@5", "recall@10"}
    assert set(report) == {"n_queries", "untrained", "association"} and report["n_queries"] == 1
    assert set(report["untrained"]) == keys and set(report["association"]) == keys


def test_both_sides_ablation_with_an_identity_adapter_changes_nothing() -> None:
    """An identity adapter reads memories as the base model does, so all three rankings must agree."""
    def encode(texts):  # noqa: ANN001, ANN202
        return unit_rows(np.stack([np.random.default_rng(sum(map(ord, t))).normal(size=8) for t in texts]))

    dim = 8
    identity = QueryAdapter("residual_mlp", {"W1": np.zeros((4, dim)), "b1": np.zeros(4), "W2": np.zeros((dim, 4)),
                                             "b2": np.zeros(dim)}, 0.5)
    lives = [Life(p, f"{p} said thing {i}", "state", "later", (f"{p} trigger {i}",), "q?") for p in "xy"
             for i in range(6)]
    row = both_sides(lives, EmbeddingCache(encode, "fake"), identity)
    assert row["n_queries"] == 12
    assert row["plain_recall@10"] == row["query_side_recall@10"] == row["both_sides_recall@10"]
    assert row["mcnemar_both_vs_query_side"]["p_value"] == 1.0


@pytest.mark.slow
def test_cross_validation_holds_every_person_out_once_and_pools_their_hits(embedder: Embedder) -> None:
    from copilot.association.crossval import LORA, MLP, UNTRAINED, cross_validate, markdown
    from copilot.association.data import DEFAULT_LIVES_DIR, load_lives
    from copilot.association.training import TrainConfig

    lives = load_lives(DEFAULT_LIVES_DIR)
    persons = sorted({life.person for life in lives})[:8]
    lives = [life for life in lives if life.person in set(persons)]
    distractors = ["Did you watch the game last night?", "Pass me the salt, please.", "It rained all day here."]
    cache = EmbeddingCache.for_embedder(embedder)
    result = cross_validate(lives, cache, embedder.model_path, distractors, folds=2, per_person=2,
                            mlp_config=TrainConfig(kind="residual_mlp", fixed_weight=1.0, epochs=1),
                            lora_config=LoraTrainConfig(r=4, max_steps=1, eval_every=1, n_val_persons=2,
                                                        persons_per_batch=2))
    assert [row["persons"] for row in result["per_fold"]] == [4, 4]
    assert sum(row["statements"] for row in result["per_fold"]) == len(lives)
    triggers = sum(len(life.triggers) for life in lives)
    for pool in ("alone", "distractors"):
        row = result["pooled"][pool]["trigger_recall@10"]
        assert row["n_queries"] == triggers and all(0 <= row[k] <= 100 for k in (UNTRAINED, MLP, LORA))
        assert result["pooled"][pool]["direct_recall@1"]["n_queries"] == len(lives)
        test = row[f"{LORA} vs {MLP}"]
        assert 0 < test["p_value"] <= 1 and test["gain"] == pytest.approx(row[LORA] - row[MLP], abs=0.011)  # both rounded
    assert "| alone | trigger_recall@10 |" in markdown(result) and "2 distractors / person" in markdown(result)
    with pytest.raises(ValueError, match="Cannot make 10 folds of 8 persons"):
        cross_validate(lives, cache, embedder.model_path, distractors, folds=10)


def test_the_read_weight_is_chosen_on_validation_within_the_direct_question_floor() -> None:
    """A probe that points each trigger near its statement gains with every larger w, until it also moves
    direct questions away from theirs: then the floor on direct Recall@1 caps w."""
    import hashlib

    from copilot.association.lora_training import READ_WEIGHTS, choose_read_weight

    dim = 64

    def vector(text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        return unit_rows(np.random.default_rng(seed).normal(size=(1, dim)))[0]

    lives = [Life(p, f"{p} said thing {i}", "state", "later", (f"{p} trigger {i}",), f"{p} question {i}?")
             for p in "xy" for i in range(25)]
    statement = {t: life.statement for life in lives for t in (life.triggers[0], life.direct_question)}

    def encode(texts):  # noqa: ANN001, ANN202 - a direct question reads like its statement, a trigger does not
        return np.stack([vector(statement[t]) if t.endswith("?") else vector(t) for t in texts])

    class Probe:
        def __init__(self, mislead_direct: bool) -> None:
            self.mislead = mislead_direct

        def adapt(self, plain, texts):  # noqa: ANN001, ANN202
            rows = []
            for text in texts:
                if text.endswith("?"):
                    rows.append(vector("elsewhere " + text) if self.mislead else vector(statement[text]))
                else:
                    rows.append(vector(statement[text]) + 2.5 * vector("noise " + text))
            return unit_rows(np.stack(rows))

    cache = EmbeddingCache(encode, "fake")
    config = LoraTrainConfig(distractors_per_person=20)
    distractors = [f"line {j}" for j in range(40)]
    free, rows = choose_read_weight(Probe(False), lives, distractors, cache, config)
    assert [r["weight"] for r in rows] == list(READ_WEIGHTS)
    best = max(r["trigger_r10"] for r in rows)
    assert free > 1.0 and next(r for r in rows if r["weight"] == free)["trigger_r10"] == best
    assert rows[0]["trigger_r10"] < best
    capped, rows = choose_read_weight(Probe(True), lives, distractors, cache, config)
    kept = next(r for r in rows if r["weight"] == capped)
    assert capped < free and kept["direct_r1"] >= 100.0 - config.max_direct_drop
    assert any(r["direct_r1"] < 99.0 for r in rows)  # larger weights do mislead direct questions
