"""Personal access tokens (what an agent acts as its user with), on each storage backend: made with a secret shown
once and kept only as its hash, bounded per user, refused once revoked, and never another user's to revoke."""

from __future__ import annotations

from pathlib import Path

import pytest

from copilot import access
from copilot.config import Settings
from copilot.embeddings import Embedder
from copilot.engine import Copilot
from copilot.errors import NotFound
from copilot.limits import LimitExceeded
from tests.conftest import all_rows
from tests.scripted_llm import ScriptedLLM


@pytest.fixture
def copilot(open_store, tmp_path: Path, embedder: Embedder) -> Copilot:  # noqa: ANN001 - on each backend
    settings = Settings(data_dir=tmp_path / "data", llm_backend="local", max_access_tokens=2)
    return Copilot(settings, open_store(), embedder, ScriptedLLM())


def test_a_token_acts_as_its_user_until_revoked_and_only_its_hash_is_kept(copilot: Copilot) -> None:
    token, secret = copilot.create_access_token("ada", "  my   laptop ")
    assert access.well_formed(secret) and token.name == "my laptop" and token.user_id == "ada"
    assert copilot.token_user(secret) == "ada" and copilot.token_user(f" {secret} ") == "ada"
    stored = all_rows(copilot.store, "access_tokens")
    assert len(stored) == 1 and secret not in repr(stored) and stored[0]["token_hash"] == access.token_hash(secret)
    assert copilot.access_tokens("ada")[0].last_used_at is not None, "its last use is shown"
    for forged in ("", "pct_", secret[:-1], secret[:-1] + ("A" if secret[-1] != "A" else "B"), "guest-ada"):
        assert copilot.token_user(forged) is None, forged
    with pytest.raises(NotFound):
        copilot.revoke_access_token("bob", token.id)  # not bob's
    assert copilot.token_user(secret) == "ada"
    copilot.revoke_access_token("ada", token.id)
    assert copilot.token_user(secret) is None and copilot.access_tokens("ada") == []
    with pytest.raises(NotFound):
        copilot.revoke_access_token("ada", token.id)


def test_a_guests_token_lasts_no_longer_than_a_guests_cookie(copilot: Copilot) -> None:
    from copilot.limits import GUEST_PREFIX

    guest, member = f"{GUEST_PREFIX}ada", "hf:bob"
    secrets = {user: copilot.create_access_token(user, "agent")[1] for user in (guest, member)}
    copilot.store.conn.execute("UPDATE access_tokens SET created_at = ?", ["2020-01-01T00:00:00+00:00"])
    assert copilot.token_user(secrets[guest]) is None, "past COPILOT_GUEST_DAYS"
    assert copilot.token_user(secrets[member]) == member, "a signed-in user's token lasts until revoked"


def test_tokens_per_user_are_bounded_and_named(copilot: Copilot) -> None:
    first, _ = copilot.create_access_token("ada", "")
    second, _ = copilot.create_access_token("ada", "x" * 500)
    assert first.name == "agent" and len(second.name) == access.MAX_TOKEN_NAME_CHARS
    with pytest.raises(LimitExceeded, match="2 access tokens"):
        copilot.create_access_token("ada", "third")
    assert copilot.create_access_token("bob", "his")[0].user_id == "bob", "the bound is per user"
    assert [t.id for t in copilot.access_tokens("ada")] == [second.id, first.id]
    copilot.revoke_access_token("ada", first.id)
    assert copilot.create_access_token("ada", "third")[0].name == "third"
