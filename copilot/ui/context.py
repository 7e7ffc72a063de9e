"""What every tab needs: the engine, who the user is, whether quotas apply, and how errors reach the page."""

from __future__ import annotations

from dataclasses import dataclass, field

import gradio as gr

from copilot.config import Settings
from copilot.engine import Copilot
from copilot.errors import one_line
from copilot.storage import StorageError
from copilot.ui.identity import GuestTokens, load_secret
from copilot.ui.services import Services
from copilot.ui.users import Mode, resolve_user


def page_error(exc: BaseException) -> gr.Error:
    """A readable error for the page: the exception's one line; the traceback stays in the server log."""
    return gr.Error(one_line(exc))


@dataclass
class AppContext:
    settings: Settings
    services: Services
    mode: Mode
    tokens: GuestTokens | None = field(default=None)

    def __post_init__(self) -> None:
        if self.tokens is None and self.mode != "single":
            self.tokens = GuestTokens(load_secret(self.settings))

    @property
    def copilot(self) -> Copilot:
        """The engine every action calls (loaded on first use)."""
        return self.services.copilot

    def user(self, request: gr.Request | None, profile: gr.OAuthProfile | None = None) -> str:
        """Who is asking; every action starts here, so an unusable database is reported before anything else."""
        self.ready()
        return resolve_user(self.mode, request, profile, self.tokens)

    def ready(self) -> None:
        """Raise the page's error when the database cannot be used: the storage layer's one line, no traceback."""
        try:
            self.services.store  # noqa: B018 - opens the records (not the models) on first use
        except StorageError as exc:
            raise page_error(exc) from exc

    @property
    def single_user(self) -> bool:
        """One person owns this instance: they may also remove shared arXiv papers, and no quota applies."""
        return self.mode == "single"

    @property
    def quotas(self) -> bool:
        """Per-user quotas apply: the instance serves several people."""
        return not self.single_user

    def admit(self, user_id: str, action: str = "question", n: int = 1) -> None:
        """Count a request of ``user_id`` against its per-minute limit on an instance that serves several people:
        a model request (a question, a draft, ideas) or ``n`` arXiv requests (``search``)."""
        if self.quotas:
            self.copilot.admit(user_id, action, n)
