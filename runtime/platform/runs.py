"""The run API that needs no code: start, get, signal, cancel, resume, retry, list.

``Platform`` adds code (it checks the workflow exists before starting); the CLI console
uses ``Runs`` directly against a data folder, beside a running ``lunaflow dev``.
"""

from __future__ import annotations

import uuid
from typing import Any

from runtime.core import values
from runtime.core.bounds import MAX_SIGNAL_BACKLOG
from runtime.core.clock import Clock
from runtime.core.durations import parse_ms
from runtime.core.ids import check_run_id
from runtime.core.journal import CANCELLABLE, FORMAT_VERSION, RESUMABLE, Entry, Kind, Status
from runtime.engine.observe import Observer, Quiet
from runtime.engine.wake import Waker, Wakes
from runtime.errors import (
    InvalidInput,
    InvalidTransition,
    JournalConflict,
    NoSuchRun,
    RunIdTaken,
    SignalBacklogFull,
)
from runtime.store.base import RunRecord, RunUpdate, Store, TimerSet


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
    ) -> RunRecord:
        run_id = str(uuid.uuid4()) if id is None else check_run_id(id)
        # Parsed before anything is written: a bad or too long bound is refused here.
        timeout_ms = None if timeout is None else parse_ms(timeout, f"the timeout of run '{run_id}'")
        encoded = values.encode(input_value, f"the input of run '{run_id}'")
        input_value = values.decode(encoded)
        at = self.clock.now()
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
        if timeout_ms is not None:
            # The bound as given (for its message) and when it falls: a durable timer.
            data["timeout"] = timeout if isinstance(timeout, str) else f"{timeout:g}s"
            data["deadline_at"] = round(at * 1000) + timeout_ms
        started = Entry(1, Kind.STARTED, workflow, data, at)
        existing, created = self.store.create_run(record, started)
        if not created and existing.workflow != workflow:
            raise RunIdTaken(run_id, existing.workflow, workflow)
        if created:
            self.observer.started(run_id, workflow)
        if created or existing.journal_len == 1:
            # A repeated start of a run that never began prompts it again, in case the first
            # prompt was lost between the store write and the wake.
            self.wakes.prompt(run_id)
        return existing

    def get(self, run_id: str, workflow: str | None = None) -> RunRecord:
        run = self.store.get_run(run_id)
        if run is None or (workflow is not None and run.workflow != workflow):
            raise NoSuchRun(run_id, workflow)
        return run

    def journal(self, run_id: str) -> list[Entry]:
        self.get(run_id)
        return self.store.journal(run_id)

    def signal(self, run_id: str, name: str, payload: Any = None, *, workflow: str | None = None) -> bool:
        run_id = check_run_id(run_id)
        if not isinstance(name, str) or not name:
            raise InvalidInput(f'a signal name must be a non-empty string (got {name!r}), e.g. "paid"')
        self.get(run_id, workflow)
        encoded = values.encode(payload, f"the payload of signal '{name}' for run '{run_id}'")
        if self.store.signal_backlog(run_id) >= MAX_SIGNAL_BACKLOG:  # refused early, cheaply
            raise SignalBacklogFull(run_id, MAX_SIGNAL_BACKLOG)
        # The store counts again inside the write, where concurrent senders cannot overshoot.
        _, live = self.store.add_signal(
            run_id, name, values.decode(encoded), self.clock.now(), max_backlog=MAX_SIGNAL_BACKLOG
        )
        if live:
            self.wakes.prompt(run_id)
        return live

    def cancel(self, run_id: str, *, workflow: str | None = None) -> None:
        run = self.get(run_id, workflow)
        if run.status not in CANCELLABLE:
            raise InvalidTransition(
                f"run '{run_id}' is {run.status}, so it cannot be cancelled; cancel applies to runs "
                "that have not ended (running, sleeping, awaiting, failed)"
            )
        self._cancel_tree(run_id)

    def _cancel_tree(self, run_id: str) -> None:
        for _ in range(100):
            run = self.store.get_run(run_id)
            if run is None or run.status not in CANCELLABLE:
                break
            entry = Entry(run.journal_len + 1, Kind.CANCELLED, None, {}, self.clock.now())
            try:
                self.store.append(run_id, run.journal_len, [entry], update=RunUpdate(Status.CANCELLED, None))
            except JournalConflict:
                continue
            self.observer.cancelled(run_id, run.workflow)
            break
        self.wakes.timer(run_id, None)
        for child in self.store.children(run_id):
            self._cancel_tree(child)

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
            update=RunUpdate(Status.RUNNING, run.current_step),
            timer=TimerSet(None),
        )
        self.wakes.wake(run_id)

    def runs(
        self, *, status: str | None = None, workflow: str | None = None, limit: int = 1000
    ) -> list[RunRecord]:
        return self.store.list_runs(status=status, workflow=workflow, limit=limit)

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
        if (
            run.status != Status.SLEEPING
            or last is None
            or last.kind != Kind.STEP_FAILED
            or last.data.get("final")
        ):
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
            update=RunUpdate(Status.RUNNING, run.current_step),
            timer=TimerSet(None),
        )
        self.wakes.timer(run_id, None)
        self.wakes.wake(run_id)
