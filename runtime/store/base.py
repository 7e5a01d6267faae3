"""The store contract every backend implements (``sqlite.SQLiteStore`` on one file,
``dynamodb.DynamoDBStore`` on one table), and the checks every backend's append shares.

Each method states its error contract. Backends raise only ``runtime.errors`` types:
``JournalConflict`` when a conditional append loses, never a driver exception. The suite in
``tests/contract/`` runs every method against both backends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from runtime.core.flow import Admission, Collect, Rate, SlotView, SlotWant
from runtime.core.journal import Entry, Kind, Signal, Status
from runtime.core.published import Where
from runtime.errors import EngineBug

# A lease's owner that has not beaten its heart for this long is taken for dead: its leases
# are free before they expire (a SIGKILLed `lunaflow dev`, a Lambda invocation cut off).
OWNER_DEAD_AFTER_MS = 5_000
# How a listing marks a run it found but could not read (its error begins so).
UNREADABLE_RUN = "this run cannot be read"


class Lease(StrEnum):
    """What taking a run's lease found."""

    OK = "ok"  # the lease is this owner's now
    BUSY = "busy"  # another owner holds a live lease
    MISSING = "missing"  # there is no such run


@dataclass(frozen=True)
class RunRecord:
    id: str
    workflow: str
    status: Status
    input: Any
    result: Any = None
    error: str | None = None
    parent_id: str | None = None
    current_step: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    journal_len: int = 0
    # When an ended run is deleted ([runs] retention; epoch seconds), or None: kept.
    expires_at: float | None = None

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
class Progress:
    """A run's wake-up and lease (``Store.progress``): why it is, or is not, moving."""

    wakeup_at: float | None = None  # epoch seconds: the pending wake-up's first ask, or (DynamoDB)
    # the reconciler's next look after a re-send
    wake_resends: int = 0  # how often the reconciler re-sent the wake-up (DynamoDB)
    lease_owner: str | None = None
    lease_until_ms: int | None = None


@dataclass(frozen=True)
class RunUpdate:
    status: Status
    current_step: str | None = None
    result: Any = None
    error: str | None = None
    # The status is unchanged and only the current step moved on: a backend may skip the
    # write (DynamoDB does, and derives a running run's current step from its journal).
    progress_only: bool = False
    # When the status changed, for a change no journal entry records (a failure by a raise in
    # the workflow's code, a divergence): the run's `updated_at` then, not its last entry's.
    at: float | None = None
    # Another run to wake in the same write: the parent of a child whose end this records
    # (wf:child's c:result() waits on it). Recorded with the end, so no crash between the
    # child's end and its parent's wake can lose the wake.
    wake: str | None = None
    # The run's own wake-up is recorded by this write: a change made from outside an
    # activation that leaves the run running (a resume, a retry now, a cancel's cleanup)
    # needs a worker, and a wake-up written after it could be lost to a crash between the
    # two, leaving the run running with nothing to wake it.
    woken: bool = False
    # Whether the run may hold flow-control items (slots, a place in line, a collection): an
    # activation knows (its session passed the workflow's gate or collection, or not); None
    # when the writer does not (a cancel from outside, which runs no code). On an end, a
    # backend may skip looking for items to give back when this is False.
    flow: bool | None = None
    # On an end, the run's workflow: a backend that lists completed runs under their
    # workflow's name records the name before the run leaves its other lists (DynamoDB's
    # status index); without it, the run stays there.
    workflow: str | None = None


def current_step(status: Status, stored: str | None, last: Entry) -> str | None:
    """A run's current step, as the console shows it. Steps of a running run are progress,
    which backends need not write to the run's record (``RunUpdate.progress_only``): its
    last journal entry, an intent or a re-run, says which step it is in."""
    if status == Status.RUNNING and last.kind in (Kind.STEP_INTENT, Kind.STEP_RERUN):
        return f"step '{last.name}'"
    return stored


def checked_update(
    run_id: str, expected_len: int, entries: Sequence[Entry], update: RunUpdate | None
) -> RunUpdate | None:
    """What every backend's ``append`` checks first: entries are numbered on from
    ``expected_len``, in order (the engine never writes a gap). Returns the update to write:
    none for progress a backend need not record."""
    for offset, entry in enumerate(entries):
        if entry.seq != expected_len + offset + 1:
            raise EngineBug(
                f"entry {entry.seq} of run '{run_id}' is out of order: the journal is {expected_len} "
                f"long, so this append starts at {expected_len + 1}"
            )
    if update is not None and update.progress_only:
        return None
    return update


class Unchanged:
    """``TimerSet.armed``'s default: the write leaves the note as it is."""

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = Unchanged()


@dataclass(frozen=True)
class TimerSet:
    """Set the run's timer to ``due_ms`` (or clear it with ``due_ms=None``)."""

    due_ms: int | None
    # The note of the timer transport the waker armed for the run (on AWS, an EventBridge
    # Scheduler entry: ``(due_ms, "schedule")``), recorded by the same write, or cleared
    # (None): a note of its own would cost a write. Backends without one ignore it.
    armed: tuple[int, str] | None | Unchanged = UNCHANGED


@dataclass(frozen=True)
class FirstSignal:
    """A signal written with the run that it starts (signal-with-start): in the same write,
    so no crash leaves the run without it. ``payload`` is a checked, decoded value."""

    name: str
    payload: Any
    at: float


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
    # Told of each run a freed slot admitted, after the write that recorded its wake-up.
    on_admit: Any
    # How long an ended run is kept (``[runs] retention``; the platform sets it from the code
    # it serves): the write that ends a run records when it expires, from its end and this;
    # None records nothing, and the run is kept for ever.
    retention_s: float | None

    def create_run(
        self, run: RunRecord, started: Entry, signal: FirstSignal | None = None
    ) -> tuple[RunRecord, bool]:
        """Insert the run, its first journal entry and a wake-up, atomically; with
        ``signal``, its first (pending) signal too, in the same write.

        Returns ``(record, created)``. When a run with that id exists, nothing is written
        (the signal neither) and the existing record is returned with ``created=False``.
        """

    def get_run(self, run_id: str) -> RunRecord | None: ...

    def child_state(self, run_id: str) -> RunRecord | None:
        """``get_run`` for a state a run journals (its child's status and result): a run this
        code cannot read whole is refused (DynamoDB: ``NewerLayout``), not read in part."""
        ...

    def load(self, run_id: str, *, after: int | None = None) -> Snapshot | None:
        """The run with its pending signals and the journal entries after seq ``after`` (all
        of them when None); ``run.journal_len`` is the journal's true length. Consistent reads,
        one round trip where the backend allows it (DynamoDB: one Query of the partition)."""

    def list_runs(
        self, *, status: str | None = None, workflow: str | None = None, limit: int = 1000
    ) -> list[RunRecord]:
        """Runs newest first, filtered by status and workflow."""

    def in_flight_runs(self, limit: int = 1_000_000) -> list[RunRecord]:
        """Every run not ended (running, sleeping, awaiting, failed), newest first."""

    def children(self, run_id: str) -> list[str]: ...

    # --- values runs publish (wf:set) -------------------------------------------------

    def run_values(self, run_id: str) -> dict[str, Any]:
        """The latest value per key the run published (``value.set`` entries, kept beside the
        run by every append that holds one, in that append's write), keys in sorted order; ``{}``
        for none."""

    def find_runs(
        self, where: Where, *, workflow: str | None = None, status: str | None = None, limit: int = 1000
    ) -> list[RunRecord]:
        """Runs whose latest value of ``where.key`` matches ``where`` (of ``workflow`` and
        with ``status`` when given), newest first, read through an index of (key, value): no
        journal, and no read of every run. The workflow and status narrow the lookup itself:
        ``limit`` runs matching all three, not ``limit`` values thinned afterwards."""

    # --- cancel intents: a cancel's cascade survives the process that began it ---------

    def begin_cancel(self, run_id: str, at: float) -> None:
        """Record, durably, that the run and every run below it are being cancelled, before
        any of them changes. A second intent for the same run keeps the first's ``at``."""

    def end_cancel(self, run_id: str) -> None:
        """The cascade of the run's cancel is complete: drop its intent (none: a no-op)."""

    def pending_cancels(self, before: float | None = None) -> list[str]:
        """Runs whose cancel intent, recorded before ``before`` (epoch seconds; any time when
        None), was never ended: a cascade that a crash cut short, or one still under way."""

    # --- retention ------------------------------------------------------------------

    def expire(self, now: float, limit: int = 100) -> list[str]:
        """Delete, whole, up to ``limit`` runs whose expiry (``retention_s`` after their end)
        is past at ``now``: the run, its journal, signals, values and pins; returns their ids,
        which name no run afterwards (a start of one starts a new run). A run whose children
        are not all gone, a child whose parent is neither ended nor gone, and a run whose
        cancel's cascade is unfinished, are kept a day longer instead: a child's end wakes
        its parent, a parent may still read its child's result, a new run of the parent's
        id would join the old children (their ids derive from it), and the cascade reads the
        run's children."""

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
        timer cleared; when ``update`` parks or ends it (any status but running), its lease
        is released whoever holds it.
        """

    def add_signal(
        self,
        run_id: str,
        name: str,
        payload: Any,
        at: float,
        max_backlog: int | None = None,
        *,
        workflow: str | None = None,
    ) -> tuple[int, bool]:
        """Record a signal. Returns ``(id, live)``; for an ended run it is set aside and
        ``live`` is False. Raises ``NoSuchRun`` (recording nothing) when there is no such run,
        or, with ``workflow``, when the run is of another workflow: the write is its own
        check, so a sender reads nothing first.

        With ``max_backlog``, raises ``SignalBacklogFull`` (recording nothing) when the live
        run already holds that many unconsumed signals, counted as part of the write, so
        concurrent senders, in any process, never take it past the bound."""

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

    def add_wakeup(self, run_id: str) -> None:
        """Record that the run needs a worker. Each wake-up gets a new token, never reused;
        a missing run is ignored."""

    def wakeups(self) -> list[tuple[str, int]]:
        """Runs asked to advance, with their wake tokens, oldest first."""

    def clear_wakeup(self, run_id: str, token: int) -> None:
        """Drop the wake-up if its token is still ``token`` (no newer wake arrived)."""

    def wakeups_older_than(self, at: float) -> list[str]:
        """Runs whose wake-up has waited since before ``at`` (epoch seconds): a lost prompt.
        A wake-up is as old as its first ask (a start, a signal, a due timer, ``add_wakeup``)."""

    def drop_entries(self, run_id: str, before: int) -> None:
        """Remove the run's journal entries from seq 2 up to, not including, ``before`` (older
        generations: ``GENERATIONS_KEPT``). Entry 1 stays; a backend that stores entries in
        groups (DynamoDB's chunks) removes the groups wholly before ``before``."""

    def progress(self, run_id: str) -> Progress:
        """What moves the run now, beyond its journal: its wake-up waiting (and since when),
        the lease on it. ``Progress()`` for a run with neither, or no such run."""

    def running_runs(self) -> list[str]:
        """Runs left ``running``: after a crash, each needs advancing again."""

    def stale_running(self, before: float, now_ms: int) -> list[str]:
        """Runs left ``running`` with no change since before ``before`` (epoch seconds) and no
        live lease at ``now_ms``: an activation died between its journal write and its park.
        A backend may count only changes of the run's summary (DynamoDB does): a run whose
        journal moves meanwhile is kept off the list by its lease. DynamoDB lists only items
        older code wrote: a run it writes now keeps its wake-up while it runs (released only
        by the work that took it, with no other lease live), or its due timer if that woke
        it, which the reconciler reads."""

    # --- leases: one worker advances a run at a time ---------------------------------

    def heartbeat(self, owner: str, now_ms: int) -> None:
        """``owner`` is alive. Its leases stay its own until they expire; once it has stopped
        beating for ``OWNER_DEAD_AFTER_MS`` they are free (an owner that never beat keeps
        its leases until they expire)."""

    def acquire_lease(self, run_id: str, owner: str, now_ms: int, lease_ms: int) -> Lease:
        """Take the run's lease until ``now_ms + lease_ms``: ``OK`` when it is free, expired,
        already ``owner``'s, or held by a dead owner; ``BUSY`` when another live owner holds
        it; ``MISSING`` when there is no such run."""

    def release_lease(self, run_id: str, owner: str) -> None:
        """Drop the lease if ``owner`` holds it; another owner's lease is left alone."""

    def add_secret(self, name: str, value: str) -> int:
        """Add a version of a secret; returns the version number (1, 2, ...)."""

    def secret(self, name: str, version: int | None = None) -> tuple[int, str] | None: ...

    def pin_secret(self, run_id: str, name: str, version: int) -> int:
        """Pin the run to a version unless it already has one; returns the pinned version."""

    def pinned_secret(self, run_id: str, name: str) -> int | None:
        """The version the run is pinned to, without pinning it."""

    # --- flow control: slots per key, rates, their settings (runtime.core.flow) -------

    def admit(self, run_id: str, wants: Sequence[SlotWant], rank: int) -> Admission:
        """Give the run a slot of every key in ``wants`` (all or none), or put it in each
        key's line by ``rank``. A run that holds its slots is admitted again (idempotent). The
        limit of a key is its setting (``set_flow_setting``) when there is one, else the
        declared one."""

    def release_slots(self, run_id: str) -> list[str]:
        """The run ended (or failed, or was cancelled): drop its slots and its places in line,
        and hand each freed slot to the first run in line that fits every one of its keys,
        recording its wake-up. Returns the runs so admitted. Every append that ends a run does
        this in its own write where the backend allows it (SQLite); elsewhere the platform
        calls it after the end, and the reconciler frees what a crash between the two left."""

    def waiting_for(self, run_id: str) -> Admission | None:
        """Where the run stands in line (None: it is in no line)."""

    def reserve_rate(self, rate: Rate, now_ms: int) -> int:
        """Reserve the next start of ``rate``'s bucket: the time (epoch ms) it may go, never
        given to another. The bucket's setting, if any, overrides the declared rate."""

    def set_flow_setting(self, name: str, value: str | None) -> list[str]:
        """Set (None: clear) a limit's setting: a key or ``workflow/*`` to a number of
        slots, or ``rate:<key>`` to a rate. Waiting runs that fit now are admitted and their
        ids returned (their wake-ups recorded)."""

    def flow_settings(self) -> dict[str, str]: ...

    def slot_views(self, limit: int = 100) -> list[SlotView]:
        """Keys with runs holding or waiting for their slots, busiest first."""

    def collect(
        self, run: RunRecord, started: Entry, key: str, spec: Collect, now_ms: int
    ) -> tuple[RunRecord, bool]:
        """A start of a workflow with ``debounce`` or ``batch``: add ``run.input`` to the open
        collection of ``key`` (answering its run, ``created=False``), or create ``run`` (as
        ``create_run`` does) with a new collection holding its input, in one write. An input
        that would take the open collection past its size or bytes closes it (its run woken)."""

    def close_collection(self, run_id: str, spec: Collect, now_ms: int) -> list[Any] | int | None:
        """The inputs the run collected, closing its collection if due; while open, the time
        it is due; None when the run has no collection."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class RunFilter:
    """What a console search asks of runs besides their status: ``id_prefix`` (an id or the
    start of one), ``since`` (started at or after, epoch seconds), ``until`` (started
    before)."""

    workflow: str | None = None
    id_prefix: str | None = None
    since: float | None = None
    until: float | None = None

    @property
    def only_workflow(self) -> bool:
        return self.id_prefix is None and self.since is None and self.until is None


@runtime_checkable
class IndexedSearch(Protocol):
    """A store that answers the console's searches from its indexes, reading only the page
    it is asked for (SQLite). A store without it (DynamoDB) is searched by the console over
    its newest runs (runtime/console/search.py)."""

    def search_runs(
        self, where: RunFilter, *, status: str | None, offset: int, limit: int
    ) -> list[RunRecord]:
        """Runs matching ``where`` and ``status``, newest first, ``limit`` of them after
        skipping ``offset``."""

    def run_counts(self, where: RunFilter, *, bound: int) -> tuple[dict[str, int], bool]:
        """Runs per status matching ``where``, and whether the counts were bounded. Filtered
        by workflow alone the counts are exact and kept as runs change (no scan); with an
        id prefix or a time they cover the newest ``bound`` matching runs."""
