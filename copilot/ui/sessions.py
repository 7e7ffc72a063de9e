"""Gradio's session-keyed routes, bound to the guest who opened the session.

Gradio names a browser tab's session by a ``session_hash`` that the page itself makes up and then sends in request
URLs (queue data streams, heartbeats), bodies (queue joins, cancels) and headers (uploads). Whoever holds that hash
could otherwise read the tab's streamed answers or its state, without the tab's guest cookie: the hash leaks
through logs, proxies and shared screenshots. :class:`SessionGuard` closes that door before Gradio sees the request:

- the first request that names a session hash claims it for the guest its signed cookie names; a later request
  naming it with any other cookie (or none) is refused with 403;
- event ids that Gradio hands out (queue joins, ``/call`` posts) are bound the same way, so the routes that take an
  event id (results, resets, streams) serve only their owner;
- deep links, a feature the app does not use that writes a session's whole state to a shareable file, are off.

:data:`~copilot.ui.session_routes.SESSION_ROUTES` lists every route of the installed Gradio that takes a session
hash or an event id, with where it carries it; a test enumerates the installed Gradio's routes and fails when one
is missing there.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from typing import Any
from urllib.parse import parse_qs, unquote

from copilot.ui.identity import COOKIE, GuestTokens, InvalidToken, _cookies
from copilot.ui.session_routes import (  # noqa: F401 - the route table is read from here too
    API, BODY, BODY_EVENT, EVENT, GET, HEADER, OFF, PATH, POST, QUERY, SESSION_ROUTES, match,
)

# Routes whose JSON answer names a new event id, which then belongs to the caller (as a session hash too: a /call
# without one runs in a session named by its event id).
ISSUES_EVENTS = (f"{API}/queue/join", f"{API}/call/")
MAX_BODY_BYTES = 8 * 1024 * 1024  # a queue join carries inputs and file references, never file bytes
MAX_TRACKED = 200_000  # sessions (and events) remembered at once; past it, new ones wait for old ones to go idle
IDLE_S = 3600  # a session or event unused this long is forgotten (an open page's heartbeats keep its own fresh)
REFUSED = "This session belongs to another visitor: reload the page to start your own."
FULL = "The demo is busy: too many open sessions. Please try again in a minute."


class _Owners:
    """Keys (session hashes, event ids) and the visitor that owns each. A key unused for :data:`IDLE_S` is
    forgotten; a live one never is: when :data:`MAX_TRACKED` keys are live, a new key is refused, not another's
    key given up (else a flood of new keys could free a victim's key for the taking)."""

    def __init__(self, capacity: int = MAX_TRACKED, idle_s: float = IDLE_S) -> None:
        self._owners: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._capacity = capacity
        self._idle_s = idle_s

    def owner(self, key: str) -> str | None:
        found = self._owners.get(key)
        if found is None:
            return None
        self._owners[key] = (found[0], time.monotonic())
        self._owners.move_to_end(key)
        return found[0]

    def claim(self, key: str, who: str) -> bool | None:
        """True when ``key`` is now ``who``'s (new, or already theirs); False when another visitor holds it; None
        when it is new and no more keys can be held now."""
        found = self.owner(key)
        if found is not None:
            return found == who
        now = time.monotonic()
        while self._owners and now - next(iter(self._owners.values()))[1] > self._idle_s:
            self._owners.popitem(last=False)
        if len(self._owners) >= self._capacity:
            return None
        self._owners[key] = (who, now)
        return True


async def _respond(send: Any, status: int, detail: str) -> None:  # noqa: ANN401 - ASGI send
    body = json.dumps({"detail": detail, "error": detail}).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class SessionGuard:
    """ASGI middleware (inside :class:`~copilot.ui.identity.GuestCookieMiddleware`, which has put a cookie on every
    request): see the module docstring."""

    def __init__(self, app: Any, tokens: GuestTokens) -> None:  # noqa: ANN401 - an ASGI app
        self.app = app
        self.tokens = tokens
        self.sessions = _Owners()
        self.events = _Owners()

    def _who(self, scope: dict[str, Any]) -> str:
        """The visitor: the guest a valid cookie names, else the cookie itself (hashed). A request with a bad
        cookie still owns what it opens and nothing else; its actions refuse it with their own line."""
        cookie = _cookies(scope).get(COOKIE)
        try:
            return self.tokens.user_id(cookie)
        except InvalidToken:
            return "cookie:" + hashlib.sha256((cookie or "").encode("utf-8", "replace")).hexdigest()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:  # noqa: ANN401 - ASGI
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path.startswith(f"{API}/file=") and "/deep_links/" in unquote(path):
            await _respond(send, 404, "Not found.")
            return
        found = match(path, scope.get("method", GET))
        if found is None:
            await self.app(scope, receive, send)
            return
        template, where, parts = found
        if where == OFF:
            await _respond(send, 404, "Not found.")
            return
        who = self._who(scope)
        keys: list[tuple[_Owners, str]] = []
        if where == QUERY:
            keys = [(self.sessions, v) for v in parse_qs(scope.get("query_string", b"").decode("latin-1"))
                    .get("session_hash", [])]
        elif where == PATH:
            keys = [(self.sessions, parts["session_hash"])]
        elif where == HEADER:
            keys = [(self.sessions, v.decode("latin-1")) for k, v in scope.get("headers", []) if k == b"session_hash"]
        elif where == EVENT and "event_id" in parts:
            keys = [(self.events, parts["event_id"])]
        if where in (BODY, BODY_EVENT, EVENT) and scope.get("method") == POST:
            body, receive = await self._read(receive)
            if body is None:
                await _respond(send, 413, "The request is too large.")
                return
            fields = _json_fields(body)
            if fields is None and template.startswith(f"{API}/component_server") and body:
                await _respond(send, 415, "Not served.")  # the app has no component that takes files this way
                return
            fields = fields or {}
            if isinstance(fields.get("session_hash"), str):
                keys.append((self.sessions, fields["session_hash"]))
            if where in (EVENT, BODY_EVENT) and fields.get("event_id") is not None:
                keys.append((self.events, str(fields["event_id"])))
        for owners, key in keys:
            # An event id is only ever the caller's when it was handed to them; a session hash is claimed by the
            # first visitor that names it.
            allowed = owners.owner(key) == who if owners is self.events else owners.claim(key, who)
            if not allowed:
                await _respond(send, 503 if allowed is None else 403, FULL if allowed is None else REFUSED)
                return
        if template.startswith(ISSUES_EVENTS) and scope.get("method") == POST:
            send = self._binding_events(send, who)
        await self.app(scope, receive, send)

    async def _read(self, receive: Any) -> tuple[bytes | None, Any]:  # noqa: ANN401 - ASGI receive
        """The request's body (None past :data:`MAX_BODY_BYTES`) and a ``receive`` that replays it."""
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                return None, receive
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return body, replay

    def _binding_events(self, send: Any, who: str) -> Any:  # noqa: ANN401 - ASGI send
        """``send`` that reads the event id out of a successful JSON answer and gives it to ``who``."""
        status = 0
        chunks: list[bytes] = []

        async def bind(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and status == 200:
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    event_id = (_json_fields(b"".join(chunks)) or {}).get("event_id")
                    if isinstance(event_id, str):
                        self.events.claim(event_id, who)
                        self.sessions.claim(event_id, who)  # a /call without a session hash runs in this one
            await send(message)

        return bind


def _json_fields(body: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(body) if body else None
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None
