"""The run API that needs no code: start, get, signal, cancel, resume, retry, list.

``Platform`` adds code (it checks the workflow exists before starting); the CLI console
uses ``Runs`` directly against a data folder, beside a running ``lunaflow dev``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from runtime.core import flow, values
from runtime.core.bounds import MAX_SIGNAL_BACKLOG
from runtime.core.clock import Clock
from runtime.core.durations import parse_ms
from runtime.core.flow import Collect
from runtime.core.ids import check_run_id
from runtime.core.journal import (
    CANCELLABLE,
    FORMAT_VERSION,
    RESUMABLE,
    Entry,
    Kind,
    Status,
    cleanup_state,
    generations,
)
from runtime.core.published import Where
from runtime.core.replay import DEFAULT_CLEANUP_MS
from runtime.engine.observe import Observer, Quiet
from runtime.engine.wake import Waker, Wakes
from runtime.errors import (
    AlreadyCancelled,
    InvalidInput,
    InvalidTransition,
    JournalConflict,
    NewerLayout,
    NoSuchRun,
    RunIdTaken,
)
from runtime.platform.flow import waiting_line
from runtime.platform.why import STUCK_AFTER_S, Why
from runtime.platform.why import why as why_not_moving
from runtime.store.base import FirstSignal, Progress, RunRecord, RunUpdate, Store, TimerSet

log = logging.getLogger("lunaflow.runs")


@dataclass(frozen=True)
class Cancelled:
    """What one cancel did: ``below`` every run under it, ``changed`` the runs it cancelled
    (a repeat cancel raises ``AlreadyCancelled``, which carries the same two lists).
    ``cleanup``: the run registered a cancel handler, which runs now; the run ends
    cancelled after it, and only then are the runs below it cancelled."""

    run_id: str
    below: list[str]
    changed: list[str]
    cleanup: bool = False


# How the CLI and the console say that a cancel started a run's cleanup.
CLEANUP_NOTE = (
    "is cleaning up: its on_cancel handler runs, then it ends cancelled and the runs it started are cancelled"
)

# What ``Runs._cancel_one`` did to a run.
CANCELLED, CLEANING = "cancelled", "cleaning"


def in_backoff(status: str, last: Entry | None) -> bool:
    """Whether a run with ``status`` and ``last`` as its journal's last entry waits out a
    step's backoff, which retry now cuts short. Sleeping alone does not say it: ``wf:sleep``
    and a rate's turn sleep too. The one rule for ``lunaflow retry`` (a run or a selection)
    and the console's Retry now buttons, so none offers what another refuses."""
    return (
        status == Status.SLEEPING
        and last is not None
        and last.kind == Kind.STEP_FAILED
        and not last.data.get("final")
    )


def walk(store: Store, root: str) -> Iterator[str]:
    """Every run below ``root``, depth first, children in start order, with a stack rather
    than recursion: a chain of runs thousands deep is an ordinary tree here."""
    seen = {root}
    stack = [root]
    while stack:
        run_id = stack.pop()
        if run_id != root:
            yield run_id
        children = [c for c in store.children(run_id) if c not in seen]
        seen.update(children)
        stack.extend(reversed(children))


def descendants(store: Store, root: str) -> list[str]:
    """The runs a cancel of ``root`` reaches besides it (the CLI and the console name them)."""
    return list(walk(store, root))


class Runs:
    def __init__(
        self, store: Store, clock: Clock, waker: Waker | None = None, observer: Observer | None = None
    ) -> None:
        self.store = store
        self.clock = clock
        self.wakes = Wakes(store, waker)
        self.observer: Observer = observer or Quiet()

    def start(
        self,
        workflow: str,
        input_value: Any = None,
        *,
        id: str | None = None,
        parent_id: str | None = None,
        changes: tuple[str, ...] = (),
        timeout: str | float | None = None,
        signal: str | None = None,
        payload: Any = None,
        code: str | None = None,
        collect: Collect | None = None,
    ) -> RunRecord:
        """Start a run, or join the run of this workflow holding ``id``. ``code``: the version
        of the code starting it (journaled: ``lunaflow show`` says which code a run runs on).

        With ``signal`` (signal-with-start), the signal is delivered too: a new run is
        written with it, pending, in the one write that creates the run, so a crash can
        neither lose it nor start the run twice; an existing run of the workflow gets it as
        ``signal`` would deliver it (set aside if the run has ended: the record returned is
        then the ended run's). Everything is checked before anything is written."""
        run_id = str(uuid.uuid4()) if id is None else check_run_id(id)
        # Parsed before anything is written: a bad or too long bound is refused here.
        timeout_ms = None if timeout is None else parse_ms(timeout, f"the timeout of run '{run_id}'")
        encoded = values.encode(input_value, f"the input of run '{run_id}'")
        input_value = values.decode(encoded)
        at = self.clock.now()
        first = self._first_signal(run_id, signal, payload, at)
        record = RunRecord(
            id=run_id,
            workflow=workflow,
            status=Status.RUNNING,
            input=input_value,
            parent_id=parent_id,
            created_at=at,
            updated_at=at,
        )
        data: dict[str, Any] = {"format": FORMAT_VERSION, "input": input_value}
        if changes:
            data["changes"] = list(changes)  # what wf:version answers for this run
        if code is not None:
            data["code"] = code
        if timeout_ms is not None:
            # The bound as given (for its message) and when it falls: a durable timer.
            data["timeout"] = timeout if isinstance(timeout, str) else f"{timeout:g}s"
            data["deadline_at"] = round(at * 1000) + timeout_ms
        started = Entry(1, Kind.STARTED, workflow, data, at)
        if collect is not None and id is None and first is None and parent_id is None:
            # Debounce or batch: the start joins its key's open collection, or opens one.
            key = flow.collect_key(collect, input_value, workflow)
            existing, created = self.store.collect(record, started, key, collect, round(at * 1000))
            run_id = existing.id
        else:
            existing, created = self.store.create_run(record, started, first)
        if not created and existing.workflow != workflow:
            raise RunIdTaken(run_id, existing.workflow, workflow)
        if created:
            self.observer.started(run_id, workflow)
            if parent_id is not None:
                self._refuse_under_cancelled(parent_id, run_id)
        elif first is not None:
            # The run was there already: the signal goes to it as any signal does (its own
            # one write, bounded by the backlog), and nothing else of this start is written.
            if not self._deliver(run_id, first.name, first.payload):
                return self.get(run_id)  # it had ended: the signal was set aside
            return existing
        if created or existing.journal_len == 1:
            # A repeated start of a run that never began prompts it again, in case the first
            # prompt was lost between the store write and the wake.
            self.wakes.prompt(run_id)
        return existing

    def _first_signal(self, run_id: str, name: str | None, payload: Any, at: float) -> FirstSignal | None:
        """The signal a start delivers, checked as ``signal`` checks one (nothing is written
        yet), or None."""
        if name is None:
            if payload is not None:
                raise InvalidInput(
                    f"the start of run '{run_id}' has a payload but no signal; a payload travels "
                    'with a signal: name it (signal = "paid"), or drop the payload'
                )
            return None
        self._check_signal_name(name)
        encoded = values.encode(payload, f"the payload of signal '{name}' for run '{run_id}'")
        return FirstSignal(name, values.decode(encoded), at)

    @staticmethod
    def _check_signal_name(name: Any) -> None:
        if not isinstance(name, str) or not name:
            raise InvalidInput(f'a signal name must be a non-empty string (got {name!r}), e.g. "paid"')

    def get(self, run_id: str, workflow: str | None = None) -> RunRecord:
        run = self.store.get_run(run_id)
        if run is None or (workflow is not None and run.workflow != workflow):
            raise NoSuchRun(run_id, workflow)
        return run

    def journal(self, run_id: str) -> list[Entry]:
        self.get(run_id)
        return self.store.journal(run_id)

    def why(
        self, run: RunRecord, entries: list[Entry] | None = None, *, stuck_after_s: float = STUCK_AFTER_S
    ) -> Why:
        """What the run waits for, or what holds it (``runtime/platform/why.py``): one line.
        An ended run's needs no read; a parked one's reads its journal (unless given), timer,
        wake-up and lease."""
        now = self.clock.now()
        if run.status in (Status.COMPLETED, Status.CANCELLED, Status.FAILED):
            return why_not_moving(run, [], None, Progress(), now)
        journal = self.store.journal(run.id) if entries is None else entries
        progress = self.store.progress(run.id)
        if (run.current_step or "").startswith("a slot of "):
            admission = self.store.waiting_for(run.id)
            if admission is not None and progress.wakeup_at is None:
                return Why(waiting_line(admission))
        return why_not_moving(
            run, journal, self.store.timer(run.id), progress, now, stuck_after_s=stuck_after_s
        )

    def values(self, run_id: str, workflow: str | None = None) -> dict[str, Any]:
        """The latest value of each key the run published (``wf:set``), read from the store
        beside the run: no code, no replay."""
        self.get(run_id, workflow)
        return self.store.run_values(run_id)

    def find(
        self, where: Where, *, workflow: str | None = None, status: str | None = None, limit: int = 1000
    ) -> list[RunRecord]:
        """Runs whose latest ``where.key`` matches (and of ``workflow``, with ``status``),
        newest first, through the store's index of published values (no journal is read)."""
        return self.store.find_runs(where, workflow=workflow, status=status, limit=limit)

    def generations(self, run_id: str, workflow: str | None = None) -> dict[str, Any]:
        """The run's current generation and the earlier ones its journal still keeps
        (``wf:continue_as_new``; the oldest past ``GENERATIONS_KEPT`` are dropped)."""
        self.get(run_id, workflow)
        gens = generations(self.store.journal(run_id))
        current = gens[-1]["generation"] if gens else 1
        earliest = gens[0]["generation"] if gens else current
        return {"current": current, "earlier": gens[:-1], "dropped": earliest - 1}

    def signal(self, run_id: str, name: str, payload: Any = None, *, workflow: str | None = None) -> bool:
        run_id = check_run_id(run_id)
        self._check_signal_name(name)
        encoded = values.encode(payload, f"the payload of signal '{name}' for run '{run_id}'")
        return self._deliver(run_id, name, values.decode(encoded), workflow)

    def _deliver(self, run_id: str, name: str, payload: Any, workflow: str | None = None) -> bool:
        """Write a checked signal to a run; whether a live run got it. Nothing is read first:
        the store's write refuses a missing run, a run of another workflow and a full backlog
        (counted inside the write, where concurrent senders cannot overshoot), writing nothing."""
        _, live = self.store.add_signal(
            run_id, name, payload, self.clock.now(), max_backlog=MAX_SIGNAL_BACKLOG, workflow=workflow
        )
        if live:
            self.wakes.prompt(run_id)
        return live

    def descendants(self, run_id: str) -> list[str]:
        """The runs below ``run_id``, which a cancel of it reaches (the CLI and console name them)."""
        return descendants(self.store, run_id)

    def _refuse_under_cancelled(self, parent_id: str, run_id: str) -> None:
        """A run started from a step of a run that is cancelled meanwhile is cancelled at once.

        The read of the parent follows the child's write, so either it sees the cancel, or
        the cancel committed after the child existed and its cascade, which lists children
        after that commit, reaches it. A process that dies between the two leaves the child
        to its first activation, which makes the same check (``Executor.advance``)."""
        parent = self.store.get_run(parent_id)
        if parent is None or parent.status != Status.CANCELLED:
            return
        self._cancel_one(run_id)
        raise InvalidTransition(
            f"run '{parent_id}' was cancelled while its step started run '{run_id}', so run "
            f"'{run_id}' was cancelled at once: a cancelled run has no live children; nothing to "
            "do, or start the run from outside the cancelled one"
        )

    def cancel(self, run_id: str, *, workflow: str | None = None) -> Cancelled:
        """Cancel the run and every run below it. Cancelling a run already cancelled finishes
        its cascade (a crash may have cut it short), changes nothing else, and then raises
        ``AlreadyCancelled``: the SPEC refuses the transition, the issue asks the walk.

        The intent is recorded before anything changes and dropped once the walk is done, so
        a cascade cut short by a crash is finished on restart (``finish_cancels``)."""
        run = self.get(run_id, workflow)
        if run.status not in CANCELLABLE and run.status != Status.CANCELLED:
            raise InvalidTransition(
                f"run '{run_id}' is {run.status}, so it cannot be cancelled; cancel applies to runs "
                "that have not ended (running, sleeping, awaiting, failed), and to a cancelled run "
                "to finish cancelling the runs it started"
            )
        self.store.begin_cancel(run_id, self.clock.now())
        done = self._cancel_tree(run_id)
        if done[2]:
            # Its cleanup runs (this cancel started it, or an earlier one did): the intent
            # stays, and the cascade is finished once the run ends cancelled.
            return Cancelled(run_id, below=[], changed=[], cleanup=True)
        self.store.end_cancel(run_id)
        if not done[1] and run.status != Status.CANCELLED:
            now = self.get(run_id)
            if now.status != Status.CANCELLED:  # it ended on its own before the cancel landed
                raise InvalidTransition(
                    f"run '{run_id}' became {now.status} while it was being cancelled, so it was not "
                    "cancelled; nothing to do"
                )
        if run.status == Status.CANCELLED:
            raise AlreadyCancelled(run_id, done[0], done[1])
        return Cancelled(run_id, below=done[0], changed=done[1])

    def finish_cancels(self, before: float | None = None, limit: int | None = None) -> list[str]:
        """Finish every cascade whose intent was recorded before ``before`` and never ended:
        the cancelling process died part-way. Returns the runs whose cascade was finished."""
        finished: list[str] = []
        for run_id in self.store.pending_cancels(before)[:limit]:
            try:
                cleaning = self._cancel_tree(run_id)[2]
            except Exception:  # one broken tree must not hold back the others, nor a start-up
                log.exception("finishing the cancel of run %s failed; its intent stays for a retry", run_id)
                continue
            if cleaning:
                continue  # its cleanup still runs; its end finishes the cascade
            self.store.end_cancel(run_id)
            finished.append(run_id)
        return finished

    def _cancel_tree(self, root: str) -> tuple[list[str], list[str], bool]:
        """Cancel ``root`` and, if it is cancelled, every run below it, walking the tree with a
        stack (a chain thousands deep must not reach Python's recursion limit). Returns the
        runs below the root, the runs this walk cancelled, and whether the root is cleaning
        up (its cancel handler runs: nothing below it is cancelled yet). The walk does not go
        below a run that cleans up either: that run's own intent cascades once it ends."""
        changed: list[str] = []
        # The root's parent may be waiting on it (c:result()): its cancel wakes the parent. The
        # runs below have parents cancelled with them, so their cancels wake no one.
        first = self._cancel_one(root, wake_parent=True)
        if first == CLEANING:
            return [], changed, True
        if first == CANCELLED:
            changed.append(root)
        found = self.store.get_run(root)
        if found is None or found.status != Status.CANCELLED:
            return [], changed, False  # it completed before the cancel could land: nothing cascades
        below: list[str] = []
        seen = {root}
        stack = [root]
        newer: NewerLayout | None = None
        while stack:
            run_id = stack.pop()
            if run_id != root:
                below.append(run_id)
                try:
                    done = self._cancel_one(run_id)
                except NewerLayout as e:
                    # Left to the newer code; the rest of the tree is cancelled all the same, and
                    # the intent stays (raised below) until the newer code finishes the cascade.
                    newer = e
                    continue
                if done == CANCELLED:
                    changed.append(run_id)
                elif done == CLEANING:
                    continue
            children = [c for c in self.store.children(run_id) if c not in seen]
            seen.update(children)
            stack.extend(reversed(children))
        if newer is not None:
            raise newer
        return below, changed, False

    def _cancel_one(self, run_id: str, *, wake_parent: bool = False) -> str:
        """Cancel one run unless it has ended: ``CANCELLED`` when this call cancelled it,
        ``CLEANING`` when it registered a cancel handler (this call, or an earlier one,
        started its cleanup), else ``""``. ``wake_parent``: its parent is woken in the same
        write (a parent awaiting the child's result)."""
        cancelled = False
        for _ in range(100):
            run = self.store.get_run(run_id)
            if run is None or run.status not in CANCELLABLE:
                break
            if run.status != Status.FAILED and run.journal_len > 1:
                # Whether the run has a cancel handler is in its journal (``cancel.handler``);
                # a failed run stopped at an error and is cancelled as it stands.
                entries = self.store.journal(run_id)
                if len(entries) != run.journal_len:
                    continue
                handler, request = cleanup_state(entries)
                if request is not None:
                    return CLEANING  # a second cancel does not start a second cleanup
                if handler is not None:
                    if self._request_cleanup(run, handler):
                        return CLEANING
                    continue
            entry = Entry(run.journal_len + 1, Kind.CANCELLED, None, {}, self.clock.now())
            try:
                wake = run.parent_id if wake_parent else None
                self.store.append(
                    run_id, run.journal_len, [entry], update=RunUpdate(Status.CANCELLED, None, wake=wake)
                )
            except JournalConflict:
                continue
            if wake is not None:
                self.wakes.prompt(wake)
            self.observer.cancelled(run_id, run.workflow)
            cancelled = True
            break
        # Every time, not only when this call cancelled it: a crash between a cancel and its
        # timer's removal leaves a schedule that only this repeat removes.
        self.wakes.timer(run_id, None)
        return CANCELLED if cancelled else ""

    def _request_cleanup(self, run: RunRecord, handler: Entry) -> bool:
        """Wake a run with a cancel handler to clean up: journal the cancel
        (``run.cancel_requested``, with the end of the cleanup's budget), which replay turns
        into leaving the workflow function for the handler. The run's own intent comes first,
        so the cascade below it survives this process. False if another writer moved first."""
        now = self.clock.now()
        self.store.begin_cancel(run.id, now)
        due = round(now * 1000) + int(handler.data.get("timeout_ms") or DEFAULT_CLEANUP_MS)
        entry = Entry(run.journal_len + 1, Kind.CANCEL_REQUESTED, None, {"due_at": due}, now)
        try:
            self.store.append(
                run.id,
                run.journal_len,
                [entry],
                update=RunUpdate(Status.RUNNING, "cleanup", woken=True),
                timer=TimerSet(None),
            )
        except JournalConflict:
            return False
        self.wakes.timer(run.id, None)
        self.wakes.prompt(run.id)
        return True

    def resume(self, run_id: str, *, workflow: str | None = None) -> None:
        run = self.get(run_id, workflow)
        if run.status not in RESUMABLE:
            raise InvalidTransition(
                f"run '{run_id}' is {run.status}, so it cannot be resumed; resume applies to failed runs only"
            )
        entry = Entry(run.journal_len + 1, Kind.RESUMED, None, {}, self.clock.now())
        self.store.append(
            run_id,
            run.journal_len,
            [entry],
            update=RunUpdate(Status.RUNNING, run.current_step, woken=True),
            timer=TimerSet(None),
        )
        self.wakes.prompt(run_id)

    def runs(
        self, *, status: str | None = None, workflow: str | None = None, limit: int = 1000
    ) -> list[RunRecord]:
        return self.store.list_runs(status=status, workflow=workflow, limit=limit)

    def waiting_out_backoff(self, run: RunRecord) -> bool:
        """Whether the listed run waits out a step's backoff (``in_backoff``), reading its
        last entry alone."""
        if run.status != Status.SLEEPING or run.current_step == "sleep":
            return False  # no read: nothing else is in a backoff, and a wf:sleep says so itself
        snap = self.store.load(run.id, after=max(0, run.journal_len - 1))
        return snap is not None and in_backoff(snap.run.status, snap.journal[-1] if snap.journal else None)

    def retry(self, run_id: str, *, workflow: str | None = None) -> None:
        """Cut short the backoff a run is waiting out: its step's next attempt runs now. The
        ask is journaled (``step.retry_now``) so replay reads the same; asking again before
        the attempt starts changes nothing."""
        # Only the last entry is read: a long journal costs no more than a short one.
        seen = self.get(run_id, workflow)
        snap = self.store.load(run_id, after=max(0, seen.journal_len - 1))
        if snap is None:
            raise NoSuchRun(run_id, workflow)
        run, last = snap.run, (snap.journal[-1] if snap.journal else None)
        if last is not None and last.kind == Kind.STEP_RETRY_NOW:
            return
        if last is None or not in_backoff(run.status, last):
            raise InvalidTransition(
                f"run '{run_id}' is {run.status} and not waiting out a step's backoff, so it cannot be "
                "retried now; retry applies to a run sleeping before a failed step's next attempt "
                "(a failed run is resumed instead)"
            )
        entry = Entry(run.journal_len + 1, Kind.STEP_RETRY_NOW, last.name, {}, self.clock.now())
        self.store.append(
            run_id,
            run.journal_len,
            [entry],
            update=RunUpdate(Status.RUNNING, run.current_step, woken=True),
            timer=TimerSet(None),
        )
        self.wakes.timer(run_id, None)
        self.wakes.prompt(run_id)
