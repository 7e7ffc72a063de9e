"""The query-side LoRA: a second reading of the question by MiniLM with low-rank deltas in its projections.

A residual adapter on the 384-d output vector can only move a finished embedding; it cannot change how the
encoder reads the words of a message. This adapter does: rank-r deltas (peft ``LoraConfig``) are added to
BERT's attention and/or feed-forward projections of a copy of all-MiniLM-L6-v2, and that copy encodes the
question a second time, E_θ(q). Memories and chunks stay encoded once by the frozen model; the score stays

    score(q, m) = cos(E(q), E(m)) + w·cos(E_θ(q), E(m)).

On disk an adapter is a directory: peft's ``adapter_config.json`` and ``adapter_model.safetensors`` (the
deltas only, in float16: 2.6 MB for the shipped r 32 on ``query``, ``key``, ``value`` and ``dense`` of all six layers) and
``association.json`` (w, the training configuration, the persons held out, the validation history). At load
time the deltas are merged into the copy's weights (``merge_and_unload``), so the second reading costs exactly
one plain MiniLM pass.

The copy is a separate module from the product's embedder: the frozen encoder is never patched, so chunks,
thoughts and memories keep the vectors they were stored with whatever adapter is loaded.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from copilot.association.adapter import AdapterFileError
from copilot.embeddings import unit_rows

if TYPE_CHECKING:
    import torch

LORA_KIND = "lora"
CONFIG_FILE = "association.json"
VALIDATION_FILE = "validation_run.json"  # a refit's record of the validated run it came from; loading ignores it
PEFT_FILES = ("adapter_config.json", "adapter_model.safetensors")
BASE_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
# Merged encoders shared by every adapter of one process that reads the same files onto the same base model
# (each engine of a process, e.g. one per test or replica, would otherwise hold its own 90 MB copy).
SHARED_ENCODERS = 4
_encoders: dict[tuple, tuple[Any, Any, int, threading.Lock]] = {}
_encoders_lock = threading.Lock()


def is_lora_dir(path: str | Path) -> bool:
    """True when ``path`` is a directory holding a LoRA association adapter."""
    path = Path(path)
    return path.is_dir() and (path / CONFIG_FILE).exists()


def load_base_transformer(model_path: str | Path) -> tuple[Any, Any, int]:
    """(tokenizer, BERT module, max tokens) of the sentence-transformers directory at ``model_path``."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(model_path), device="cpu", local_files_only=True)
    return st.tokenizer, st[0].auto_model, int(st.max_seq_length)


def mean_pooled(model: Any, tokenizer: Any, texts: Sequence[str], max_tokens: int) -> torch.Tensor:
    """Unit sentence vectors as all-MiniLM-L6-v2's pipeline makes them: mean of the token vectors (padding
    masked out), then L2 normalisation. Keeps the autograd graph, so training and reading share it."""
    import torch
    import torch.nn.functional as F

    batch = tokenizer(list(texts), padding=True, truncation=True, max_length=max_tokens, return_tensors="pt")
    tokens = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                   token_type_ids=batch.get("token_type_ids")).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(tokens.dtype)
    pooled = (tokens * mask).sum(1) / torch.clamp(mask.sum(1), min=1e-9)
    return F.normalize(pooled, dim=-1)


@dataclass
class LoraAdapter:
    """E_θ(q) from question texts; the same surface as :class:`~copilot.association.adapter.QueryAdapter`
    (``kind``, ``weight``, ``config``, ``dimension``, :meth:`adapt`), so scoring and evaluation take either.

    ``path`` is the adapter directory; the encoder is built on first use from ``base_model`` (the embedder's
    model directory; the bundled MiniLM when empty) and kept.
    """

    path: Path
    weight: float = 1.0
    config: dict[str, Any] = field(default_factory=dict)
    base_model: str | Path | None = None
    batch_size: int = 64
    kind: str = LORA_KIND
    _encoder: Any = field(default=None, init=False, repr=False)

    @property
    def dimension(self) -> int:
        return int(self.config.get("dimension", 384))

    @property
    def n_parameters(self) -> int:
        return int(self.config.get("n_parameters", 0))

    def _load(self) -> tuple[Any, Any, int, threading.Lock]:
        """(tokenizer, merged model, max tokens, the lock its passes take), built once per process and files."""
        if self._encoder is None:
            from copilot.embeddings import bundled_model_path

            base = self.base_model or bundled_model_path()
            files = tuple((f.stat().st_mtime_ns, f.stat().st_size) if f.exists() else None
                          for f in (self.path / name for name in PEFT_FILES))
            key = (str(self.path.resolve()), str(Path(base).resolve()), files)
            with _encoders_lock:
                encoder = _encoders.pop(key, None)  # re-inserted last: the least recently used go first
                if encoder is None:
                    encoder = (*self._build(base), threading.Lock())
                _encoders[key] = encoder
                while len(_encoders) > SHARED_ENCODERS:
                    _encoders.pop(next(iter(_encoders)))
            self._encoder = encoder
        return self._encoder

    def _build(self, base: str | Path) -> tuple[Any, Any, int]:
        from peft import PeftModel

        tokenizer, model, max_tokens = load_base_transformer(base)
        try:
            model = PeftModel.from_pretrained(model, str(self.path), is_trainable=False).merge_and_unload()
        except (OSError, ValueError, RuntimeError, KeyError) as exc:
            raise AdapterFileError(f"Cannot read the LoRA adapter in {self.path}: {exc}") from exc
        model.eval()
        return tokenizer, model, max_tokens

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """E_θ(q) for each text, unit rows of shape ``(n, dim)``."""
        import torch

        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        tokenizer, model, max_tokens, lock = self._load()
        out = []
        with lock, torch.no_grad():
            for start in range(0, len(texts), self.batch_size):
                out.append(mean_pooled(model, tokenizer, texts[start:start + self.batch_size], max_tokens).numpy())
        return unit_rows(np.concatenate(out))

    def adapt(self, plain: np.ndarray, texts: Sequence[str] | None) -> np.ndarray:
        """E_θ(q) for queries whose plain vectors are ``plain``: the LoRA reads the texts themselves."""
        if texts is None:
            raise ValueError("The LoRA adapter reads the question's text; pass the texts with their vectors.")
        if len(texts) != len(plain):
            raise ValueError(f"{len(texts)} texts for {len(plain)} query vectors.")
        return self.encode(list(texts))


def half_precision(weights: Path) -> None:
    """Rewrite a safetensors file of deltas in float16: half the size on disk. Loading casts them back into the
    float32 copy before merging; the rounding moves an adapted vector by under 2e-7 in cosine."""
    import torch
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(weights))
    save_file({name: tensor.to(torch.float16) if tensor.is_floating_point() else tensor
               for name, tensor in tensors.items()}, str(weights), metadata={"format": "pt"})


def save_lora(model: Any, path: str | Path, weight: float, config: dict[str, Any], float16: bool = False,
              validation: dict[str, Any] | None = None) -> Path:
    """Write a trained peft model's deltas and the association configuration into the directory ``path``;
    ``float16`` stores the deltas at half the size (what ``train`` ships); ``validation``: a refit's validated
    run record, kept beside them."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(path), safe_serialization=True)
    for extra in path.iterdir():  # peft writes a README model card; the package ships only what loading reads
        if extra.name not in (*PEFT_FILES, CONFIG_FILE):
            extra.unlink()
    if float16:
        half_precision(path / PEFT_FILES[1])
    peft_config = json.loads((path / PEFT_FILES[0]).read_text(encoding="utf-8"))
    peft_config["base_model_name_or_path"] = BASE_MODEL_NAME  # not this machine's path: the base is given at load
    (path / PEFT_FILES[0]).write_text(json.dumps(peft_config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    info = dict(config, kind=LORA_KIND, weight=float(weight))
    for name, record in ((CONFIG_FILE, info), (VALIDATION_FILE, validation)):
        if record is not None:
            (path / name).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def load_lora(path: str | Path, base_model: str | Path | None = None) -> LoraAdapter:
    """The LoRA adapter in directory ``path`` (its encoder is built when first used)."""
    path = Path(path)
    missing = [name for name in (*PEFT_FILES, CONFIG_FILE) if not (path / name).exists()]
    if missing:
        raise AdapterFileError(f"The LoRA adapter directory {path} lacks {missing}.")
    try:
        config = json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AdapterFileError(f"Cannot read {path / CONFIG_FILE}: {exc}") from exc
    return LoraAdapter(path, float(config.get("weight", 1.0)), config, base_model)
