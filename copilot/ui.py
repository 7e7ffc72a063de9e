"""The Gradio web app: a thin layer over the engine. Every event has an ``api_name`` for ``gradio_client``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import gradio as gr

from copilot.chat import stream_reply
from copilot.config import Settings, get_settings
from copilot.llm import LLMError, get_llm

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
CSS_PATH = STATIC_DIR / "style.css"

INTRO = (
    "## Paper Copilot\n"
    "An academic copilot: chat about papers, draft abstracts and related work, and build a memory of "
    "*thoughts* from past answers."
)


def describe_model(settings: Settings) -> dict:
    """The configured backend and model, without loading it."""
    backend = settings.resolved_backend()
    model = settings.llm_model or {
        "local": "SmolLM2-135M-Instruct (embedded, CPU)",
        "openai": "default OpenAI-compatible model",
        "hf": "default Hugging Face Inference model",
    }[backend]
    return {"backend": backend, "model": model, "data_dir": str(settings.data_dir.resolve())}


def _model_line(settings: Settings) -> str:
    info = describe_model(settings)
    return f"Model: **{info['model']}** via `{info['backend']}` backend."


def make_chat_handler(settings: Settings):  # noqa: ANN201 - a Gradio generator callback
    """The chat callback: stream the reply into the history; a failing LLM becomes a readable error."""

    def respond(message: str, history: list[dict] | None) -> Iterator[tuple[str, list[dict]]]:
        history = list(history or [])
        message = (message or "").strip()
        if not message:
            gr.Info("Type a message first.")
            yield "", history
            return
        shown = [*history, {"role": "user", "content": message}, {"role": "assistant", "content": ""}]
        yield "", shown
        try:
            llm = get_llm(settings)
            for text in stream_reply(
                llm, message, history, max_tokens=settings.max_answer_tokens, temperature=settings.temperature
            ):
                shown[-1] = {"role": "assistant", "content": text}
                yield "", shown
        except LLMError as exc:
            # Keep the user's words in the box so nothing typed is lost.
            raise gr.Error(str(exc)) from exc
        if not shown[-1]["content"].strip():
            shown[-1] = {"role": "assistant", "content": "(The model returned no text; try rephrasing.)"}
            yield "", shown

    return respond


def _warm_up(settings: Settings) -> None:
    """Load the model in the background so the first message does not wait for it."""
    try:
        get_llm(settings)
    except LLMError:
        pass  # reported to the user on their first message


def build_app(settings: Settings | None = None) -> gr.Blocks:
    """The whole web app for ``settings`` (default: the environment's)."""
    settings = settings or get_settings()
    threading.Thread(target=_warm_up, args=(settings,), daemon=True).start()
    with gr.Blocks(title="Paper Copilot") as demo:
        gr.Markdown(INTRO, elem_id="intro")
        gr.Markdown(_model_line(settings), elem_id="model-line")
        with gr.Tab("Chat", id="chat"):
            chatbot = gr.Chatbot(label="Conversation", height=460, elem_id="chatbot")
            with gr.Row():
                message = gr.Textbox(
                    placeholder="Ask about a paper or a research topic…",
                    show_label=False,
                    scale=8,
                    elem_id="message",
                    autofocus=True,
                )
                send = gr.Button("Send", variant="primary", scale=1, elem_id="send")
            clear = gr.Button("Clear conversation", size="sm", elem_id="clear")
        respond = make_chat_handler(settings)
        message.submit(respond, [message, chatbot], [message, chatbot], api_name="chat")
        send.click(respond, [message, chatbot], [message, chatbot], api_visibility="private")
        clear.click(lambda: ("", []), None, [message, chatbot], api_name="clear")

        def model_info() -> dict:
            """Which LLM backend and model answer, and where this instance keeps its data."""
            return describe_model(settings)

        gr.api(model_info, api_name="model_info")
    return demo


def launch(settings: Settings | None = None, **kwargs) -> None:  # noqa: ANN003 - passed to Gradio
    """Build and serve the app on the configured host and port."""
    settings = settings or get_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    demo = build_app(settings)
    demo.queue(default_concurrency_limit=2).launch(
        server_name=settings.host,
        server_port=settings.port,
        css_paths=[CSS_PATH] if CSS_PATH.exists() else None,
        theme=gr.themes.Soft(),
        show_error=True,
        **kwargs,
    )
