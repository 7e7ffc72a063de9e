"""Chat tab: cited answers over the library or a chosen subset, feedback, and the retrieved items."""

from __future__ import annotations

import html
from collections.abc import Iterator
from typing import Any

import gradio as gr

from copilot.conversations import reference_line
from copilot.engine import AskResult
from copilot.errors import SHOWN
from copilot.grounding import quoted
from copilot.limits import check_question
from copilot.types import AnswerSources, QueuePosition, RetrievedItem
from copilot.ui import conversations_panel, passage_view
from copilot.ui.actions import action
from copilot.ui.context import AppContext, page_error
from copilot.ui.users import answered_by, visitor_token

RETRIEVED_HEADERS = ["#", "kind", "id", "depth", "conf.", "score", "recalled by", "from", "text"]
# Fixed widths keep short columns readable in the narrow side panel; the table scrolls sideways for the rest.
RETRIEVED_WIDTHS = ["40px", "70px", "56px", "64px", "64px", "68px", "96px", "220px", "360px"]
THOUGHT_WAIT_S = 90.0
# Chat handlers that may run at once. A waiting answer holds a server thread but no CPU: it waits in the LLM
# scheduler's line (answers first, users in turn) and shows its sources and place meanwhile, which Gradio's
# own queue (default limit 2) could not. Thought-status checks only poll the database.
CHAT_CONCURRENCY = 32
# Above the streaming draft: it is the model's text, not yet checked (a declined draft never stays on the page).
DRAFT_LABEL = "*Draft — unchecked until it is done, then checked against the sources and replaced.*"


def recalled_by(memory: dict[str, Any]) -> str:
    """How a memory was recalled, with the sentence of the message that called for it when it was one of several."""
    cue = memory.get("cue")
    return f"{memory['recalled_by']}, by {quoted(cue, 80)}" if cue else memory["recalled_by"]


def retrieved_rows(items: list[RetrievedItem], provenance: dict[int, str]) -> list[list[Any]]:
    """The table of retrieved items beside an answer: what it is, how deep, how sure, how similar."""
    rows = []
    for n, item in enumerate(items, start=1):
        where = (item.paper_title or item.paper_id or "") if item.kind == "chunk" else provenance.get(item.id, "")
        rows.append([n, item.kind, item.id, item.depth, None if item.confidence is None else round(item.confidence, 3),
                     round(item.score, 3), item.recalled_by, where, item.text[:160]])
    return rows


def _sources_markdown(items: list[RetrievedItem]) -> str:
    lines = [reference_line(n, item) for n, item in enumerate(items, start=1)]
    sources = "\n".join(f"- {line}" for line in lines) if lines else "- (no sources: the library is empty)"
    return f"**Sources**\n{sources}"


def _answer_markdown(answer: str, items: list[RetrievedItem]) -> str:
    """The answer above its source list; the list is shown from the moment retrieval is done. Each ``[n]`` opens
    its passage."""
    return passage_view.linked(f"{answer}\n\n{_sources_markdown(items)}", items)


def queue_text(position: QueuePosition) -> str:
    """A waiting answer's place in line, in words."""
    if position.ahead == 0:
        who = "yours is next"
    else:
        who = f"{position.ahead} {'answer' if position.ahead == 1 else 'answers'} before yours"
    return f"_Waiting for the model: {who} (about {max(1, round(position.estimate_s))} s)…_"


def thought_text(outcome: dict[str, Any] | None) -> str:
    if not outcome:
        return "Thought: still being written…"
    kind = outcome.get("thought_outcome") or outcome.get("outcome")
    if kind == "added":
        return f"Thought: **added** #{outcome['thought_id']} — see the Dashboard."
    if kind == "merged":
        return f"Thought: **merged** into #{outcome['thought_id']} ({outcome.get('thought_reason') or ''})."
    if kind == "pending":
        return "Thought: still being written…"
    return f"Thought: dropped ({outcome.get('thought_reason') or outcome.get('reason') or 'no reason'})."


def build(ctx: AppContext) -> dict[str, Any]:
    act = action(ctx)
    with gr.Tab("Chat", id="chat"):
        with gr.Row():
            with gr.Column(scale=3):
                chatbot = gr.Chatbot(label="Conversation", height=480, elem_id="chatbot",
                                     placeholder="**Ask about your papers below.** No papers? Add them in Library.")
                with gr.Row():
                    message = gr.Textbox(placeholder="Ask about your papers…", show_label=False, scale=8,
                                         elem_id="message", autofocus=True)
                    send = gr.Button("Send", variant="primary", scale=1, elem_id="send")
                with gr.Row():  # words, not emoji: a browser without an emoji font shows empty boxes
                    up = gr.Button("Helpful", size="sm", elem_id="thumbs-up")
                    down = gr.Button("Not helpful", size="sm", elem_id="thumbs-down")
                    clear = gr.Button("Clear conversation", size="sm", elem_id="clear")
                status = gr.Markdown(elem_id="chat-status")
                query_id = gr.Number(label="Answer id", precision=0, interactive=False, visible=False,
                                     elem_id="query-id")
                panel = conversations_panel.build()  # the kept conversations, to reopen, rename, delete, export
            with gr.Column(scale=2):
                conversation = gr.State(None)  # the kept conversation the next question continues
                scope = gr.Dropdown(label="Papers (empty: the whole library)", choices=[], multiselect=True,
                                    allow_custom_value=True, elem_id="chat-scope")
                use_public = gr.Checkbox(label="Also use the public thought pool", value=False)
                share = gr.Checkbox(label="Share my new thoughts in the public pool", value=False)
                retrieved = gr.Dataframe(headers=RETRIEVED_HEADERS, label="Retrieved for the last answer",
                                         interactive=False, wrap=True, column_widths=RETRIEVED_WIDTHS,
                                         max_chars=160, elem_id="retrieved", render=False)
                # The cited passage beside the answer, above the table of everything retrieved.
                passage = passage_view.build(ctx, retrieved)
                retrieved.render()
        listing = conversations_panel.connect(ctx, panel, chatbot=chatbot, conversation=conversation,
                                              query_id=query_id, retrieved=retrieved,
                                              source_rows=lambda items: _rows(items, []))

    @act
    def chat(message: str, history: list[dict] | None, scope: list[str] | None, use_public: bool, share: bool,
             user_id: str, conversation: int | None = None, token: gr.OAuthToken | None = None
             ) -> Iterator[tuple[str, list[dict], list[list[Any]], int | None, str, int | None]]:
        """Ask about your library: a streamed answer with numbered, followable sources. A question after others in
        the chat continues their kept conversation; into an empty chat, it starts a new one. A signed-in visitor
        of a Space is answered by its remote model under their own account (:func:`visitor_token`)."""
        history = list(history or [])
        conversation = conversation if history else None
        if not (message or "").strip():
            gr.Info("Type a question first.")
            yield "", history, [], None, "", conversation
            return
        # Before any model is loaded or called: an unreadable or oversized question costs nothing.
        message = check_question(message, ctx.settings)
        ctx.admit(user_id)
        if not scope and not ctx.copilot.visible_paper_ids(user_id, None):
            gr.Warning("Your library is empty: add papers in the Library tab for answers with sources.")
        shown = [*history, {"role": "user", "content": message}, {"role": "assistant", "content": ""}]
        yield "", shown, [], None, "", conversation
        result: AskResult | None = None
        items: list[RetrievedItem] = []
        rows: list[list[Any]] = []
        # Sources first (retrieval takes milliseconds), then the place in line, then the streaming answer. A
        # refusal on the way (the model's line is full, a limit is reached) is written where the answer would have
        # been, under the question, and then raised as the call's error.
        visitor = visitor_token(user_id, token) if ctx.mode == "hf" else None
        remote = ctx.copilot.visitor_model(visitor) if visitor else None
        stream = ctx.copilot.chat_stream(user_id, message, paper_ids=list(scope) if scope else None,
                                         include_public=use_public, share_thought=share, conversation_id=conversation,
                                         llm=remote)
        try:
            for update in stream:
                if isinstance(update, AskResult):
                    result = update
                    continue
                if isinstance(update, AnswerSources):
                    items = update.items
                    rows = _rows(items, update.memories)
                    text, note = "", "Sources found; the answer comes next…"
                elif isinstance(update, QueuePosition):
                    text, note = queue_text(update), queue_text(update)
                else:  # the draft as it streams: marked as such until the check replaces it
                    text = f"{DRAFT_LABEL}\n\n{update}"
                    note = "Writing; the answer is checked against the sources next…"
                shown[-1] = {"role": "assistant", "content": _answer_markdown(text, items)}
                yield "", shown, rows, None, note, conversation
        except SHOWN as exc:
            shown[-1] = {"role": "assistant", "content": f"⚠️ *Not answered: {page_error(exc).message}*"}
            yield "", shown, rows, None, "", conversation
            raise
        assert result is not None
        if result.fallback:
            gr.Warning(html.escape(f"The remote model did not answer ({result.fallback}); this site's own model did."))
        by = answered_by(result, remote)
        checked = result.to_markdown() + (f"\n\n{by}" if by else "")
        shown[-1] = {"role": "assistant", "content": _answer_markdown(checked, result.sources)}
        yield "", shown, rows, result.query_id, "Thought: being written in the background…", result.conversation_id

    def _rows(items: list[RetrievedItem], memories: list[dict[str, Any]]) -> list[list[Any]]:
        rows = retrieved_rows(items, ctx.copilot.thought_origins([i.id for i in items if i.kind == "thought"]))
        rows += [["–", "memory", m["id"], None, None, m["score"], recalled_by(m), "you said", m["text"][:160]]
                 for m in memories]
        return rows

    @act
    def thought_status(query_id: float | None, user_id: str) -> str:
        """What became of the thought of answer ``query_id`` (waits briefly while it is being written)."""
        if query_id is None:
            return ""
        return thought_text(ctx.copilot.wait_for_thought(int(query_id), user_id, THOUGHT_WAIT_S))

    def feedback(query_id: float | None, value: int, user_id: str) -> str:
        if query_id is None:
            raise gr.Error("Ask a question first: feedback applies to the last answer.")
        # The answer's own thought must be written first, or the feedback could not move its confidence.
        result = ctx.copilot.rate(int(query_id), value, user_id, THOUGHT_WAIT_S)
        word = "Thanks" if value > 0 else "Noted"
        before = result["before"]
        if result["thought_id"] is None or result["confidence"] is None:
            return f"{word}: feedback saved (this answer made no thought)."
        return (f"{word}: thought #{result['thought_id']} confidence {before:.2f} → {result['confidence']:.2f}."
                if before is not None else f"{word}: thought #{result['thought_id']} confidence now "
                f"{result['confidence']:.2f}.")

    @act
    def feedback_up(query_id: float | None, user_id: str) -> str:
        """Thumbs up on an answer: the thought made from it gains confidence."""
        return feedback(query_id, 1, user_id)

    @act
    def feedback_down(query_id: float | None, user_id: str) -> str:
        """Thumbs down on an answer: the thought made from it loses confidence (and may stop being used)."""
        return feedback(query_id, -1, user_id)

    inputs = [message, chatbot, scope, use_public, share, conversation]
    outputs = [message, chatbot, retrieved, query_id, status, conversation]
    shown_passage = [passage["image"], passage["text"], passage["number"]]
    chat_evt = message.submit(chat, inputs, outputs, api_name="chat", concurrency_limit=CHAT_CONCURRENCY,
                              concurrency_id="chat")
    chat_evt.then(*listing, api_visibility="private")
    chat_evt.then(passage["follow"], [chatbot], shown_passage[:2], api_visibility="private")
    chat_evt.then(thought_status, [query_id], [status], api_name="thought_status",
                  concurrency_limit=CHAT_CONCURRENCY, concurrency_id="thought_status")
    sent = send.click(chat, inputs, outputs, api_visibility="private", concurrency_limit=CHAT_CONCURRENCY,
                      concurrency_id="chat")
    sent.then(*listing, api_visibility="private").then(
        thought_status, [query_id], [status], api_visibility="private", concurrency_limit=CHAT_CONCURRENCY,
        concurrency_id="thought_status")
    sent.then(passage["follow"], [chatbot], shown_passage[:2], api_visibility="private")
    up.click(feedback_up, [query_id], [status], api_name="feedback_up")
    down.click(feedback_down, [query_id], [status], api_name="feedback_down")
    clear.click(lambda: ("", [], [], None, "", None), None, outputs, api_name="clear").then(
        passage["cleared"], None, shown_passage, api_visibility="private", queue=False)
    return {"scope": scope, "load": [listing]}
