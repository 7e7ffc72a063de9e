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

:data:`SESSION_ROUTES` lists every route of the installed Gradio that takes a session hash or an event id, with
where it carries it; a test enumerates the installed Gradio's routes and fails when one is missing here.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from typing import Any
from urllib.parse import parse_qs, unquote

from copilot.ui.identity import COOKIE, GuestTokens, InvalidToken, _cookies

API = "/gradio_api"
QUERY, PATH, BODY, HEADER, EVENT, OFF = "query", "path", "body", "header", "event", "off"

# Route template (as the installed Gradio declares it) -> where the session hash or event id travels.
SESSION_ROUTES: dict[str, str] = {
    f"{API}/deep_link": OFF,
    f"{API}/queue/data": QUERY,
    f"{API}/heartbeat/{{session_hash}}": PATH,
    f"{API}/stream/{{session_hash}}/{{run}}/{{component_id}}/playlist.m3u8": PATH,
    f"{API}/stream/{{session_hash}}/{{run}}/{{component_id}}/{{segment_id}}.{{ext}}": PATH,
    f"{API}/stream/{{session_hash}}/{{run}}/{{component_id}}/playlist-file": PATH,
    f"{API}/queue/join": BODY,
    f"{API}/cancel": BODY,
    f"{API}/component_server": BODY,
    f"{API}/component_server/": BODY,
    f"{API}/api/{{api_name}}": BODY,
    f"{API}/api/{{api_name}}/": BODY,
    f"{API}/run/{{api_name}}": BODY,
    f"{API}/run/{{api_name}}/": BODY,
    f"{API}/call/{{api_name}}": BODY,
    f"{API}/call/{{api_name}}/": BODY,
    f"{API}/call/v2/{{api_name}}": BODY,
    f"{API}/call/v2/{{api_name}}/": BODY,
    f"{API}/upload": HEADER,
    f"{API}/call/{{api_name}}/{{event_id}}": EVENT,
    f"{API}/call/v2/{{api_name}}/{{event_id}}": EVENT,
    f"{API}/stream/{{event_id}}": EVENT,
    f"{API}/stream/{{event_id}}/close": EVENT,
    f"{API}/reset": EVENT,
    f"{API}/reset/": EVENT,
}
# Routes whose JSON answer names a new event id, which then belongs to the caller.
ISSUES_EVENTS = (f"{API}/queue/join", f"{API}/call/")
MAX_BODY_BYTES = 8 * 1024 * 1024  # a queue join carries inputs and file references, never file bytes
MAX_TRACKED = 100_000  # sessions and events remembered; the least recently used are forgotten first
REFUSED = "This session belongs to another visitor: reload the page to start your own."


def _pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[a-z_]+\})", template)
    regex = "".join(f"(?P<{p[1:-1]}>[^/]+?)" if p.startswith("{") else re.escape(p) for p in parts)
    return re.compile(f"^{regex}$")


# Fewer placeholders first, so that /call/v2/{api_name} is not read as /call/{api_name}/{event_id}.
_ROUTES = sorted(((_pattern(t), t, where) for t, where in SESSION_ROUTES.items()),
                 key=lambda route: (route[1].count("{"), -len(route[1])))


def match(path: str) -> tuple[str, str, dict[str, str]] | None:
    """The session route ``path`` is, with where it carries its key and the path's named parts; None if none."""
    for pattern, template, where in _ROUTES:
        found = pattern.match(path)
        if found:
            return template, where, found.groupdict()
    return None


class _Owners:
    """Keys (session hashes, event ids) and the guest that owns each, the least recently used forgotten first."""

    def __init__(self, capacity: int = MAX_TRACKED) -> None:
        self._owners: OrderedDict[str, str] = OrderedDict()
        self._capacity = capacity

    def owner(self, key: str) -> str | None:
        found = self._owners.get(key)
        if found is not None:
            self._owners.move_to_end(key)
        return found

    def claim(self, key: str, who: str) -> bool:
        """True when ``key`` is now ``who``'s (new, or already theirs); False when another guest holds it."""
        found = self.owner(key)
        if found is not None:
            return found == who
        self._owners[key] = who
        if len(self._owners) > self._capacity:
            self._owners.popitem(last=False)
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

    def _who(self, scope: dict[str, Any]) -> str | None:
        try:
            return self.tokens.user_id(_cookies(scope).get(COOKIE))
        except InvalidToken:
            return None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:  # noqa: ANN401 - ASGI
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path.startswith(f"{API}/file=") and "/deep_links/" in unquote(path):
            await _respond(send, 404, "Not found.")
            return
        found = match(path)
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
        if where in (BODY, EVENT) and scope.get("method") == "POST":
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
            if where == EVENT and isinstance(fields.get("event_id"), str):
                keys.append((self.events, fields["event_id"]))
        for owners, key in keys:
            if owners is self.events:
                allowed = who is not None and owners.owner(key) == who  # an event id nobody was given: refused
            elif who is None:
                # A bad cookie claims nothing; the request's handler refuses it with its own line.
                allowed = owners.owner(key) is None
            else:
                allowed = owners.claim(key, who)
            if not allowed:
                await _respond(send, 403, REFUSED)
                return
        if who is not None and template.startswith(ISSUES_EVENTS) and scope.get("method") == "POST":
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
            await send(message)

        return bind


def _json_fields(body: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(body) if body else None
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None
