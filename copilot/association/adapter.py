"""The query-side adapters at read time, and the one loader that picks the kind from the file.

Two kinds share one surface (``kind``, ``weight``, ``config``, ``dimension``, ``adapt(plain, texts)``):

- the residual MLP on the output vector (the default, ``default_adapter.npz``): a few NumPy matrix products on one
  query embedding, stored as plain arrays in an ``.npz`` file with its configuration as a JSON string beside
  them, so loading never unpickles anything;
- a LoRA inside the query encoder (:mod:`copilot.association.lora`, the directory ``default_lora``,
  ``COPILOT_ASSOCIATION_ADAPTER=copilot/association/default_lora``), which reads the question's text a second
  time.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from copilot.errors import UserError
from copilot.embeddings import unit_rows  # noqa: F401 - re-exported for the package

DEFAULT_MLP_PATH = Path(__file__).resolve().parent / "default_adapter.npz"
DEFAULT_LORA_PATH = Path(__file__).resolve().parent / "default_lora"
# The default is the kind that wins where users live within the read-time budget: held-out statements hidden in real
# conversations, each trigger asked after a real chat turn, the message read sentence by sentence as recall reads it
# (docs/benchmarks.md, "Associative recall"). There the residual MLP reaches 44.2 Recall@10 against 12.5 for plain
# cosine read whole, in 35.2 ms a message on 2 cores. The LoRA reaches 51.8 but reads each sentence a second time
# (91.5 ms), and on whole messages an outside benchmark of real conversations measured it below plain cosine (MLP
# +4.1, LoRA -8.5). It ships beside it: COPILOT_ASSOCIATION_ADAPTER=<DEFAULT_LORA_PATH>.
DEFAULT_ADAPTER_PATH = DEFAULT_MLP_PATH
KINDS = ("residual_mlp", "linear", "mlp")
_GELU_C = float(np.sqrt(2.0 / np.pi))


class AdapterFileError(UserError):
    """An adapter file is missing, unreadable or inconsistent with its configuration."""


def gelu(x: np.ndarray) -> np.ndarray:
    """The tanh form of GELU, the same one the training module uses, so both sides agree to float precision."""
    return 0.5 * x * (1.0 + np.tanh(_GELU_C * (x + 0.044715 * x**3)))


@dataclass
class QueryAdapter:
    """Maps a base query embedding E(q) to the associative one E_θ(q), both unit vectors of the same size.

    ``kind`` picks the form: ``residual_mlp`` is q + W2·gelu(W1·q + b1) + b2, ``linear`` is q + W·q + b,
    ``mlp`` is W2·gelu(W1·q + b1) + b2 without the skip connection. ``weight`` is the w of the combined score
    cos(E(q), m) + w·cos(E_θ(q), m), chosen at training time and kept with the arrays.
    """

    kind: str
    arrays: dict[str, np.ndarray]
    weight: float = 1.0
    config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise AdapterFileError(f"Unknown adapter kind {self.kind!r}; expected one of {KINDS}.")
        needed = ("W", "b") if self.kind == "linear" else ("W1", "b1", "W2", "b2")
        missing = [name for name in needed if name not in self.arrays]
        if missing:
            raise AdapterFileError(f"The {self.kind} adapter lacks array(s) {missing}.")
        self.arrays = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in self.arrays.items()}

    @property
    def dimension(self) -> int:
        first = self.arrays["W"] if self.kind == "linear" else self.arrays["W1"]
        return int(first.shape[1])

    @property
    def n_parameters(self) -> int:
        return int(sum(a.size for a in self.arrays.values()))

    def transform(self, vectors: np.ndarray) -> np.ndarray:
        """E_θ(q) for each row of ``vectors`` (shape ``(n, dim)``), as unit vectors."""
        q = np.asarray(vectors, dtype=np.float32)
        if q.ndim != 2 or q.shape[1] != self.dimension:
            raise ValueError(f"Expected query vectors of shape (n, {self.dimension}), got {q.shape}.")
        a = self.arrays
        if self.kind == "linear":
            out = q + q @ a["W"].T + a["b"]
        else:
            delta = gelu(q @ a["W1"].T + a["b1"]) @ a["W2"].T + a["b2"]
            out = q + delta if self.kind == "residual_mlp" else delta
        return unit_rows(out)

    def adapt(self, plain: np.ndarray, texts: Sequence[str] | None = None) -> np.ndarray:
        """E_θ(q) from the plain vectors (this kind never reads the texts)."""
        return self.transform(plain)

    def save(self, path: str | Path) -> Path:
        """Write the arrays and the configuration (weight and kind included) to one ``.npz`` file."""
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_suffix(".npz")
        path.parent.mkdir(parents=True, exist_ok=True)
        config = dict(self.config, kind=self.kind, weight=float(self.weight))
        np.savez(path, config=np.array(json.dumps(config, sort_keys=True)), **self.arrays)
        return path


def load_adapter(path: str | Path | None = None, base_model: str | Path | None = None) -> Any:
    """The adapter stored at ``path`` (a LoRA directory or an ``.npz`` file); without one, the trained default
    shipped with this package. ``base_model``: the embedder's model directory a LoRA is applied to."""
    path = Path(path) if path is not None else DEFAULT_ADAPTER_PATH
    if path.is_dir():
        from copilot.association.lora import load_lora

        return load_lora(path, base_model)
    if not path.exists():
        raise AdapterFileError(f"No adapter file at {path}; train one with `python -m copilot.association train`.")
    try:
        with np.load(path, allow_pickle=False) as data:
            config = json.loads(str(data["config"]))
            arrays = {name: data[name] for name in data.files if name != "config"}
    except (OSError, KeyError, ValueError) as exc:
        raise AdapterFileError(f"Cannot read the adapter file {path}: {exc}") from exc
    return QueryAdapter(kind=config.get("kind", "residual_mlp"), arrays=arrays,
                        weight=float(config.get("weight", 1.0)), config=config)
