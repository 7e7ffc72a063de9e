"""Any OpenAI-compatible chat-completions endpoint: OpenAI, vLLM, Ollama, llama.cpp server, TGI."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

import openai

from copilot.config import Settings
from copilot.llm.base import ChatModel, GenerationOptions, LLMError, Message

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"


# What each failure of the endpoint tells the user, most specific first (a timeout is also a connection error).
FAILURES: tuple[tuple[type[openai.OpenAIError], str], ...] = (
    (openai.APITimeoutError, "The LLM endpoint {url} did not answer within the timeout; raise COPILOT_LLM_TIMEOUT_S "
                             "or check the server's load."),
    (openai.APIConnectionError, "Cannot reach the LLM endpoint {url}: is the server running and is "
                                "COPILOT_OPENAI_BASE_URL right (it usually ends in /v1)?"),
    (openai.AuthenticationError, "The LLM endpoint {url} refused the API key; check COPILOT_OPENAI_API_KEY."),
    (openai.PermissionDeniedError, "The API key may not use model '{model}' at {url}."),
    (openai.NotFoundError, "Model '{model}' (or the chat-completions route) was not found at {url}; check "
                           "COPILOT_LLM_MODEL and COPILOT_OPENAI_BASE_URL."),
    (openai.RateLimitError, "The LLM endpoint {url} is rate limiting requests; retry later."),
    (openai.APIStatusError, "The LLM endpoint {url} answered HTTP {status}: {message}"),
    (openai.OpenAIError, "The LLM endpoint {url} failed: {exc}"),
)


def delta_texts(events: Iterable[Any]) -> Iterator[str]:  # noqa: ANN401 - a client's streamed chunks
    """The text pieces of a streamed chat completion (OpenAI's and Hugging Face's chunks have one shape)."""
    for event in events:
        if not event.choices:
            continue
        delta = event.choices[0].delta
        if delta is not None and delta.content:
            yield delta.content


def estimate_tokens(text: str) -> int:
    """About four characters a token: remote tokenizers are unknown here, so budgets use this estimate."""
    return math.ceil(len(text) / 4) if text else 0


class OpenAICompatibleModel(ChatModel):
    """Chat through the ``openai`` package against a configurable base URL."""

    def __init__(self, *, base_url: str, api_key: str, model: str, timeout_s: float = 60.0,
                 slots: int = 1) -> None:
        super().__init__(slots)
        self.base_url = base_url or DEFAULT_OPENAI_BASE_URL
        self.model = model or DEFAULT_OPENAI_MODEL
        self.name = f"openai:{self.model}"
        # Local servers (vLLM, Ollama, llama.cpp) accept any key; the client insists on a non-empty one.
        self._client = openai.OpenAI(
            base_url=self.base_url, api_key=api_key or "not-needed", timeout=timeout_s, max_retries=1
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAICompatibleModel:
        """The configured endpoint, with ``llm_slots`` calls at once (an endpoint serves several requests)."""
        return cls(base_url=settings.openai_base_url, api_key=settings.openai_api_key, model=settings.llm_model,
                   timeout_s=settings.llm_timeout_s, slots=settings.llm_slots)

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)

    def _stream(self, messages: list[Message], options: GenerationOptions) -> Iterator[str]:
        try:
            response = self._client.chat.completions.create(
                model=self.model,
                messages=messages,  # type: ignore[arg-type]
                max_tokens=options.max_tokens,
                temperature=options.temperature,
                stop=options.stop,
                stream=True,
            )
            yield from delta_texts(response)
        except openai.OpenAIError as exc:
            raise LLMError(self.explain(exc)) from exc

    def explain(self, exc: openai.OpenAIError) -> str:
        """What a failed call means for the user: the first entry of :data:`FAILURES` that ``exc`` is."""
        template = next(text for kind, text in FAILURES if isinstance(exc, kind))
        return template.format(url=self.base_url, model=self.model, status=getattr(exc, "status_code", None),
                               message=getattr(exc, "message", exc), exc=exc)
