"""The public demo as a hostile visitor meets it: identities nobody can forge, downloads nobody else can read, and
a limit on everything a visitor could exhaust, each refused with one line and nothing stored lost.

The app runs in this process in ``session`` users mode, with small limits, the real store, library, embedder and
UI; the LLM is a scripted test double and arXiv a stand-in serving the test papers over local HTTP. Every
``gradio_client.Client`` is a browser of its own, so each test's clients are new guests.
"""

from __future__ import annotations

import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from gradio_client import Client, handle_file

from copilot.config import Settings
from copilot.llm import LLMError
from copilot.ui.identity import COOKIE
from tests.ui_harness import TEST_PAPERS, RoutedLLM, app_in_process

pytestmark = pytest.mark.slow

LIMITS = {"max_upload_mb": 2, "max_papers_per_user": 2, "max_upload_mb_per_user": 1, "max_arxiv_adds_per_day": 1,
          "max_question_chars": 500, "max_memory_chars": 100, "max_memories_per_user": 3, "questions_per_minute": 3,
          "searches_per_minute": 2}


class FailingOnDemand(RoutedLLM):
    """The routed test double, which fails every call while ``broken`` is set (a backend that went away)."""

    broken = False

    def _stream(self, messages, options):  # noqa: ANN001, ANN202
        if self.broken:
            raise LLMError("The model backend is unavailable.")
        yield from super()._stream(messages, options)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - yields (url, services, llm, root)
    root = tmp_path_factory.mktemp("public-demo")
    settings = Settings(data_dir=root / "data", llm_backend="local", users="session", **LIMITS)
    llm = FailingOnDemand()
    with app_in_process(settings, llm) as (url, services, _):
        yield url, services, llm, root


def _rows(table: dict | list) -> list[list]:
    return table["data"] if isinstance(table, dict) else table


def _copy(root: Path, name: str, as_name: str) -> str:
    """A shared paper under another name (the same bytes: other guests may have uploaded it too)."""
    copy = root / as_name
    shutil.copy(TEST_PAPERS / name, copy)
    return handle_file(str(copy))


def _mine(client: Client) -> list[str]:
    return [r[0] for r in _rows(client.predict(api_name="/list_papers")) if r[-1] == "you"]


# ----- identity ------------------------------------------------------------------------------------------


def test_a_guest_cannot_become_another_guest(demo) -> None:  # noqa: ANN001
    url, _, _, root = demo
    a = Client(url, verbose=False)
    notice, _ = a.predict([_copy(root, "N18-3011.pdf", "mine.pdf")], api_name="/upload_pdfs")
    assert "added" in notice
    secret_upload = _mine(a)
    assert len(secret_upload) == 1
    token = a.cookies[COOKIE]
    random_part, signature = token.split(".")
    assert len(random_part) >= 22  # 128 bits or more, base64

    # The browser session hash a client chooses names nobody: the same hash with another cookie is refused
    # outright (tests/test_demo_guards.py tries every session route), and a fresh hash is still a stranger.
    b = Client(url, verbose=False)
    b.session_hash = a.session_hash
    with pytest.raises(Exception, match="403"):
        b.predict(api_name="/list_papers")
    b = Client(url, verbose=False)
    assert _mine(b) == [] and secret_upload[0] not in [r[0] for r in _rows(b.predict(api_name="/list_papers"))]

    # A's token cut short, re-signed by guesswork, or made up is refused with a clear message.
    other_last = "B" if random_part.endswith("A") else "A"
    forged = [token[:16], token[:-3], f"{random_part}.{signature[::-1]}", f"{random_part[:-1]}{other_last}.{signature}",
              "guest-" + random_part, "x" * 22 + "." + "y" * 43]
    for bad in forged:
        c = Client(url, verbose=False, httpx_kwargs={"cookies": {COOKIE: bad}})
        with pytest.raises(Exception, match="guest session token is not valid"):
            c.predict(api_name="/list_papers")
    # Only the whole token is A.
    same = Client(url, verbose=False, httpx_kwargs={"cookies": {COOKIE: token}})
    assert _mine(same) == secret_upload


def test_the_page_gets_an_httponly_cookie(demo) -> None:  # noqa: ANN001
    url, *_ = demo
    with urllib.request.urlopen(url, timeout=10) as response:
        cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie and "SameSite=Lax" in cookie


# ----- uploads, downloads --------------------------------------------------------------------------------


def test_a_draft_download_is_served_only_from_its_private_link(demo) -> None:  # noqa: ANN001
    url, services, _, root = demo
    owner = Client(url, verbose=False)
    owner.predict([_copy(root, "N18-3011.pdf", "for-draft.pdf")], api_name="/upload_pdfs")
    (paper_id,) = _mine(owner)
    _, md, bib = owner.predict(paper_id, api_name="/draft_abstract")
    assert Path(md).read_text().strip() and Path(bib).suffix == ".bib"
    data_dir = services.settings.data_dir.resolve()
    assert not (data_dir / "exports").exists()
    # Nothing of the data directory is served: not the database, not a guessed draft path.
    for guess in [data_dir / "copilot.db", data_dir / "exports" / "local" / "abstract.md", data_dir / "secret.key"]:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{url}gradio_api/file={guess}", timeout=10)
        assert refused.value.code in (403, 404)


def test_upload_limits(demo) -> None:  # noqa: ANN001
    url, services, _, root = demo
    big = Client(url, verbose=False)
    with pytest.raises(Exception, match="(?i)exceeds the maximum|too large|2 ?mb"):
        big.predict([_copy(root, "2020.acl-main.447.pdf", "big.pdf")], api_name="/upload_pdfs")
    assert _mine(big) == []

    counted = Client(url, verbose=False)
    counted.predict([_copy(root, "N18-3011.pdf", "one.pdf"), _copy(root, "2020.acl-main.207.pdf", "two.pdf")],
                    api_name="/upload_pdfs")
    kept = _mine(counted)
    assert len(kept) == 2
    with pytest.raises(Exception, match="most allowed is 2"):
        counted.predict([_copy(root, "2023.eacl-main.121.pdf", "three.pdf")], api_name="/upload_pdfs")
    assert _mine(counted) == kept  # nothing stored lost

    sized = Client(url, verbose=False)
    sized.predict([_copy(root, "2020.acl-main.207.pdf", "first.pdf")], api_name="/upload_pdfs")
    with pytest.raises(Exception, match="would pass your 1 MB"):
        sized.predict([_copy(root, "2023.eacl-main.121.pdf", "second.pdf")], api_name="/upload_pdfs")
    assert len(_mine(sized)) == 1

    # The server keeps no copy of what it received.
    from gradio.utils import get_upload_folder

    assert not list(Path(get_upload_folder()).rglob("first.pdf")) and not list(Path(get_upload_folder()).rglob(
        "second.pdf"))


def test_a_failed_upload_is_an_error_and_names_the_users_file(demo) -> None:  # noqa: ANN001
    url, _, _, root = demo
    client = Client(url, verbose=False)
    broken = root / "my-notes.pdf"
    broken.write_bytes(b"%PDF-1.4 not really a pdf")
    with pytest.raises(Exception, match="my-notes.pdf"):
        client.predict([handle_file(str(broken))], api_name="/upload_pdfs")
    assert _mine(client) == []


def test_typed_arxiv_ids_are_added_through_the_api_within_the_daily_allowance(demo) -> None:  # noqa: ANN001
    url, *_ = demo
    client = Client(url, verbose=False)  # no search first: the ids are typed
    notice, papers = client.predict(["2301.00001"], api_name="/add_arxiv")
    assert "2301.00001: added" in notice and "2301.00001" in [r[0] for r in _rows(papers)]
    with pytest.raises(Exception, match="1 new papers is more than the 0 arXiv additions you have left today"):
        client.predict(["2301.00002"], api_name="/add_arxiv")
    # A long list is refused before any arXiv look-up: it would hold the shared client for everyone.
    with pytest.raises(Exception, match="50 new papers is more than the 0 arXiv additions you have left"):
        client.predict([f"2301.{i:05d}" for i in range(10, 60)], api_name="/add_arxiv")
    # A paper already in the library costs nothing.
    notice, _ = client.predict(["2301.00001"], api_name="/add_arxiv")
    assert "already in your library" in notice
    # Nor does any other form of its id: it is found in the library, with no arXiv look-up (none could answer).
    arxiv = demo[2]
    arxiv.offline = True
    try:
        notice, _ = client.predict(["https://arxiv.org/abs/2301.00001v2"], api_name="/add_arxiv")
    finally:
        arxiv.offline = False
    assert "already in your library as 2301.00001" in notice, notice


# ----- questions and memories ----------------------------------------------------------------------------


def test_question_limits_cost_no_model_call_and_keep_nothing(demo, tmp_path: Path) -> None:  # noqa: ANN001
    url, services, llm, _ = demo
    client = Client(url, verbose=False)
    calls = len(llm.calls)
    too_long = "I am a librarian in Lyon. " * 40  # 1,040 characters, each sentence a self-statement
    with pytest.raises(Exception, match="limited to 500 characters"):
        client.predict(too_long, [], [], False, False, api_name="/chat")
    for unreadable in ["\x01\x02\x1b\x7f", "\x00\x08 \x00", "\x1b[2J", "\u0301"]:
        with pytest.raises(Exception, match="no readable text"):
            client.predict(unreadable, [], [], False, False, api_name="/chat")
    assert len(llm.calls) == calls
    assert _rows(client.predict(api_name="/list_memories")) == []

    # A message whose answer failed keeps no memory either. (The guest first adds a paper the question is about: a
    # question nothing in scope bears on is declined before any model call.)
    client.predict([_copy(tmp_path, "N18-3011.pdf", "graph.pdf")], api_name="/upload_pdfs")
    llm.broken = True
    try:
        with pytest.raises(Exception, match="unavailable"):
            client.predict("I am a librarian in Lyon. What is the literature graph?", [], [], False, False, api_name="/chat")
    finally:
        llm.broken = False
    assert _rows(client.predict(api_name="/list_memories")) == []


def test_questions_per_minute(demo) -> None:  # noqa: ANN001
    url, services, llm, _ = demo
    client = Client(url, verbose=False)
    for i in range(3):
        client.predict(f"What is question number {i} about?", [], [], False, False, api_name="/chat")
    assert services.copilot.flush(timeout=60), "the thoughts of those answers, written in the background"
    calls = len(llm.calls)
    with pytest.raises(Exception, match="3 questions in the last minute"):
        client.predict("One more?", [], [], False, False, api_name="/chat")
    with pytest.raises(Exception, match="in the last minute"):
        client.predict([], api_name="/trends_ideas")
    assert len(llm.calls) == calls
    # Another visitor is not slowed by this one.
    other = Client(url, verbose=False)
    _, history, *_ = other.predict("What is S2ORC?", [], [], False, False, api_name="/chat")
    assert history


def test_memory_limits(demo) -> None:  # noqa: ANN001
    url, *_ = demo
    client = Client(url, verbose=False)
    with pytest.raises(Exception, match="limited to 100 characters"):
        client.predict("I work on " + "very " * 40 + "long things.", api_name="/add_memory")
    for i in range(3):
        client.predict(f"I like topic number {i}.", api_name="/add_memory")
    with pytest.raises(Exception, match="3 memories, the most allowed"):
        client.predict("I like one more topic.", api_name="/add_memory")
    assert len(_rows(client.predict(api_name="/list_memories"))) == 3
    # Statements in chat messages stop being kept at the limit, and the answer still comes.
    _, history, *_ = client.predict("I am a chemist. What is S2ORC?", [], [], False, False, api_name="/chat")
    assert history and len(_rows(client.predict(api_name="/list_memories"))) == 3


def test_related_work_input_is_bounded(demo) -> None:  # noqa: ANN001
    url, _, llm, _ = demo
    calls = len(llm.calls)
    with pytest.raises(Exception, match="limited to 500 characters together"):
        Client(url, verbose=False).predict("A title", "An abstract. " * 60, [], False, api_name="/draft_related")
    assert len(llm.calls) == calls


def test_searches_per_minute(demo) -> None:  # noqa: ANN001
    url, *_ = demo
    client = Client(url, verbose=False)
    for _ in range(2):
        client.predict("literature graph", "all", 5, api_name="/search_arxiv")
    with pytest.raises(Exception, match="you ran 2 in the last minute; the most allowed is 2"):
        client.predict("literature graph", "all", 5, api_name="/search_arxiv")
    rows, *_ = Client(url, verbose=False).predict("literature graph", "all", 5, api_name="/search_arxiv")
    assert _rows(rows)


def test_a_full_line_tells_the_visitor_the_demo_is_busy(demo) -> None:  # noqa: ANN001
    url, services, llm, _ = demo
    scheduler = services.copilot.llm.scheduler
    size = services.settings.queue_size
    running = scheduler.enqueue("another-visitor")
    assert running.wait(30)
    waiting = [scheduler.enqueue(f"visitor-{i}") for i in range(size)]
    try:
        assert scheduler.waiting() == size
        calls = len(llm.calls)
        with pytest.raises(Exception, match=f"The demo is busy: {size} answers are waiting"):
            Client(url, verbose=False).predict("What is S2ORC?", [], [], False, False, api_name="/chat")
        assert len(llm.calls) == calls
    finally:
        for ticket in [running, *waiting]:
            scheduler.release(ticket)
    _, history, *_ = Client(url, verbose=False).predict("What is S2ORC?", [], [], False, False, api_name="/chat")
    assert "**Sources**" in str(history[-1]["content"])
