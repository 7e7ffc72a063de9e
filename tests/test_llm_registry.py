"""Backends are registered by name, chosen by a setting, and imported only when built."""

from __future__ import annotations

import subprocess
import sys
from typing import get_args

import pytest

from copilot.config import LLMBackendName, Settings
from copilot.errors import UserError
from copilot.llm import BACKENDS, ChatModel, backend_class, build_llm


def test_every_configurable_backend_is_registered() -> None:
    assert set(get_args(LLMBackendName)) - {"auto"} == set(BACKENDS)


def test_each_backend_is_a_chat_model_built_from_settings() -> None:
    for name in BACKENDS:
        cls = backend_class(name)
        assert issubclass(cls, ChatModel)
        assert cls.from_settings.__func__ is not ChatModel.from_settings.__func__, name


def test_an_unknown_backend_is_one_line_naming_the_known_ones() -> None:
    settings = Settings().model_copy(update={"llm_backend": "gpt5"})
    with pytest.raises(UserError, match="Unknown LLM backend 'gpt5'; known backends: local, openai, hf") as info:
        build_llm(settings)
    assert "\n" not in str(info.value)


def test_importing_the_package_loads_no_backend_library() -> None:
    code = ("import sys, copilot.llm; print(sorted(m for m in ('llama_cpp', 'openai', 'huggingface_hub', 'torch') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
