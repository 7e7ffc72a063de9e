"""Stored evaluation runs: one row per task of a run, its summary as JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from copilot.storage.rows import fetch_all, inserted_id, loads
from copilot.types import EvalRun

if TYPE_CHECKING:
    from copilot.storage.store import Store


class EvalRunRepository:
    """Reads and writes ``eval_runs``."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def add(self, *, task: str, methods: Sequence[str], started_at: str, finished_at: str, path: str,
            report: dict[str, Any]) -> int:
        with self._store.transaction() as conn:
            return inserted_id(conn,
                "INSERT INTO eval_runs (task, methods, started_at, finished_at, path, report) "
                "VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                [task, ",".join(methods), started_at, finished_at, path, json.dumps(report)])

    def list(self, task: str | None = None) -> list[EvalRun]:
        """Stored runs (of one task when given), oldest first."""
        where, params = ("WHERE task = ?", [task]) if task else ("", [])
        return [EvalRun(id=r["id"], task=r["task"], methods=(r["methods"] or "").split(","),
                        started_at=r["started_at"], finished_at=r["finished_at"], path=r["path"],
                        report=loads(r["report"], {}))
                for r in fetch_all(self._store.conn, f"SELECT * FROM eval_runs {where} ORDER BY id", params)]
