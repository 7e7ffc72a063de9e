"""The Library tab's Zotero import: connect a Zotero library (the web API with a key, or Zotero 7's local API) and
sync it, one result line per item taken.

The rule lives in :meth:`copilot.engine.Copilot.sync_zotero`; this panel shows its report. The key is kept sealed
with the instance secret and never shown again; *Disconnect* deletes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr

from copilot.ui.actions import action
from copilot.ui.context import AppContext

SYNC_HEADERS = ["item", "title", "result", "paper", "details"]
SYNC_WIDTHS = ["12%", "33%", "13%", "12%", "30%"]


def sync_summary(report: dict[str, Any]) -> str:
    text = (f"**Zotero synced:** {report['added']} added, {report['already']} already in the library, "
            f"{report['metadata_only']} metadata only (no arXiv id, no stored PDF), {report['unchanged']} unchanged")
    if report["failed"]:
        text += f", {report['failed']} failed (tried again at the next sync)"
    if report["left"]:
        text += ". The limits of one sync were reached: sync again for the rest"
    return text + "."


def build(ctx: AppContext, papers: gr.Dataframe, rows: Callable[[str], list[list[Any]]]) -> dict[str, Any]:
    """Lay out the panel inside the Library tab; ``rows(user_id)`` is the library table."""
    act = action(ctx)
    with gr.Accordion("Import from Zotero", open=False):
        gr.Markdown("Items with an arXiv id come from arXiv, items with a stored PDF are uploaded with the usual "
                    "checks, others are listed as metadata only. A second sync takes only what is new or changed. "
                    "Your user id and a read-only key are on zotero.org/settings/keys; the key is kept encrypted.")
        with gr.Row():
            library_id = gr.Textbox(label="Zotero user (or group) id", scale=2, elem_id="zotero-library")
            api_key = gr.Textbox(label="API key", type="password", scale=3, elem_id="zotero-key")
            collection = gr.Textbox(label="Only this collection (key, optional)", scale=2, elem_id="zotero-collection")
        with gr.Row():
            group = gr.Checkbox(label="A group library", scale=1)
            local = gr.Checkbox(label="Zotero 7 on this machine (local API)", scale=2, visible=ctx.single_user)
            sync_btn = gr.Button("Connect and sync", variant="primary", scale=2, elem_id="zotero-sync")
            disconnect_btn = gr.Button("Disconnect", scale=1, elem_id="zotero-disconnect")
        summary = gr.Markdown(elem_id="zotero-summary")
        result = gr.Dataframe(headers=SYNC_HEADERS, interactive=False, wrap=True, column_widths=SYNC_WIDTHS,
                              label="Sync result", elem_id="zotero-result")

    @act
    def sync_zotero(library: str, key: str, only: str, is_group: bool, is_local: bool, user_id: str,
                    progress: gr.Progress = gr.Progress()) -> tuple[str, list[list[Any]], list[list[Any]], str]:
        """Connect a Zotero library (when an id is given, or the local API is chosen) and sync it: arXiv items are
        added, stored PDFs uploaded, other items listed; only what is new or changed since the last sync."""
        if is_local and not ctx.single_user:
            raise gr.Error("Zotero's local API is the library on this server's own machine: on a shared site, "
                           "connect with your user id and an API key.")
        if (library or "").strip() or is_local:
            ctx.copilot.connect_zotero(user_id, library or "", key or "", collection=only or "", local=bool(is_local),
                                       library_type="group" if is_group else "user")
        ctx.admit(user_id, "arxiv_job")
        report = ctx.copilot.sync_zotero(user_id, lambda fraction, message: progress(fraction, desc=message),
                                         quotas=ctx.quotas, address=ctx.address(user_id))
        lines = [[i["item"], i["title"], i["status"], i.get("paper_id") or "", i["message"]] for i in report["items"]]
        return sync_summary(report), lines, rows(user_id), ""

    @act
    def disconnect_zotero(user_id: str) -> str:
        """Delete your Zotero connection and its stored key (the papers it brought stay)."""
        ctx.copilot.disconnect_zotero(user_id)
        return "Zotero disconnected: its key is deleted."

    event = sync_btn.click(sync_zotero, [library_id, api_key, collection, group, local],
                           [summary, result, papers, api_key], api_name="sync_zotero")
    disconnect_btn.click(disconnect_zotero, None, [summary], api_name="disconnect_zotero")
    return {"changed": [event]}
