"""The bundled all-MiniLM-L6-v2 embedder, loaded offline from its package."""

import subprocess
import sys

import numpy as np
import pytest

from copilot.config import Settings
from copilot.embeddings import Embedder, EmbeddingError, get_embedder
from tests.conftest import ROOT, clean_env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return get_embedder(Settings())


def test_dimension_and_unit_vectors(embedder: Embedder) -> None:
    vectors = embedder.encode_documents(["graph neural networks", "a bread recipe", "x" * 5000])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert embedder.encode_documents([]).shape == (0, 384)


def test_similar_texts_are_closer(embedder: Embedder) -> None:
    q = embedder.encode_query("How are scientific papers linked by citations?")
    docs = embedder.encode_documents(["The citation graph connects papers that cite each other.",
                                      "Preheat the oven to 200 degrees before baking."])
    assert q @ docs[0] > q @ docs[1] + 0.2


def test_batching_does_not_change_results(embedder: Embedder) -> None:
    texts = [f"sentence number {i} about retrieval" for i in range(40)]
    whole = embedder.encode_documents(texts)
    one = embedder.encode_documents(texts[7:8])
    assert np.allclose(whole[7], one[0], atol=1e-5)


def test_token_vectors_cover_texts_longer_than_the_model_reads(embedder: Embedder) -> None:
    long = " ".join(["citation graphs of scholarly papers"] * 150)
    pieces = embedder.tokenizer(long, add_special_tokens=False)["input_ids"]
    assert len(pieces) > 2 * embedder.max_tokens
    matrices = embedder.encode_tokens([long, "a short text"])
    assert matrices[0].shape == (len(pieces), embedder.dimension), "no token is dropped"
    assert matrices[1].shape[0] == 3
    assert np.allclose(np.linalg.norm(matrices[0], axis=1), 1.0, atol=1e-4)


def test_loaded_once_per_process() -> None:
    assert get_embedder(Settings()) is get_embedder(Settings())


def test_queries_use_the_plain_encoder(embedder: Embedder) -> None:
    plain = embedder.encode_documents(["memory of a deadline"])[0]
    assert np.allclose(embedder.encode_query("memory of a deadline"), plain, atol=1e-6)


def test_missing_model_directory(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(EmbeddingError, match="not found"):
        Embedder(str(tmp_path / "nowhere"))


def test_loads_with_the_hub_offline(tmp_path) -> None:  # noqa: ANN001
    """In a fresh process with HF_HUB_OFFLINE=1 and an empty hub cache the model still loads and embeds."""
    env = clean_env() | {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "empty-hf-home")}
    code = "from copilot.embeddings import Embedder; print(Embedder().encode_documents(['ok']).shape)"
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert "(1, 384)" in out.stdout
