"""The public demo against a visitor who holds another guest's session hash, or who comes back as fresh guests.

The app runs in this process in ``session`` users mode behind one trusted proxy (so each test names its client
address in ``X-Forwarded-For``), with small allowances per address and a small cap on what all guests store. The
LLM is the scripted test double; the store, library, embedder and web server are the real ones.
"""

from __future__ import annotations

import inspect
import shutil
import typing
from pathlib import Path

import gradio as gr
import httpx
import pytest
from gradio.routes import App
from gradio_client import Client, handle_file

from copilot.config import Settings
from copilot.ui.sessions import EVENT, OFF, SESSION_ROUTES, _Owners
from tests.ui_harness import TEST_PAPERS, RoutedLLM, app_in_process

pytestmark = pytest.mark.slow

LIMITS = {"address_questions_per_minute": 5, "address_memories_per_day": 4, "address_uploads_per_day": 3,
          "guest_storage_mb": 1, "questions_per_minute": 3, "max_memories_per_user": 3, "proxy_count": 1,
          "queue_size": 3, "address_arxiv_per_minute": 4}
# Fresh guests from one address: more than its largest allowance, so that every kind is refused at least once.
GUESTS = max(LIMITS[k] for k in LIMITS if k.startswith("address_")) + 3
# Routes whose code mentions a session hash without taking one.
NOT_SESSION_ROUTES = {"/gradio_api/openapi.json": "describes the API for documentation"}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - yields (url, services, root)
    root = tmp_path_factory.mktemp("demo-guards")
    settings = Settings(data_dir=root / "data", llm_backend="local", users="session", **LIMITS)
    with app_in_process(settings, RoutedLLM()) as (url, services, _):
        yield url, services, root


def _client(url: str, address: str) -> Client:
    return Client(url, verbose=False, headers={"X-Forwarded-For": address})


def installed_session_routes() -> dict[str, set[str]]:
    """Every route of the installed Gradio that takes a session hash or an event id, or hands out an event id
    (path -> methods): found in its path, its body model's fields, or its handler's code."""
    with gr.Blocks() as blocks:
        gr.Textbox()
    found: dict[str, set[str]] = {}

    def walk(routes: list, prefix: str = "") -> None:
        for route in routes:
            included = getattr(route, "include_context", None)
            if included is not None:
                walk(route.original_router.routes, prefix + included.prefix)
                continue
            endpoint = getattr(route, "endpoint", None)
            if endpoint is None:
                continue
            path = prefix + route.path
            try:
                code = inspect.getsource(endpoint)
            except (OSError, TypeError):
                code = ""
            fields: set[str] = set()
            for hint in typing.get_type_hints(endpoint).values():
                fields |= set(getattr(hint, "model_fields", None) or {})
            keys = ("session_hash", "event_id")
            if (any(k in path or k in fields or k in code for k in keys) or "queue_join_helper(" in code) \
                    and path not in NOT_SESSION_ROUTES:
                found.setdefault(path, set()).update(getattr(route, "methods", None) or set())
    walk(App.create_app(blocks).routes)
    return found


def test_every_session_route_of_the_installed_gradio_is_guarded() -> None:
    found = installed_session_routes()
    assert len(found) >= 20, sorted(found)
    assert sorted(set(found) - set(SESSION_ROUTES)) == [], "session routes of this Gradio that the guard misses"
    assert sorted(set(SESSION_ROUTES) - set(found)) == [], "guarded routes this Gradio no longer serves"
    assert {t: {m} for t, (_, m) in SESSION_ROUTES.items()} == {t: found[t] - {"HEAD"} for t in SESSION_ROUTES}


def test_another_guests_session_hash_or_event_id_opens_nothing(demo) -> None:  # noqa: ANN001
    url, _, _ = demo
    owner = _client(url, "198.51.100.1")
    _, history, *_ = owner.predict("What is S2ORC?", [], [], False, False, api_name="/chat")
    assert "What is S2ORC?" in str(history)
    session = owner.session_hash
    with httpx.Client(base_url=url, cookies=owner.cookies, timeout=30) as mine:
        event = mine.post("/gradio_api/call/model_info", json={"data": []}).json()["event_id"]
        assert "backend" in mine.get(f"/gradio_api/call/model_info/{event}").text  # the owner reads its event

    names = {"session_hash": session, "event_id": event, "api_name": "chat", "run": "0", "component_id": "1",
             "segment_id": "0", "ext": "ts"}
    refused = []
    with httpx.Client(base_url=url, timeout=30) as spy:  # no cookie: the server gives it a guest of its own
        for template, (where, method) in sorted(SESSION_ROUTES.items()):
            path = template.format(**names)
            body = {"session_hash": session, "event_id": event, "data": [], "fn_index": 0}
            if where == "query" or where == OFF:
                response = spy.get(path, params={"session_hash": session})
            elif where == "header":
                response = spy.post(path, headers={"session_hash": session},
                                    files={"files": ("a.pdf", b"%PDF-1.4", "application/pdf")})
            elif method == "POST":
                response = spy.post(path, json=body if where != EVENT or "{event_id}" not in template else {})
            else:
                response = spy.get(path)
            assert response.status_code == (404 if where == OFF else 403), (template, response.text[:200])
            refused.append(template)
        # The two reproductions: a deep link of the owner's page, and the owner's streamed messages.
        assert spy.get("/gradio_api/deep_link", params={"session_hash": session}).status_code == 404
        assert spy.get("/gradio_api/file=/tmp/gradio/deep_links/0123/state.json").status_code == 404
        data = spy.get("/gradio_api/queue/data", params={"session_hash": session})
        assert data.status_code == 403 and "S2ORC" not in data.text
        # The owner's /call result under another route's spelling, or as the session its event id names; the
        # owner's event cancelled from the spy's own session.
        assert spy.get(f"/gradio_api/call/v2/{event}").status_code == 403
        assert spy.get("/gradio_api/queue/data", params={"session_hash": event}).status_code == 403
        assert spy.post("/gradio_api/cancel", json={"session_hash": "the-spys-own", "fn_index": 0,
                                                    "event_id": event}).status_code == 403
    print("refused with the owner's session hash or event id:", ", ".join(refused))
    assert len(refused) == len(SESSION_ROUTES)

    # The owner is unharmed, and a client that makes up the owner's hash is refused rather than served.
    _, history, *_ = owner.predict("What is S2ORC?", [], [], False, False, api_name="/chat")
    assert "**Sources**" in str(history[-1]["content"])
    stranger = _client(url, "198.51.100.2")
    stranger.session_hash = session
    with pytest.raises(Exception, match="403"):
        stranger.predict(api_name="/list_papers")


def test_a_flood_of_new_sessions_never_frees_a_live_one() -> None:
    owners = _Owners(capacity=3, idle_s=3600)
    assert owners.claim("victim", "guest-a") is True
    assert [owners.claim(f"flood-{i}", "guest-b") for i in range(4)] == [True, True, None, None]
    assert owners.claim("victim", "guest-b") is False and owners.owner("victim") == "guest-a"
    idle = _Owners(capacity=1, idle_s=-1.0)  # idle at once: a new key may take the place of one nobody uses
    assert idle.claim("old", "guest-a") is True and idle.claim("new", "guest-b") is True
    assert idle.owner("old") is None


def _copy(root: Path, name: str, as_name: str) -> str:
    copy = root / as_name
    shutil.copy(TEST_PAPERS / name, copy)
    return handle_file(str(copy))


def test_fresh_guests_from_one_address_share_its_allowance_and_all_guests_one_storage_cap(demo) -> None:  # noqa: ANN001
    url, services, root = demo
    store = services.store
    address = "203.0.113.9"
    refusals: dict[str, set[str]] = {"memory": set(), "upload": set(), "question": set(), "search": set()}
    answered = searched = 0
    for i in range(GUESTS):
        guest = _client(url, address)
        for kind, call in [
            ("memory", lambda g=guest, i=i: g.predict(f"I study topic {i}.", api_name="/add_memory")),
            ("upload", lambda g=guest, i=i: g.predict([_copy(root, "N18-3011.pdf", f"guest{i}.pdf")],
                                                      api_name="/upload_pdfs")),
            ("question", lambda g=guest: g.predict("What is S2ORC?", [], [], False, False, api_name="/chat")),
            ("search", lambda g=guest: g.predict("literature graph", "all", 5, api_name="/search_arxiv")),
        ]:
            try:
                call()
                answered += kind == "question"
                searched += kind == "search"
            except Exception as exc:  # noqa: BLE001 - the refusal's line is what is checked
                refusals[kind].add(str(exc).strip().splitlines()[-1])
    memories = store.conn.execute("SELECT COUNT(*) FROM memories WHERE user_id LIKE 'guest-%'").fetchone()[0]
    uploads = store.conn.execute("SELECT COUNT(*) FROM papers WHERE user_id LIKE 'guest-%'").fetchone()[0]
    assert (memories, uploads, answered, searched) == (4, 3, 5, 4)
    for kind, lines in refusals.items():
        assert len(lines) == 1 and next(iter(lines)).startswith("Guests from your network made"), (kind, lines)

    # Another address has its own allowance, but all guests share one storage cap (1 MB; 3 x 175 KB kept).
    other = _client(url, "203.0.113.10")
    with pytest.raises(Exception, match="Guests' uploads fill this demo's storage"):
        other.predict([_copy(root, "2020.acl-main.207.pdf", "big.pdf")], api_name="/upload_pdfs")
    assert store.conn.execute("SELECT COUNT(*) FROM papers WHERE user_id LIKE 'guest-%'").fetchone()[0] == uploads
    other.predict("I also study retrieval.", api_name="/add_memory")  # a memory still fits


def test_thirty_chats_at_a_full_line_are_told_in_the_apps_own_words(demo) -> None:  # noqa: ANN001
    from concurrent.futures import ThreadPoolExecutor

    url, services, _ = demo
    scheduler = services.copilot.llm.scheduler
    size = services.settings.queue_size
    running = scheduler.enqueue("another-visitor")
    assert running.wait(30)
    waiting = [scheduler.enqueue(f"visitor-{i}") for i in range(size)]

    def chat(i: int) -> str:
        try:
            _client(url, f"192.0.2.{i + 1}").predict("What is S2ORC?", [], [], False, False, api_name="/chat")
            return "answered"
        except Exception as exc:  # noqa: BLE001 - the refusal's words are what is checked
            return str(exc)

    try:
        with ThreadPoolExecutor(max_workers=30) as pool:
            outcomes = list(pool.map(chat, range(30)))
    finally:
        for ticket in [running, *waiting]:
            scheduler.release(ticket)
    assert not [o for o in outcomes if "Queue is full" in o or "currently busy" in o]
    assert all(f"The demo is busy: {size} answers are waiting" in o for o in outcomes), set(outcomes)


def test_a_streaming_draft_is_marked_unchecked_until_the_check_replaces_it(demo) -> None:  # noqa: ANN001
    from copilot.ui.chat_tab import DRAFT_LABEL

    url, _, root = demo
    client = _client(url, "198.51.100.20")
    client.predict([_copy(root, "N18-3011.pdf", "graph.pdf")], api_name="/upload_pdfs")
    job = client.submit("What is the literature graph?", [], [], False, False, api_name="/chat")
    job.result(timeout=120)
    contents = [str(output[1][-1]["content"]) for output in job.outputs() if output[1]]
    drafts = [c for c in contents if DRAFT_LABEL in c]
    assert drafts and "On What is the literature graph" in drafts[-1], contents
    assert DRAFT_LABEL not in contents[-1] and "Supporting quotes" in contents[-1], contents[-1]
