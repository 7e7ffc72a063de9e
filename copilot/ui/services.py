"""The engine of one running web app, opened on first use so that the page appears at once.

``store`` opens only the records (an unusable database is reported before any model loads); ``copilot`` the
whole engine, :class:`copilot.engine.Copilot`, which every tab calls and which holds every rule.
"""

from __future__ import annotations

import threading

from copilot.config import Settings
from copilot.engine import Copilot
from copilot.library import Library
from copilot.storage import Store


class Services:
    """The engine and library of one running instance, loaded on first use."""

    def __init__(self, settings: Settings, copilot: Copilot | None = None, library: Library | None = None) -> None:
        """``copilot`` and ``library``: already opened ones (tests, benchmarks); the library then serves the
        engine."""
        self.settings = settings
        self._copilot = copilot
        self._store: Store | None = None
        self._lock = threading.Lock()
        if copilot is not None and library is not None:
            copilot.library = library

    @property
    def store(self) -> Store:
        """The records, opened without the models: raises ``StorageError`` (one line naming the database file and
        what to do) when the database cannot be used; every action asks again, so a repaired file is picked up."""
        with self._lock:
            if self._copilot is not None:
                return self._copilot.store
            if self._store is None:
                self._store = Store.open(self.settings)
            return self._store

    @property
    def copilot(self) -> Copilot:
        store = self.store
        with self._lock:
            if self._copilot is None:
                self._copilot = Copilot.open(self.settings, store=store, adopt_jobs=True, read_ahead=True)
            return self._copilot

    @property
    def library(self) -> Library:
        return self.copilot.library
