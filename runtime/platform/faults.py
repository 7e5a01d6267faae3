"""Fault injection for crash tests: a real process killed at a chosen point of its work.

A crash test must kill its subject part-way through a cascade whatever the machine's
speed, so the subject kills itself: with ``LUNAFLOW_KILL_AFTER_CANCELS=N`` in its
environment, ``lunaflow cancel`` and ``lunaflow dev`` SIGKILL their own process right
after the N-th run they cancel (the cancel committed, the rest of the cascade not begun).
With ``LUNAFLOW_KILL_AFTER_END=RUN_ID``, ``lunaflow dev`` SIGKILLs itself right after that
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


class _KillAfterCancels:
    """An observer passing every event on, which SIGKILLs the process after ``limit`` cancels."""

    def __init__(self, inner: Observer, limit: int) -> None:
        self._inner = inner
        self._left = limit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def cancelled(self, run_id: str, workflow: str) -> None:
        self._inner.cancelled(run_id, workflow)
        self._left -= 1
        if self._left <= 0:
            os.kill(os.getpid(), signal.SIGKILL)


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


def with_faults(observer: Observer | None, environ: Mapping[str, str]) -> Observer | None:
    """``observer``, wrapped to kill the process as ``environ`` asks (unchanged when it does not)."""
    limit = environ.get(KILL_AFTER_CANCELS)
    if limit:
        observer = _KillAfterCancels(observer or Quiet(), int(limit))
    end = environ.get(KILL_AFTER_END)
    if end:
        observer = _KillAfterEnd(observer or Quiet(), end)
    return observer
