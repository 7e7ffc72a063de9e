"""One replica of the web app for the two-replica tests, in a process of its own: the real UI, engine, library and
store on a shared PostgreSQL database, with the hash embedder (no model to load), a scripted LLM (tests only) and
an arXiv stand-in whose PDFs the test papers are, served over local HTTP.

Usage: python -m tests.replica_app PORT DATABASE_URL DATA_DIR [--hold-thoughts MARKER]. With ``--hold-thoughts``
every thought call touches MARKER and then never returns: the replica has answered, its thought is not written,
and the test kills it there. It serves until killed.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from copilot.config import Settings
from copilot.engine import Copilot
from copilot.llm.base import GenerationOptions, Message
from copilot.storage import Store
from copilot.ui import build_app, serve
from copilot.ui.services import Services
from copilot.library import Library
from tests.library_support import HashEmbedder
from tests.ui_harness import TEST_PAPERS, RoutedLLM, StubArxiv, pdf_server

LEASE_S = 2.0  # a dead replica's thought jobs are taken over after this long
POLL_S = 0.5  # how often a replica looks for them


class HeldThoughtsLLM(RoutedLLM):
    """:class:`RoutedLLM` whose thought calls mark ``marker`` and then hang: answered, never thought."""

    def __init__(self, marker: Path) -> None:
        super().__init__()
        self.marker = marker

    def _stream(self, messages: list[Message], options: GenerationOptions) -> Iterator[str]:
        if options.probe is not None:
            self.marker.touch()
            threading.Event().wait()
        yield from super()._stream(messages, options)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("database_url")
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--hold-thoughts", type=Path, default=None)
    args = parser.parse_args()
    settings = Settings(data_dir=args.data_dir, database_url=args.database_url, llm_backend="local", users="single",
                        association=False, relevance_weight=0.0, thought_lease_s=LEASE_S, thought_poll_s=POLL_S)
    llm = HeldThoughtsLLM(args.hold_thoughts) if args.hold_thoughts else RoutedLLM()
    store = Store.open(settings)
    copilot = Copilot(settings, store, HashEmbedder(), llm, adopt_jobs=True)  # as the web app's own engine
    _, base_url = pdf_server(TEST_PAPERS)
    library = Library.open(settings, store=store, embedder=copilot.embedder, arxiv=StubArxiv(base_url))
    demo = build_app(settings, Services(settings, copilot, library), warm_up=False)
    serve(demo, settings, server_name="127.0.0.1", server_port=args.port, prevent_thread_lock=True, quiet=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
