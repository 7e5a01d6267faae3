"""The store contract every backend implements (SQLite now, DynamoDB later).

Each method states its error contract. Backends raise only ``runtime.errors`` types:
``JournalConflict`` when a conditional append loses, never a driver exception.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from runtime.core.journal import Entry, Kind
from runtime.core.replay import Signal


@dataclass(frozen=True)
class RunRecord:
    id: str
    workflow: str
    status: str
    input: Any
    result: Any = None
    error: str | None = None
    parent_id: str | None = None
    current_step: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    journal_len: int = 0

    def summary(self) -> dict[str, Any]:
        """The run as the console's JSON and the Lua test platform show it."""
        return {
            "id": self.id,
            "workflow": self.workflow,
            "status": self.status,
            "current_step": self.current_step,
            "input": self.input,
            "result": self.result,
            "error": self.error,
            "parent_id": self.parent_id,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


@dataclass(frozen=True)
class RunUpdate:
    status: str
    current_step: str | None = None
    result: Any = None
    error: str | None = None
    # The status is unchanged and only the current step moved on: a backend may skip the
    # write (DynamoDB does, and derives a running run's current step from its journal).
    progress_only: bool = False


def current_step(status: str, stored: str | None, last: Entry) -> str | None:
    """A run's current step, as the console shows it. Steps of a running run are progress,
    which backends need not write to the run's record (``RunUpdate.progress_only``): its
    last journal entry, an intent, says which step it is in."""
    if status == "running" and last.kind == Kind.STEP_INTENT:
        return f"step '{last.name}'"
    return stored


@dataclass(frozen=True)
class TimerSet:
    """Set the run's timer to ``due_ms`` (or clear it with ``due_ms=None``)."""

    due_ms: int | None


@dataclass(frozen=True)
class SignalRecord:
    id: int
    run_id: str
    name: str
    payload: Any
    at: float
    state: str  # pending | consumed | set_aside
    consumed_seq: int | None


@dataclass(frozen=True)
class Snapshot:
    """What advancing a run reads: the run, its pending signals and journal entries."""

    run: RunRecord
    signals: list[Signal]
    journal: list[Entry]


class Store(Protocol):
    def create_run(self, run: RunRecord, started: Entry) -> tuple[RunRecord, bool]:
        """Insert the run, its first journal entry and a wake-up, atomically.

        Returns ``(record, created)``. When a run with that id exists, nothing is written
        and the existing record is returned with ``created=False``.
        """

    def get_run(self, run_id: str) -> RunRecord | None: ...

    def load(self, run_id: str, *, after: int | None = None) -> Snapshot | None:
        """The run with its pending signals and the journal entries after seq ``after`` (all
        of them when None); ``run.journal_len`` is the journal's true length. Consistent reads,
        one round trip where the backend allows it (DynamoDB: one Query of the partition)."""

    def list_runs(
        self, *, status: str | None = None, workflow: str | None = None, limit: int = 1000
    ) -> list[RunRecord]:
        """Runs newest first, filtered by status and workflow."""

    def children(self, run_id: str) -> list[str]: ...

    def journal(self, run_id: str) -> list[Entry]: ...

    def append(
        self,
        run_id: str,
        expected_len: int,
        entries: Sequence[Entry],
        *,
        update: RunUpdate | None = None,
        timer: TimerSet | None = None,
    ) -> None:
        """Append ``entries`` (numbered from ``expected_len + 1``) and apply ``update`` and
        ``timer``, all or nothing.

        Raises ``JournalConflict`` when the journal is no longer ``expected_len`` long:
        another writer won the slot. Signals named by ``wait.done`` entries are marked
        consumed; when ``update`` ends the run, its pending signals are set aside and its
        timer cleared.
        """

    def add_signal(self, run_id: str, name: str, payload: Any, at: float) -> tuple[int, bool]:
        """Record a signal. Returns ``(id, live)``; for an ended run it is set aside and
        ``live`` is False. The run must exist."""

    def pending_signals(self, run_id: str) -> list[Signal]: ...

    def signal_backlog(self, run_id: str) -> int:
        """How many signals wait unconsumed; a backend may answer an upper bound, exact when
        it nears ``runtime.platform.runs.MAX_SIGNAL_BACKLOG``."""

    def signals(self, run_id: str) -> list[SignalRecord]: ...

    def fire_due_timers(self, now_ms: int) -> list[str]:
        """Turn every timer due at ``now_ms`` into a wake-up, atomically; returns the runs."""

    def next_due(self) -> int | None:
        """The earliest timer's due time in epoch milliseconds."""

    def timer(self, run_id: str) -> int | None: ...

    def wake(self, run_id: str) -> None:
        """Ask a worker to advance the run. Each wake gets a new token."""

    def wakeups(self) -> list[tuple[str, int]]:
        """Runs asked to advance, with their wake tokens, oldest first."""

    def clear_wakeup(self, run_id: str, token: int) -> None:
        """Drop the wake-up if its token is still ``token`` (no newer wake arrived)."""

    def running_runs(self) -> list[str]:
        """Runs left ``running``: after a crash, each needs advancing again."""

    def add_secret(self, name: str, value: str) -> int:
        """Add a version of a secret; returns the version number (1, 2, ...)."""

    def secret(self, name: str, version: int | None = None) -> tuple[int, str] | None: ...

    def pin_secret(self, run_id: str, name: str, version: int) -> int:
        """Pin the run to a version unless it already has one; returns the pinned version."""

    def pinned_secret(self, run_id: str, name: str) -> int | None:
        """The version the run is pinned to, without pinning it."""

    def close(self) -> None: ...
