"""Hugging Face Inference through ``huggingface_hub.InferenceClient``: the natural choice on Spaces."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
from huggingface_hub import InferenceClient
from huggingface_hub.errors import HfHubHTTPError, InferenceTimeoutError, OfflineModeIsEnabled

from copilot.config import Settings
from copilot.llm.base import ChatModel, GenerationOptions, LLMError, Message
from copilot.llm.openai_compat import delta_texts, estimate_tokens

DEFAULT_HF_MODEL = "HuggingFaceTB/SmolLM3-3B"
# What an HTTP status from Hugging Face Inference tells the user.
STATUS_MESSAGES = {
    401: "Hugging Face refused the token; check COPILOT_HF_TOKEN (or HF_TOKEN).",
    403: "The Hugging Face token may not use '{model}'; check its permissions.",
    404: "Model '{model}' is not served by Hugging Face Inference; check COPILOT_LLM_MODEL.",
    429: "Hugging Face Inference is rate limiting requests; retry later or use your own token.",
}


class HFInferenceModel(ChatModel):
    """Chat completions served by Hugging Face Inference providers."""

    def __init__(self, *, token: str, model: str, timeout_s: float = 60.0,
                 slots: int = 1) -> None:
        super().__init__(slots)
        self.model = model or DEFAULT_HF_MODEL
        self.name = f"hf:{self.model}"
        self._client = InferenceClient(model=self.model, token=token or None, timeout=timeout_s)

    @classmethod
    def from_settings(cls, settings: Settings) -> HFInferenceModel:
        """The configured model on Hugging Face Inference, with ``llm_slots`` calls at once."""
        return cls(token=settings.hf_token, model=settings.llm_model, timeout_s=settings.llm_timeout_s,
                   slots=settings.llm_slots)

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)

    def _stream(self, messages: list[Message], options: GenerationOptions) -> Iterator[str]:
        try:
            yield from delta_texts(self._client.chat_completion(
                messages,
                max_tokens=options.max_tokens,
                temperature=options.temperature,
                stop=options.stop,
                stream=True,
            ))
        except InferenceTimeoutError as exc:
            raise LLMError(
                f"Hugging Face Inference did not answer for '{self.model}' in time; "
                "raise COPILOT_LLM_TIMEOUT_S or pick another model."
            ) from exc
        except HfHubHTTPError as exc:
            raise LLMError(self._explain_status(exc)) from exc
        except OfflineModeIsEnabled as exc:
            raise LLMError(
                "Hugging Face Inference needs the network, but HF_HUB_OFFLINE is set; unset it to use this backend."
            ) from exc
        except httpx2.TimeoutException as exc:
            raise LLMError(f"Hugging Face Inference timed out for '{self.model}'.") from exc
        except httpx2.HTTPError as exc:
            raise LLMError(
                f"Cannot reach Hugging Face Inference for '{self.model}': check the network connection."
            ) from exc

    def _explain_status(self, exc: HfHubHTTPError) -> str:
        status = exc.response.status_code if exc.response is not None else None
        template = STATUS_MESSAGES.get(status, "Hugging Face Inference failed for '{model}' (HTTP {status}): {exc}")
        return template.format(model=self.model, status=status, exc=exc)
