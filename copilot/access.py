"""Personal access tokens (what an agent, an MCP client, sends to act as its user), the instance secret, and the
credentials kept sealed with it.

A token is ``pct_`` and 256 random bits (URL-safe base64). The user sees it once, when it is made; the server
keeps only its SHA-256, which is enough for a secret that cannot be guessed, so a copy of the database opens no
account. It travels in the :data:`HEADER` request header, never in a cookie or a session hash.

A credential the instance must use again (a Zotero API key) is kept encrypted (Fernet, from ``cryptography``) with a
key derived from the instance secret: a copy of the database alone does not reveal it.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import secrets
from pathlib import Path

from typing import Any

from copilot.config import Settings
from copilot.errors import UserError

SECRET_FILE = "secret.key"
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


def load_secret(settings: Settings) -> bytes:
    """``COPILOT_SECRET`` when set, else the key kept in the data directory (created once, readable by the owner
    only), so tokens survive a restart."""
    configured = settings.secret.get_secret_value()
    if configured:
        return configured.encode("utf-8")
    path = Path(settings.data_dir) / SECRET_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        key = path.read_text(encoding="ascii").strip()
        if len(key) < 32:
            raise RuntimeError(f"{path} holds no usable secret: delete it (guests get new sessions) or set "
                               "COPILOT_SECRET.") from None
        return key.encode("ascii")
    key = secrets.token_hex(32)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(key + "\n")
    return key.encode("ascii")


class UnsealError(UserError):
    """A sealed credential this instance cannot open (its secret changed since)."""


def _fernet(settings: Settings) -> Any:  # noqa: ANN401 - a cryptography Fernet
    from cryptography.fernet import Fernet

    key = hashlib.sha256(b"paper-copilot sealed credential\0" + load_secret(settings)).digest()
    return Fernet(base64.urlsafe_b64encode(key))


def seal(settings: Settings, text: str) -> str:
    """``text`` encrypted with the instance secret."""
    return _fernet(settings).encrypt(text.encode("utf-8")).decode("ascii")


def unseal(settings: Settings, sealed: str) -> str:
    from cryptography.fernet import InvalidToken

    try:
        return _fernet(settings).decrypt(sealed.encode("ascii")).decode("utf-8")
    except InvalidToken as exc:
        raise UnsealError("The stored key cannot be read (this instance's secret changed): connect again.") from exc
