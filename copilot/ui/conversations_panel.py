"""The Chat tab's conversations panel: the user's kept chats, newest first, to reopen, rename, delete or export.

Each action calls one engine method, scoped to the asking user (another user's conversation id reads as a missing
one). Reopening puts the conversation back into the chat with its answers and their sources, and makes it the
one the next question continues. The export is a Markdown file handed over through Gradio's cache, like the
Write tab's drafts, never a path of the data directory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr

from copilot.conversations import reference_line, thought_line
from copilot.types import Conversation, RetrievedItem
from copilot.ui.actions import action
from copilot.ui.context import AppContext
from copilot.ui.write_tab import safe_stem, scratch_folder

HEADERS = ["id", "title", "questions", "last asked"]


def rows(conversations: list[Conversation]) -> list[list[Any]]:
    return [[c.id, c.title, c.n_turns, (c.updated_at or "")[:16].replace("T", " ")] for c in conversations]


def choices(conversations: list[Conversation]) -> list[tuple[str, str]]:
    return [(f"#{c.id} {c.title}", str(c.id)) for c in conversations]


def turn_markdown(turn: dict[str, Any]) -> str:
    """A reopened answer as the chat showed it: the answer, its numbered sources, what became of its thought."""
    sources = "\n".join(f"- {reference_line(n, item)}" for n, item in enumerate(turn["sources"], start=1))
    thought = turn["thought"]
    return (f"{turn['answer']}\n\n**Sources**\n{sources or '- (no sources)'}\n\n"
            f"_{thought_line(thought['outcome'], thought['thought_id'], thought['reason'])}._")


def history(turns: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The turns as the chatbot's messages."""
    messages = []
    for turn in turns:
        messages += [{"role": "user", "content": turn["question"]},
                     {"role": "assistant", "content": turn_markdown(turn)}]
    return messages


def build() -> dict[str, Any]:
    """The panel's components, laid out where it is called (:func:`connect` gives them their actions)."""
    with gr.Accordion("Conversations", open=True, elem_id="conversations-panel"):
        with gr.Row():
            picker = gr.Dropdown(label="Conversation", choices=[], allow_custom_value=True, scale=4,
                                 elem_id="conversation-picker")
            refresh = gr.Button("↻", size="sm", scale=0, min_width=40, elem_id="conversations-refresh")
        table = gr.Dataframe(headers=HEADERS, label="Your conversations (newest first)", interactive=False,
                             wrap=True, max_height=220, column_widths=["40px", "340px", "84px", "140px"],
                             elem_id="conversations")
        with gr.Row():
            open_ = gr.Button("Open", size="sm", variant="primary", elem_id="conversation-open")
            export = gr.Button("Export Markdown", size="sm", elem_id="conversation-export-button")
            delete = gr.Button("Delete", size="sm", variant="stop", elem_id="conversation-delete")
        with gr.Row():
            title = gr.Textbox(placeholder="New title", show_label=False, scale=4, elem_id="conversation-title")
            rename = gr.Button("Rename", size="sm", scale=1, elem_id="conversation-rename")
        note = gr.Markdown(elem_id="conversation-status")
        download = gr.File(label="Exported conversation", interactive=False, visible=True,
                           elem_id="conversation-export")
    return {"picker": picker, "refresh": refresh, "table": table, "open": open_, "export": export, "delete": delete,
            "title": title, "rename": rename, "note": note, "download": download}


def connect(ctx: AppContext, panel: dict[str, Any], *, chatbot: gr.Chatbot, conversation: gr.State,
            query_id: gr.Number, retrieved: gr.Dataframe,
            source_rows: Callable[[list[RetrievedItem]], list[list[Any]]]) -> tuple[Any, ...]:
    """The panel's actions. ``conversation`` holds the id the next question continues; a reopened conversation's
    last answer fills ``retrieved`` (its rows made by ``source_rows``), so that its sources can be picked and shown
    as after a question. Returns the list's refresh as (function, inputs, outputs), for the page load and after
    each question."""
    act = action(ctx)
    picker, table, note, title, download = (panel[k] for k in ("picker", "table", "note", "title", "download"))

    def listing(user_id: str, **picked: str | None) -> tuple[Any, list[list[Any]]]:
        """The picker's choices (its value too when ``picked`` names it: else the choice stays) and the table."""
        found = ctx.copilot.conversations(user_id)
        return gr.update(choices=choices(found), **picked), rows(found)

    @act
    def list_conversations(user_id: str) -> tuple[Any, list[list[Any]]]:
        """The user's kept conversations, newest first."""
        return listing(user_id)

    @act
    def open_conversation(conversation_id: str | None, user_id: str
                          ) -> tuple[list[dict[str, str]], int, list[list[Any]], int | None, str]:
        """Reopen a conversation in the chat, with its answers' sources; the next question continues it."""
        kept, turns = ctx.copilot.open_conversation(conversation_id, user_id)
        last = turns[-1] if turns else None
        return (history(turns), kept.id, source_rows(last["sources"]) if last else [],
                last["query_id"] if last else None, f"Opened **{kept.title}** ({len(turns)} questions).")

    @act
    def rename_conversation(conversation_id: str | None, new_title: str, user_id: str
                            ) -> tuple[str, Any, list[list[Any]]]:
        """Give a conversation a new title."""
        kept = ctx.copilot.rename_conversation(conversation_id, new_title, user_id)
        return (f"Renamed to **{kept.title}**.", *listing(user_id, value=str(kept.id)))

    @act
    def delete_conversation(conversation_id: str | None, current: int | None, shown: list[dict] | None,
                            user_id: str) -> tuple[str, Any, list[list[Any]], list[dict], int | None]:
        """Delete a conversation (its answers' thoughts stay); the chat is cleared when it was the open one."""
        ctx.copilot.delete_conversation(conversation_id, user_id)
        gone = current is not None and str(current) == str(conversation_id).strip()
        return ("Conversation deleted.", *listing(user_id, value=None), [] if gone else list(shown or []),
                None if gone else current)

    @act
    def export_conversation(conversation_id: str | None, user_id: str) -> str:
        """The conversation as a Markdown file: answers, their numbered references, each thought's outcome."""
        kept, text = ctx.copilot.export_conversation(conversation_id, user_id)
        path = scratch_folder() / f"{safe_stem(kept.title, 'conversation')}.md"
        path.write_text(text, encoding="utf-8")
        return str(path)

    listed = [picker, table]
    panel["refresh"].click(list_conversations, None, listed, api_name="list_conversations")
    panel["open"].click(open_conversation, [picker], [chatbot, conversation, retrieved, query_id, note],
                api_name="open_conversation")
    panel["rename"].click(rename_conversation, [picker, title], [note, *listed], api_name="rename_conversation")
    panel["delete"].click(delete_conversation, [picker, conversation, chatbot], [note, *listed, chatbot, conversation],
                 api_name="delete_conversation")
    panel["export"].click(export_conversation, [picker], [download], api_name="export_conversation")
    return list_conversations, [], listed
