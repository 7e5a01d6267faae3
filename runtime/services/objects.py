"""``object "Name" {...}``: per-key state persisted after each call; calls to one key are
serialized (a lock per key in this process, and a version check in the table). Keys and
state are held to the limits of ``runtime.services.keys``, as on DynamoDB."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from runtime.services import deadline
from runtime.services.base import ObjectRunner, ServiceError
from runtime.services.keys import check_key, check_name, shown, stored

SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    cls TEXT NOT NULL, key TEXT NOT NULL, state TEXT NOT NULL, version INTEGER NOT NULL,
    PRIMARY KEY (cls, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS object_locks (
    cls TEXT NOT NULL, key TEXT NOT NULL, owner TEXT NOT NULL, until REAL NOT NULL,
    PRIMARY KEY (cls, key)
) WITHOUT ROWID;
"""

LOCK_S = 60.0  # a crashed holder's lock frees itself after this
WAIT_S = 30.0  # how long a call waits for another process's call on the same key


class Objects:
    def __init__(self, db: Callable[[], sqlite3.Connection]) -> None:
        self._db = db
        self._locks: dict[tuple[str, str], threading.RLock] = {}
        self._guard = threading.Lock()

    def _lock(self, cls: str, key: str) -> threading.RLock:
        with self._guard:
            return self._locks.setdefault((cls, key), threading.RLock())

    @contextmanager
    def _process_lock(self, cls: str, key: str, what: str) -> Iterator[None]:
        """Serialize calls to one key across processes sharing the data folder."""
        me = f"{os.getpid()}:{uuid.uuid4().hex}"
        give_up = time.monotonic() + WAIT_S
        limit = deadline.current()  # a step attempt's deadline bounds the wait too
        if limit is not None and limit.at < give_up:
            give_up = limit.at
        pause = 0.005
        while True:
            now = time.time()
            cur = self._db().execute(
                "INSERT INTO object_locks VALUES (?,?,?,?) ON CONFLICT (cls, key) DO UPDATE SET "
                "owner = excluded.owner, until = excluded.until WHERE object_locks.until < ?",
                (cls, key, me, now + LOCK_S, now),
            )
            if cur.rowcount == 1:
                break
            if self._holder_dead(cls, key):
                # Its process was killed mid-call (the data folder is on this machine).
                self._db().execute("DELETE FROM object_locks WHERE cls = ? AND key = ?", (cls, key))
                continue
            if time.monotonic() > give_up:
                if limit is not None and limit.passed():
                    raise limit.expired()
                raise ServiceError(f"{what}: the object is busy with another call for over {WAIT_S:.0f}s")
            time.sleep(pause)
            pause = min(pause * 2, 0.2)
        try:
            yield
        finally:
            self._db().execute(
                "DELETE FROM object_locks WHERE cls = ? AND key = ? AND owner = ?", (cls, key, me)
            )

    def _holder_dead(self, cls: str, key: str) -> bool:
        row = (
            self._db()
            .execute("SELECT owner FROM object_locks WHERE cls = ? AND key = ?", (cls, key))
            .fetchone()
        )
        if row is None:
            return False
        pid = int(str(row[0]).split(":", 1)[0] or 0)
        if pid == os.getpid():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    @contextmanager
    def _thread_lock(self, cls: str, key: str) -> Iterator[None]:
        """The key's lock in this process; a step attempt waits for it until its deadline."""
        lock = self._lock(cls, key)
        limit = deadline.current()
        if not lock.acquire(timeout=-1 if limit is None else max(0.0, limit.left())):
            assert limit is not None
            raise limit.expired()
        try:
            yield
        finally:
            lock.release()

    def call(self, runner: ObjectRunner, cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        check_name(cls, f"object '{shown(cls)}'")
        check_key(key, f"{cls}('{shown(key)}'):{method}")
        with self._thread_lock(cls, key), self._process_lock(cls, key, f"{cls}('{key}'):{method}"):
            row = (
                self._db()
                .execute("SELECT state, version FROM objects WHERE cls = ? AND key = ?", (cls, key))
                .fetchone()
            )
            state, version = ({}, 0) if row is None else (json.loads(row[0]), int(row[1]))
            results, new_state = runner.call_object(cls, key, method, state, args)
            text = stored({} if new_state is None else new_state, f"the state of {cls}('{shown(key)}')")
            cur = self._db().execute(
                "INSERT INTO objects VALUES (?,?,?,1) ON CONFLICT (cls, key) DO UPDATE SET "
                "state = excluded.state, version = objects.version + 1 WHERE objects.version = ?",
                (cls, key, text, version),
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
