"""Profile tab: a research persona (from an arXiv author or pasted text, editable) and personal memories."""

from __future__ import annotations

from typing import Any

import gradio as gr

from copilot.llm import LLMError, scheduling
from copilot.ui.context import AppContext, fail

MEMORY_HEADERS = ["id", "what you said", "when"]


def build(ctx: AppContext) -> dict[str, Any]:
    services = ctx.services
    with gr.Tab("Profile", id="profile"):
        who = gr.Markdown(elem_id="who")
        with gr.Row():
            author = gr.Textbox(label="Build from an arXiv author", placeholder="e.g. Yann LeCun", scale=4,
                                elem_id="profile-author")
            author_btn = gr.Button("Build from arXiv", scale=1, elem_id="profile-from-author")
        with gr.Row():
            pasted = gr.Textbox(label="…or from text about your research", lines=3, scale=4, elem_id="profile-text")
            text_btn = gr.Button("Build from text", scale=1, elem_id="profile-from-text")
        persona = gr.Textbox(label="Your research persona (edit freely, then save)", lines=5, elem_id="persona")
        with gr.Row():
            save_btn = gr.Button("Save persona", variant="primary", elem_id="save-persona")
            profile_status = gr.Markdown(elem_id="profile-status")
        gr.Markdown("### Personal memories\nWhat you tell the copilot about yourself in chat is kept here and "
                    "recalled when a later message needs it.")
        memories = gr.Dataframe(headers=MEMORY_HEADERS, interactive=False, wrap=True, elem_id="memories")
        with gr.Row():
            new_memory = gr.Textbox(label="Add a memory", scale=4, elem_id="memory-text")
            add_btn = gr.Button("Add", scale=1, elem_id="memory-add")
        with gr.Row():
            memory_id = gr.Number(label="Memory id to delete", precision=0, scale=4, elem_id="memory-id")
            delete_btn = gr.Button("Delete memory", variant="stop", scale=1, elem_id="memory-delete")

    def rows(user: str) -> list[list[Any]]:
        from copilot.tasks.profile import list_memories

        return [[m.id, m.text, (m.created_at or "")[:19]]
                for m in list_memories(services.copilot.store, user)]

    def load_profile(request: gr.Request, profile: gr.OAuthProfile | None = None
                     ) -> tuple[str, str, list[list[Any]]]:
        """Who you are here, your saved persona and your memories."""
        from copilot.tasks.profile import get_profile
        from copilot.ui.users import describe_user

        user = ctx.user(request, profile)
        stored = get_profile(services.copilot.store, user)
        return f"You are: {describe_user(user)}", stored.persona if stored else "", rows(user)

    def from_author(name: str, request: gr.Request, profile: gr.OAuthProfile | None = None) -> tuple[str, str]:
        """Build and save a persona from an arXiv author's papers (an au: search)."""
        from copilot.tasks.profile import profile_from_author, save_profile

        user = ctx.user(request, profile)
        if not (name or "").strip():
            raise gr.Error("Type an author's name first.")
        ctx.admit(user, "search")  # an arXiv search first,
        ctx.admit(user)  # then a model call
        try:
            with scheduling(user):
                text = profile_from_author(services.copilot, name.strip(), user_id=user,
                                           arxiv_client=services.library.arxiv)
            save_profile(services.copilot.store, user, text, "arxiv:" + name.strip())
        except (LLMError, ValueError, RuntimeError) as exc:
            raise fail(exc) from exc
        return text, "Persona built from arXiv and saved."

    def from_text(text: str, request: gr.Request, profile: gr.OAuthProfile | None = None) -> tuple[str, str]:
        """Build and save a persona from pasted text about your research."""
        from copilot.tasks.profile import profile_from_text, save_profile

        user = ctx.user(request, profile)
        if not (text or "").strip():
            raise gr.Error("Paste some text about your research first.")
        ctx.admit(user)
        try:
            with scheduling(user):
                persona = profile_from_text(services.copilot, text, user_id=user)
            save_profile(services.copilot.store, user, persona, "text")
        except (LLMError, ValueError) as exc:
            raise fail(exc) from exc
        return persona, "Persona built from your text and saved."

    def save(persona: str, request: gr.Request, profile: gr.OAuthProfile | None = None) -> str:
        """Save your (edited) persona."""
        from copilot.tasks.profile import save_profile

        try:
            user = ctx.user(request, profile)
            save_profile(services.copilot.store, user, persona, "edited")
        except ValueError as exc:
            raise fail(exc) from exc
        return "Persona saved."

    def add_memory(text: str, request: gr.Request, profile: gr.OAuthProfile | None = None
                   ) -> tuple[str, list[list[Any]]]:
        """Remember something about you."""
        user = ctx.user(request, profile)
        try:
            services.copilot.remember(text or "", user_id=user)
        except ValueError as exc:
            raise fail(exc) from exc
        return "", rows(user)

    def delete_memory(memory_id: float | None, request: gr.Request, profile: gr.OAuthProfile | None = None
                      ) -> tuple[str, list[list[Any]]]:
        """Forget one of your memories."""
        from copilot.tasks.profile import delete_memory as forget

        user = ctx.user(request, profile)
        if memory_id is None:
            raise gr.Error("Give the id of the memory to delete.")
        if not forget(services.copilot.store, int(memory_id), user):
            raise gr.Error(f"No memory #{int(memory_id)} of yours.")
        return f"Memory #{int(memory_id)} deleted.", rows(user)

    def list_memories(request: gr.Request, profile: gr.OAuthProfile | None = None) -> list[list[Any]]:
        """Your personal memories."""
        return rows(ctx.user(request, profile))

    author_btn.click(from_author, [author], [persona, profile_status], api_name="profile_from_author")
    text_btn.click(from_text, [pasted], [persona, profile_status], api_name="profile_from_text")
    save_btn.click(save, [persona], [profile_status], api_name="save_profile")
    add_btn.click(add_memory, [new_memory], [new_memory, memories], api_name="add_memory")
    delete_btn.click(delete_memory, [memory_id], [profile_status, memories], api_name="delete_memory")
    return {"apis": [(list_memories, "list_memories")], "load": [(load_profile, [], [who, persona, memories])]}
