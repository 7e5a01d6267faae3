"""Waking a run: the one meaning of "wake".

A run that needs a worker (it was started, signalled, resumed, or its journal moved under
a worker) is *woken*: the store records a wake-up (durable: a restarted process finds it)
and the platform's ``Waker`` prompts a worker (fast: locally nothing more is needed, the
dev server's dispatcher reads the store; on AWS ``runtime.aws.wake.AwsWaker`` sends an SQS
message and keeps an EventBridge Scheduler entry per parked run). ``Wakes`` pairs the two
so no caller does it by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from runtime.store.base import UNCHANGED, Store, TimerSet, Unchanged


@dataclass(frozen=True)
class TimerPlan:
    """What a waker decided for a run's timer before the write that parks or ends the run:
    ``timer`` is what that write records (the timer and the note of its transport, so the
    note costs no write of its own); the waker's ``timer`` call after the write does the
    rest of ``how`` (``none``, ``sqs``, ``schedule``: created before the write, so a crash
    between the two leaves only an early wake, which the worker sends back; ``kept``: the
    one armed already fires then). ``armed_before`` is the note the write replaces."""

    due_ms: int | None
    how: str = "none"
    armed_before: tuple[int, str] | None = None
    note: tuple[int, str] | None | Unchanged = UNCHANGED

    @property
    def timer(self) -> TimerSet:
        return TimerSet(self.due_ms, self.note)


class Waker(Protocol):
    """A platform's transport for bringing runs to workers."""

    def prompt(self, run_id: str, delay_s: int = 0) -> None:
        """Bring the run to a worker soon (after ``delay_s``); the store already says why."""

    def arm(self, run_id: str, due_ms: int | None) -> TimerPlan:
        """Before the write that parks the run until ``due_ms`` or clears its timer (None):
        what that write must record, and what ``timer`` does after it."""

    def timer(self, run_id: str, due_ms: int | None, plan: TimerPlan | None = None) -> None:
        """The run is parked until ``due_ms`` (epoch milliseconds), or has no timer (None);
        ``plan``: what ``arm`` decided before the write (without one, the waker decides now
        and notes its transport with a write of its own)."""


class StoreOnly:
    """The store's own wake-ups and timers table are all a local platform needs."""

    def prompt(self, run_id: str, delay_s: int = 0) -> None:
        pass

    def arm(self, run_id: str, due_ms: int | None) -> TimerPlan:
        return TimerPlan(due_ms)

    def timer(self, run_id: str, due_ms: int | None, plan: TimerPlan | None = None) -> None:
        pass


class Wakes:
    """Wake runs: a wake-up recorded in the store, then a prompt through the waker."""

    def __init__(self, store: Store, waker: Waker | None = None) -> None:
        self.store = store
        self.waker: Waker = waker or StoreOnly()
        if waker is not None:
            # A run a freed slot admits has its wake-up recorded by the store's write that
            # admitted it; the waker's prompt brings it to a worker (runtime.core.flow).
            store.on_admit = waker.prompt

    def wake(self, run_id: str) -> None:
        self.store.add_wakeup(run_id)
        self.waker.prompt(run_id)

    def prompt(self, run_id: str, delay_s: int = 0) -> None:
        """The write that made the run need a worker (a start, a signal) recorded its
        wake-up in the same transaction: only the prompt is left."""
        self.waker.prompt(run_id, delay_s)

    def arm(self, run_id: str, due_ms: int | None) -> TimerPlan:
        return self.waker.arm(run_id, due_ms)

    def timer(self, run_id: str, due_ms: int | None, plan: TimerPlan | None = None) -> None:
        self.waker.timer(run_id, due_ms, plan)
