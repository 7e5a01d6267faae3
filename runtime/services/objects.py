"""``object "Name" {...}``: per-key state persisted after each call; calls to one key are
serialized (a lock per key in this process, and a version check in the table)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

from runtime.services.base import ObjectRunner, ServiceError

SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    cls TEXT NOT NULL, key TEXT NOT NULL, state TEXT NOT NULL, version INTEGER NOT NULL,
    PRIMARY KEY (cls, key)
) WITHOUT ROWID;
"""


class Objects:
    def __init__(self, db: Callable[[], sqlite3.Connection]) -> None:
        self._db = db
        self._locks: dict[tuple[str, str], threading.RLock] = {}
        self._guard = threading.Lock()

    def _lock(self, cls: str, key: str) -> threading.RLock:
        with self._guard:
            return self._locks.setdefault((cls, key), threading.RLock())

    def call(self, runner: ObjectRunner, cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        with self._lock(cls, key):
            row = (
                self._db()
                .execute("SELECT state, version FROM objects WHERE cls = ? AND key = ?", (cls, key))
                .fetchone()
            )
            state, version = ({}, 0) if row is None else (json.loads(row[0]), int(row[1]))
            results, new_state = runner.call_object(cls, key, method, state, args)
            if new_state is None:
                new_state = {}
            cur = self._db().execute(
                "INSERT INTO objects VALUES (?,?,?,1) ON CONFLICT (cls, key) DO UPDATE SET "
                "state = excluded.state, version = objects.version + 1 WHERE objects.version = ?",
                (cls, key, json.dumps(new_state, separators=(",", ":")), version),
            )
            if cur.rowcount != 1:
                raise ServiceError(
                    f"{cls}('{key}'):{method}: the object's state changed in another process during "
                    "the call; "
                    "calls to one key are serialized within one lunaflow process — run one per data folder"
                )
            return results

    def state(self, cls: str, key: str) -> Any:
        row = self._db().execute("SELECT state FROM objects WHERE cls = ? AND key = ?", (cls, key)).fetchone()
        return None if row is None else json.loads(row[0])
