"""What both test harnesses share (SPEC section 5): the run API over a ``Platform``, each call
that changes something settling before it returns, and a fake clock that moves only with
``advance``, stopping at every due time on the way so timers fire in order.

``runtime.dev.harness.LocalPlatform`` runs the platform on SQLite in-process;
``runtime.aws.harness.AwsPlatform`` runs it through the Lambda handlers on a moto server.
They differ in what "due" means (a timer row, a delayed SQS message, a schedule) and in how
work is done (a loop over the store's wake-ups, SQS batches to the worker handler); the
meaning of every call is the same, so a test written for one runs on the other.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from runtime.core.clock import Clock, FakeClock, now_ms
from runtime.core.durations import parse_ms
from runtime.core.journal import Entry
from runtime.core.published import parse_where
from runtime.engine.schedules import Schedule
from runtime.errors import InvalidInput
from runtime.platform.fetch import Response
from runtime.platform.flow import LimitRow, limit_rows, set_limit
from runtime.platform.platform import Platform
from runtime.platform.schedules import ScheduleControl, Ticker, find
from runtime.store.base import RunRecord


def own_folder(prefix: str) -> Path:
    """A temporary folder for a harness that was given none, named for this process
    (``<prefix><pid>-<random>``). Folders of that name whose process is gone (a test's
    subprocess killed before it could remove its own) are removed first."""
    root = Path(tempfile.gettempdir())
    for old in root.glob(f"{prefix}[0-9]*-*"):
        pid = old.name[len(prefix) :].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


class Harness:
    """The run API on a fake clock. Subclasses provide ``platform`` (the one their run API
    calls go through), ``settle``, ``_next_due``, ``fetch``, ``deploy``, ``restart`` and
    ``close``."""

    platform: Platform

    def __init__(self, clock: Clock | None = None) -> None:
        """``clock``: a fake one by default (it moves only with ``advance``); a bench that
        drives a deployment from several processes passes the real one."""
        self._clock: Clock = FakeClock() if clock is None else clock

    def __enter__(self) -> Any:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- what a harness provides -------------------------------------------------------

    def settle(self) -> None:
        """Run all due work until idle; the clock does not move."""
        raise NotImplementedError

    def _next_due(self, until_ms: int) -> int | None:
        """The earliest time after now (epoch milliseconds) at which something falls due; a
        time after ``until_ms`` may be given as None (no advance stops there)."""
        raise NotImplementedError

    def fetch(
        self,
        method: str,
        path: str,
        body: str | None = None,
        headers: dict[str, str] | None = None,
        query: dict[str, str] | None = None,
    ) -> Response:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    # --- runs --------------------------------------------------------------------------

    def start(
        self,
        workflow: str,
        input: Any = None,
        id: str | None = None,
        timeout: str | float | None = None,
        *,
        signal: str | None = None,
        payload: Any = None,
    ) -> RunRecord:
        """``timeout``: past it the run ends failed, ``run 'ID' timed out after 30d``.
        ``signal`` (with its ``payload``): signal-with-start, the run created with the signal
        in one write, or an existing run of the workflow sent it."""
        run = self.platform.start(workflow, input, id=id, timeout=timeout, signal=signal, payload=payload)
        self.settle()
        return self.get(run.id)

    def get(self, run_id: str) -> RunRecord:
        return self.platform.get(run_id)

    def journal(self, run_id: str) -> list[Entry]:
        return self.platform.journal(run_id)

    def values(self, run_id: str) -> dict[str, Any]:
        """The latest value per key the run published with ``wf:set``."""
        return self.platform.values(run_id)

    def find(self, where: str, workflow: str | None = None) -> list[RunRecord]:
        """Runs by a published value: ``p.find("month=7")``, ``p.find("month>=3")``."""
        return self.platform.find(parse_where(where), workflow=workflow)

    def runs(self, status: str | None = None, workflow: str | None = None) -> list[RunRecord]:
        return self.platform.runs(status=status, workflow=workflow)

    def signal(self, run_id: str, name: str, payload: Any = None) -> bool:
        live = self.platform.signal(run_id, name, payload)
        self.settle()
        return live

    def cancel(self, run_id: str) -> None:
        self.platform.cancel(run_id)
        self.settle()

    def resume(self, run_id: str) -> None:
        self.platform.resume(run_id)
        self.settle()

    # --- flow control ------------------------------------------------------------------

    def why(self, run_id: str) -> str:
        """Why the run is not moving, in one line (``lunaflow show``'s)."""
        return self.platform.why(self.get(run_id)).text

    def slots(self) -> list[LimitRow]:
        """Each key with runs holding or waiting for its slots (``lunaflow limits``)."""
        return limit_rows(self.platform.store)

    def set_limit(self, name: str, value: str | int | None) -> list[str]:
        """Change a limit without a deploy (``lunaflow limits set``); waiting runs that now fit
        start at once. Returns them."""
        admitted = set_limit(self.platform.store, name, None if value is None else str(value))
        self.settle()
        return admitted

    def retry(self, run_id: str) -> None:
        """A run waiting out a step's backoff runs the next attempt now."""
        self.platform.retry(run_id)
        self.settle()

    # --- time --------------------------------------------------------------------------

    @property
    def now(self) -> float:
        return self._clock.now()

    def advance(self, duration: str | float) -> None:
        """Move the clock, stopping at each due time on the way and settling there, so timers
        fire in the order of their due times."""
        target = now_ms(self._clock) + parse_ms(duration, "advance")
        self.settle()
        while (due := self._next_stop(target)) is not None and due <= target:
            self._move_clock(due)
            self._fire_ticks()
            self.settle()
        self._move_clock(target)
        self._fire_ticks()
        self.settle()

    # --- schedules ---------------------------------------------------------------------

    @property
    def ticker(self) -> Ticker:
        """Ticks count from the harness's first look (its creation): none fires for a
        time before it."""
        if getattr(self, "_ticker", None) is None:
            self._ticker = Ticker(now_ms(self._clock))
        return self._ticker

    def _next_stop(self, until_ms: int) -> int | None:
        """The next time an advance to ``until_ms`` stops at (one after it: none)."""
        now = now_ms(self._clock)
        tick = self.ticker.next_due(self.platform.worker.schedules, now)
        return earliest_after(now, [self._next_due(until_ms), tick])

    def _fire_ticks(self) -> None:
        for schedule, tick in self.ticker.due(self.platform.worker.schedules, now_ms(self._clock)):
            self._fire(schedule, tick)

    def _fire(self, schedule: Schedule, tick_ms: int, *, now: bool = False) -> None:
        """Deliver one tick the way this platform's ticks arrive (``now``: a trigger, which
        a pause does not hold back)."""
        raise NotImplementedError

    def trigger(self, name: str) -> RunRecord:
        """Fire schedule ``name`` now, as if it ticked at this second (paused or not)."""
        schedule = find(self.platform.worker.schedules, name)
        tick = now_ms(self._clock) // 1000 * 1000
        self._fire(schedule, tick, now=True)
        self.settle()
        return self.get(schedule.run_id(tick))

    def pause_schedule(self, name: str) -> None:
        """Its ticks fire no run until ``resume_schedule``; the ticks missed meanwhile are not
        caught up."""
        self._set_paused(find(self.platform.worker.schedules, name), True)

    def resume_schedule(self, name: str) -> None:
        self._set_paused(find(self.platform.worker.schedules, name), False)

    def _set_paused(self, schedule: Schedule, paused: bool) -> None:
        self.schedule_control.set_paused(schedule.name, paused)

    @property
    def schedule_control(self) -> ScheduleControl:
        """Where this platform keeps its schedules' pauses and how a trigger reaches it: what
        the console acts through (``render.runs_page(..., schedules=...)``)."""
        raise NotImplementedError

    def _move_clock(self, to_ms: int) -> None:
        if not isinstance(self._clock, FakeClock):
            raise InvalidInput("advance moves the harness's fake clock; this one runs on the real clock")
        self._clock.advance(max(0, to_ms - now_ms(self._clock)) / 1000)

    # --- secrets and logs --------------------------------------------------------------

    def set_secret(self, name: str, value: str) -> int:
        if not isinstance(value, str):
            raise InvalidInput(f"secret '{name}' must be a string value (got {type(value).__name__})")
        return self.platform.store.add_secret(name, value)

    @property
    def logs(self) -> list[dict[str, Any]]:
        return list(self.platform.logs)


MAX_WORKERS = 64  # a harness's threads, each with a Lua state: more is a mistake, not a test


def check_workers(workers: object) -> int:
    """A harness's ``workers``: how many woken runs advance at once (1 to 64)."""
    if not isinstance(workers, int) or isinstance(workers, bool) or not 1 <= workers <= MAX_WORKERS:
        raise InvalidInput(
            f"workers must be a whole number from 1 to {MAX_WORKERS} (got {workers!r}): how many woken "
            "runs advance at once, each on a Lua state of its own"
        )
    return workers


def earliest_after(now: int, dues: Sequence[int | float | None]) -> int | None:
    """The earliest of ``dues`` later than ``now`` (what is due by now has been settled, or
    cannot be: a message for a queue with no handler), in whole milliseconds."""
    found = [math.ceil(d) for d in dues if d is not None and d > now]
    return min(found) if found else None
