"""Associative recall: the loss, the adapter, the combined score, evaluation, decontamination, the shipped model."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from copilot.association import AssociativeScorer, QueryAdapter, combined_scores, load_adapter
from copilot.association.adapter import DEFAULT_LORA_PATH, DEFAULT_MLP_PATH, AdapterFileError, unit_rows
from copilot.association.cli import cli
from copilot.association.data import (
    DEFAULT_LIVES_DIR,
    DEFAULT_LOCOMO,
    Life,
    Memory,
    Pair,
    Query,
    lives_benchmark,
    load_lives,
    locomo_benchmark,
    pairs_of,
    persons_of,
    split_persons,
)
from copilot.association.decontam import decontaminate
from copilot.association.embedcache import EmbeddingCache
from copilot.association.evaluation import ASSOCIATION, BY_SENTENCE, UNTRAINED, UNTRAINED_BY_SENTENCE, evaluate
from copilot.association.heldout import among_real_turns, relation_of_queries
from copilot.association.metrics import mcnemar_exact, recall_at_k
from copilot.association.report import query_blind, read_time_cost
from copilot.association.scoring import MAX_PARTS, fused_scores, message_parts
from copilot.association.simulate import leaked_words, simulate_lives
from copilot.association.training import (TrainConfig, TrainingSet, build_net, fit, info_nce, real_turn_weight,
                                          train, with_chatter, without)
from tests.scripted_llm import ScriptedLLM

LIVES_DIR = DEFAULT_LIVES_DIR
LOCOMO = DEFAULT_LOCOMO
DIM = 384


@pytest.fixture(scope="module")
def cache() -> EmbeddingCache:
    from copilot.config import Settings
    from copilot.embeddings import get_embedder

    torch.set_num_threads(2)
    return EmbeddingCache.for_embedder(get_embedder(Settings()))


def _random_units(n: int, seed: int, dim: int = DIM) -> np.ndarray:
    return unit_rows(np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32))


def _trained_looking_adapter(seed: int = 0, weight: float = 1.5) -> QueryAdapter:
    rng = np.random.default_rng(seed)
    arrays = {"W1": rng.normal(0, 0.1, (64, DIM)), "b1": rng.normal(0, 0.1, 64),
              "W2": rng.normal(0, 0.1, (DIM, 64)), "b2": rng.normal(0, 0.1, DIM)}
    return QueryAdapter("residual_mlp", arrays, weight)


def test_info_nce_hand_example() -> None:
    q = torch.tensor([[1.0, 0.0], [0.0, 3.0]])  # the second is not unit length: the loss normalises it
    c = torch.tensor([[2.0, 0.0], [0.0, 1.0]])
    # cosine logits / 0.05 are [[20, 0], [0, 20]]
    right = info_nce(q, c, torch.tensor([0, 1]), 0.05).item()
    assert math.isclose(right, math.log1p(math.exp(-20)), abs_tol=1e-6)
    mixed = info_nce(q, c, torch.tensor([0, 0]), 0.05).item()  # query 1 points at the wrong candidate
    assert math.isclose(mixed, (math.log1p(math.exp(-20)) + 20 + math.log1p(math.exp(-20))) / 2, rel_tol=1e-4)
    assert info_nce(q, c, torch.tensor([0, 1]), 1.0).item() > right  # a higher temperature is less sure


def test_residual_adapter_starts_as_identity_and_round_trips(tmp_path) -> None:  # noqa: ANN001
    net = build_net(DIM, "residual_mlp", 32, 0.0)
    arrays = {k: v.detach().numpy() for k, v in
              {"W1": net.fc1.weight, "b1": net.fc1.bias, "W2": net.fc2.weight, "b2": net.fc2.bias}.items()}
    q = _random_units(5, 1)
    identity = QueryAdapter("residual_mlp", arrays, 0.5)
    assert identity.transform(q).shape == (5, DIM)
    assert np.allclose(identity.transform(q), q, atol=1e-6)

    adapter = _trained_looking_adapter()
    adapter.config = {"val_persons": ["p1"]}
    path = adapter.save(tmp_path / "a.npz")
    loaded = load_adapter(path)
    assert loaded.weight == 1.5 and loaded.config["val_persons"] == ["p1"] and loaded.kind == "residual_mlp"
    out = loaded.transform(q)
    assert np.allclose(out, adapter.transform(q), atol=1e-6)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(out, q, atol=1e-2)
    with pytest.raises(ValueError, match="shape"):
        loaded.transform(np.zeros((2, 10), dtype=np.float32))
    with pytest.raises(AdapterFileError):
        load_adapter(tmp_path / "missing.npz")
    with pytest.raises(AdapterFileError, match="lacks"):
        QueryAdapter("linear", {"W1": np.zeros((2, 2))})


def test_numpy_forward_matches_torch() -> None:
    torch.manual_seed(0)
    for kind in ("residual_mlp", "linear", "mlp"):
        net = build_net(DIM, kind, 48, 0.0)
        for p in net.parameters():
            torch.nn.init.normal_(p, 0, 0.05)
        net.eval()
        adapter = QueryAdapter(kind, net.arrays())
        q = _random_units(4, 2)
        expected = torch.nn.functional.normalize(net(torch.from_numpy(q)), dim=-1).detach().numpy()
        assert np.allclose(adapter.transform(q), expected, atol=1e-5), kind


class _FakeEmbedder:
    """Deterministic unit vectors per text: enough to check the scorer's arithmetic without a model."""

    dimension = DIM
    name = "fake"

    def __init__(self) -> None:
        self.calls = 0

    def encode_documents(self, texts):  # noqa: ANN001, ANN201
        self.calls += 1
        return np.stack([_random_units(1, sum(map(ord, t)))[0] for t in texts])

    def encode_queries(self, texts):  # noqa: ANN001, ANN201
        return self.encode_documents(texts)


def test_combined_score_and_query_vector_rank_alike() -> None:
    embedder = _FakeEmbedder()
    adapter = _trained_looking_adapter(weight=2.0)
    scorer = AssociativeScorer(embedder, adapter)
    memories = _random_units(50, 3)
    plain = embedder.encode_documents(["a question"])
    expected = plain @ memories.T + 2.0 * adapter.transform(plain) @ memories.T
    assert np.allclose(scorer.score("a question", memories), expected[0], atol=1e-5)
    assert np.allclose(combined_scores(plain, adapter.transform(plain), memories, 0.0), plain @ memories.T)

    seam_scores = scorer.query_vectors(embedder.encode_queries(["a question"]))[0] @ memories.T
    # the combined query vector ranks exactly like the combined score, and scorer.score stays combined
    assert list(np.argsort(-seam_scores)) == list(np.argsort(-expected[0]))
    assert scorer.rank("a question", memories, k=5) == list(np.argsort(-expected[0])[:5])
    assert np.allclose(scorer.score("a question", memories), expected[0], atol=1e-5)
    # the query encoder itself stays plain
    assert np.allclose(embedder.encode_queries(["a question"]), plain)


def test_embedding_cache_encodes_each_text_once(tmp_path) -> None:  # noqa: ANN001
    embedder = _FakeEmbedder()
    cache = EmbeddingCache(embedder.encode_documents, "fake", tmp_path / "c.npz")
    first = cache.encode(["x", "y", "x"])
    cache.encode(["y", "x"])
    assert embedder.calls == 1 and cache.computed == 2 and np.allclose(first[0], first[2])
    cache.save()
    again = EmbeddingCache(embedder.encode_documents, "fake", tmp_path / "c.npz")
    assert np.allclose(again.encode(["y"]), first[1:2]) and embedder.calls == 1
    assert len(EmbeddingCache(embedder.encode_documents, "other model", tmp_path / "c.npz")) == 0


def test_mcnemar_hand_example() -> None:
    before = [1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1]
    after = [1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1]  # 8 new hits, 1 new miss
    test = mcnemar_exact(before, after)
    assert (test.b_only, test.a_only) == (8, 1)
    assert math.isclose(test.p_value, 2 * (9 + 1) / 2**9, rel_tol=1e-9)  # 2·P(X ≥ 8), X ~ Bin(9, 1/2)
    assert mcnemar_exact([1, 0], [1, 0]).p_value == 1.0
    assert recall_at_k(["a", "b", "c"], ["c", "z"], 2) == 0.0 and recall_at_k(["a", "b", "c"], ["c", "z"], 3) == 0.5


def test_training_learns_a_hidden_association() -> None:
    """Queries are a fixed scrambling of their statements: plain cosine fails, a fitted adapter must not."""
    rng = np.random.default_rng(0)
    statements = _random_units(200, 4)
    mix = np.linalg.qr(rng.normal(size=(DIM, DIM)))[0].astype(np.float32)
    queries = unit_rows(statements @ mix + 0.05 * rng.normal(size=statements.shape).astype(np.float32))
    persons = np.repeat(np.arange(20), 10)
    data = TrainingSet(queries, statements, np.arange(200), persons, persons)
    adapter = fit(data, TrainConfig(epochs=60, persons_per_batch=20, lr=3e-3, dropout=0.0, hidden=256))
    plain_hits = np.mean(np.argmax(queries @ statements.T, axis=1) == np.arange(200))
    learned_hits = np.mean(np.argmax(adapter.transform(queries) @ statements.T, axis=1) == np.arange(200))
    assert plain_hits < 0.1 and learned_hits > 0.9


def test_split_is_by_person_and_seeded() -> None:
    persons = [f"p{i:02d}" for i in range(20)]
    train, val = split_persons(persons * 3, 5, seed=3)
    assert len(val) == 5 and len(train) == 15 and not set(train) & set(val)
    assert split_persons(persons, 5, seed=3) == (train, val) and split_persons(persons, 5, seed=4) != (train, val)
    with pytest.raises(ValueError):
        split_persons(persons, 20, seed=0)


def test_simulate_keeps_valid_lines_and_rejects_leaks(tmp_path) -> None:  # noqa: ANN001
    good = {"person": "whatever", "statement": "My sister Maya is moving to Lisbon in June.", "relation": "state",
            "time_gap": "two weeks later", "direct_question": "Where is my sister moving?",
            "triggers": ["Any tips for sending a parcel abroad?", "I feel a bit lonely lately.",
                         "What gift suits a new flat?"]}
    leaky = dict(good, statement="I go running every morning before work.",
                 triggers=["Should I skip running tomorrow?", "My knees ache.", "Best shoes?"])
    bad_relation = dict(good, relation="other")
    reply = "\n".join(["Here you go:", json.dumps(good), json.dumps(leaky), json.dumps(bad_relation), "{oops"])
    llm = ScriptedLLM(answers=[reply, "no json at all"])
    out = tmp_path / "lives_sim.jsonl"
    stats = simulate_lives(llm, out, 2, seed=7)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["person"] for r in rows] == ["sim7_001"] and rows[0]["statement"] == good["statement"]
    assert stats["lines_written"] == 1 and stats["persons_written"] == 1
    assert stats["rejected"]["trigger shares words with its statement"] == 1
    assert stats["rejected"]["invalid fields"] == 1
    assert "Simulate" in llm.calls[0][1]["content"] and len(llm.calls) == 2
    assert load_lives(out)[0].triggers == tuple(good["triggers"])
    assert leaked_words("We paid $2,000 in Paris.", "Is 2000 too much?") == {"2000"}


@pytest.mark.slow
def test_eval_command_json(tmp_path, cache: EmbeddingCache) -> None:  # noqa: ANN001
    memories = [{"id": "a1", "text": "The cat sat on the mat.", "group": "a"},
                {"id": "a2", "text": "I filed my taxes in April.", "group": "a"},
                {"id": "b1", "text": "The rocket launched at dawn.", "group": "b"},
                {"id": "b2", "text": "The cat sat on the mat.", "group": "b"}]
    queries = [{"id": "q1", "text": "Where did the cat sit?", "gold": ["a1"], "group": "a"},
               {"id": "q2", "text": "When did the rocket launch?", "gold": ["b1"], "group": "b"},
               {"id": "q3", "text": "Where did the cat sit?", "gold": ["b2"], "group": "b"}]
    m_path, q_path = tmp_path / "m.jsonl", tmp_path / "q.jsonl"
    m_path.write_text("".join(json.dumps(m) + "\n" for m in memories))
    q_path.write_text("".join(json.dumps(q) + "\n" for q in queries))
    result = CliRunner().invoke(cli, ["eval", "--memories", str(m_path), "--queries", str(q_path), "--k", "10",
                                      "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    keys = {"recall@1", "recall@5", "recall@10"}
    assert set(report) == {"n_queries", "untrained", "association"} and report["n_queries"] == 3
    assert set(report["untrained"]) == keys and set(report["association"]) == keys
    # q3 only sees group b: the identical memory a1 in group a must not take its place
    assert report["untrained"]["recall@1"] == 100.0 and report["association"]["recall@10"] == 100.0
    chatty = [{"id": "q4", "text": "The rocket launched at dawn, what a sight. Where did the cat sit?", "gold": ["a1"],
               "group": "a"}]
    q_path.write_text("".join(json.dumps(q) + "\n" for q in queries + chatty))
    args = ["eval", "--memories", str(m_path), "--queries", str(q_path), "--k", "1"]
    for extra in (["--json", "--weight", "0"], ["--json", "--whole-message"]):
        result = CliRunner().invoke(cli, args + extra)
        assert result.exit_code == 0, result.output
        assert set(json.loads(result.output)) == {"n_queries", "untrained", "association"}
    table = CliRunner().invoke(cli, args).output
    assert "| untrained, by sentence |" in table and "| association |" in table
    assert "by sentence" not in CliRunner().invoke(cli, args + ["--whole-message"]).output


@pytest.mark.slow
def test_decontamination_drops_a_near_duplicate(cache: EmbeddingCache) -> None:
    evaluation = ["How do I tell my PhD advisor that I want to switch to a different research topic?"]
    near = Pair("how do i tell my phd advisor i want to switch to a different research topic",
                "My advisor expects me to keep working on parsing.", "p1", "trigger")
    far = Pair("Any good recipes for a rainy Sunday?", "I love cooking soups in autumn.", "p1", "trigger")
    result = decontaminate([near, far], evaluation, cache, threshold=0.9)
    assert result.dropped == [near] and result.kept == [far]
    assert decontaminate([near, far], evaluation, cache, threshold=0.999).dropped == []


def lives_the_adapter_was_trained_from(n_persons: int) -> list:
    """The lives of the first files (sorted) that hold the adapter's ``n_persons``: the simulated lives grow by new
    files, and a person split is only reproducible over the persons it was drawn from."""
    lives: list = []
    for path in sorted(LIVES_DIR.glob("lives_*.jsonl")):
        lives += load_lives(path)
        if len(persons_of(lives)) >= n_persons:
            break
    assert len(persons_of(lives)) == n_persons, "the files the shipped adapter was trained from are not all there"
    return lives


@pytest.mark.slow
def test_shipped_mlp_adapter_beats_plain_cosine_on_held_out_persons(cache: EmbeddingCache) -> None:
    assert DEFAULT_MLP_PATH.stat().st_size < 5 * 1024 * 1024
    adapter = load_adapter(DEFAULT_MLP_PATH)
    lives = lives_the_adapter_was_trained_from(adapter.config["n_train_persons"] + len(adapter.config["val_persons"]))
    held_out = sorted(adapter.config["val_persons"])
    train_persons, val_persons = split_persons(persons_of(lives), len(held_out), adapter.config["split_seed"])
    assert val_persons == held_out and adapter.weight > 0
    slice_ = [life for life in lives if life.person in set(held_out[:10])]
    memories, queries = lives_benchmark(slice_, pooled=True)
    result = evaluate(memories, queries, cache, adapter)
    assert result.n_queries == 3 * len(slice_) >= 90
    assert result.percent(ASSOCIATION, 5) > result.percent(UNTRAINED, 5)
    assert result.mrr(ASSOCIATION) > result.mrr(UNTRAINED)


@pytest.mark.slow
def test_shipped_lora_beats_plain_cosine_and_the_mlp_on_held_out_persons(cache: EmbeddingCache) -> None:
    adapter = load_adapter(DEFAULT_LORA_PATH)
    assert adapter.kind == "lora"
    held_out = sorted(adapter.config["test_persons"])
    lives = lives_the_adapter_was_trained_from(470)
    assert split_persons(persons_of(lives), len(held_out), adapter.config["split_seed"])[1] == held_out
    slice_ = [life for life in lives if life.person in set(held_out[:20])]
    memories, queries = lives_benchmark(slice_, pooled=True)
    result = evaluate(memories, queries, cache, adapter)
    mlp = evaluate(memories, queries, cache, load_adapter(DEFAULT_MLP_PATH))
    assert result.n_queries == 3 * len(slice_) >= 180
    assert result.percent(ASSOCIATION, 10) > result.percent(UNTRAINED, 10) + 3
    assert result.mrr(ASSOCIATION) > max(result.mrr(UNTRAINED), mlp.mrr(ASSOCIATION))


@pytest.mark.slow
def test_the_default_wins_where_users_live(cache: EmbeddingCache) -> None:
    """Held-out statements in real conversations, each trigger asked after a real chat turn: the default (the MLP)
    finds more than plain cosine and more than the LoRA, which wins only on the simulator's own lines; read sentence
    by sentence, as the chat reads a message, it finds far more, and more than plain cosine read the same way."""
    mlp, lora = load_adapter(), load_adapter(DEFAULT_LORA_PATH)
    assert mlp.kind == "residual_mlp"
    held_out = sorted(mlp.config["val_persons"])
    lives = [life for life in lives_the_adapter_was_trained_from(470) if life.person in set(held_out[:30])]
    turns, _ = locomo_benchmark(LOCOMO)
    conversations = [[m.text for m in turns if m.group == g] for g in dict.fromkeys(m.group for m in turns)]
    memories, queries = among_real_turns(lives, conversations, chatty=True)
    triggers = [q for q in queries if q.kind == "trigger"]
    scorers = {UNTRAINED: 0.0, ASSOCIATION: mlp.weight, UNTRAINED_BY_SENTENCE: 0.0, BY_SENTENCE: mlp.weight}
    default = evaluate(memories, triggers, cache, mlp, scorers, by_sentence=(UNTRAINED_BY_SENTENCE, BY_SENTENCE))
    other = evaluate(memories, triggers, cache, lora)
    assert default.n_queries >= 800
    assert default.percent(ASSOCIATION, 10) > default.percent(UNTRAINED, 10) + 2
    assert default.percent(ASSOCIATION, 10) > other.percent(ASSOCIATION, 10) + 1
    # as the chat reads a message: sentence by sentence, then the adapter on top
    assert default.percent(BY_SENTENCE, 10) > default.percent(UNTRAINED, 10) + 10
    assert default.percent(BY_SENTENCE, 10) > default.percent(UNTRAINED_BY_SENTENCE, 10) + 2
    direct = [q for q in queries if q.kind == "direct"]
    asked = evaluate(memories, direct, cache, mlp, scorers, ks=(1,), by_sentence=(BY_SENTENCE,))
    assert len(direct) >= 250 and asked.percent(BY_SENTENCE, 1) > asked.percent(UNTRAINED, 1) + 20, \
        "a direct question after small talk finds its memory again"


def test_the_query_blind_control_finds_a_line_that_differs_from_its_conversation_without_reading_the_query() -> None:
    """Two conversations of near-identical chat lines, each hiding one line that points elsewhere: the control puts
    that line first whatever its queries say, and misses a cue that looks like the chat around it."""
    axes = {"chat": np.array([1.0, 0.0, 0.0]), "odd": np.array([0.0, 1.0, 0.0])}

    def encode(texts):  # a line's direction is named by its first word, with a small per-line tilt
        return unit_rows(np.stack([axes[t.split()[0]] + np.array([0.0, 0.0, 0.01 * len(t)]) for t in texts]))

    cache = EmbeddingCache(encode)
    memories = [Memory(f"turn/{i}", f"chat line {'x' * i}", "g1") for i in range(5)] + [Memory("cue/a", "odd", "g1")]
    memories += [Memory(f"turn/{i}", f"chat talk {'y' * i}", "g2") for i in range(5)]
    memories.append(Memory("cue/b", "chat abcdefg", "g2"))  # as long as the middle turn: nothing sets it apart
    queries = [Query("q1", "anything at all", ("cue/a",), "g1", "trigger"),
               Query("q2", "odd", ("cue/b",), "g2", "trigger"), Query("q3", "odd", ("cue/a",), "g1", "direct")]
    assert query_blind(memories, queries, cache, k=1) == 50.0, "the odd cue found, the chat-like one not"
    assert query_blind(memories, queries, cache, k=6) == 100.0, "every line of a group is in its top 6"


def test_locomo_benchmark_points_gold_at_own_turns() -> None:
    memories, queries = locomo_benchmark(LOCOMO)
    ids = {m.id: m.group for m in memories}
    assert len({m.group for m in memories}) == 2 and len(queries) > 300  # the two conversations kept (CC BY-NC)
    assert all(ids[g] == q.group for q in queries for g in q.gold)


def test_real_turns_hide_a_few_statements_of_one_person_in_a_whole_conversation() -> None:
    lives = [Life(p, f"{p} statement {i}", ("state", "causal")[i % 2], "later", ("t1", "t2"), f"{p} q{i}?")
             for p in ("x", "y") for i in range(3)]
    conversations = [["A: hi", "B: hello", "A: rain again"], ["C: lunch?", "D: sure"]]
    memories, queries = among_real_turns(lives, conversations, cues=2, seed=0)
    groups: dict[str, list] = {}
    for m in memories:
        groups.setdefault(m.group, []).append(m)
    assert len(groups) == 4, "each person's 3 statements make groups of 2 and 1"
    for number, members in enumerate(groups.values()):
        turns = [m.text for m in members if m.id.startswith("turn/")]
        statements = [m for m in members if not m.id.startswith("turn/")]
        assert turns == [t.split(": ", 1)[1] for t in conversations[number % 2]], "the whole conversation, unnamed"
        assert 1 <= len(statements) <= 2 and len({m.id.split("/")[0] for m in statements}) == 1, "one person's"
    hidden = sorted(m.id for m in memories if not m.id.startswith("turn/"))
    assert hidden == sorted(f"{p}/{i}" for p in ("x", "y") for i in range(3)), "every statement once"
    own = {m.id: m.group for m in memories if not m.id.startswith("turn/")}
    assert all(own[q.gold[0]] == q.group for q in queries), "a query searches the group of its statement"
    assert sorted(q.kind for q in queries).count("direct") == 6 and len(queries) == 18
    assert relation_of_queries(lives, queries) == [("state", "causal")[int(q.gold[0][-1]) % 2] for q in queries]
    chat_memories, chat_queries = among_real_turns(lives, conversations, cues=2, seed=0, chatty=True)
    assert chat_memories == memories and len(chat_queries) == len(queries) == 18
    for chatty, plain in zip(chat_queries, queries, strict=True):
        other = conversations[(int(chatty.group.split("/")[1]) + 1) % 2]
        said = chatty.text.removesuffix(" " + plain.text)
        assert chatty.kind == plain.kind and chatty.gold == plain.gold and said != chatty.text, "after a chat turn"
        assert said in {turn.split(": ", 1)[1] for turn in other}, "a turn of another conversation, no speaker"
    chatter = random.Random(0 + 1)  # the triggers' own draws: the direct questions' turns take none of them
    for chatty in [q for q in chat_queries if q.kind == "trigger"]:
        other = conversations[(int(chatty.group.split("/")[1]) + 1) % 2]
        assert chatty.text.startswith(chatter.choice(other).split(": ", 1)[1] + " ")
    matched, matched_queries = among_real_turns(lives, conversations, cues=2, seed=0, others=2)
    assert matched_queries == queries, "the same queries"
    assert [m for m in matched if not m.id.startswith("other/")] == memories, "the same groups, with more lines"
    statements = {life.statement: life.person for life in lives}
    for group in groups:
        mine = {m.id.split("/")[0] for m in groups[group] if not m.id.startswith("turn/")}
        added = [m.text for m in matched if m.group == group and m.id.startswith("other/")]
        assert len(added) == 2 and all(statements[t] not in mine for t in added), "two statements of others"


def test_chatter_asks_each_trigger_inside_another_persons_line() -> None:
    lives = [Life(p, f"{p} statement {i}", "state", "later", (f"{p} t{i}a", f"{p} t{i}b"), f"{p} q{i}?")
             for p in ("x", "y", "z") for i in range(2)]
    pairs = pairs_of(lives)
    more = with_chatter(pairs, 2, seed=3)
    assert more[:len(pairs)] == pairs and len(more) == len(pairs) + 2 * 12
    lines = {(p.person, p.query) for p in pairs}
    for pair in more[len(pairs):]:
        trigger = next(p for p in pairs if p.kind == "trigger" and p.statement == pair.statement
                       and (pair.query.startswith(p.query + " ") or pair.query.endswith(" " + p.query)))
        said = pair.query.replace(trigger.query, "").strip()
        assert pair.kind == "trigger" and pair.person == trigger.person
        assert any(line == said and person != pair.person for person, line in lines), "another person's own line"
    assert with_chatter(pairs, 2, seed=3) == more and with_chatter(pairs, 0, seed=3) == pairs
    assert all(p.chatter_of not in ("", p.person) for p in more[len(pairs):]), "whose line it carries"
    assert not [p for p in without(more, {"y"}) if "y" in (p.person, p.chatter_of)], "nothing of y, as query or chatter"
    alone = [p for p in pairs if p.person == "x"]
    assert with_chatter(alone, 2, seed=3) == alone, "one person has no one else's line to borrow"


def test_w_is_chosen_where_users_live_on_training_persons_only(cache: EmbeddingCache) -> None:
    topics = ["my knee hurts after running", "I moved to a flat near the river", "my sister is getting married",
              "I am learning to play the cello", "our cat is afraid of thunder", "I quit coffee last month"]
    lives = [Life(f"p{n}", f"{topic} ({n})", "state", "later", (f"about {topic.split()[-1]}, any tips?",),
                  f"What did I say about {topic.split()[-1]}?") for n in range(6) for topic in topics[n:n + 2]]
    conversations = [["A: hi there", "B: long day at work", "A: want pizza tonight?"]]
    config = TrainConfig(epochs=2, persons_per_batch=2, real_turn_persons=2, weight_grid=(0.5, 2.0))
    weight, rows, held = real_turn_weight(pairs_of(lives), lives, cache, config, conversations)
    assert len(held) == 2 and set(held) <= {life.person for life in lives}
    assert [r["weight"] for r in rows] == [0.0, 0.5, 2.0] and weight in (0.0, 0.5, 2.0)
    keys = ("trigger_r10_real_turns_chat", "direct_r1_real_turns", "direct_r1_alone")
    assert all(0 <= r[key] <= 100 for r in rows for key in keys)
    kept = [r for r in rows if all(r[key] >= rows[0][key] - config.max_direct_drop for key in keys[1:])]
    assert weight == max(kept, key=lambda r: (r[keys[0]], -r["weight"]))["weight"], "the best w that keeps direct"
    run = train(lives, ["p5"], cache, config, conversations=conversations)
    assert "p5" not in run.adapter.config["real_turn_persons"], "test persons never choose w"
    assert run.adapter.weight in (0.0, 0.5, 2.0) and run.adapter.config["real_turn_weight_search"]


def test_a_message_is_read_whole_and_sentence_by_sentence() -> None:
    message = "Sorry I vanished, e.g. for three weeks. The kids were sick.\nI've been coughing every night too."
    assert message_parts(message) == [message, "Sorry I vanished, e.g. for three weeks.", "The kids were sick.",
                                      "I've been coughing every night too."]
    assert message_parts("Just one sentence, about Dr. Smith.") == ["Just one sentence, about Dr. Smith."]
    assert message_parts("Hmm. I've been coughing every night.") == ["Hmm. I've been coughing every night.",
                                                                     "I've been coughing every night."], "no filler"
    assert message_parts("Wow, really? Thanks!") == ["Wow, really? Thanks!"]
    assert message_parts("我最近每天晚上都咳嗽\n今天天气很好")[1:] == ["我最近每天晚上都咳嗽", "今天天气很好"], "a character a word"
    long = " ".join(f"Line {i} is here." for i in range(20))
    parts = message_parts(long)
    assert len(parts) == 1 + MAX_PARTS and parts[0] == long and " ".join(parts[1:]) == long, "runs of sentences"
    assert [len(p.split(". ")) for p in parts[1:]] == [3, 3, 3, 3, 2, 2, 2, 2], "as even as they go"


def test_fused_scores_let_the_sentence_that_singles_a_memory_out_win() -> None:
    # columns: three chat lines the small talk resembles a little, then the memory the second sentence calls for
    scores = np.array([[0.40, 0.38, 0.39, 0.30],    # the whole message
                       [0.55, 0.52, 0.54, 0.20],    # its small talk: the highest cosines, singling nothing out
                       [0.10, 0.12, 0.11, 0.45]])   # its other sentence
    fused, best = fused_scores(scores)
    assert int(np.argmax(scores.max(0))) == 0, "raw cosines would let the small talk win"
    assert int(np.argmax(fused)) == 3 and best[3] == 2
    assert fused[3] == pytest.approx((0.45 - scores[2].mean()) / scores[2].std(), rel=1e-6)
    alone, which = fused_scores(scores[:1])
    assert alone.tolist() == scores[0].tolist() and which.tolist() == [0, 0, 0, 0], "one part: unchanged"
    with pytest.raises(ValueError):
        fused_scores(np.zeros((0, 4)))


def test_evaluate_reads_a_query_sentence_by_sentence_only_when_asked(cache: EmbeddingCache) -> None:
    lines = ["Our cat hides under the bed whenever there is thunder.", "I filed my taxes in April.",
             "The car needs new tyres before winter.", "The bus to work was late again today.",
             "My sister is getting married in May.", "I am learning to play the cello."]
    memories = [Memory(f"m{i}", text, "g") for i, text in enumerate(lines)]
    text = "The bus was late, the car still needs tyres, and the traffic was awful. The storm last night was so loud."
    queries = [Query("q", text, ("m0",), "g", "trigger")]
    result = evaluate(memories, queries, cache, load_adapter(), {UNTRAINED: 0.0, UNTRAINED_BY_SENTENCE: 0.0},
                      ks=(2,), by_sentence=(UNTRAINED_BY_SENTENCE,))
    assert result.rank[UNTRAINED][0] == 3, "read whole, the bus and the car come first"
    assert result.rank[UNTRAINED_BY_SENTENCE][0] == 2, "its own sentence brings the thunder-shy cat up"
    assert result.percent(UNTRAINED, 2) == 0.0 and result.percent(UNTRAINED_BY_SENTENCE, 2) == 100.0


def test_read_time_cost_times_a_message_as_recall_reads_it() -> None:
    from copilot.config import Settings
    from copilot.embeddings import get_embedder

    scorer = AssociativeScorer(get_embedder(Settings()), load_adapter())
    messages = ["The final was a mess. Anyway, I've been coughing every night.", "Just one sentence here."]
    cost = read_time_cost(scorer, ["When is my deadline?"], messages=messages)
    assert cost["messages"] == 2 and cost["parts_mean"] == 2.0, "3 parts, then 1"
    assert cost["whole_message_ms_median"] > 0 and cost["by_sentence_ms_median"] > 0
    assert cost["plain_ms_median"] > 0 and "by_sentence_ms_median" not in read_time_cost(scorer, ["Hi?"])


def test_lives_benchmark_pools() -> None:
    lives = [Life(p, f"{p} statement {i}", "state", "later", ("t1", "t2", "t3"), "q?") for p in ("x", "y")
             for i in range(3)]
    per_person, per_queries = lives_benchmark(lives, pooled=False)
    pooled, pooled_queries = lives_benchmark(lives, pooled=True)
    assert {m.group for m in per_person} == {"x", "y"} and {m.group for m in pooled} == {"all"}
    assert len(per_queries) == len(pooled_queries) == 18 and per_queries[0].gold == ("x/0",)
