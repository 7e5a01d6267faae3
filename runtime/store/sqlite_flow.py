"""Flow control on the SQLite store: slots per key, the lines of runs waiting for them, rate
buckets and their settings (runtime.core.flow). Each function works inside a transaction the
store holds (``db``); a release runs in the very append that ends the run, so no crash
between the end and the release can leak a slot.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from runtime.core.flow import (
    MAX_COLLECTED_BYTES,
    Admission,
    Collect,
    Rate,
    SlotView,
    SlotWant,
    parse_rate,
    reserve,
    setting_names,
)
from runtime.core.values import compact
from runtime.store.base import RunRecord

SCHEMA = """
-- Flow control (schema 7). A run passing its gate is in `flow_runs` with what it wants
-- (JSON [[key, limit, name], ...]) and its rank; it holds a slot of each key (`flow_holders`)
-- or waits in each key's line (`flow_waiters`, ordered by rank).
CREATE TABLE IF NOT EXISTS flow_runs (
    run_id TEXT PRIMARY KEY,
    wants TEXT NOT NULL,
    rank INTEGER NOT NULL,
    holding INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS flow_holders (key TEXT NOT NULL, run_id TEXT NOT NULL, PRIMARY KEY (key, run_id));
CREATE TABLE IF NOT EXISTS flow_waiters (
    key TEXT NOT NULL,
    rank INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    PRIMARY KEY (key, run_id)
);
CREATE INDEX IF NOT EXISTS flow_waiters_by_rank ON flow_waiters (key, rank, run_id);
-- The limit each key's code declared, last seen: a release admits by it.
CREATE TABLE IF NOT EXISTS flow_limits (key TEXT PRIMARY KEY, declared INTEGER NOT NULL, name TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS flow_settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
-- A rate bucket's next theoretical arrival time (epoch ms, fractional).
CREATE TABLE IF NOT EXISTS flow_rates (key TEXT PRIMARY KEY, tat REAL NOT NULL);
-- Debounce and batching: the inputs a run collects (a JSON list) until its collection
-- closes; `flow_open` names the run each key's starts join now.
CREATE TABLE IF NOT EXISTS flow_collect (
    run_id TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    events TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    count INTEGER NOT NULL,
    first_ms INTEGER NOT NULL,
    last_ms INTEGER NOT NULL,
    closed INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS flow_open (key TEXT PRIMARY KEY, run_id TEXT NOT NULL);
"""

Wake = Callable[[sqlite3.Connection, str], None]


def _wants(text: str) -> list[SlotWant]:
    return [SlotWant(k, int(n), name) for k, n, name in json.loads(text)]


def _limit(db: sqlite3.Connection, want: SlotWant) -> int:
    for name in setting_names(want):
        row = db.execute("SELECT value FROM flow_settings WHERE name = ?", (name,)).fetchone()
        if row is not None:
            return int(row[0])
    return want.limit


def _in_use(db: sqlite3.Connection, key: str, run_id: str) -> int:
    return int(
        db.execute(
            "SELECT COUNT(*) FROM flow_holders WHERE key = ? AND run_id != ?", (key, run_id)
        ).fetchone()[0]
    )


def _full(db: sqlite3.Connection, run_id: str, wants: Sequence[SlotWant]) -> tuple[SlotWant, int, int] | None:
    """The first key without room for the run: (want, in use, limit)."""
    for w in wants:
        limit, used = _limit(db, w), _in_use(db, w.key, run_id)
        if used >= limit:
            return w, used, limit
    return None


def _hold(db: sqlite3.Connection, run_id: str, wants: Sequence[SlotWant]) -> None:
    for w in wants:
        db.execute("INSERT OR IGNORE INTO flow_holders VALUES (?, ?)", (w.key, run_id))
    db.execute("DELETE FROM flow_waiters WHERE run_id = ?", (run_id,))
    db.execute("UPDATE flow_runs SET holding = 1 WHERE run_id = ?", (run_id,))


def _place(db: sqlite3.Connection, key: str, rank: int, run_id: str) -> int:
    row = db.execute(
        "SELECT COUNT(*) FROM flow_waiters WHERE key = ? AND (rank < ? OR (rank = ? AND run_id < ?))",
        (key, rank, rank, run_id),
    ).fetchone()
    return int(row[0]) + 1


def admit(db: sqlite3.Connection, run_id: str, wants: Sequence[SlotWant], rank: int) -> Admission:
    row = db.execute("SELECT holding, rank FROM flow_runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is not None and row[0]:
        return Admission(True)
    for w in wants:
        db.execute(
            "INSERT INTO flow_limits VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE "
            "SET declared = excluded.declared, name = excluded.name",
            (w.key, w.limit, w.name),
        )
    rank = rank if row is None else int(row[1])  # a place in line is kept
    encoded = json.dumps([[w.key, w.limit, w.name] for w in wants])
    db.execute(
        "INSERT INTO flow_runs VALUES (?, ?, ?, 0) ON CONFLICT (run_id) DO UPDATE SET wants = excluded.wants",
        (run_id, encoded, rank),
    )
    full = _full(db, run_id, wants)
    if full is None:
        _hold(db, run_id, wants)
        return Admission(True)
    for w in wants:
        db.execute("INSERT OR IGNORE INTO flow_waiters VALUES (?, ?, ?)", (w.key, rank, run_id))
    want, used, limit = full
    return Admission(False, want.key, used, limit, _place(db, want.key, rank, run_id))


def waiting_for(db: sqlite3.Connection, run_id: str) -> Admission | None:
    row = db.execute("SELECT wants, rank, holding FROM flow_runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is None or row[2]:
        return None
    full = _full(db, run_id, _wants(row[0]))
    if full is None:
        return Admission(False)  # a slot is free: its wake-up is on the way
    want, used, limit = full
    return Admission(False, want.key, used, limit, _place(db, want.key, int(row[1]), run_id))


def fill(db: sqlite3.Connection, key: str, wake: Wake) -> list[str]:
    """Hand the key's free slots to the runs in its line, best rank first, each only if
    every key it wants has room (a run blocked on another key keeps its place)."""
    admitted: list[str] = []
    skipped = 0
    while True:
        row = db.execute(
            "SELECT w.run_id, f.wants FROM flow_waiters w JOIN flow_runs f ON f.run_id = w.run_id "
            "WHERE w.key = ? ORDER BY w.rank, w.run_id LIMIT 1 OFFSET ?",
            (key, skipped),
        ).fetchone()
        if row is None:
            return admitted
        run_id, wants = str(row[0]), _wants(row[1])
        full = _full(db, run_id, wants)
        if full is None:
            _hold(db, run_id, wants)
            wake(db, run_id)
            admitted.append(run_id)
        elif full[0].key == key:
            return admitted  # this key is full again
        else:
            skipped += 1


def collect(
    db: sqlite3.Connection,
    run: RunRecord,
    key: str,
    spec: Collect,
    now_ms: int,
    create: Callable[[sqlite3.Connection], None],
    wake: Wake,
) -> str:
    """Add the start's input to the open collection of ``key`` and answer its run's id, or
    open one with a new run (``create``) and answer ``run.id``. A collection that this input
    would take past its size or bytes closes now (its run woken) and a new one opens."""
    event = compact(run.input)
    size = len(event.encode("utf-8"))
    row = db.execute("SELECT run_id FROM flow_open WHERE key = ?", (key,)).fetchone()
    if row is not None:
        open_id = str(row[0])
        c = db.execute(
            "SELECT events, bytes, count, closed FROM flow_collect WHERE run_id = ?", (open_id,)
        ).fetchone()
        if c is not None and not c[3]:
            if c[2] < spec.size and c[1] + size + 1 <= MAX_COLLECTED_BYTES:
                events = f"{c[0][:-1]},{event}]"
                db.execute(
                    "UPDATE flow_collect SET events = ?, bytes = bytes + ?, count = count + 1, last_ms = ? "
                    "WHERE run_id = ?",
                    (events, size + 1, now_ms, open_id),
                )
                if spec.kind == "batch" and c[2] + 1 >= spec.size:
                    wake(db, open_id)  # full: it closes now
                return open_id
            db.execute("UPDATE flow_collect SET closed = 1 WHERE run_id = ?", (open_id,))
            wake(db, open_id)
        db.execute("DELETE FROM flow_open WHERE key = ?", (key,))
    create(db)
    db.execute(
        "INSERT INTO flow_collect VALUES (?, ?, ?, ?, 1, ?, ?, 0)",
        (run.id, key, f"[{event}]", size + 2, now_ms, now_ms),
    )
    db.execute("INSERT INTO flow_open VALUES (?, ?)", (key, run.id))
    return run.id


def close(db: sqlite3.Connection, run_id: str, spec: Collect, now_ms: int) -> list[Any] | int | None:
    """The inputs the run collected once its collection closes (closing it now if due), the
    time it closes while it is open, or None when the run collects nothing (a start with an id)."""
    c = db.execute(
        "SELECT key, events, count, first_ms, last_ms, closed FROM flow_collect WHERE run_id = ?", (run_id,)
    ).fetchone()
    if c is None:
        return None
    key, events, count, first_ms, last_ms, closed = c
    if not closed:
        due = spec.due(int(first_ms), int(last_ms), int(count))
        if now_ms < due:
            return due
        db.execute("UPDATE flow_collect SET closed = 1 WHERE run_id = ?", (run_id,))
        db.execute("DELETE FROM flow_open WHERE key = ? AND run_id = ?", (key, run_id))
    return list(json.loads(events))


def release(db: sqlite3.Connection, run_id: str, wake: Wake) -> list[str]:
    db.execute("DELETE FROM flow_collect WHERE run_id = ?", (run_id,))
    db.execute("DELETE FROM flow_open WHERE run_id = ?", (run_id,))
    keys = [r[0] for r in db.execute("SELECT key FROM flow_holders WHERE run_id = ?", (run_id,))]
    db.execute("DELETE FROM flow_holders WHERE run_id = ?", (run_id,))
    db.execute("DELETE FROM flow_waiters WHERE run_id = ?", (run_id,))
    db.execute("DELETE FROM flow_runs WHERE run_id = ?", (run_id,))
    admitted: list[str] = []
    for key in keys:
        admitted += fill(db, key, wake)
    return admitted


def reserve_rate(db: sqlite3.Connection, rate: Rate, now_ms: int) -> int:
    row = db.execute("SELECT value FROM flow_settings WHERE name = ?", (f"rate:{rate.key}",)).fetchone()
    if row is not None:
        limit, period = parse_rate(row[0], f"the setting rate:{rate.key}")
        rate = Rate(rate.key, limit, period)
    old = db.execute("SELECT tat FROM flow_rates WHERE key = ?", (rate.key,)).fetchone()
    go_at, tat = reserve(None if old is None else float(old[0]), now_ms, rate)
    db.execute(
        "INSERT INTO flow_rates VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET tat = excluded.tat",
        (rate.key, tat),
    )
    return go_at


def set_setting(db: sqlite3.Connection, name: str, value: str | None, wake: Wake) -> list[str]:
    if value is None:
        db.execute("DELETE FROM flow_settings WHERE name = ?", (name,))
    else:
        db.execute(
            "INSERT INTO flow_settings VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            (name, value),
        )
    if name.startswith("rate:"):
        return []
    keys = [r[0] for r in db.execute("SELECT key FROM flow_limits WHERE key = ? OR name = ?", (name, name))]
    admitted: list[str] = []
    for key in keys:
        admitted += fill(db, key, wake)
    return admitted


def settings(db: sqlite3.Connection) -> dict[str, str]:
    return {str(n): str(v) for n, v in db.execute("SELECT name, value FROM flow_settings ORDER BY name")}


def views(db: sqlite3.Connection, limit: int) -> list[SlotView]:
    rows = db.execute(
        "SELECT l.key, l.declared, l.name, "
        "(SELECT COUNT(*) FROM flow_holders h WHERE h.key = l.key) AS held, "
        "(SELECT COUNT(*) FROM flow_waiters w WHERE w.key = l.key) AS waiting "
        "FROM flow_limits l WHERE held > 0 OR waiting > 0 ORDER BY waiting DESC, held DESC, l.key LIMIT ?",
        (limit,),
    ).fetchall()
    out = []
    for key, declared, name, held, queued in rows:
        want = SlotWant(str(key), int(declared), str(name))
        holders = [
            r[0]
            for r in db.execute(
                "SELECT run_id FROM flow_holders WHERE key = ? ORDER BY run_id LIMIT 20", (key,)
            )
        ]
        waiting = [
            r[0]
            for r in db.execute(
                "SELECT run_id FROM flow_waiters WHERE key = ? ORDER BY rank, run_id LIMIT 20", (key,)
            )
        ]
        out.append(SlotView(str(key), _limit(db, want), int(held), int(queued), holders, waiting))
    return out
