"""Personal access tokens: what an agent (an MCP client) sends to act as its user.

A token is ``pct_`` and 256 random bits (URL-safe base64). The user sees it once, when it is made; the server
keeps only its SHA-256, which is enough for a secret that cannot be guessed, so a copy of the database opens no
account. It travels in the :data:`HEADER` request header, never in a cookie or a session hash.
"""

from __future__ import annotations

import hashlib
import re
import secrets

PREFIX = "pct_"
HEADER = "x-copilot-token"
MAX_TOKEN_NAME_CHARS = 60
_SHAPE = re.compile(r"pct_[A-Za-z0-9_-]{43}")


def new_secret() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def well_formed(secret: str | None) -> bool:
    """Has ``secret`` the shape of a token (the database is not asked about anything else)?"""
    return bool(secret) and _SHAPE.fullmatch(secret.strip()) is not None


def token_hash(secret: str) -> str:
    return hashlib.sha256(secret.strip().encode("ascii")).hexdigest()
