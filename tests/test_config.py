import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from copilot.config import LOCAL_CONTEXT_BUDGET_TOKENS, LOCAL_MAX_ANSWER_TOKENS, Settings, get_settings, usable_cpus


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("COPILOT_DATA_DIR", "COPILOT_LLM_BACKEND", "COPILOT_OPENAI_BASE_URL", "COPILOT_OPENAI_API_KEY",
                 "COPILOT_HF_TOKEN", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    s = Settings()
    assert s.data_dir == Path("data")
    assert s.context_budget_tokens == 350 < 2000, "the default embedded model's own (Qwen2.5-Coder-1.5B)"
    assert Settings(llm_model="/models/mine.gguf").context_budget_tokens == LOCAL_CONTEXT_BUDGET_TOKENS
    assert s.max_answer_tokens == LOCAL_MAX_ANSWER_TOKENS
    assert s.top_k == 8
    assert s.dedup_threshold == 0.85
    assert s.resolved_backend() == "local"
    assert s.db_path == Path("data") / "copilot.db"


def test_prompt_size_follows_the_backend_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("COPILOT_CONTEXT_BUDGET_TOKENS", "COPILOT_MAX_ANSWER_TOKENS", "COPILOT_OPENAI_BASE_URL",
                 "COPILOT_OPENAI_API_KEY", "COPILOT_HF_TOKEN", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    remote = Settings(llm_backend="openai")
    assert (remote.context_budget_tokens, remote.max_answer_tokens) == (2000, 256)
    assert Settings(llm_backend="hf").context_budget_tokens == 2000
    local = Settings(llm_backend="local")
    assert (local.context_budget_tokens, local.max_answer_tokens) == (350, LOCAL_MAX_ANSWER_TOKENS)
    assert Settings(llm_backend="local", llm_model="smollm2-135m").context_budget_tokens == LOCAL_CONTEXT_BUDGET_TOKENS
    assert Settings(llm_backend="local", context_budget_tokens=2000).context_budget_tokens == 2000
    monkeypatch.setenv("COPILOT_MAX_ANSWER_TOKENS", "99")
    assert Settings(llm_backend="openai").max_answer_tokens == 99


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COPILOT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("COPILOT_TOP_K", "3")
    monkeypatch.setenv("COPILOT_CONTEXT_BUDGET_TOKENS", "1500")
    monkeypatch.setenv("COPILOT_LLM_BACKEND", "openai")
    s = Settings()
    assert s.data_dir == tmp_path
    assert s.top_k == 3
    assert s.context_budget_tokens == 1500
    assert s.resolved_backend() == "openai"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "local"),
        ({"COPILOT_OPENAI_BASE_URL": "http://127.0.0.1:8000/v1"}, "openai"),
        # A token or key alone never chooses the backend (an HF_TOKEN set on a Space for another reason).
        ({"COPILOT_OPENAI_API_KEY": "sk-x"}, "local"),
        ({"COPILOT_HF_TOKEN": "hf_x"}, "local"),
        ({"HF_TOKEN": "hf_x"}, "local"),
        ({"HF_TOKEN": "hf_x", "COPILOT_LLM_BACKEND": "hf"}, "hf"),
        ({"HF_TOKEN": "hf_x", "COPILOT_OPENAI_BASE_URL": "http://h/v1"}, "openai"),
        ({"HF_TOKEN": "hf_x", "COPILOT_LLM_BACKEND": "local"}, "local"),
    ],
)
def test_auto_backend(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: str) -> None:
    for name in ("COPILOT_LLM_BACKEND", "COPILOT_OPENAI_BASE_URL", "COPILOT_OPENAI_API_KEY", "COPILOT_HF_TOKEN",
                 "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert Settings().resolved_backend() == expected


def test_bad_values_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COPILOT_LLM_BACKEND", "gpt5")
    with pytest.raises(ValidationError, match="llm_backend"):
        Settings()
    monkeypatch.setenv("COPILOT_LLM_BACKEND", "local")
    monkeypatch.setenv("COPILOT_DEDUP_THRESHOLD", "1.5")
    with pytest.raises(ValidationError, match="dedup_threshold"):
        Settings()


def test_every_setting_is_documented_in_the_configuration_page() -> None:
    from tests.conftest import ROOT

    readme = (ROOT / "docs" / "configuration.md").read_text()
    missing = [f"COPILOT_{name.upper()}" for name in Settings.model_fields if f"`COPILOT_{name.upper()}`" not in readme]
    assert missing == []


def test_the_configuration_page_states_each_default_the_settings_have() -> None:
    import re

    from tests.conftest import ROOT

    def shown(value: object) -> str:
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)

    readme = (ROOT / "docs" / "configuration.md").read_text()
    rows = re.findall(r"^\| `COPILOT_([A-Z0-9_]+)` \| `([^`]*)` \|", readme, re.M)
    assert len(rows) > 40  # the configuration table, each default in backticks ("(empty)" and such are not read)
    assert [name for name, _ in rows if name.lower() not in Settings.model_fields] == [], "no such setting"
    wrong = [(name, default, shown(Settings.model_fields[name.lower()].default)) for name, default in rows
             if shown(Settings.model_fields[name.lower()].default) != default]
    assert wrong == []


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_the_local_model_threads_default_to_the_cores_this_process_may_use() -> None:
    """A container or a pinned process runs on fewer cores than the machine has: ``COPILOT_LLM_THREADS=0`` counts
    those, so the model's threads never outnumber them."""
    probe = "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); " \
            "from copilot.config import usable_cpus; print(usable_cpus())"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.stdout.strip() == "1"
    assert usable_cpus() == len(os.sched_getaffinity(0))


def test_openmp_threads_spin_briefly_unless_the_environment_says_otherwise() -> None:
    """Importing ``copilot`` sets ``GOMP_SPINCOUNT`` before llama.cpp or torch loads (their OpenMP reads it once);
    a spin count or a wait policy the environment already gives is kept (docs/configuration.md, "Threads")."""
    probe = ("import sys, os, copilot; print(os.environ.get('GOMP_SPINCOUNT', '-'), 'torch' in sys.modules, "
             "'llama_cpp' in sys.modules)")
    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}

    def spin(extra: dict[str, str]) -> list[str]:
        return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=root,
                              env=env | extra).stdout.split()

    assert spin({}) == ["2000", "False", "False"]
    assert spin({"GOMP_SPINCOUNT": "50000"})[0] == "50000"
    assert spin({"OMP_WAIT_POLICY": "PASSIVE"})[0] == "-"


def test_the_process_wide_settings_are_read_once() -> None:
    """What start-up applies to them (``apply_offline_defaults``) holds for every later reader in the process."""
    assert get_settings() is get_settings()
