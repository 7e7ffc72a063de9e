"""What every tab needs: the engine, who the user is, whether quotas apply, and how errors reach the page."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import gradio as gr

from copilot.config import Settings
from copilot.engine import Copilot
from copilot.errors import one_line, without_paths
from copilot.storage import StorageError
from copilot.ui.identity import GuestTokens, guest_tokens
from copilot.ui.services import Services
from copilot.limits import is_guest
from copilot.ui.users import Mode, client_address, resolve_user

logger = logging.getLogger(__name__)
UNAVAILABLE = "The library's database cannot be used right now; the site's owner can see why in the server log."
MAX_ADDRESSES = 100_000  # guests whose last client address is remembered, the least recently seen forgotten first


def from_agent(request: gr.Request | None) -> bool:
    """Whether Gradio's MCP server makes the call, for an agent (it marks its own requests so)."""
    headers = getattr(request, "headers", None) or {}
    return headers.get("x-gradio-user") == "mcp"


def page_error(exc: BaseException) -> gr.Error:
    """A readable error for the page: the exception's one line, without server paths; the traceback stays in the
    server log."""
    message = exc.message if isinstance(exc, gr.Error) else one_line(exc)
    return gr.Error(" ".join(without_paths(str(message)).split()))


@dataclass
class AppContext:
    settings: Settings
    services: Services
    mode: Mode
    tokens: GuestTokens | None = field(default=None)
    _addresses: OrderedDict[str, str | None] = field(default_factory=OrderedDict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.tokens is None and self.mode != "single":
            self.tokens = guest_tokens(self.settings)

    @property
    def copilot(self) -> Copilot:
        """The engine every action calls (loaded on first use)."""
        return self.services.copilot

    def user(self, request: gr.Request | None, profile: gr.OAuthProfile | None = None) -> str:
        """Who is asking; every action starts here, so an unusable database is reported before anything else.
        A guest's client address is noted for the allowance all guests from that address share."""
        self.ready()
        if from_agent(request):  # Gradio's MCP server calling: only the agents' tools, which need a token
            raise gr.Error("This action is not one of the agents' tools.")
        user_id = resolve_user(self.mode, request, profile, self.tokens)
        if self.quotas and is_guest(user_id):
            address = client_address(request, self.settings)
            with self._lock:
                self._addresses[user_id] = address
                self._addresses.move_to_end(user_id)
                while len(self._addresses) > MAX_ADDRESSES:
                    self._addresses.popitem(last=False)
        return user_id

    def ready(self) -> None:
        """Raise the page's error when the database cannot be used: the storage layer's one line, no traceback. A
        shared instance's visitors read that it is unavailable, without its file or host, which stays in the log."""
        try:
            self.services.store  # noqa: B018 - opens the records (not the models) on first use
        except StorageError as exc:
            if self.single_user:
                raise page_error(exc) from exc
            logger.error("the database cannot be used: %s", exc)
            raise gr.Error(UNAVAILABLE) from exc

    @property
    def single_user(self) -> bool:
        """One person owns this instance: they may also remove shared arXiv papers, and no quota applies."""
        return self.mode == "single"

    @property
    def quotas(self) -> bool:
        """Per-user quotas apply: the instance serves several people."""
        return not self.single_user

    def address(self, user_id: str) -> str | None:
        """The client address a guest last came from (None for anyone else, or not seen)."""
        with self._lock:
            return self._addresses.get(user_id)

    def admit(self, user_id: str, action: str = "question", n: int = 1) -> None:
        """Count a request of ``user_id`` against its limits on an instance that serves several people: a model
        request (``question``: a question, a draft, ideas), ``n`` arXiv requests (``search``), ``n`` uploads or a
        memory; a guest's also against the allowance of the client address it came from."""
        if self.quotas:
            with self._lock:
                address = self._addresses.get(user_id)
            self.copilot.admit(user_id, action, n, address=address)
