"""Kept conversations read back: a turn's sources as they stand now, its thought's outcome, and the Markdown export.

A turn's answered query keeps its sources by kind and id, in the order the answer numbered them. Reading a
conversation back resolves each one again under the reader's visibility: a paper removed since (or a thought
deleted) is still listed under its number, marked as gone, so the answer's ``[n]`` keep pointing at the right line.
"""

from __future__ import annotations

from typing import Any

from ingest.models import abs_url

from copilot.storage import Store
from copilot.types import Conversation, RetrievedItem

GONE = "(removed since)"


def title_from(question: str, limit: int) -> str:
    """A conversation's title from its first question: one line, at most ``limit`` characters, cut at a word."""
    text = " ".join((question or "").split())
    if len(text) <= limit:
        return text or "Untitled"
    cut = text[: limit - 1].rsplit(" ", 1)[0] or text[: limit - 1]
    return cut.rstrip(" ,;:") + "…"


def sources_of(store: Store, retrieved: list[dict[str, Any]], user_id: str) -> list[RetrievedItem]:
    """An answer's sources (the query's ``retrieved`` records, in order) as retrieved items, read again."""
    items = []
    for record in retrieved:
        kind, item_id = record.get("kind"), int(record.get("id") or 0)
        score = float(record.get("score") or 0.0)
        if kind == "thought":
            thought = store.thoughts.visible(item_id, user_id)
            items.append(RetrievedItem("thought", item_id, thought.text if thought else GONE, score,
                                       depth=int(record.get("depth") or 1),
                                       confidence=thought.confidence if thought else record.get("confidence")))
            continue
        chunk = store.chunks.visible(item_id, user_id)
        if chunk is None:
            items.append(RetrievedItem("chunk", item_id, GONE, score, paper_id=record.get("paper_id")))
        else:
            items.append(RetrievedItem("chunk", item_id, chunk.text, score, paper_id=chunk.paper_id,
                                       section=chunk.section, page_start=chunk.page_start, page_end=chunk.page_end,
                                       paper_title=chunk.paper_title))
    return items


def reference_line(n: int, item: RetrievedItem) -> str:
    """One numbered reference in Markdown: a thought by its id, a chunk by paper, section and pages (with its
    arXiv page when it has one)."""
    if item.kind == "thought":
        conf = f", confidence {item.confidence:.2f}" if item.confidence is not None else ""
        return f"[{n}] Thought #{item.id} (depth {item.depth}{conf})"
    if item.text == GONE and item.section is None:
        return f"[{n}] chunk #{item.id} of {item.paper_id or 'a paper'} {GONE}"
    pages = f"p. {item.page_start}" if item.page_start == item.page_end else f"pp. {item.page_start}-{item.page_end}"
    paper = item.paper_id or ""
    link = f" [arXiv:{paper}]({abs_url(paper)})" if paper and not paper.startswith("pdf-") else ""
    return f"[{n}] *{item.paper_title or paper}*, {item.section or 'body'}, {pages}{link}"


def thought_line(outcome: str | None, thought_id: int | None, reason: str | None) -> str:
    """What became of a turn's thought, in one line."""
    if outcome in ("added", "merged"):
        into = "added as" if outcome == "added" else "merged into"
        return f"Thought: {into} #{thought_id}" + (f" ({reason})" if outcome == "merged" and reason else "")
    if outcome == "pending" or not outcome:
        return "Thought: still being written"
    return f"Thought: dropped ({reason or 'no reason'})"


def export_markdown(conversation: Conversation, turns: list[dict[str, Any]]) -> str:
    """The conversation as Markdown: each question, its answer, its numbered references and its thought's outcome
    (``turns`` as :meth:`copilot.engine.Copilot.open_conversation` gives them)."""
    lines = [f"# {conversation.title}", "",
             f"*{len(turns)} question{'s' if len(turns) != 1 else ''}, {conversation.created_at or ''} – "
             f"{conversation.updated_at or ''} (UTC)*", ""]
    for n, turn in enumerate(turns, start=1):
        lines += [f"## {n}. {turn['question']}", "", turn["answer"] or "_(no answer)_", ""]
        if turn["sources"]:
            lines += ["**References**", ""]
            lines += [f"- {reference_line(i, item)}" for i, item in enumerate(turn["sources"], start=1)]
            lines.append("")
        thought = turn["thought"]
        lines += [f"_{thought_line(thought['outcome'], thought['thought_id'], thought['reason'])}._", ""]
    return "\n".join(lines).rstrip() + "\n"
