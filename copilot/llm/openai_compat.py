"""Any OpenAI-compatible chat-completions endpoint: OpenAI, vLLM, Ollama, llama.cpp server, TGI."""

from __future__ import annotations

import math
from collections.abc import Iterator

import openai

from copilot.config import Settings
from copilot.llm.base import ChatModel, GenerationOptions, LLMError, Message

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"


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
            for event in response:
                if not event.choices:
                    continue
                delta = event.choices[0].delta
                if delta is not None and delta.content:
                    yield delta.content
        except openai.APITimeoutError as exc:
            raise LLMError(
                f"The LLM endpoint {self.base_url} did not answer within the timeout; "
                "raise COPILOT_LLM_TIMEOUT_S or check the server's load."
            ) from exc
        except openai.APIConnectionError as exc:
            raise LLMError(
                f"Cannot reach the LLM endpoint {self.base_url}: is the server running and is "
                "COPILOT_OPENAI_BASE_URL right (it usually ends in /v1)?"
            ) from exc
        except openai.AuthenticationError as exc:
            raise LLMError(
                f"The LLM endpoint {self.base_url} refused the API key; check COPILOT_OPENAI_API_KEY."
            ) from exc
        except openai.PermissionDeniedError as exc:
            raise LLMError(f"The API key may not use model '{self.model}' at {self.base_url}.") from exc
        except openai.NotFoundError as exc:
            raise LLMError(
                f"Model '{self.model}' (or the chat-completions route) was not found at {self.base_url}; "
                "check COPILOT_LLM_MODEL and COPILOT_OPENAI_BASE_URL."
            ) from exc
        except openai.RateLimitError as exc:
            raise LLMError(f"The LLM endpoint {self.base_url} is rate limiting requests; retry later.") from exc
        except openai.APIStatusError as exc:
            raise LLMError(
                f"The LLM endpoint {self.base_url} answered HTTP {exc.status_code}: {exc.message}"
            ) from exc
        except openai.OpenAIError as exc:
            raise LLMError(f"The LLM endpoint {self.base_url} failed: {exc}") from exc
