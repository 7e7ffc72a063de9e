"""Guest identity: a random token the server issues and signs, held by the browser in a cookie.

A visitor who has not signed in is known only by this token. It carries 192 random bits, the time it was issued
and an HMAC-SHA256 signature of both by the instance's secret (``COPILOT_SECRET``, or a key generated once into the
data directory), and it is verified on every request. It expires ``COPILOT_GUEST_DAYS`` after it was issued, on
the server's clock, so a stolen cookie does not open a guest's space for ever (a guest who keeps coming gets it
renewed). Nothing a client can choose maps to another user: a client may drop its cookie and become a new guest,
but it cannot name an existing one without that guest's whole token.

``GuestCookieMiddleware`` issues the cookie on the first request that lacks one (the page load, or
``gradio_client``'s config request) and replaces one that fails verification; ``GuestTokens.user_id`` turns a
verified token into the id every record is keyed by.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from http.cookies import SimpleCookie
from typing import Any

from copilot.access import load_secret
from copilot.errors import UserError
from copilot.config import Settings

COOKIE = "copilot_guest"
MCP_PATH = "/gradio_api/mcp"  # Gradio's MCP server (streamable HTTP, and SSE under it)
RANDOM_BYTES = 24  # 192 bits: far past guessing
TIME_BYTES = 5  # the issue time, in whole seconds since 1970
DEFAULT_MAX_AGE_S = 30 * 24 * 3600  # a guest space outlives one visit from the same browser


class InvalidToken(UserError):
    """A guest token that is missing, malformed, truncated or not signed by this instance."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def guest_tokens(settings: Settings) -> GuestTokens:
    """This instance's token issuer: its secret, and ``COPILOT_GUEST_DAYS`` as a token's lifetime."""
    return GuestTokens(load_secret(settings), max_age_s=settings.guest_days * 24 * 3600)


class GuestTokens:
    """Issues and verifies signed guest tokens: ``<random and issue time>.<signature>``, both URL-safe base64.
    ``max_age_s``: how long a token is honoured after it was issued."""

    def __init__(self, secret: bytes, max_age_s: float = DEFAULT_MAX_AGE_S) -> None:
        if len(secret) < 16:
            raise ValueError("COPILOT_SECRET must be at least 16 characters.")
        self._key = hashlib.sha256(b"paper-copilot guest token\0" + secret).digest()
        self.max_age_s = max_age_s

    def _sign(self, payload: str) -> str:
        return _b64(hmac.new(self._key, payload.encode("ascii"), hashlib.sha256).digest())

    def issue(self, now: float | None = None, *, random_part: bytes | None = None) -> str:
        """A new token (``random_part``: the same guest's, renewed)."""
        issued = int(time.time() if now is None else now).to_bytes(TIME_BYTES, "big")
        payload = _b64((random_part or secrets.token_bytes(RANDOM_BYTES)) + issued)
        return f"{payload}.{self._sign(payload)}"

    def renewed(self, token: str, now: float | None = None) -> str | None:
        """For a valid token past half its lifetime, the same guest's token issued ``now``; else None. A guest who
        keeps coming keeps their space; one who stays away longer than ``max_age_s`` loses it."""
        try:
            self.user_id(token, now)
        except InvalidToken:
            return None
        raw = _unb64(token.partition(".")[0])
        issued = int.from_bytes(raw[RANDOM_BYTES:], "big")
        if (time.time() if now is None else now) - issued <= self.max_age_s / 2:
            return None
        return self.issue(now, random_part=raw[:RANDOM_BYTES])

    def user_id(self, token: str | None, now: float | None = None) -> str:
        """The guest id of a verified token that has not expired; :class:`InvalidToken` for anything else."""
        if not token:
            raise InvalidToken("No guest session: reload the page (this site needs its cookie to keep your work).")
        payload, dot, signature = token.partition(".")
        if (not dot or not token.isascii() or len(payload) != len(_b64(bytes(RANDOM_BYTES + TIME_BYTES)))
                or not hmac.compare_digest(signature.encode("ascii"), self._sign(payload).encode("ascii"))):
            raise InvalidToken("Your guest session token is not valid (altered, truncated or from another server): "
                               "reload the page to start a new guest session.")
        raw = _unb64(payload)
        issued = int.from_bytes(raw[RANDOM_BYTES:], "big")
        if (time.time() if now is None else now) - issued > self.max_age_s:
            raise InvalidToken("Your guest session has expired: reload the page to start a new guest session.")
        return f"guest-{_b64(raw[:RANDOM_BYTES])}"

    def is_valid(self, token: str | None) -> bool:
        try:
            self.user_id(token)
        except InvalidToken:
            return False
        return True


def _cookies(scope: dict[str, Any]) -> dict[str, str]:
    """The request's cookies, read by the parser the request handlers use (Starlette's), so that both see the same
    token whatever other cookies a header carries."""
    from starlette.requests import cookie_parser

    found: dict[str, str] = {}
    for name, value in scope.get("headers", []):
        if name == b"cookie":
            found |= cookie_parser(value.decode("latin-1"))
    return found


def _is_https(scope: dict[str, Any]) -> bool:
    if scope.get("scheme") == "https":
        return True
    headers = dict(scope.get("headers", []))
    return headers.get(b"x-forwarded-proto", b"").split(b",")[0].strip() == b"https"


def set_cookie_header(token: str, *, https: bool, max_age_s: float = DEFAULT_MAX_AGE_S) -> bytes:
    """The ``Set-Cookie`` value: HttpOnly, and ``SameSite=None; Secure`` over HTTPS so that the page works inside
    the Hugging Face Spaces frame."""
    jar: SimpleCookie = SimpleCookie()
    jar[COOKIE] = token
    morsel = jar[COOKIE]
    morsel["path"] = "/"
    morsel["max-age"] = str(int(max_age_s))
    morsel["httponly"] = True
    if https:
        morsel["secure"] = True
        morsel["samesite"] = "None"
    else:
        morsel["samesite"] = "Lax"
    return morsel.OutputString().encode("latin-1")


class GuestCookieMiddleware:
    """ASGI middleware: every HTTP request leaves with a valid guest cookie.

    A request without one gets a fresh token, also put into the request itself so that its own handler sees it.
    A request with a bad one keeps it (its handler refuses it with a clear message) and the response carries a
    fresh token, so a reload starts a new guest session. A valid token past half its lifetime is renewed for the
    same guest, so a visitor who keeps coming keeps their space.
    """

    def __init__(self, app: Any, tokens: GuestTokens) -> None:  # noqa: ANN401 - an ASGI app
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:  # noqa: ANN401 - ASGI
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope.get("path", "").startswith(MCP_PATH):
            # An agent is known by its access token alone: its cookie is dropped (Gradio forwards the MCP request's
            # headers to its own connection into the app, whose session a cookie of the agent's would not match).
            headers = [(k, v) for k, v in scope.get("headers", []) if k != b"cookie"]
            await self.app(dict(scope, headers=headers), receive, send)
            return
        current = _cookies(scope).get(COOKIE)
        if current is not None and self.tokens.is_valid(current):
            renewed = self.tokens.renewed(current)
            if renewed is None:
                await self.app(scope, receive, send)
                return
            await self.app(scope, receive, self._with_cookie(send, renewed, scope))
            return
        fresh = self.tokens.issue()
        if current is None:
            pair = f"{COOKIE}={fresh}".encode("latin-1")
            headers = [(k, v) for k, v in scope.get("headers", []) if k != b"cookie"]
            others = [v for k, v in scope.get("headers", []) if k == b"cookie"]
            headers.append((b"cookie", b"; ".join([*others, pair])))
            scope = dict(scope, headers=headers)
        await self.app(scope, receive, self._with_cookie(send, fresh, scope))

    def _with_cookie(self, send: Any, token: str, scope: dict[str, Any]) -> Any:  # noqa: ANN401 - ASGI send
        cookie = set_cookie_header(token, https=_is_https(scope), max_age_s=self.tokens.max_age_s)

        async def send_with_cookie(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = dict(message, headers=[*message.get("headers", []), (b"set-cookie", cookie)])
            await send(message)

        return send_with_cookie
