"""Test support for the writing, trends, profile and refresh tests: a small library with no model to load.

``HashEmbedder`` maps words to signed hash buckets (deterministic, instant); ``make_copilot`` wires it with a
scripted LLM into a real store; ``add_paper`` puts a paper with its chunks and vectors in; ``recorded_client``
is the real arXiv client answering every request from one recorded arXiv API response.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
import requests

from copilot.config import Settings
from copilot.engine import Copilot
from copilot.storage import Store
from tests.conftest import TEST_DATA

DIM = 128
RECORDINGS = TEST_DATA / "arxiv_api"


class WordTokenizer:
    """Stands in for a transformers tokenizer where chunking asks for token offsets."""

    def __call__(self, text: str, **kwargs) -> dict:  # noqa: ANN003
        return {"offset_mapping": [(m.start(), m.end()) for m in re.finditer(r"\w+|[^\w\s]", text)]}


class HashEmbedder:
    """Bag of words hashed into signed buckets, scaled to unit length: texts sharing words are close."""

    tokenizer = WordTokenizer()

    def _one(self, text: str) -> np.ndarray:
        vector = np.zeros(DIM, dtype=np.float32)
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            digest = hashlib.md5(word.encode()).digest()
            vector[digest[0] % DIM] += 1.0 if digest[1] % 2 else -1.0
        norm = np.linalg.norm(vector)
        return vector / norm if norm else vector

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._one(t) for t in texts]) if texts else np.zeros((0, DIM), dtype=np.float32)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self.encode_documents(texts)

    def encode_query(self, text: str) -> np.ndarray:
        return self._one(text)


def make_copilot(tmp_path: Path, llm, **settings) -> Copilot:  # noqa: ANN001, ANN003
    """A copilot over an empty store in ``tmp_path`` with the hash embedder and ``llm``."""
    values = {"data_dir": tmp_path / "data", "association": False, "llm_backend": "local"} | settings
    config = Settings(**values)
    return Copilot(config, Store.open(config), HashEmbedder(), llm)


def add_paper(copilot: Copilot, paper_id: str, title: str, *, sections: list[tuple[str, str]], abstract: str = "",
              user_id: str | None = None, arxiv_id: str | None = None, authors: list[str] | None = None,
              published: str | None = None, added_at: str = "2026-01-01T00:00:00+00:00", doi: str | None = None,
              journal_ref: str | None = None, category: str | None = None) -> str:
    """Store a paper row and one chunk per (section, text), with vectors; an abstract also becomes a chunk."""
    copilot.store.db["papers"].insert({
        "id": paper_id, "user_id": user_id, "source": "arxiv" if arxiv_id else "upload", "arxiv_id": arxiv_id,
        "title": title, "authors": json.dumps(authors or []), "abstract": abstract, "published": published,
        "doi": doi, "journal_ref": journal_ref, "added_at": added_at,
        "meta": json.dumps({"primary_category": category}) if category else None,
        "categories": json.dumps([category] if category else []), "sections": "[]", "references_json": "[]"})
    pieces = ([("Abstract", abstract)] if abstract else []) + list(sections)
    rows = [{"paper_id": paper_id, "seq": i, "section": section, "text": text, "page_start": 1, "page_end": 1,
             "char_start": 0, "char_end": len(text), "n_tokens": len(text.split())}
            for i, (section, text) in enumerate(pieces)]
    copilot.store.insert_with_vectors("chunks", rows, copilot.embedder.encode_documents([t for _, t in pieces]))
    return paper_id


def recording(name: str) -> bytes:
    """The body of a recorded arXiv API answer (stored decoded as ISO-8859-1; these are arXiv's bytes)."""
    path = next(RECORDINGS.glob(f"{name}_*.json"))
    return json.loads(path.read_text())["body"].encode("latin-1")


class RecordedSession:
    """Stands in for ``Session.get``: answers every request with one recorded feed, or fails like a dead line."""

    def __init__(self, body: bytes | None) -> None:
        self.body = body
        self.urls: list[str] = []

    def get(self, url: str, headers: dict | None = None, timeout: float | None = None,
            **kwargs) -> requests.Response:  # noqa: ANN003
        assert timeout is not None, "every arXiv request needs a timeout"
        self.urls.append(url)
        if self.body is None:
            raise requests.ConnectionError("network is unreachable")
        response = requests.Response()
        response.url = url
        response.status_code = 200
        response._content = self.body
        response.headers["Content-Type"] = "application/atom+xml"
        return response


def recorded_client(monkeypatch: pytest.MonkeyPatch, name: str | None = "q_testing_s0_m10"):  # noqa: ANN201
    """The real arXiv client, unpaced for the test, answering from recording ``name`` (None: offline)."""
    from ingest import arxiv_client

    monkeypatch.setattr(arxiv_client, "MIN_DELAY_SECONDS", 0.0)
    monkeypatch.setattr(arxiv_client, "_sleep", lambda seconds: None)
    monkeypatch.setattr(arxiv_client._RATE_LIMIT, "last_call", None)
    client = arxiv_client.ArxivClient(num_retries=0, delay_seconds=0.0)
    session = RecordedSession(recording(name) if name else None)
    monkeypatch.setattr(client.session, "get", session.get)
    client.recorded = session  # type: ignore[attr-defined]
    return client


REAL_PAPERS = {"specter": "2020.acl-main.207.pdf", "litgraph": "N18-3011.pdf"}


def build_real_library(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A data directory holding two real shared papers, built once per test session with the real embedder.

    Returns the directory and the paper ids by short name. The end-to-end tests only read from it.
    """
    from copilot.embeddings import get_embedder
    from copilot.library import Library

    data_dir = tmp_path_factory.getbasetemp() / "real-library"
    ids_file = data_dir / "ids.json"
    if not ids_file.exists():
        settings = Settings(data_dir=data_dir)
        library = Library.open(settings, embedder=get_embedder(settings))
        ids = {name: library.add_pdf(TEST_DATA / "papers" / file).paper_id for name, file in REAL_PAPERS.items()}
        library.store.close()
        ids_file.write_text(json.dumps(ids))
    return data_dir, json.loads(ids_file.read_text())
