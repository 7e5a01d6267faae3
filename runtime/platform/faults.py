"""Fault injection for crash tests: a real process killed at a chosen point of its work.

A crash test must kill its subject part-way through whatever the machine's speed, so the
subject kills itself:

- with ``LUNAFLOW_KILL_AFTER_CANCELS=N`` in its environment, ``lunaflow cancel`` and
  ``lunaflow dev`` SIGKILL their own process right after the N-th run they cancel (the
  cancel committed, the rest of the cascade not begun);
- with ``LUNAFLOW_KILL_AFTER_STARTS=N``, ``lunaflow start`` and ``lunaflow dev`` SIGKILL
  theirs right after the N-th run they create (the store's write committed; no prompt, no
  answer, no first activation), which is where a signal-with-start would lose its signal
  if the run and the signal were two writes;
- with ``LUNAFLOW_KILL_AFTER_END=RUN_ID``, ``lunaflow dev`` SIGKILLs itself right after that
  run's end is written (a child's end, with its parent's wake-up, before the parent runs).

Read once where the command is built (``runtime.cli``); nothing else looks at it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from typing import Any

from runtime.engine.observe import Observer, Quiet

KILL_AFTER_CANCELS = "LUNAFLOW_KILL_AFTER_CANCELS"
KILL_AFTER_END = "LUNAFLOW_KILL_AFTER_END"
KILL_AFTER_STARTS = "LUNAFLOW_KILL_AFTER_STARTS"


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class _Killing:
    """An observer passing every event on, which SIGKILLs the process after ``cancels``
    cancels or ``starts`` starts (None: never)."""

    def __init__(self, inner: Observer, cancels: int | None, starts: int | None) -> None:
        self._inner = inner
        self._cancels = cancels
        self._starts = starts

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def cancelled(self, run_id: str, workflow: str) -> None:
        self._inner.cancelled(run_id, workflow)
        if self._cancels is not None:
            self._cancels -= 1
            if self._cancels <= 0:
                _die()

    def started(self, run_id: str, workflow: str) -> None:
        if self._starts is not None:
            self._starts -= 1
            if self._starts <= 0:
                _die()  # before the observer hears of it: the write is all there is
        self._inner.started(run_id, workflow)


class _KillAfterEnd:
    """An observer passing every event on, which SIGKILLs the process once ``run_id`` ended
    (the observer hears of an end after its write committed)."""

    def __init__(self, inner: Observer, run_id: str) -> None:
        self._inner = inner
        self._run_id = run_id

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def ended(self, run_id: str, workflow: str, *args: Any, **kwargs: Any) -> None:
        self._inner.ended(run_id, workflow, *args, **kwargs)
        if run_id == self._run_id:
            os.kill(os.getpid(), signal.SIGKILL)


class _KillAtContinue:
    """An observer passing every event on, which SIGKILLs the process once ``run_id`` closed
    a generation (wf:continue_as_new: heard after its write committed, before the new
    generation runs anything)."""

    def __init__(self, inner: Observer, run_id: str) -> None:
        self._inner = inner
        self._run_id = run_id

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def continued(self, run_id: str, workflow: str, generation: int) -> None:
        self._inner.continued(run_id, workflow, generation)
        if run_id == self._run_id:
            os.kill(os.getpid(), signal.SIGKILL)


# ``LUNAFLOW_KILL_AT_CONTINUE=RUN_ID``: ``lunaflow dev`` SIGKILLs itself right after that run's
# wf:continue_as_new is written, before its next generation runs.
KILL_AT_CONTINUE = "LUNAFLOW_KILL_AT_CONTINUE"


def with_faults(observer: Observer | None, environ: Mapping[str, str]) -> Observer | None:
    """``observer``, wrapped to kill the process as ``environ`` asks (unchanged when it does not)."""
    cancels, starts = environ.get(KILL_AFTER_CANCELS), environ.get(KILL_AFTER_STARTS)
    if cancels or starts:
        observer = _Killing(
            observer or Quiet(), int(cancels) if cancels else None, int(starts) if starts else None
        )
    end = environ.get(KILL_AFTER_END)
    if end:
        observer = _KillAfterEnd(observer or Quiet(), end)
    at_continue = environ.get(KILL_AT_CONTINUE)
    if at_continue:
        observer = _KillAtContinue(observer or Quiet(), at_continue)
    return observer


# ``LUNAFLOW_KILL_AT_TICK=before|after``: ``lunaflow dev`` SIGKILLs itself at its first
# schedule tick, just before the tick's run is started or just after its start committed.
KILL_AT_TICK = "LUNAFLOW_KILL_AT_TICK"


def tick_fault(environ: Mapping[str, str]) -> str | None:
    value = environ.get(KILL_AT_TICK) or None
    if value not in (None, "before", "after"):
        raise ValueError(f"{KILL_AT_TICK} is 'before' or 'after' (got {value!r})")
    return value


def kill_now() -> None:
    os.kill(os.getpid(), signal.SIGKILL)
