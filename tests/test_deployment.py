"""On Hugging Face Spaces the app says what its owner must set to keep data and guests across restarts: in the log
at start-up and on the page for the signed-in owner only. Elsewhere it says nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from copilot.config import Settings
from copilot.ui.app import deployment_warnings, owner_notice


def test_nothing_is_said_off_spaces(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert deployment_warnings(Settings(data_dir=tmp_path)) == []


def test_a_space_without_persistent_storage_or_secret_is_warned(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    monkeypatch.setenv("SPACE_ID", "ada/paper-copilot")
    monkeypatch.setenv("SPACE_AUTHOR_NAME", "ada")
    ephemeral = deployment_warnings(Settings(data_dir=tmp_path, secret=SecretStr("")))
    assert len(ephemeral) == 2
    assert "loses at every restart" in ephemeral[0] and "COPILOT_DATA_DIR=/data/copilot" in ephemeral[0]
    assert "COPILOT_SECRET is not set" in ephemeral[1]
    assert all("\n" not in w for w in ephemeral)
    kept = Settings(data_dir=Path("/data/copilot"), secret=SecretStr("x" * 32))
    assert deployment_warnings(kept) == []
    # Only the Space's owner, signed in, reads them on the page.
    broken = Settings(data_dir=tmp_path, secret=SecretStr(""))
    assert "For this Space's owner" in owner_notice("hf:ada", broken) and "COPILOT_SECRET" in owner_notice("hf:ada",
                                                                                                             broken)
    assert owner_notice("hf:bob", broken) == "" and owner_notice("guest-x", broken) == ""
    assert owner_notice("hf:ada", kept) == ""
