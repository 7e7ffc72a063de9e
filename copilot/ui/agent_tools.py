"""The copilot's tools for agents, served over MCP by Gradio's own MCP server (``COPILOT_MCP``).

Each tool is an API endpoint of the app (``agent_<tool>``) whose docstring and typed parameters Gradio turns into the
tool's description and schema; :func:`expose` narrows Gradio's tool list to exactly these, so the page's own
endpoints are never offered to an agent. A tool acts as a user only with that user's personal access token, sent
in the ``X-Copilot-Token`` header (:mod:`copilot.access`); without one, only the read-only public tools answer
(:data:`PUBLIC`), and every limit of the web app applies per user, so per token. Each tool returns JSON text.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import gradio as gr

from copilot.access import HEADER
from copilot.answering import AskResult
from copilot.ui.actions import REFUSED
from copilot.ui.context import AppContext, page_error
from copilot.limits import is_guest
from copilot.tasks.compare import parse_aspects
from copilot.ui.users import client_address
from ingest.errors import ArxivUnavailable

PREFIX = "agent_"  # each tool's API endpoint is this and the tool's name
TOOLS = ("search_papers", "add_paper", "list_papers", "ask", "draft_related_work", "compare_papers", "get_passage")
PUBLIC = ("search_papers", "list_papers", "get_passage")  # read-only: they answer without a token, on public papers
ANONYMOUS = "anonymous"  # whom a call without a token acts as: it owns nothing, so it sees public papers only
MAX_SEARCH_RESULTS = 20
NEEDS_TOKEN = ("This tool acts as a user: send your personal access token in the X-Copilot-Token header (create one "
               "in the Profile tab).")
BAD_TOKEN = "This access token is not valid or was revoked: create a new one in the Profile tab."


def agent_user(ctx: AppContext, request: gr.Request | None, *, public: bool) -> str:
    """Whom a tool call acts as: the user of the token it carries; with none, :data:`ANONYMOUS` for a public tool,
    else refused. Never the session's guest or cookie: an MCP client's calls all reach the app through one
    connection of the server's own."""
    ctx.ready()
    headers = getattr(request, "headers", None) or {}
    token = (headers.get(HEADER) or "").strip()
    if token:
        user_id = ctx.copilot.token_user(token)
        if user_id is None:
            raise gr.Error(BAD_TOKEN)
        return user_id
    if public:
        return ANONYMOUS
    raise gr.Error(NEEDS_TOKEN)


def _json(value: Any) -> str:  # noqa: ANN401 - any JSON value
    return json.dumps(value, ensure_ascii=False, indent=1)


def register(ctx: AppContext) -> None:
    """Add the tools to the Blocks being built (call inside it)."""

    def admit(user_id: str, request: gr.Request | None, action: str = "question", n: int = 1) -> None:
        """The web app's limits, per user; a guest's token also counts against its client address's allowance, as
        the guest's own page does. Calls without a token share one allowance, even on one's own machine."""
        if ctx.quotas or user_id == ANONYMOUS:
            address = client_address(request, ctx.settings) if is_guest(user_id) else None
            ctx.copilot.admit(user_id, action, n, address=address)

    def refusals(fn: Any) -> Any:  # noqa: ANN401 - a tool function
        """A refusal is the call's error: one line, no server paths."""

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
            try:
                return fn(*args, **kwargs)
            except REFUSED as exc:
                raise page_error(exc) from exc

        return run

    @refusals
    def search_papers(query: str, max_results: int = 5, request: gr.Request = None) -> str:  # type: ignore[assignment]
        """Search arXiv for papers by free text, title words or an author's name. Needs no token.

        Args:
            query: What to look for, e.g. "thought retrieval" or "Vaswani".
            max_results: How many papers to return, 1 to 20.

        Returns:
            JSON: a list of papers, each with arxiv_id, title, authors, published, primary_category and abstract.
            Pass an arxiv_id to add_paper to read the paper.
        """
        if not (query or "").strip():
            raise gr.Error("Give words to search for.")
        user_id = agent_user(ctx, request, public=True)
        admit(user_id, request, "search")
        n = min(MAX_SEARCH_RESULTS, max(1, int(max_results or 5)))
        try:
            hits = ctx.copilot.search_arxiv(query, "all", n)
        except ArxivUnavailable as exc:
            raise gr.Error(f"arXiv cannot be reached now: {exc}") from exc
        return _json([{"arxiv_id": h.arxiv_id, "title": h.title, "authors": h.authors[:10],
                       "published": h.published[:10], "primary_category": h.primary_category,
                       "abstract": h.abstract[:1500]} for h in hits])

    @refusals
    def add_paper(paper: str, request: gr.Request = None) -> str:  # type: ignore[assignment]
        """Add one arXiv paper to the library (downloaded, parsed and indexed; this takes a while). Needs a token.

        Args:
            paper: An arXiv id or URL, e.g. "2104.12255" or "https://arxiv.org/abs/1706.03762".

        Returns:
            JSON: paper_id, status ("added", "already in the library" or "failed") and a message.
        """
        if not (paper or "").strip():
            raise gr.Error("Give an arXiv id or URL.")
        user_id = agent_user(ctx, request, public=False)
        admit(user_id, request, "arxiv_job")
        admit(user_id, request, "arxiv_add")
        report = ctx.copilot.add_arxiv([paper.strip()], user_id, {}, quotas=ctx.quotas)
        failed = [r for r in report if not r["ok"]]
        if failed and len(failed) == len(report):
            raise gr.Error(f"{failed[0]['ref']}: {failed[0]['message']}")
        first = report[0]
        return _json({"paper_id": first["ref"], "status": first["status"], "message": first["message"]})

    @refusals
    def list_papers(matching: str = "", request: gr.Request = None) -> str:  # type: ignore[assignment]
        """List the papers in the library: with a token, the user's (shared arXiv papers and their own uploads);
        without one, the shared arXiv papers.

        Args:
            matching: Only papers whose id, title or authors hold every one of these words (empty: all).

        Returns:
            JSON: a list of papers, each with paper_id, title, authors, published, shared (an arXiv paper everyone
            sees, or the user's own upload) and passages. Pass paper_ids to ask or draft_related_work to keep to
            those papers.
        """
        user_id = agent_user(ctx, request, public=True)
        admit(user_id, request, "page")
        return _json([{"paper_id": p.id, "title": p.title, "authors": p.authors[:10],
                       "published": (p.published or "")[:10], "shared": p.shared, "passages": p.n_chunks}
                      for p in ctx.copilot.papers(user_id, matching)])

    @refusals
    def ask(question: str, paper_ids: list[str] | None = None,
            request: gr.Request = None) -> str:  # type: ignore[assignment]
        """Ask a question about the papers in the library. The answer cites numbered sources; each supported
        sentence comes with the verbatim source sentence that shows it, and when the papers do not say, the
        answer declines instead of guessing. Needs a token. Takes seconds to a minute.

        Args:
            question: The question, e.g. "Which dataset was SPECTER trained on?".
            paper_ids: Only these papers (ids from list_papers); empty: the whole library.

        Returns:
            JSON: answer, declined (true when the papers do not say) and decline_reason, evidence (each n, quote,
            paper_id, page), unsupported (sentences the sources do not show), sources (each n, id, paper_id,
            title, section, page; get_passage reads one), nearest (a declined question's closest passages).
        """
        user_id = agent_user(ctx, request, public=False)
        admit(user_id, request)
        result = None
        for update in ctx.copilot.chat_stream(user_id, question, paper_ids=list(paper_ids) if paper_ids else None):
            result = update if isinstance(update, AskResult) else result
        assert result is not None
        shown = result.as_dict()
        unsupported = ([{"sentence": s.sentence, "flaw": s.flaws(), "closest": s.quote}
                        for s in result.grounding.unsupported] if result.grounding else [])
        return _json({
            "answer": result.answer, "declined": result.declined, "decline_reason": result.decline_reason,
            "evidence": shown["evidence"], "unsupported": unsupported,
            "sources": [{"n": n, "id": s.id, "kind": s.kind, "paper_id": s.paper_id, "title": s.paper_title,
                         "section": s.section, "page": s.page_start} for n, s in enumerate(result.sources, start=1)],
            "nearest": shown["nearest"], "model": result.model, "table_cell": result.table_cell,
            "conversation_id": result.conversation_id})

    @refusals
    def draft_related_work(title: str, abstract: str, paper_ids: list[str] | None = None,
                           request: gr.Request = None) -> str:  # type: ignore[assignment]
        """Draft a related-work section for a paper you are writing, citing papers of the library, with BibTeX.
        Sentences the cited papers do not support are marked. Needs a token. Takes a minute or more.

        Args:
            title: Your paper's title.
            abstract: Your paper's abstract.
            paper_ids: Only these library papers (ids from list_papers); empty: the whole library.

        Returns:
            JSON: text (Markdown, unsupported sentences marked), references, bibtex, unsupported, notes.
        """
        user_id = agent_user(ctx, request, public=False)
        admit(user_id, request)
        draft = ctx.copilot.draft("related", user_id, title=(title or "").strip(), abstract=(abstract or "").strip(),
                                  paper_ids=list(paper_ids) if paper_ids else None, search_arxiv=False)
        shown = draft.as_dict()
        return _json({"text": draft.marked_text(), "references": shown["references"], "bibtex": shown["bibtex"],
                      "unsupported": shown["unsupported"], "notes": shown["notes"]})

    @refusals
    def compare_papers(paper_ids: list[str], aspects: list[str] | None = None,
                       request: gr.Request = None) -> str:  # type: ignore[assignment]
        """Compare 2 to 10 papers of the library in a table: one row a paper, one column an aspect. Each cell is
        filled from that paper's own text with the sentence that shows it (paper, page), or says "not stated"; a
        cell the paper does not support is marked. Needs a token. Takes a few seconds a cell.

        Args:
            paper_ids: The papers to compare (ids from list_papers), 2 to 10.
            aspects: The columns, at most 8 (default: task, data, method, metric, main result, limitation).

        Returns:
            JSON: aspects, papers, cells (paper_id, aspect, text, stated, supported, evidence), markdown, bibtex.
        """
        user_id = agent_user(ctx, request, public=False)
        admit(user_id, request)
        address = client_address(request, ctx.settings) if is_guest(user_id) else None
        wanted = parse_aspects(aspects) if isinstance(aspects, str) else aspects
        return _json(ctx.copilot.comparison(user_id, list(paper_ids or []), wanted or None, quotas=ctx.quotas,
                                            address=address).as_dict())

    @refusals
    def get_passage(source_id: int, request: gr.Request = None) -> str:  # type: ignore[assignment]
        """Read one source passage in full: its text, paper, section and pages. Without a token, only passages of
        shared arXiv papers.

        Args:
            source_id: A source's id, as ask lists it under sources.

        Returns:
            JSON: id, paper_id, title, section, page_start, page_end, text.
        """
        user_id = agent_user(ctx, request, public=True)
        admit(user_id, request, "page")
        return _json(ctx.copilot.passage_text(user_id, int(source_id)))

    for fn in (search_papers, add_paper, list_papers, ask, draft_related_work, compare_papers, get_passage):
        gr.api(fn, api_name=PREFIX + fn.__name__)


def expose(demo: gr.Blocks) -> None:
    """Offer agents exactly :data:`TOOLS` (named as such, after the Space's prefix Gradio adds), none of the page's
    own endpoints: Gradio lists every public endpoint as a tool, and calls only the tools it lists."""
    server = getattr(demo, "mcp_server_obj", None)
    if server is None:
        return
    prefix = server.tool_prefix
    server.tool_to_endpoint = {prefix + name: f"/{PREFIX}{name}" for name in TOOLS}
