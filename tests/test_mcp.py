"""The copilot as an MCP server: the official ``mcp`` client over streamable HTTP against the real app (real
store, library, embedder and UI; a scripted LLM and the arXiv stand-in), tokens made and revoked through the
Profile tab's API, and two users whose tokens see two libraries."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import shutil
from typing import Any

import httpx
import pytest
from gradio_client import Client, handle_file
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from copilot.config import Settings
from copilot.ui.agent_tools import BAD_TOKEN, NEEDS_TOKEN, PUBLIC, TOOLS
from tests.ui_harness import TEST_PAPERS, RoutedLLM, app_in_process

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - yields (url, services, root)
    root = tmp_path_factory.mktemp("mcp")
    settings = Settings(data_dir=root / "data", llm_backend="local", users="session", mcp="on")
    with app_in_process(settings, RoutedLLM()) as (url, services, _arxiv):
        yield url, services, root


class Agent:
    """One MCP client session: every call of :meth:`run` opens a session (with ``token`` in its header) and makes
    the calls in order; each call's result is (is_error, text), progress messages are kept."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self.url = url + "gradio_api/mcp/"
        self.headers = {"X-Copilot-Token": token} if token else {}
        self.progress: list[tuple[float, str | None]] = []

    async def _run(self, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            self.progress.append((progress, message))

        async with httpx.AsyncClient(headers=self.headers, timeout=httpx.Timeout(120)) as http, \
                streamable_http_client(self.url, http_client=http) as (read, write, _), \
                ClientSession(read, write) as session:
            await session.initialize()
            out: list[Any] = []
            for name, arguments in calls:
                if name == "tools/list":
                    out.append([tool.name for tool in (await session.list_tools()).tools])
                    continue
                result = await session.call_tool(name, arguments, progress_callback=on_progress)
                out.append((result.isError, result.content[0].text if result.content else ""))
            return out

    def run(self, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
        # In a thread of its own: a caller may already run an event loop (Playwright's, in the browser tests).
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, self._run(list(calls))).result()

    def call(self, name: str, **arguments: Any) -> Any:  # noqa: ANN401 - the tool's JSON
        """One tool call's JSON; AssertionError carrying the message when the tool refused."""
        failed, text = self.run((name, arguments))[0]
        assert not failed, text
        return json.loads(text)

    def refusal(self, name: str, **arguments: Any) -> str:
        failed, text = self.run((name, arguments))[0]
        assert failed, f"{name} answered: {text[:200]}"
        return text


def _user(url: str) -> tuple[Client, str]:
    """A browser session (a guest of its own) and the access token it created in the Profile tab."""
    client = Client(url, verbose=False)
    secret, table, note = client.predict("laptop", api_name="/create_token")
    assert secret.startswith("pct_") and "created" in note and table["data"][0][1] == "laptop"
    return client, secret


def test_tools_list_names_the_agents_tools_and_nothing_of_the_page(app) -> None:  # noqa: ANN001
    url, *_ = app
    agent = Agent(url)
    assert agent.run(("tools/list", {}))[0] == list(TOOLS)
    # The page's own endpoints are not tools, even called by name.
    assert "Unknown tool" in agent.refusal("list_memories")


def test_public_tools_answer_without_a_token_the_others_refuse(app) -> None:  # noqa: ANN001
    url, *_ = app
    agent = Agent(url)
    hits = agent.call("search_papers", query="literature graph", max_results=2)
    assert [h["arxiv_id"] for h in hits] == ["2301.00001", "2301.00002"] and hits[0]["title"]
    for name, arguments in (("ask", {"question": "What is the literature graph?"}),
                            ("add_paper", {"paper": "2301.00001"}),
                            ("draft_related_work", {"title": "Graphs", "abstract": "We build graphs."}),
                            ("compare_papers", {"paper_ids": ["2301.00001", "2301.00002"]})):
        assert NEEDS_TOKEN in agent.refusal(name, **arguments)
    assert BAD_TOKEN in Agent(url, "pct_" + "x" * 43).refusal("ask", question="What is it?")
    # The same owner check on the plain API path (gradio_client), which these endpoints also are: every tool that
    # acts as a user refuses a call without a token, whatever cookie the client holds.
    browser = Client(url, verbose=False)
    arguments = {"ask": ("What is it?", None), "add_paper": ("2301.00001",),
                 "draft_related_work": ("Graphs", "We build graphs.", None),
                 "compare_papers": (["2301.00001", "2301.00002"], None)}
    assert set(arguments) == set(TOOLS) - set(PUBLIC)
    for name, args in arguments.items():
        with pytest.raises(Exception, match="access token"):
            browser.predict(*args, api_name=f"/agent_{name}")


def test_add_paper_then_ask_returns_sources_and_evidence_with_progress(app) -> None:  # noqa: ANN001
    url, *_ = app
    _client, token = _user(url)
    agent = Agent(url, token)
    added = agent.call("add_paper", paper="2301.00001")
    assert added["paper_id"] == "2301.00001" and added["status"] in ("added", "already in the library")
    assert any(m for _, m in agent.progress), "queued tools report their progress"
    listed = agent.call("list_papers")
    assert "2301.00001" in [p["paper_id"] for p in listed]
    answer = agent.call("ask", question="How is the literature graph constructed?", paper_ids=["2301.00001"])
    assert answer["declined"] is False and answer["answer"]
    assert answer["sources"] and {"n", "id", "paper_id", "title", "section", "page"} <= set(answer["sources"][0])
    quote = answer["evidence"][0]
    cited = answer["sources"][quote["n"] - 1]
    assert quote["paper_id"] == cited["paper_id"] == "2301.00001" and quote["page"] >= 1 and quote["quote"]
    passage = agent.call("get_passage", source_id=cited["id"])
    assert passage["paper_id"] == "2301.00001" and passage["page_start"] >= 1
    assert " ".join(quote["quote"].split())[:60] in " ".join(passage["text"].split()), "the quote is the source's"
    draft = agent.call("draft_related_work", title="Graphs of papers", abstract="We link papers and authors.",
                       paper_ids=["2301.00001"])
    assert draft["text"] and "@" in draft["bibtex"]
    agent.call("add_paper", paper="2301.00002")
    table = agent.call("compare_papers", paper_ids=["2301.00001", "2301.00002"], aspects=["task", "data"])
    assert table["aspects"] == ["task", "data"] and [p["paper_id"] for p in table["papers"]] == ["2301.00001",
                                                                                                  "2301.00002"]
    assert [(c["paper_id"], c["aspect"]) for c in table["cells"]] == [
        ("2301.00001", "task"), ("2301.00001", "data"), ("2301.00002", "task"), ("2301.00002", "data")]
    for cell in table["cells"]:
        assert cell["text"] == "not stated" or all(q["paper_id"] == cell["paper_id"] and q["page"] >= 1
                                                  for q in cell["evidence"])
    assert any(c["stated"] and c["evidence"] for c in table["cells"])
    assert table["markdown"].startswith("| Paper | task | data |") and table["bibtex"].count("@") == 2


def test_two_tokens_see_two_libraries_and_a_revoked_token_is_refused(app) -> None:  # noqa: ANN001
    url, _services, root = app
    ada, ada_token = _user(url)
    bob, bob_token = _user(url)
    copy = root / "ada-private.pdf"
    shutil.copy(TEST_PAPERS / "2020.acl-main.447.pdf", copy)
    notice, _ = ada.predict([handle_file(str(copy))], api_name="/upload_pdfs")
    assert "added" in notice, notice
    mine = [p for p in Agent(url, ada_token).call("list_papers") if not p["shared"]]
    assert len(mine) == 1
    upload = mine[0]["paper_id"]
    bob_list = Agent(url, bob_token).call("list_papers")
    assert upload not in [p["paper_id"] for p in bob_list]
    assert upload not in [p["paper_id"] for p in Agent(url).call("list_papers")], "no token: shared papers only"
    asked = Agent(url, ada_token).call("ask", question="What does the paper study?", paper_ids=[upload])
    own = next(s["id"] for s in asked["sources"] if s["paper_id"] == upload)
    assert Agent(url, ada_token).call("get_passage", source_id=own)["paper_id"] == upload
    assert "No source" in Agent(url, bob_token).refusal("get_passage", source_id=own)
    assert "Unknown paper" in Agent(url, bob_token).refusal("ask", question="What is it?", paper_ids=[upload])
    # Revoked in the Profile tab: refused from then on; another user cannot revoke it.
    tokens = ada.predict(api_name="/list_tokens")
    token_id = (tokens["data"] if isinstance(tokens, dict) else tokens)[0][0]
    with pytest.raises(Exception, match="no access token"):
        bob.predict(token_id, api_name="/revoke_token")
    assert Agent(url, ada_token).call("list_papers")
    ada.predict(token_id, api_name="/revoke_token")
    assert BAD_TOKEN in Agent(url, ada_token).refusal("list_papers")
    assert Agent(url, bob_token).call("list_papers") == bob_list, "the other user's token still works"
