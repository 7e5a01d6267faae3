"""``kv "namespace"``: keys and JSON-like values with optional TTLs, on SQLite, within the
key and value limits of ``runtime.services.keys`` (the same as on DynamoDB)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from runtime.core.durations import parse_ms
from runtime.services.base import ServiceError
from runtime.services.keys import check_key, check_name, fits_a_key, options, shown, stored

SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
    ns TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, expires_at REAL,
    PRIMARY KEY (ns, key)
) WITHOUT ROWID;
"""

MAX_LIST = 1000


class KV:
    def __init__(self, db: Callable[[], sqlite3.Connection], now: Callable[[], float]) -> None:
        self._db = db
        self._now = now

    def call(self, ns: str, method: str, args: list[Any]) -> list[Any]:
        check_name(ns, f"kv '{shown(ns)}'")
        db = self._db()
        now = self._now()
        if method in ("get", "put", "delete"):
            if not args or not isinstance(args[0], str) or not args[0]:
                raise ServiceError(f"kv '{ns}':{method} expects a non-empty string key first")
            key = check_key(args[0], f"kv '{ns}':{method}")
        if method == "get":
            row = db.execute(
                "SELECT value FROM kv WHERE ns = ? AND key = ? AND (expires_at IS NULL OR expires_at > ?)",
                (ns, key, now),
            ).fetchone()
            return [None if row is None else json.loads(row[0])]
        if method == "put":
            value = args[1] if len(args) > 1 else None
            opts = options(args[2] if len(args) > 2 else None, ("ttl",), f"kv '{ns}':put", '{ ttl = "1h" }')
            expires = None
            if opts.get("ttl") is not None:
                expires = now + parse_ms(opts["ttl"], f"the ttl of kv '{ns}':put") / 1000
            if value is None:
                db.execute("DELETE FROM kv WHERE ns = ? AND key = ?", (ns, key))
            else:
                text = stored(value, f"the value of kv '{ns}' key '{shown(key)}'")
                db.execute(
                    "INSERT INTO kv VALUES (?,?,?,?) ON CONFLICT (ns, key) DO UPDATE SET "
                    "value = excluded.value, expires_at = excluded.expires_at",
                    (ns, key, text, expires),
                )
            return []
        if method == "delete":
            cur = db.execute("DELETE FROM kv WHERE ns = ? AND key = ?", (ns, key))
            return [cur.rowcount > 0]
        if method == "list":
            opts = options(
                args[0] if args else None,
                ("prefix", "limit"),
                f"kv '{ns}':list",
                '{ prefix = "a", limit = 100 }',
            )
            prefix = str(opts.get("prefix") or "")
            limit = opts.get("limit", MAX_LIST)
            if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIST:
                raise ServiceError(f"kv '{ns}':list limit must be a whole number from 1 to {MAX_LIST}")
            if not fits_a_key(prefix):
                return [[]]
            rows = db.execute(
                "SELECT key, value FROM kv WHERE ns = ? AND key >= ? AND key < ? "
                "AND (expires_at IS NULL OR expires_at > ?) ORDER BY key LIMIT ?",
                (ns, prefix, prefix + "\U0010ffff", now, limit),
            ).fetchall()
            return [[{"key": k, "value": json.loads(v)} for k, v in rows]]
        raise ServiceError(f"kv '{ns}' has no method '{method}'; use get, put, delete or list")
