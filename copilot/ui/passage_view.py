"""The cited passage, shown in place beside the chat: pick a source of the last answer (click its row in the
retrieved table, or type its number [n]) and see its PDF page with the passage highlighted, with its section
and page. A thought has no page: its text and what it was built from are shown instead.

Gradio cannot tell which ``[n]`` inside a chat message was clicked, so the table's row (``.select``) and the
number box are the two ways to choose.
"""

from __future__ import annotations

import io
from typing import Any

import gradio as gr
from PIL import Image

from copilot.types import Passage
from copilot.ui.actions import action
from copilot.ui.context import AppContext

NO_PAGE = "A recalled memory is something you said, not a source: it has no page."
PICK_FIRST = "Ask a question, then pick one of its sources: click its row in the table, or type its number."


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
    """The picker and the view, placed under the retrieved table of the Chat tab."""
    act = action(ctx)
    with gr.Group(elem_id="passage-view"):
        with gr.Row():
            number = gr.Number(label="Show source [n]", precision=0, minimum=1, scale=3, elem_id="source-n")
            show = gr.Button("Show source", scale=1, elem_id="show-source")
        text = gr.Markdown(PICK_FIRST, elem_id="passage-text")
        image = gr.Image(label="Cited passage", type="pil", format="png", interactive=False, show_label=False,
                         elem_id="passage-image", visible=True)

    @act
    def source_page(n: float | None, table: Any, user_id: str) -> tuple[Any, str]:  # noqa: ANN401 - Dataframe
        """Source ``n`` of the last answer on its PDF page, highlighted, with its section and page."""
        try:
            row = _row(table, int(n)) if n is not None else None
        except (ValueError, OverflowError):  # NaN or infinity
            row = None
        if row is None:
            raise gr.Error(PICK_FIRST)
        kind, item_id = row[1], int(row[2]) if str(row[2]).isascii() and str(row[2]).isdigit() else None
        if item_id is None:
            raise gr.Error(PICK_FIRST)
        if kind == "thought":
            return None, thought_markdown(int(n), ctx.copilot.thought(item_id, user_id))
        if kind != "chunk":
            return None, NO_PAGE
        passage = ctx.copilot.source_page(user_id, item_id)
        return Image.open(io.BytesIO(passage.png)), passage_markdown(int(n), passage)

    def picked(evt: gr.SelectData) -> int:
        """The number of the clicked row (any cell of it); a recalled memory's row has none."""
        row = evt.row_value or []
        if not row or not str(row[0]).isdigit():
            raise gr.Error(NO_PAGE)
        return int(row[0])

    show.click(source_page, [number, retrieved], [image, text], api_name="source_page")
    number.submit(source_page, [number, retrieved], [image, text], api_visibility="private")
    retrieved.select(picked, None, [number], api_visibility="private").success(
        source_page, [number, retrieved], [image, text], api_visibility="private")
    return {"number": number, "image": image, "text": text}
