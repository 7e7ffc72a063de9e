"""LLM backends behind one interface, each registered by name and chosen by ``COPILOT_LLM_BACKEND``.

A backend is one :class:`~copilot.llm.base.ChatModel` subclass built from the settings by its
``from_settings`` classmethod. :data:`BACKENDS` names each one's class by import path, so a backend's module
(llama.cpp, the ``openai`` client, ``huggingface_hub``) is imported only when that backend is built.
``get_llm()`` returns the process-wide model for the configured backend; loading the embedded model takes a
second or two, so it happens once.
"""

from __future__ import annotations

import pkgutil
import threading

from copilot.config import Settings, get_settings
from copilot.errors import UserError
from copilot.llm.base import (ChatModel, ChoiceProbe, GenerationOptions, LLMError, Message, TokenTrace,
                              UsageCounter)
from copilot.llm.json_reply import NoJSONObject, extract_json_object
from copilot.llm.scheduler import LLMScheduler, Priority, Ticket, scheduling

__all__ = [
    "BACKENDS",
    "ChatModel",
    "ChoiceProbe",
    "GenerationOptions",
    "LLMError",
    "LLMScheduler",
    "Message",
    "NoJSONObject",
    "Priority",
    "Ticket",
    "TokenTrace",
    "UsageCounter",
    "backend_class",
    "build_llm",
    "extract_json_object",
    "get_llm",
    "scheduling",
]

# Backend name (the resolved value of ``Settings.llm_backend``) -> "module:Class".
BACKENDS: dict[str, str] = {
    "local": "copilot.llm.llamacpp:LlamaCppModel",
    "openai": "copilot.llm.openai_compat:OpenAICompatibleModel",
    "hf": "copilot.llm.hf_inference:HFInferenceModel",
}

_cache: dict[tuple, ChatModel] = {}
_cache_lock = threading.Lock()


def backend_class(name: str) -> type[ChatModel]:
    """The class registered as backend ``name``, its module imported now."""
    if name not in BACKENDS:
        raise UserError(f"Unknown LLM backend '{name}'; known backends: {', '.join(BACKENDS)}.")
    try:
        return pkgutil.resolve_name(BACKENDS[name])
    except ModuleNotFoundError as exc:  # the backend's library is missing from this install
        raise LLMError(f"The '{name}' LLM backend needs {exc.name}, which is not installed; run `make run` to set "
                       "up.") from exc


def build_llm(settings: Settings) -> ChatModel:
    """A new model object for ``settings`` (no caching)."""
    return backend_class(settings.resolved_backend()).from_settings(settings)


def get_llm(settings: Settings | None = None) -> ChatModel:
    """The shared model for ``settings`` (default: the environment's), built on first use."""
    settings = settings or get_settings()
    key = (
        settings.resolved_backend(),
        settings.llm_model,
        settings.llm_prompt_form,
        settings.openai_base_url,
        settings.openai_api_key,
        settings.hf_token,
        settings.hf_base_url,
        settings.llm_context_tokens,
    )
    with _cache_lock:
        if key not in _cache:
            _cache[key] = build_llm(settings)
        return _cache[key]
