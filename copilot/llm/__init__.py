"""LLM backends behind one interface, chosen by configuration.

``get_llm()`` returns the process-wide model for the configured backend; loading the embedded model takes a
second or two, so it happens once.
"""

from __future__ import annotations

import threading

from copilot.config import Settings, get_settings
from copilot.llm.base import ChatModel, ChoiceProbe, GenerationOptions, LLMError, Message, UsageCounter
from copilot.llm.json_reply import NoJSONObject, extract_json_object
from copilot.llm.scheduler import LLMScheduler, Priority, Ticket, scheduling

__all__ = [
    "ChatModel",
    "ChoiceProbe",
    "GenerationOptions",
    "LLMError",
    "LLMScheduler",
    "Message",
    "NoJSONObject",
    "Priority",
    "Ticket",
    "UsageCounter",
    "build_llm",
    "extract_json_object",
    "get_llm",
    "scheduling",
]

_cache: dict[tuple, ChatModel] = {}
_cache_lock = threading.Lock()


def build_llm(settings: Settings) -> ChatModel:
    """A new model object for ``settings`` (no caching)."""
    backend = settings.resolved_backend()
    if backend == "openai":
        from copilot.llm.openai_compat import OpenAICompatibleModel

        model: ChatModel = OpenAICompatibleModel(
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key,
            model=settings.llm_model,
            timeout_s=settings.llm_timeout_s,
            slots=settings.llm_slots,  # an endpoint serves several requests at once
        )
        return model
    if backend == "hf":
        from copilot.llm.hf_inference import HFInferenceModel

        return HFInferenceModel(token=settings.hf_token, model=settings.llm_model, timeout_s=settings.llm_timeout_s,
                                slots=settings.llm_slots)
    # One in-process model computes one call at a time: one slot (the ChatModel default).
    from copilot.llm.llamacpp import LlamaCppModel

    return LlamaCppModel(
        model_path=settings.llm_model or None,
        n_ctx=settings.llm_context_tokens,
        n_threads=settings.llm_threads,
        repeat_penalty=settings.repeat_penalty,
    )


def get_llm(settings: Settings | None = None) -> ChatModel:
    """The shared model for ``settings`` (default: the environment's), built on first use."""
    settings = settings or get_settings()
    key = (
        settings.resolved_backend(),
        settings.llm_model,
        settings.openai_base_url,
        settings.openai_api_key,
        settings.hf_token,
        settings.llm_context_tokens,
    )
    with _cache_lock:
        if key not in _cache:
            _cache[key] = build_llm(settings)
        return _cache[key]
