"""The Gradio web app: six tabs over the engine and the library. Every main action has an ``api_name``, so
``gradio_client`` can drive everything the page does."""

from __future__ import annotations

import logging
import os
import threading
import warnings
from pathlib import Path
from typing import Any

import gradio as gr

from copilot.config import Settings, get_settings
from copilot.grounding import load_readers
from copilot.llm.embedded import title_of
from copilot.ui import agent_tools, chat_tab, dashboard_tab, ideas_tab, library_tab, profile_tab, write_tab
from copilot.ui.actions import action
from copilot.ui.chat_tab import CHAT_CONCURRENCY
from copilot.ui.context import AppContext
from copilot.ui.identity import GuestCookieMiddleware, guest_tokens
from copilot.ui.services import Services
from copilot.ui.sessions import SessionGuard
from copilot.ui.users import mcp_enabled, on_spaces, users_mode

logger = logging.getLogger(__name__)
PERSISTENT_ROOT = Path("/data")  # where a Space mounts its persistent storage or storage bucket
STATIC_DIR = Path(__file__).resolve().parent.parent.parent / "static"
CSS_PATH = STATIC_DIR / "style.css"
PAGE_JS = STATIC_DIR / "page.js"  # the page's own script: an [n] in an answer opens its passage

INTRO = (
    "## Paper Copilot\n"
    "Chat about your papers with cited answers, draft abstracts and related work, and watch a memory of "
    "*thoughts* grow from past answers."
)


def describe_model(settings: Settings) -> dict:
    """The configured backend and model, without loading it."""
    backend = settings.resolved_backend()
    if backend == "local":
        model = title_of(settings.llm_model)
    else:
        model = settings.llm_model or {"openai": "default OpenAI-compatible model",
                                       "hf": "default Hugging Face Inference model"}[backend]
    return {"backend": backend, "model": model, "data_dir": str(settings.data_dir.resolve())}


def _model_line(settings: Settings, mode: str) -> str:
    info = describe_model(settings)
    line = f"Model: **{info['model']}** via `{info['backend']}` backend."
    if mode == "hf" and settings.signed_in_model:
        line += f" Signed in: **{settings.signed_in_model}** on Hugging Face Inference, with your account."
    return line


def _warm_up(services: Services) -> None:
    """Load the models in the background so the first question does not wait for them."""
    try:
        services.library  # noqa: B018 - loads the engine (store, embedder, LLM) and the library
        load_readers()  # the answer check's sentence splitter and stemmer
    except Exception:  # noqa: BLE001 - reported to the user on their first action
        pass


def build_app(settings: Settings | None = None, services: Services | None = None, *,
              warm_up: bool = True) -> gr.Blocks:
    """The whole web app for ``settings`` (default: the environment's)."""
    settings = settings or get_settings()
    services = services or Services(settings)
    ctx = AppContext(settings, services, users_mode(settings))
    if warm_up:
        threading.Thread(target=_warm_up, args=(services,), daemon=True).start()
    max_age_s = int(settings.temp_max_age_hours * 3600)
    # Gradio's cache (uploaded PDFs once added, drafts once downloaded) is swept of files older than the limit.
    with gr.Blocks(title="Paper Copilot", delete_cache=(max(60, max_age_s // 4), max_age_s)) as demo:
        with gr.Row():
            gr.Markdown(INTRO, elem_id="intro")
            if ctx.mode == "hf":
                gr.LoginButton()
        gr.Markdown(_model_line(settings, ctx.mode), elem_id="model-line")
        notice = gr.Markdown(visible=False, elem_id="owner-notice")
        with gr.Tabs():
            library = library_tab.build(ctx)
            chat = chat_tab.build(ctx)
            write = write_tab.build(ctx)
            ideas = ideas_tab.build(ctx)
            profile = profile_tab.build(ctx)
            dashboard_tab.build(ctx)  # fills itself when opened
        pickers = [chat["scope"], write["one_paper"], write["many_papers"], write["related_papers"],
                   write["compare_papers"], ideas["papers"]]

        @action(ctx)
        def paper_pickers(user_id: str) -> tuple[Any, ...]:
            choices = library_tab.paper_choices(ctx.copilot.papers(user_id))
            return tuple(gr.update(choices=choices) for _ in pickers)

        # Endpoints without a button are registered outside the tabs (inside, Gradio draws a phantom tab) and
        # before the page-load events that reuse their functions (those would take the names first).
        for fn, name in library["apis"] + profile["apis"]:
            gr.api(fn, api_name=name)
        for event in library["changed"]:
            event.then(paper_pickers, None, pickers, api_visibility="private")
        for fn, inputs, outputs in library["load"] + profile["load"] + chat["load"]:
            demo.load(fn, inputs, outputs, api_visibility="private")
        demo.load(paper_pickers, None, pickers, api_visibility="private")

        @action(ctx)
        def show_owner_notice(user_id: str) -> Any:  # noqa: ANN401 - a Gradio update
            text = owner_notice(user_id, settings)
            return gr.update(value=text, visible=bool(text))

        demo.load(show_owner_notice, None, notice, api_visibility="private")

        def model_info() -> dict:
            """Which LLM backend and model answer (and, on a single-user instance, where it keeps its data)."""
            info = describe_model(settings)
            if ctx.mode != "single":
                info.pop("data_dir")  # visitors of a shared instance need not know its file system
            return info

        gr.api(model_info, api_name="model_info")
        if mcp_enabled(settings):
            agent_tools.register(ctx)
    return demo


def start_refresh_schedule(settings: Settings, services: Services) -> Any:  # noqa: ANN401 - a RefreshScheduler
    """Every ``COPILOT_REFRESH_HOURS`` hours, pull the newest papers of every followed category (0 = off)."""
    from copilot.tasks.refresh import RefreshScheduler, refresh_followed

    scheduler = RefreshScheduler(settings.refresh_hours, lambda: refresh_followed(services.library))
    return scheduler if scheduler.start() else None


def serve(demo: gr.Blocks, settings: Settings, **kwargs: Any) -> Any:  # noqa: ANN401 - passed to Gradio
    """Start the web server for ``demo`` with this instance's limits and, for guests, the signed session cookie.

    The upload limit is enforced by the server before a byte is stored. Answers beyond ``COPILOT_QUEUE_SIZE``
    waiting for the model are refused by the app with its own "the demo is busy" line; Gradio's own queue is
    bounded further out (every chat in flight, and as many again), as a guard on memory that the app's line comes
    before. Nothing of the data directory is served as a file: downloads go through Gradio's cache under
    unguessable paths. Session-keyed routes serve only the guest that opened the session
    (:mod:`copilot.ui.sessions`). With ``COPILOT_MCP`` on, Gradio's MCP server offers agents the tools of
    :mod:`copilot.ui.agent_tools` and nothing else, from before the first request is served.
    """
    from starlette.middleware import Middleware

    app_kwargs = {}
    if users_mode(settings) != "single":
        tokens = guest_tokens(settings)
        # The cookie first (outermost), so that the session guard inside it sees every request's guest.
        app_kwargs["middleware"] = [Middleware(GuestCookieMiddleware, tokens=tokens),
                                    Middleware(SessionGuard, tokens=tokens)]
    kwargs.setdefault("server_name", settings.host)
    kwargs.setdefault("server_port", settings.port)
    # Chats waiting in the model's line and thought-status checks hold a server thread each (up to 32 of each at
    # once): enough threads that page loads and other actions never wait behind them.
    kwargs.setdefault("max_threads", 100)
    kwargs.setdefault("css_paths", [CSS_PATH] if CSS_PATH.exists() else None)
    kwargs.setdefault("js", PAGE_JS.read_text(encoding="utf-8") if PAGE_JS.exists() else None)
    gradio_queue = settings.queue_size + 2 * CHAT_CONCURRENCY
    wait = not kwargs.pop("prevent_thread_lock", False)
    with warnings.catch_warnings():
        # Gradio warns of page endpoints with state among the tools it would list; expose() lists none of them.
        warnings.filterwarnings("ignore", message="This MCP server includes a tool that has a gr.State input")
        launched = demo.queue(default_concurrency_limit=2, max_size=gradio_queue).launch(
            max_file_size=f"{settings.max_upload_mb}mb",
            app_kwargs=app_kwargs,
            mcp_server=mcp_enabled(settings),
            prevent_thread_lock=True,
            **kwargs,
        )
    agent_tools.expose(demo)  # the agents' tools only, before anyone is told the server is up
    if wait:
        demo.block_thread()
    return launched


def deployment_warnings(settings: Settings) -> list[str]:
    """On Hugging Face Spaces, what the Space's owner must set for the instance to keep its data and its guests
    across restarts (one line each; none elsewhere)."""
    if not on_spaces():
        return []
    warnings = []
    data = settings.data_dir.resolve()
    if data != PERSISTENT_ROOT and PERSISTENT_ROOT not in data.parents:
        warnings.append(f"COPILOT_DATA_DIR is {data}, which a Space loses at every restart: mount persistent "
                        f"storage at {PERSISTENT_ROOT} and set COPILOT_DATA_DIR={PERSISTENT_ROOT}/copilot.")
    if not settings.secret.get_secret_value():
        warnings.append("COPILOT_SECRET is not set: guests' cookies are signed by a key kept in the data directory; "
                        "set COPILOT_SECRET as a Space secret so that guests keep their work across restarts.")
    return warnings


def owner_notice(user_id: str, settings: Settings) -> str:
    """The deployment warnings, as the page shows them to the Space's owner signed in (nobody else sees them)."""
    owner = os.environ.get("SPACE_AUTHOR_NAME", "")
    warnings = deployment_warnings(settings)
    if not owner or user_id != f"hf:{owner}" or not warnings:
        return ""
    return "**For this Space's owner:**\n" + "\n".join(f"- ⚠️ {w}" for w in warnings)


def start_guest_expiry(settings: Settings, services: Services) -> Any:  # noqa: ANN401 - a RefreshScheduler
    """On an instance with guests: every hour, delete the data of guests idle for ``COPILOT_GUEST_DAYS``."""
    from copilot.tasks.refresh import RefreshScheduler

    if users_mode(settings) == "single":
        return None
    scheduler = RefreshScheduler(1.0, lambda: services.copilot.expire_idle_guests(), first_delay_s=60)
    return scheduler if scheduler.start() else None


def launch(settings: Settings | None = None, **kwargs: Any) -> None:  # noqa: ANN401 - passed to Gradio
    """Build and serve the app on the configured host and port, with the scheduled refresh when enabled and, on
    an instance with guests, the hourly expiry of idle guests' data."""
    settings = settings or get_settings()
    for warning in deployment_warnings(settings):
        logger.warning("%s", warning)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    services = Services(settings)
    demo = build_app(settings, services)
    start_refresh_schedule(settings, services)
    start_guest_expiry(settings, services)
    # A refusal reaches the page through the action wrapper; an unexpected error's text (which may name server
    # paths) stays in the log, and the page shows Gradio's generic error.
    serve(demo, settings, theme=gr.themes.Soft(), show_error=False, **kwargs)
