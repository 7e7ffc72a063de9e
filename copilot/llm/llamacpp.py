"""The embedded model run in-process by llama.cpp: one of the models that ship as packages
(:mod:`copilot.llm.embedded`: Qwen2.5-Coder-0.5B-Instruct, the default; SmolLM2-135M-Instruct; Gemma 3 270M; the
optional Qwen2.5-Coder-1.5B-Instruct) or any GGUF file.

It needs no network, key or GPU, so a fresh machine or a free Space answers from the first minute. The
models are small (135M to 1.5B parameters): prompts stay short, a repeat penalty keeps them from looping, and
outputs are capped. Each model reads its own prompt form: an instruction model its chat template, a base model
one completion prompt with worked examples (:func:`copilot.prompts.completion_prompt`); callers send the same
messages either way. One ``Llama`` object is not safe to use from two threads, so calls are serialised.
"""

from __future__ import annotations

import codecs
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from llama_cpp import Llama, LlamaGrammar, LogitsProcessorList

from copilot import prompts
from copilot.config import Settings, usable_cpus
from copilot.llm.base import ChatModel, ChoiceProbe, GenerationOptions, LLMError, Message, TokenTrace
from copilot.llm.embedded import EmbeddedModel, PromptForm, resolve


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
        prompt_form: PromptForm | None = None,
        embedded: EmbeddedModel | None = None,
    ) -> None:
        super().__init__()
        if not model_path:  # the default embedded model, as it is named
            default = resolve("")
            model_path, embedded = default.path, embedded or default.embedded
            prompt_form = prompt_form or default.prompt_form
        path = Path(model_path)
        if not path.is_file():
            raise LLMError(f"GGUF model file not found: {path}; check COPILOT_LLM_MODEL.")
        self.model_path = path
        self.embedded = embedded
        self.licence = embedded.licence if embedded else None
        self.name = f"local:{embedded.name if embedded else path.name}"
        self.repeat_penalty = repeat_penalty
        self._lock = threading.Lock()
        self._grammars: dict[str, LlamaGrammar] = {}
        self._openings: dict[tuple[str, ...], np.ndarray] = {}
        options = {"model_path": str(path), "n_ctx": n_ctx, "n_threads": n_threads or usable_cpus(),
                   "logits_all": logits_all, "verbose": False}
        try:
            # Flash attention reads a prompt 9-17% faster on 2 cores (Qwen2.5-Coder-0.5B 125 -> 137 tokens/s,
            # SmolLM2 246 -> 287) with the same output: the source sentences' reading is most of a first word. A
            # GGUF file of the user's that llama.cpp cannot run that way is loaded without it.
            try:
                self._llama = Llama(**options, flash_attn=True)
            except (ValueError, RuntimeError):
                self._llama = Llama(**options, flash_attn=False)
        except (ValueError, RuntimeError) as exc:
            raise LLMError(f"llama.cpp could not load {path}: {exc}") from exc
        # A file of the user's reads chat when it carries a chat template, else completion prompts.
        self.prompt_form: PromptForm = prompt_form or (
            "chat" if self._llama.metadata.get("tokenizer.chat_template") else "completion")

    @classmethod
    def from_settings(cls, settings: Settings) -> LlamaCppModel:
        """The model ``COPILOT_LLM_MODEL`` names (default: the default embedded one), in its prompt form unless
        ``COPILOT_LLM_PROMPT_FORM`` says otherwise; one in-process model computes one call at a time."""
        resolved = resolve(settings.llm_model)
        form = resolved.prompt_form if settings.llm_prompt_form == "auto" else settings.llm_prompt_form
        return cls(model_path=resolved.path, n_ctx=settings.llm_context_tokens, n_threads=settings.llm_threads,
                   repeat_penalty=settings.repeat_penalty, prompt_form=form, embedded=resolved.embedded)

    def describe(self) -> str:
        """``local:NAME (what it is, its prompt form)``: logs, the doctor and evaluation reports."""
        what = f"{self.embedded.title}, " if self.embedded else ""
        return f"{self.name} ({what}{self.prompt_form} prompts)"

    @property
    def context_tokens(self) -> int:
        return int(self._llama.n_ctx())

    def count_tokens(self, text: str) -> int:
        if not text:
            return 0
        return len(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def _fit_max_tokens(self, messages: list[Message] | str, wanted: int) -> int:
        """Shrink the output cap so prompt plus answer fit the context window (``messages``: a chat, or the
        completion prompt)."""
        if isinstance(messages, str):
            prompt = self.count_tokens(messages) + 2
        else:
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

    def _trace_processor(self, trace: TokenTrace) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        """A logits processor that writes each token's probability to ``trace``: a call sees the distribution the
        next token is drawn from, and the next call sees which token was drawn (the reply's last token, the end of
        its text, is left out). It reads the model's own scores, before any penalty or temperature. A character
        whose bytes span several tokens is the text of the token that completes it."""
        before: list[np.ndarray] = []
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

        def read(input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
            if trace.full:
                return scores
            if before:
                token, last = int(input_ids[-1]), before.pop()
                top = float(last.max())
                log_total = top + float(np.log(np.exp(last - top).sum(dtype=np.float64)))
                trace.add(decoder.decode(self._llama.detokenize([token])), float(last[token]) - log_total)
            before.append(scores.copy())  # llama.cpp reuses its buffer
            return scores

        return read

    def _opening_tokens(self, openings: tuple[str, ...]) -> np.ndarray:
        """The tokens whose text, leading spaces aside, starts with one of ``openings`` (read once per model)."""
        if openings not in self._openings:
            ids = [t for t in range(self._llama.n_vocab())
                   if self._llama.detokenize([t]).decode("utf-8", errors="ignore").lstrip().startswith(openings)]
            self._openings[openings] = np.array(ids, dtype=np.intp)
        return self._openings[openings]

    def prepare(self, *, never_opens: tuple[str, ...] = ()) -> None:
        if never_opens:
            with self._lock:
                self._opening_tokens(never_opens)

    def _opening_processor(self, openings: tuple[str, ...]) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        """A logits processor that keeps the reply's first token from opening with one of ``openings``: a small
        model asked to cite its sources sometimes answers with the bare citation ("[1]") and nothing else."""
        banned = self._opening_tokens(openings)
        first = [True]

        def mask(input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
            if first[0]:
                first[0] = False
                scores[banned] = -np.inf
            return scores

        return mask

    def _processors(self, options: GenerationOptions) -> LogitsProcessorList | None:
        # The opening's mask runs first: the trace reads the distribution the token is drawn from, so a fact written
        # first is as sure as the model was of it among the openings it may write.
        wanted = ([self._probe_processor(options.probe)] if options.probe else []) + (
            [self._opening_processor(options.never_opens)] if options.never_opens else []) + (
            [self._trace_processor(options.trace)] if options.trace is not None else [])
        return LogitsProcessorList(wanted) if wanted else None

    def _probe_processor(self, probe: ChoiceProbe) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
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

        return read

    def _stream(self, messages: list[Message], options: GenerationOptions) -> Iterator[str]:
        with self._lock:
            completion = self.prompt_form == "completion"
            prompt, stops = prompts.completion_prompt(messages) if completion else (None, [])
            max_tokens = self._fit_max_tokens(prompt if completion else messages, options.max_tokens)
            common = {
                "max_tokens": max_tokens,
                "temperature": options.temperature,
                "repeat_penalty": self.repeat_penalty,
                "stream": True,
                "logits_processor": self._processors(options),
                "grammar": self._grammar(options.grammar) if options.grammar else None,
            }
            try:
                if completion:
                    chunks = self._llama.create_completion(
                        prompt=prompt, stop=[*(options.stop or []), *stops], **common)
                    first = True
                    for chunk in chunks:
                        text = chunk["choices"][0].get("text")  # type: ignore[index]
                        if first and text:  # the reply follows its cue ("Answer:") after one space
                            text, first = text.lstrip(" "), False
                        if text:
                            yield text
                    return
                chunks = self._llama.create_chat_completion(
                    messages=messages,  # type: ignore[arg-type]
                    stop=options.stop,
                    **common,
                )
                for chunk in chunks:
                    delta = chunk["choices"][0].get("delta", {})  # type: ignore[index]
                    content = delta.get("content")
                    if content:
                        yield content
            except ValueError as exc:
                raise LLMError(f"The local model failed: {exc}") from exc
