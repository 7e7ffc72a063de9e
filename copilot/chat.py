"""Plain chat with the configured LLM: the conversation so far, trimmed to fit, and a streamed reply."""

from __future__ import annotations

from collections.abc import Iterator

from copilot import prompts
from copilot.llm import ChatModel, Message

MAX_HISTORY_TURNS = 6


def history_messages(history: list[dict], max_turns: int = MAX_HISTORY_TURNS) -> list[Message]:
    """The last ``max_turns`` user/assistant messages of a Gradio ``messages`` history, as plain text."""
    kept: list[Message] = []
    for item in history[-max_turns:]:
        role = item.get("role")
        content = item.get("content")
        if isinstance(content, list):  # Gradio 6 may hand content as a list of typed parts
            content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
        if role in ("user", "assistant") and isinstance(content, str) and content.strip():
            kept.append({"role": role, "content": content})
    return kept


def build_messages(message: str, history: list[dict] | None = None) -> list[Message]:
    return [
        {"role": "system", "content": prompts.CHAT_SYSTEM},
        *history_messages(history or []),
        {"role": "user", "content": message},
    ]


def stream_reply(
    llm: ChatModel, message: str, history: list[dict] | None = None, *, max_tokens: int = 384,
    temperature: float = 0.2,
) -> Iterator[str]:
    """The reply so far, growing with each generated piece (what a chat window shows while streaming)."""
    text = ""
    for piece in llm.stream(build_messages(message, history), max_tokens=max_tokens, temperature=temperature):
        text += piece
        yield text
