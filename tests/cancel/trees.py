"""Run trees written straight into a store (going through Lua would take minutes at these
sizes): every run ``awaiting``, as a parked child is, with no wake-up left to serve."""

from __future__ import annotations

from collections.abc import Sequence

from runtime.core.journal import Entry, Kind, Status
from runtime.store.base import RunRecord, RunUpdate, Store

WORKFLOW = "leaf"  # declared by tests/projects/cancel_cascade, so a server may serve them


def add_run(store: Store, run_id: str, parent: str | None, at: float) -> None:
    record = RunRecord(
        id=run_id, workflow=WORKFLOW, status=Status.RUNNING, input=None, parent_id=parent, created_at=at
    )
    store.create_run(record, Entry(1, Kind.STARTED, WORKFLOW, {"format": 1, "input": None}, at))
    store.append(run_id, 1, [], update=RunUpdate(Status.AWAITING, "await 'go'"))


def quiet(store: Store) -> None:
    """Drop the wake-ups the starts left (nothing here needs a worker)."""
    for run_id, token in store.wakeups():
        store.clear_wakeup(run_id, token)


def chain(store: Store, root: str, depth: int, at: float = 1_000.0) -> list[str]:
    """``root`` and ``depth`` runs below it, each the child of the one before."""
    ids = [root] + [f"{root}-{i}" for i in range(1, depth + 1)]
    for i, run_id in enumerate(ids):
        add_run(store, run_id, ids[i - 1] if i else None, at + i * 0.001)
    quiet(store)
    return ids


def fan(store: Store, root: str, width: int, at: float = 1_000.0) -> list[str]:
    """``root`` and ``width`` children of it."""
    add_run(store, root, None, at)
    kids = [f"{root}-{i:05d}" for i in range(width)]
    for i, run_id in enumerate(kids):
        add_run(store, run_id, root, at + (i + 1) * 0.001)
    quiet(store)
    return [root, *kids]


def statuses(store: Store, ids: Sequence[str]) -> dict[str, int]:
    """How many of ``ids`` are in each status."""
    counts: dict[str, int] = {}
    for run_id in ids:
        run = store.get_run(run_id)
        key = "missing" if run is None else str(run.status)
        counts[key] = counts.get(key, 0) + 1
    return counts
