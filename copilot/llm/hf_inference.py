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
    402: "Hugging Face Inference wants credits for '{model}' on the account.",
    429: "Hugging Face Inference is rate limiting requests; retry later or use your own token.",
}
# The same, said to a signed-in visitor whose own token was used.
VISITOR_MESSAGES = STATUS_MESSAGES | {
    401: "Hugging Face did not accept your sign-in for Inference; sign out and in again.",
    403: "Your Hugging Face account may not use '{model}' through Inference.",
    404: "Model '{model}' is not served by Hugging Face Inference.",
    429: "Hugging Face Inference is rate limiting your account; retry later.",
}


class HFInferenceModel(ChatModel):
    """Chat completions served by Hugging Face Inference providers."""

    def __init__(self, *, token: str, model: str, timeout_s: float = 60.0,
                 slots: int = 1, base_url: str = "") -> None:
        super().__init__(slots)
        self.model = model or DEFAULT_HF_MODEL
        self.name = f"hf:{self.model}"
        # Through Hugging Face's router the model is the client's; at a URL of one's own it goes in each request.
        self._client = (InferenceClient(base_url=base_url.rstrip("/"), token=token or None, timeout=timeout_s)
                        if base_url else InferenceClient(model=self.model, token=token or None, timeout=timeout_s))
        self._per_request = {"model": self.model} if base_url else {}
        self._messages = STATUS_MESSAGES

    @classmethod
    def from_settings(cls, settings: Settings) -> HFInferenceModel:
        """The configured model on Hugging Face Inference, with ``llm_slots`` calls at once."""
        return cls(token=settings.hf_token, model=settings.llm_model, timeout_s=settings.llm_timeout_s,
                   slots=settings.llm_slots, base_url=settings.hf_base_url)

    @classmethod
    def for_visitor(cls, settings: Settings, token: str) -> HFInferenceModel:
        """``signed_in_model`` under a signed-in visitor's own OAuth token, through Hugging Face's router (or
        ``signed_in_base_url``, never the instance's own ``hf_base_url``): a line of its own for this one question,
        beside (not behind) the embedded model's."""
        model = cls(token=token, model=settings.signed_in_model, timeout_s=settings.llm_timeout_s,
                    base_url=settings.signed_in_base_url)
        model._messages = VISITOR_MESSAGES
        return model

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)

    def _stream(self, messages: list[Message], options: GenerationOptions) -> Iterator[str]:
        try:
            yield from delta_texts(self._client.chat_completion(
                messages,
                **self._per_request,
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
        template = self._messages.get(status, "Hugging Face Inference failed for '{model}' (HTTP {status}): {exc}")
        return template.format(model=self.model, status=status, exc=exc)
