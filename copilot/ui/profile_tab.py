"""Profile tab: a research persona (from an arXiv author or pasted text, editable) and personal memories."""

from __future__ import annotations

from typing import Any

import gradio as gr

from copilot.limits import check_memory
from copilot.prompts import LANGUAGE_OF_QUESTION
from copilot.ui.actions import action
from copilot.ui.users import mcp_enabled
from copilot.ui.context import AppContext
from copilot.ui.users import describe_user

MEMORY_HEADERS = ["id", "what you said", "when"]
TOKEN_HEADERS = ["id", "name", "created (UTC)", "last used (UTC)"]
AGENTS_HELP = (
    "Use the copilot from an agent (Claude Desktop, Cursor, your own scripts): add this site's MCP server, at "
    "`/gradio_api/mcp/` under its address, to the agent, with a token below sent in the `X-Copilot-Token` header. "
    "The agent can then search arXiv, add papers, list your library, ask questions (with the evidence, or a "
    "decline), read a passage and draft related work, as you and within your limits. Without a token it can "
    "only search arXiv and read the shared papers.")
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
        agents = mcp_enabled(ctx.settings)
        with gr.Accordion("Agents (MCP)", open=False, visible=agents, elem_id="agents"):
            gr.Markdown(AGENTS_HELP)
            with gr.Row():
                token_name = gr.Textbox(label="Token name (where you use it)", placeholder="e.g. laptop, Cursor",
                                        scale=4, elem_id="token-name")
                create_btn = gr.Button("Create token", scale=1, elem_id="token-create")
            new_token = gr.Textbox(label="Your new token: copy it now, it is not shown again", interactive=False,
                                   buttons=["copy"], elem_id="token-secret")
            tokens = gr.Dataframe(headers=TOKEN_HEADERS, interactive=False, elem_id="tokens")
            with gr.Row():
                token_id = gr.Number(label="Token id to revoke", precision=0, scale=4, elem_id="token-id")
                revoke_btn = gr.Button("Revoke token", variant="stop", scale=1, elem_id="token-revoke")
            token_status = gr.Markdown(elem_id="token-status")

    def token_rows(user_id: str) -> list[list[Any]]:
        return [[t.id, t.name, t.created_at[:16].replace("T", " "),
                 (t.last_used_at or "never")[:16].replace("T", " ")] for t in ctx.copilot.access_tokens(user_id)]

    @act
    def create_token(name: str, user_id: str) -> tuple[str, list[list[Any]], str]:
        """Create a personal access token for an agent (an MCP client): it acts as you until you revoke it."""
        token, secret = ctx.copilot.create_access_token(user_id, name)
        return secret, token_rows(user_id), (f"Token #{token.id} ({token.name}) created: copy it now, it is not "
                                             "shown again.")

    @act
    def revoke_token(token_id: float | None, user_id: str) -> tuple[str, list[list[Any]], str]:
        """Revoke one of your access tokens: agents using it are refused from now on."""
        if token_id is None:
            raise gr.Error("Give the id of the token to revoke.")
        ctx.copilot.revoke_access_token(user_id, int(token_id))
        return "", token_rows(user_id), f"Token #{int(token_id)} revoked."

    @act
    def list_tokens(user_id: str) -> list[list[Any]]:
        """Your personal access tokens (names and dates; their secrets are never shown again)."""
        return token_rows(user_id)

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
    load = [(load_profile, [], [who, persona, language, memories])]
    apis = [(list_memories, "list_memories")]
    if agents:
        create_btn.click(create_token, [token_name], [new_token, tokens, token_status], api_name="create_token")
        revoke_btn.click(revoke_token, [token_id], [new_token, tokens, token_status], api_name="revoke_token")
        load.append((list_tokens, [], [tokens]))
        apis.append((list_tokens, "list_tokens"))
    return {"apis": apis, "load": load}
