"""Profile tab: a research persona (from an arXiv author or pasted text, editable) and personal memories."""

from __future__ import annotations

from typing import Any

import gradio as gr

from copilot.limits import check_memory
from copilot.prompts import LANGUAGE_OF_QUESTION
from copilot.ui.actions import action
from copilot.ui.context import AppContext
from copilot.ui.users import describe_user

MEMORY_HEADERS = ["id", "what you said", "when"]
# Offered in the answer-language box (any other language's name can be typed).
LANGUAGES = [LANGUAGE_OF_QUESTION, "English", "French", "German", "Spanish", "Italian", "Portuguese", "Dutch",
             "Chinese", "Japanese", "Korean", "Russian", "Arabic", "Hindi"]


def build(ctx: AppContext) -> dict[str, Any]:
    act = action(ctx)
    with gr.Tab("Profile", id="profile"):
        who = gr.Markdown(elem_id="who")
        gr.Markdown("*Start here: build a persona from your arXiv author name or from a few lines about your "
                    "research; answers and ideas are tailored to it.*", elem_id="profile-hint")
        with gr.Row():
            author = gr.Textbox(label="Build from an arXiv author", placeholder="e.g. Yann LeCun", scale=4,
                                elem_id="profile-author")
            author_btn = gr.Button("Build from arXiv", scale=1, elem_id="profile-from-author")
        with gr.Row():
            pasted = gr.Textbox(label="…or from text about your research (a long text is summarised by the model; "
                                      "a few lines are kept as you wrote them)", lines=3, scale=4,
                                elem_id="profile-text")
            text_btn = gr.Button("Use as my persona", scale=1, elem_id="profile-from-text")
        persona = gr.Textbox(label="Your research persona (edit freely, then save)", lines=5, elem_id="persona",
                             placeholder="No persona yet: build one above, or write it here and save.")
        with gr.Row():
            save_btn = gr.Button("Save persona", variant="primary", elem_id="save-persona")
            profile_status = gr.Markdown(elem_id="profile-status")
        with gr.Row():
            language = gr.Dropdown(LANGUAGES, value=LANGUAGE_OF_QUESTION, allow_custom_value=True, scale=4,
                                   label="Answers and drafts are written in", elem_id="answer-language")
            language_btn = gr.Button("Save language", scale=1, elem_id="save-language")
        gr.Markdown("### Personal memories\nWhat you tell the copilot about yourself in chat is kept here and "
                    "recalled when a later message needs it.")
        memories = gr.Dataframe(headers=MEMORY_HEADERS, interactive=False, wrap=True, elem_id="memories")
        with gr.Row():
            new_memory = gr.Textbox(label="Add a memory", scale=4, elem_id="memory-text")
            add_btn = gr.Button("Add", scale=1, elem_id="memory-add")
        with gr.Row():
            memory_id = gr.Number(label="Memory id to delete", precision=0, scale=4, elem_id="memory-id")
            delete_btn = gr.Button("Delete memory", variant="stop", scale=1, elem_id="memory-delete")

    def rows(user_id: str) -> list[list[Any]]:
        return [[m.id, m.text, (m.created_at or "")[:19]] for m in ctx.copilot.memories.list(user_id)]

    @act
    def load_profile(user_id: str) -> tuple[str, str, str, list[list[Any]]]:
        """Who you are here, your saved persona, your answer language and your memories."""
        stored = ctx.copilot.profile(user_id)
        return (f"You are: {describe_user(user_id)}", stored.persona if stored else "",
                ctx.copilot.answer_language(user_id) or LANGUAGE_OF_QUESTION, rows(user_id))

    @act
    def from_author(name: str, user_id: str) -> tuple[str, str]:
        """Build and save a persona from an arXiv author's papers (an au: search)."""
        if not (name or "").strip():
            raise gr.Error("Type an author's name first.")
        ctx.admit(user_id, "search")  # an arXiv search first,
        ctx.admit(user_id)  # then a model call
        return ctx.copilot.persona_from_author(user_id, name.strip()), "Persona built from arXiv and saved."

    @act
    def from_text(text: str, user_id: str) -> tuple[str, str]:
        """Build and save a persona from pasted text about your research."""
        if not (text or "").strip():
            raise gr.Error("Paste some text about your research first.")
        ctx.admit(user_id)
        persona, as_written = ctx.copilot.persona_from_text(user_id, text)
        how = "kept as you wrote it" if as_written else "summarised from your text by the model"
        return persona, f"Persona {how} and saved: edit it below if you like."

    @act
    def save(persona: str, user_id: str) -> str:
        """Save your (edited) persona."""
        ctx.copilot.save_persona(user_id, persona, "edited")
        return "Persona saved."

    @act
    def save_language(choice: str | None, user_id: str) -> tuple[str, str]:
        """Choose the language answers and drafts are written in (default: the language of the question)."""
        saved = ctx.copilot.save_answer_language(user_id, choice)
        return saved or LANGUAGE_OF_QUESTION, f"Answers will be written in {saved or LANGUAGE_OF_QUESTION}."

    @act
    def add_memory(text: str, user_id: str) -> tuple[str, list[list[Any]]]:
        """Remember something about you."""
        check_memory(ctx.copilot.store, ctx.settings, user_id, text)  # refused here costs no allowance
        ctx.admit(user_id, "memory")
        ctx.copilot.remember(text or "", user_id=user_id)
        return "", rows(user_id)

    @act
    def delete_memory(memory_id: float | None, user_id: str) -> tuple[str, list[list[Any]]]:
        """Forget one of your memories."""
        if memory_id is None:
            raise gr.Error("Give the id of the memory to delete.")
        ctx.copilot.memories.forget(int(memory_id), user_id)
        return f"Memory #{int(memory_id)} deleted.", rows(user_id)

    @act
    def list_memories(user_id: str) -> list[list[Any]]:
        """Your personal memories."""
        return rows(user_id)

    author_btn.click(from_author, [author], [persona, profile_status], api_name="profile_from_author")
    text_btn.click(from_text, [pasted], [persona, profile_status], api_name="profile_from_text")
    save_btn.click(save, [persona], [profile_status], api_name="save_profile")
    language_btn.click(save_language, [language], [language, profile_status], api_name="save_language")
    add_btn.click(add_memory, [new_memory], [new_memory, memories], api_name="add_memory")
    delete_btn.click(delete_memory, [memory_id], [profile_status, memories], api_name="delete_memory")
    return {"apis": [(list_memories, "list_memories")], "load": [(load_profile, [], [who, persona, language, memories])]}
