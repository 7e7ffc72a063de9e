"""Guest tokens and the cookie middleware, without a browser."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from copilot.config import Settings
from copilot.ui.identity import COOKIE, GuestCookieMiddleware, GuestTokens, InvalidToken, load_secret


def test_tokens_verify_only_whole_and_signed_by_this_secret() -> None:
    tokens = GuestTokens(b"a secret of this instance")
    token = tokens.issue()
    assert tokens.user_id(token).startswith("guest-")
    assert tokens.user_id(token) == tokens.user_id(token)
    assert tokens.issue() != token
    random_part, signature = token.split(".")
    assert len(random_part) * 6 >= 128
    other_last = "B" if random_part[-1] == "A" else "A"
    for bad in [None, "", token[:16], token[:-1], random_part, f"{random_part}.", f"{random_part}.{signature[:-2]}",
                f"{random_part[:-1]}{other_last}.{signature}", token + "x", "é" * 32 + "." + signature]:
        with pytest.raises(InvalidToken):
            tokens.user_id(bad)
    with pytest.raises(InvalidToken, match="not valid"):
        GuestTokens(b"another instance's secret").user_id(token)
    with pytest.raises(ValueError, match="16 characters"):
        GuestTokens(b"short")


def test_the_secret_is_generated_once_and_kept_private(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    first = load_secret(settings)
    assert len(first) >= 32 and load_secret(settings) == first
    mode = stat.S_IMODE(os.stat(tmp_path / "data" / "secret.key").st_mode)
    assert mode == 0o600
    assert load_secret(Settings(data_dir=tmp_path / "data", secret="configured-secret-value")) == \
        b"configured-secret-value"
    (tmp_path / "data" / "secret.key").write_text("x")
    with pytest.raises(RuntimeError, match="secret.key"):
        load_secret(settings)


def _app(tokens: GuestTokens) -> Starlette:
    def whoami(request: Request) -> PlainTextResponse:
        try:
            return PlainTextResponse(tokens.user_id(request.cookies.get(COOKIE)))
        except InvalidToken as exc:
            return PlainTextResponse(str(exc), status_code=401)

    return Starlette(routes=[Route("/", whoami)], middleware=[Middleware(GuestCookieMiddleware, tokens=tokens)])


def test_middleware_issues_keeps_and_replaces_cookies() -> None:
    tokens = GuestTokens(b"a secret of this instance")
    client = TestClient(_app(tokens))
    first = client.get("/")
    assert first.status_code == 200 and first.text.startswith("guest-")  # the first request is already a guest
    assert "httponly" in first.headers["set-cookie"].lower()
    again = client.get("/")  # the cookie jar sends it back: the same guest, no new cookie
    assert again.text == first.text and "set-cookie" not in again.headers

    forged = TestClient(_app(tokens), cookies={COOKIE: client.cookies[COOKIE][:-4] + "AAAA"})
    refused = forged.get("/")
    assert refused.status_code == 401 and "not valid" in refused.text
    fresh = refused.headers["set-cookie"].split(";")[0].split("=", 1)[1]
    assert tokens.is_valid(fresh) and tokens.user_id(fresh) != first.text

    # Other cookies in odd shapes do not hide the token from the middleware (it reads them as the handlers do).
    odd = TestClient(_app(tokens), cookies={"x": '{"a":1}', "y": "bar baz", COOKIE: client.cookies[COOKIE]})
    kept = odd.get("/")
    assert kept.text == first.text and "set-cookie" not in kept.headers

    https = TestClient(_app(tokens), base_url="https://demo.example").get("/")
    assert "secure" in https.headers["set-cookie"].lower() and "samesite=none" in https.headers["set-cookie"].lower()


def test_a_guest_token_expires_on_the_server_after_its_days() -> None:
    day = 24 * 3600
    tokens = GuestTokens(b"a secret of this instance", max_age_s=2 * day)
    issued = 1_800_000_000
    token = tokens.issue(now=issued)
    guest = tokens.user_id(token, now=issued + 2 * day - 60)
    assert guest.startswith("guest-") and tokens.user_id(token, now=issued) == guest
    with pytest.raises(InvalidToken, match="expired"):
        tokens.user_id(token, now=issued + 2 * day + 60)
    # The issue time is signed: moving it forward breaks the signature.
    payload, signature = token.split(".")
    import base64

    raw = bytearray(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    raw[-1] ^= 0x01
    moved = base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode() + "." + signature
    with pytest.raises(InvalidToken, match="not valid"):
        tokens.user_id(moved, now=issued)
    # An expired cookie is replaced on the next request, and the cookie itself lasts as long as the token.
    import time

    expired = tokens.issue(now=time.time() - 3 * day)
    client = TestClient(_app(tokens), cookies={COOKIE: expired})
    response = client.get("/")
    assert response.status_code == 401 and "expired" in response.text and "set-cookie" in response.headers
    assert f"max-age={2 * day}" in response.headers["set-cookie"].lower()
    # A guest who keeps coming keeps their space: past half its lifetime, a token is renewed for the same guest.
    now = time.time()
    fresh = tokens.issue(now=now - day / 2)
    assert tokens.renewed(fresh) is None
    old = tokens.issue(now=now - 1.5 * day)
    renewed = tokens.renewed(old)
    assert renewed is not None and tokens.user_id(renewed) == tokens.user_id(old)
    assert tokens.user_id(renewed, now=now + 1.9 * day) == tokens.user_id(old)  # a new lifetime from today
    response = TestClient(_app(tokens), cookies={COOKIE: old}).get("/")
    assert response.status_code == 200 and response.text == tokens.user_id(old)
    sent = response.headers["set-cookie"].split(";")[0].split("=", 1)[1]
    assert sent != old and tokens.user_id(sent) == tokens.user_id(old)


def test_the_client_address_is_read_behind_trusted_proxies_only() -> None:
    from types import SimpleNamespace

    from starlette.datastructures import Headers

    from copilot.ui.users import client_address

    def request(*forwarded: str, peer: str = "10.0.0.5") -> SimpleNamespace:
        raw = [(b"x-forwarded-for", line.encode()) for line in forwarded]
        return SimpleNamespace(headers=Headers(raw=raw), client=SimpleNamespace(host=peer))

    direct, one, two = (Settings(proxy_count=n) for n in (0, 1, 2))
    assert client_address(request("6.6.6.6"), direct) == "10.0.0.5"  # no proxy: the header is the client's word
    assert client_address(request("6.6.6.6, 203.0.113.9"), one) == "203.0.113.9"
    assert client_address(request("6.6.6.6, 203.0.113.9, 10.1.1.1"), two) == "203.0.113.9"
    # A proxy that adds its own header line: every line counts, in order, so a forged first line is not read.
    assert client_address(request("6.6.6.6", "203.0.113.9"), one) == "203.0.113.9"
    assert client_address(request(), one) == "10.0.0.5"  # no header at all: the peer
    # One IPv6 subscriber holds a /64: its addresses share one allowance.
    assert client_address(request("2001:db8::1"), one) == client_address(request("2001:db8::ffff:2"), one) \
        == "2001:db8::/64"
