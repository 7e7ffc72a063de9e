"""The cited passage, shown beside the chat: click an ``[n]`` in an answer (or a row of the retrieved table, or type
a number) and see that source's PDF page with the passage highlighted, with its section and page. A thought has
no page: its text and what it was built from are shown instead. The view follows the chat: a finished answer shows
the source of its first supporting quote (a declined one, its nearest passage), and clearing the chat clears it.

Each ``[n]`` of an answer is a link to ``#cite-<n>-<kind>-<id>`` (:func:`linked`), so it names its source even in
an older answer. Gradio cannot tell which link inside a chat message was clicked, so the page's script
(``static/page.js``) puts the link's reference into a hidden box and presses its hidden button.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import Any

import gradio as gr
from PIL import Image

from copilot.types import Passage, RetrievedItem
from copilot.ui.actions import action
from copilot.ui.context import AppContext

NO_PAGE = "A recalled memory is something you said, not a source: it has no page."
PICK_FIRST = "Ask a question, then pick one of its sources: click an [n] in the answer, or a row of the table below."
CITE = "#cite-"
_MARKER = re.compile(r"(?<![\\\[])\[(\d{1,3})\](?![(\]])")
_REF = re.compile(r"^(\d{1,3})-(chunk|thought)-(\d{1,12})$")
# The first link after the heading of an answer's quotes (or a declined question's nearest passages), before its
# source list.
_FIRST_QUOTE = re.compile(r"\*\*(?:Supporting quotes|Closest passages|Nearest passages)\*\*"
                          r"(?:(?!\*\*Sources\*\*)[\s\S])*?\(#cite-([^)\s]+)\)")


def cite_ref(n: int, item: RetrievedItem) -> str:
    """What an ``[n]`` link names: its number, and its source's kind and id."""
    return f"{n}-{item.kind}-{item.id}"


def linked(markdown: str, items: Sequence[RetrievedItem]) -> str:
    """``markdown`` with each ``[n]`` of a source among ``items`` made a link that opens its passage."""
    def link(match: re.Match) -> str:
        n = int(match.group(1))
        if not 0 < n <= len(items) or items[n - 1].kind not in ("chunk", "thought"):
            return match.group(0)
        return f"[[{n}]]({CITE}{cite_ref(n, items[n - 1])})"  # a matched pair of brackets may be a link's text
    return _MARKER.sub(link, markdown)


def first_quoted(markdown: str) -> str | None:
    """The reference of the source of an answer's first supporting quote (None when it has none)."""
    found = _FIRST_QUOTE.search(markdown or "")
    return found.group(1) if found else None


def _pages(passage: Passage) -> str:
    pages = passage.pages
    return f"p. {pages[0]}" if len(pages) == 1 else f"pp. {pages[0]}-{pages[-1]}"


def passage_markdown(n: int, passage: Passage) -> str:
    """The passage's heading (paper, section, page) and its text, as Markdown."""
    located = (f"{round(100 * passage.coverage)}% of its words highlighted" if passage.coverage
               else "not found on the page: the page it was read from is shown")
    return (f"**[{n}] {passage.paper_title or passage.paper_id}**  \nSection: {passage.section or 'body'} · "
            f"{_pages(passage)} · {located}\n\n> {' '.join(passage.text.split())}")


def thought_markdown(n: int, thought: dict[str, Any]) -> str:
    """A thought of the answer's sources: its text and the sources it was built from."""
    lines = [f"**[{n}] Thought #{thought['id']}** (depth {thought['depth']}, confidence "
             f"{thought['confidence']:.2f}): a finding of an earlier answer, with no page of its own.",
             "", f"> {thought['text']}", "", "Built from:"]
    for source in thought["provenance"]:
        if source["kind"] == "chunk" and "paper_id" in source:
            lines.append(f"- chunk #{source['id']}: *{source['title'] or source['paper_id']}*, "
                         f"{source['section'] or 'body'}, p. {source['page']}")
        else:
            lines.append(f"- {source['kind']} #{source['id']}: {source['text'][:160]}")
    return "\n".join(lines)


def _row(table: Any, n: int) -> list[Any] | None:  # noqa: ANN401 - a Dataframe's value (a frame or a dict)
    """Row ``n`` ("#" column) of the retrieved table as Gradio hands it over."""
    if table is None:
        return None
    if hasattr(table, "values") and hasattr(table, "columns"):  # a pandas DataFrame
        rows = table.values.tolist()
    elif isinstance(table, dict):
        rows = table.get("data") or []
    else:
        rows = list(table)
    return next((r for r in rows if r and str(r[0]) == str(n)), None)


def build(ctx: AppContext, retrieved: gr.Dataframe) -> dict[str, Any]:
    """The view, placed beside the chat; the number box and the table's rows also choose a source."""
    act = action(ctx)
    with gr.Group(elem_id="passage-view"):
        text = gr.Markdown(PICK_FIRST, elem_id="passage-text")
        image = gr.Image(label="Cited passage", type="pil", format="png", interactive=False, show_label=False,
                         elem_id="passage-image", visible=True)
        with gr.Row():
            number = gr.Number(label="Show source [n]", precision=0, minimum=1, scale=3, elem_id="source-n")
            show = gr.Button("Show source", scale=1, elem_id="show-source")
        # Filled by the page's script when an [n] link is clicked (hidden by the style sheet, not by Gradio, which
        # would leave them out of the page).
        ref = gr.Textbox(elem_id="source-ref", elem_classes=["page-hidden"], show_label=False, container=False)
        show_ref = gr.Button("Show", elem_id="show-ref", elem_classes=["page-hidden"])

    def shown(n: int, kind: str, item_id: int, user_id: str) -> tuple[Any, str]:  # noqa: ANN401 - an image
        if kind == "thought":
            return None, thought_markdown(n, ctx.copilot.thought(item_id, user_id))
        if kind != "chunk":
            return None, NO_PAGE
        ctx.admit(user_id, "page")  # each render reads and draws a PDF page
        passage = ctx.copilot.source_page(user_id, item_id)
        return Image.open(io.BytesIO(passage.png)), passage_markdown(n, passage)

    def from_table(n: float | None, table: Any, user_id: str) -> tuple[Any, str]:  # noqa: ANN401 - Dataframe
        """Row ``n`` of the retrieved table, shown (the number box's and a clicked row's way in)."""
        try:
            row = _row(table, int(n)) if n is not None else None
        except (ValueError, OverflowError):  # NaN or infinity
            row = None
        if row is None:
            raise gr.Error(PICK_FIRST)
        kind, item_id = row[1], int(row[2]) if str(row[2]).isascii() and str(row[2]).isdigit() else None
        if item_id is None:
            raise gr.Error(PICK_FIRST)
        return shown(int(n), kind, item_id, user_id)

    def from_ref(ref: str | None, user_id: str) -> tuple[Any, str] | None:  # noqa: ANN401 - an image
        """The source a link's reference names ("3-chunk-120"), shown; None when it names none."""
        found = _REF.match((ref or "").strip())
        return shown(int(found.group(1)), found.group(2), int(found.group(3)), user_id) if found else None

    @act
    def source_page(n: float | None, table: Any, user_id: str) -> tuple[Any, str]:  # noqa: ANN401 - Dataframe
        """Source ``n`` of the last answer on its PDF page, highlighted, with its section and page."""
        return from_table(n, table, user_id)

    @act
    def cited(ref: str, user_id: str) -> tuple[Any, str]:  # noqa: ANN401 - an image
        """The source an ``[n]`` link names ("3-chunk-120"), as :func:`source_page` shows it."""
        view = from_ref(ref, user_id)
        if view is None:
            raise gr.Error(PICK_FIRST)
        return view

    @act
    def picked(table: Any, evt: gr.SelectData, user_id: str) -> tuple[Any, str, int]:  # noqa: ANN401
        """The clicked row's source (any cell of it); a recalled memory's row has none."""
        row = evt.row_value or []
        if not row or not str(row[0]).isdigit():
            raise gr.Error(NO_PAGE)
        return (*from_table(int(row[0]), table, user_id), int(row[0]))

    @act
    def follow(history: list[dict] | None, user_id: str) -> tuple[Any, str]:  # noqa: ANN401 - an image
        """After an answer: the source of its first supporting quote, or the view emptied."""
        last = next((m for m in reversed(history or []) if isinstance(m, dict) and m.get("role") == "assistant"),
                    None)
        content = last.get("content") if last else ""
        return from_ref(first_quoted(content if isinstance(content, str) else ""), user_id) or (None, PICK_FIRST)

    show.click(source_page, [number, retrieved], [image, text], api_name="source_page")
    number.submit(source_page, [number, retrieved], [image, text], api_visibility="private")
    show_ref.click(cited, [ref], [image, text], api_visibility="private")
    retrieved.select(picked, [retrieved], [image, text, number], api_visibility="private")
    return {"number": number, "image": image, "text": text, "follow": follow,
            "cleared": lambda: (None, PICK_FIRST, None)}
