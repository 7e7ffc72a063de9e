"""An in-process app for API and isolation tests: the real UI, store, library and embedder, with a scripted
LLM (tests only) and an arXiv stand-in whose PDFs come from a local HTTP server serving the test papers."""

from __future__ import annotations

import contextlib
import functools
import http.server
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from copilot.llm.base import GenerationOptions, Message
from ingest.errors import ArxivNotFound, ArxivUnavailable
from ingest.models import PaperMetadata
from tests.conftest import TEST_DATA
from tests.scripted_llm import ScriptedLLM


def first_source_sentence(prompt: str) -> str:
    """The first sentence of eight words or more of source [1] in an answer prompt (its text after the
    "(title, section)" label), without its final full stop; a fixed sentence when the prompt has no source."""
    source = re.search(r"\[1\] \([^)]*\) (.+?)(?:\n\n|$)", prompt, re.S)
    if source is None:
        return "graph-based methods link papers, authors and entities"
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", " ".join(source.group(1).split()))]
    sentence = next((s for s in sentences if len(s.split()) >= 8), " ".join(source.group(1).split()[:30]))
    return sentence.rstrip(".!?")


class RoutedLLM(ScriptedLLM):
    """Replies by what is asked, so tests need not know the order of calls.

    Thought calls get a thought built from the question (so different questions never merge) and a high
    probability of "yes"; every other call gets a short text citing the first two sources.
    """

    def _stream(self, messages: list[Message], options: GenerationOptions) -> Iterator[str]:
        self.calls.append(messages)
        last = messages[-1]["content"]
        if options.probe is not None:
            question = re.search(r"Question: (.*)", last)
            topic = question.group(1) if question else last[:80]
            options.probe.probabilities = {"yes": 0.9, "no": 0.1}
            reply = f"thought: The papers explain in detail that {topic.rstrip('?')} works as described.\n" \
                    "answered: yes\n"
        else:
            # An answer that is about what was asked (the thought's relevance check sees it as one) and says what
            # its first source says (the grounding check finds it there).
            question = re.search(r"Question: (.*)", last)
            topic = question.group(1).rstrip("?") if question else "the papers"
            reply = f"On {topic}: {first_source_sentence(last)} [1]."
        for word in reply.split(" "):
            yield word + " "


def pdf_server(folder: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Serve ``folder`` over HTTP on a free port: arXiv's PDF host, stood in for."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def metadata(arxiv_id: str, title: str, pdf_url: str, category: str = "cs.CL") -> PaperMetadata:
    return PaperMetadata(arxiv_id=arxiv_id, version="v1", title=title, authors=["Ada Lovelace", "Alan Turing"],
                         abstract=f"{title}. A study of scholarly documents and their evaluation.",
                         categories=[category], primary_category=category, published="2026-11-01T00:00:00Z",
                         updated="2026-11-01T00:00:00Z", pdf_url=pdf_url)


class StubArxiv:
    """Answers searches with fixed metadata whose PDFs are the test papers; ``offline`` makes it fail as
    arXiv does when unreachable."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.offline = False
        self.lookups = 0  # batched look-ups by id (by_ids) answered
        self.papers = [
            metadata("2301.00001", "Construction of the Literature Graph in Semantic Scholar",
                     f"{base_url}/N18-3011.pdf"),
            metadata("2301.00002", "LongEval: Guidelines for Human Evaluation of Faithfulness",
                     f"{base_url}/2023.eacl-main.121.pdf"),
        ]

    def _answer(self, n: int) -> list[PaperMetadata]:
        if self.offline:
            raise ArxivUnavailable("arXiv could not be reached (network error: ConnectionError; 4 tries). Please "
                                   "check your connection and try again in a minute; uploading a PDF still works.")
        return self.papers[:n]

    def search(self, query: str, max_results: int = 10, sort_by: str = "relevance") -> list[PaperMetadata]:
        return self._answer(max_results)

    def by_author(self, name: str, max_results: int = 10) -> list[PaperMetadata]:
        return self._answer(max_results)

    def by_category(self, category: str, max_results: int = 10, newest_first: bool = True) -> list[PaperMetadata]:
        return self._answer(max_results)

    def by_id(self, ref: str) -> PaperMetadata:
        found = [p for p in self._answer(10) if p.arxiv_id == ref]
        if not found:
            raise ArxivNotFound(f"arXiv has no paper {ref}.")
        return found[0]

    def by_ids(self, ids: list[str], *, skip_missing: bool = False) -> list[PaperMetadata]:
        self.lookups += 1
        known = {p.arxiv_id: p for p in self._answer(10)}
        if not skip_missing:
            return [self.by_id(i) for i in ids]
        return [known[i] for i in ids if i in known]

    def wait_turn(self) -> None:
        """No pacing needed for a local server."""

    def reachable(self) -> bool:
        return not self.offline


TEST_PAPERS = TEST_DATA / "papers"


@contextlib.contextmanager
def app_in_process(settings: Any, llm: Any, arxiv: Any = None) -> Iterator[tuple[str, Any, StubArxiv]]:  # noqa: ANN401
    """The real web app for ``settings`` served on a free local port, with ``llm`` and the arXiv stand-in (or the
    ``arxiv`` client given); yields (url, services, arxiv) and stops both servers afterwards."""
    from copilot.embeddings import get_embedder
    from copilot.engine import Copilot
    from copilot.storage import Store
    from copilot.ui import build_app, serve
    from copilot.ui.services import Services
    from copilot.library import Library
    from tests.conftest import free_port

    store = Store.open(settings)
    copilot = Copilot(settings, store, get_embedder(settings), llm)
    server, base_url = pdf_server(TEST_PAPERS)
    arxiv = arxiv or StubArxiv(base_url)
    services = Services(settings, copilot, Library.open(settings, store=store, embedder=copilot.embedder,
                                                        arxiv=arxiv))
    demo = build_app(settings, services, warm_up=False)
    port = free_port()
    serve(demo, settings, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        yield f"http://127.0.0.1:{port}/", services, arxiv
    finally:
        demo.close()
        server.shutdown()
