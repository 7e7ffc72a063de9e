"""What every tab needs: the services, who the user is, and how errors reach the page."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from copilot.config import Settings
from copilot.storage import StorageError
from copilot.ui.services import Services
from copilot.ui.users import LOCAL_USER, Mode, resolve_user


@dataclass
class AppContext:
    settings: Settings
    services: Services
    mode: Mode

    def user(self, request: gr.Request | None, profile: gr.OAuthProfile | None = None) -> str:
        """Who is asking; every action starts here, so an unusable database is reported before anything else."""
        self.ready()
        return resolve_user(self.mode, request, profile)

    def ready(self) -> None:
        """Raise the page's error when the database cannot be used: the storage layer's one line, no traceback."""
        try:
            self.services.store  # noqa: B018 - opens the records (not the models) on first use
        except StorageError as exc:
            raise fail(exc) from exc

    @property
    def single_user(self) -> bool:
        """One person owns this instance: they may also remove shared arXiv papers."""
        return self.mode == "single"

    def export_dir(self, user_id: str) -> Path:
        """Where a user's downloadable drafts go: inside the data directory, one folder per user."""
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in user_id) or LOCAL_USER
        path = self.settings.data_dir / "exports" / safe
        path.mkdir(parents=True, exist_ok=True)
        return path


def fail(exc: Exception) -> gr.Error:
    """A readable error for the page; the traceback stays in the server log."""
    return gr.Error(str(exc) or exc.__class__.__name__)
