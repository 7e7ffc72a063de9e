"""Who is asking: one local user, one guest per browser session, or a Hugging Face account.

Everything a user writes (uploads, thoughts, profile, memories, queries) is keyed by the id returned here, so
this one function is where isolation between users starts.
"""

from __future__ import annotations

import os
from typing import Literal

import gradio as gr

from copilot.config import Settings

LOCAL_USER = "local"
Mode = Literal["single", "session", "hf"]


def on_spaces() -> bool:
    """Hugging Face Spaces sets SPACE_ID in every Space's environment."""
    return bool(os.environ.get("SPACE_ID"))


def users_mode(settings: Settings) -> Mode:
    if settings.users != "auto":
        return settings.users
    return "hf" if on_spaces() else "single"


def resolve_user(mode: Mode, request: gr.Request | None, profile: gr.OAuthProfile | None = None) -> str:
    """The id of the person behind a request.

    Signed-in Hugging Face users keep their space across visits; a visitor who has not signed in gets a guest
    space for this browser session, so a public demo never mixes two strangers' papers or thoughts.
    """
    if mode == "single":
        return LOCAL_USER
    if mode == "hf" and profile is not None:
        username = getattr(profile, "username", None) or getattr(profile, "preferred_username", None)
        if username:
            return f"hf:{username}"
    session = getattr(request, "session_hash", None) if request is not None else None
    if not session:
        raise gr.Error("No browser session: reload the page.")
    return f"guest-{session[:16]}"


def describe_user(user_id: str) -> str:
    """How the page names the current user."""
    if user_id == LOCAL_USER:
        return "local user"
    if user_id.startswith("hf:"):
        return f"signed in as **{user_id[3:]}**"
    return "guest (this browser session; sign in to keep your work)"
