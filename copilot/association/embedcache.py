"""Base embeddings computed once per text and kept, because the frozen encoder is the slow part on a CPU.

Training, weight selection, decontamination and every evaluation read the same statements and queries
many times; encoding each distinct text once turns all later epochs into pure matrix arithmetic. An
optional ``.npz`` file keeps the vectors between runs (written atomically, tied to the model's name).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from copilot.embeddings import Embedder

Encoder = Callable[[Sequence[str]], np.ndarray]


class EmbeddingCache:
    """``encode(texts)`` returns the base unit vectors, computing only texts it has not seen before."""

    def __init__(self, encode: Encoder, model_name: str = "", path: str | Path | None = None) -> None:
        self._encode = encode
        self.model_name = model_name
        self.path = Path(path) if path else None
        self._vectors: dict[str, np.ndarray] = {}
        self.computed = 0
        if self.path and self.path.exists():
            self._load(self.path)

    @classmethod
    def for_embedder(cls, embedder: Embedder, path: str | Path | None = None) -> EmbeddingCache:
        """A cache over the plain document encoder of ``embedder``."""
        return cls(embedder.encode_documents, getattr(embedder, "name", ""), path)

    def __len__(self) -> int:
        return len(self._vectors)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors for ``texts`` in order, shape ``(len(texts), dim)``."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            for text, vector in zip(missing, self._encode(missing), strict=True):
                self._vectors[text] = np.asarray(vector, dtype=np.float32)
            self.computed += len(missing)
        if not texts:
            dim = next(iter(self._vectors.values())).shape[0] if self._vectors else 0
            return np.zeros((0, dim), dtype=np.float32)
        return np.stack([self._vectors[t] for t in texts])

    def save(self) -> None:
        """Write every vector to the cache file, if there is one."""
        if not self.path or not self._vectors:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        texts = list(self._vectors)
        tmp = self.path.with_name(self.path.name + ".tmp.npz")
        np.savez(tmp, model=np.array(self.model_name), texts=np.array(texts, dtype=str),
                 vectors=np.stack([self._vectors[t] for t in texts]))
        os.replace(tmp, self.path)

    def _load(self, path: Path) -> None:
        with np.load(path, allow_pickle=False) as data:
            if str(data["model"]) != self.model_name:
                return  # vectors of another model would silently mix two spaces
            for text, vector in zip(data["texts"].tolist(), data["vectors"], strict=True):
                self._vectors[text] = vector.astype(np.float32)
