"""Who is asking: one local user, a guest known by a server-signed token, or a Hugging Face account.

Everything a user writes (uploads, thoughts, profile, memories, queries) is keyed by the id returned here, so
this one function is where isolation between users starts. A guest's id comes only from a token this server
issued and signed (``copilot.ui.identity``), never from anything the client chose, such as its session hash.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Literal

import gradio as gr

from copilot.answering import AskResult
from copilot.config import Settings
from copilot.llm import ChatModel
from copilot.ui.identity import COOKIE, GuestTokens, InvalidToken

LOCAL_USER = "local"
INFERENCE_SCOPE = "inference-api"  # the OAuth scope that lets a Space call Inference as the signed-in visitor
Mode = Literal["single", "session", "hf"]


def on_spaces() -> bool:
    """Hugging Face Spaces sets SPACE_ID in every Space's environment."""
    return bool(os.environ.get("SPACE_ID"))


def users_mode(settings: Settings) -> Mode:
    if settings.users != "auto":
        return settings.users
    return "hf" if on_spaces() else "single"


def resolve_user(mode: Mode, request: gr.Request | None, profile: gr.OAuthProfile | None = None,
                 tokens: GuestTokens | None = None) -> str:
    """The id of the person behind a request.

    Signed-in Hugging Face users keep their space across visits; a visitor who has not signed in is the guest
    named by the signed cookie this server gave their browser, so a public demo never mixes two strangers'
    papers or thoughts, and no visitor can claim another's space.
    """
    if mode == "single":
        return LOCAL_USER
    if mode == "hf" and profile is not None:
        username = getattr(profile, "username", None) or getattr(profile, "preferred_username", None)
        if username:
            return f"hf:{username}"
    if tokens is None:
        raise gr.Error("Guest sessions are not configured on this server.")
    cookies = getattr(request, "cookies", None) if request is not None else None
    try:
        return tokens.user_id(dict(cookies.items()).get(COOKIE) if cookies else None)
    except InvalidToken as exc:
        raise gr.Error(str(exc)) from exc


def visitor_token(user_id: str, token: gr.OAuthToken | None) -> str | None:
    """A signed-in Hugging Face visitor's own OAuth token, when the Space asked for the inference-api scope and the
    visitor granted it (None for guests, the local user, or without that scope): Inference is then called as them,
    at their cost."""
    if not user_id.startswith("hf:") or token is None or not token.token:
        return None
    return token.token if INFERENCE_SCOPE in (token.scope or "").split() else None


def answered_by(result: AskResult, remote: ChatModel | None) -> str:
    """The line under a signed-in visitor's answer that says which model wrote it ("" when the instance's model
    was the only one asked)."""
    if remote is None or not result.model:
        return ""
    if result.fallback:
        return f"*Answered by this site's own model: {remote.name[3:]} on Hugging Face Inference failed.*"
    return f"*Answered by {remote.name[3:]} on Hugging Face Inference, with your account.*"


def proxies(settings: Settings) -> int:
    """How many reverse proxies stand in front of the app (``COPILOT_PROXY_COUNT``; unset: Spaces has one)."""
    if settings.proxy_count is not None:
        return settings.proxy_count
    return 1 if on_spaces() else 0


def client_address(request: gr.Request | None, settings: Settings) -> str | None:
    """The network a request came from: behind ``n`` trusted proxies, the ``n``-th entry of X-Forwarded-For from
    the right (the one the outermost proxy saw; entries further left are the client's own word, and every header
    line counts, in order); with none, the connection's peer. An IPv6 address stands for its /64, the block one
    subscriber holds."""
    if request is None:
        return None
    address = None
    n = proxies(settings)
    if n > 0:
        headers = getattr(request, "headers", None) or {}
        lines = headers.getlist("x-forwarded-for") if hasattr(headers, "getlist") else [headers.get("x-forwarded-for")]
        forwarded = [part.strip() for line in lines if line for part in str(line).split(",") if part.strip()]
        if len(forwarded) >= n:
            address = forwarded[-n]
    if address is None:
        address = getattr(getattr(request, "client", None), "host", None)
    return network_of(address) if address else None


def network_of(address: str) -> str:
    """``address`` itself for IPv4 (or anything unparsable), its /64 network for IPv6."""
    try:
        parsed = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return address
    if parsed.version == 4:
        return str(parsed)
    if parsed.ipv4_mapped is not None:
        return str(parsed.ipv4_mapped)
    return str(ipaddress.ip_network(f"{parsed}/64", strict=False))


def describe_user(user_id: str) -> str:
    """How the page names the current user."""
    if user_id == LOCAL_USER:
        return "local user"
    if user_id.startswith("hf:"):
        return f"signed in as **{user_id[3:]}**"
    return "guest (this browser; sign in to keep your work anywhere)"


def mcp_enabled(settings: Settings) -> bool:
    """``COPILOT_MCP``: on or off as set; 'auto' is on, except on a Hugging Face Space (its owner turns it on)."""
    return settings.mcp == "on" or (settings.mcp == "auto" and not on_spaces())
