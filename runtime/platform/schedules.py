"""Firing a project's schedules: each tick starts the run ``<schedule>@<tick time>``.

The tick's run id is the whole of the durability: a tick fired twice (a retried EventBridge
delivery, ``lunaflow dev`` restarted at a tick, a harness and a server on one data folder)
joins the run the first firing started, so no state of its own is stored.

What a tick does while an earlier tick's run of the same schedule is still going (running,
sleeping or awaiting) is the schedule's ``overlap``: ``skip`` (the default: no run for this
tick), ``allow`` (start it anyway) or ``cancel`` (cancel the earlier runs, then start).

A tick outside the schedule's window (before ``start_at``, after ``end_at``) starts no run:
the window is kept here, not by EventBridge Scheduler, whose StartDate may not be in the
past when a schedule is created (a deploy of a window that has begun would fail), so on AWS
Scheduler sends the ticks outside it too and they end here. A trigger ("trigger now") is
fired whatever the window, as whatever the pause.

A tick whose run id a run of another workflow already holds (a user started it first) cannot
start its run: it is skipped and kept as an error in the platform's log, and every other tick
fires as usual (raising would lose the ticks due with it, and on AWS make the tick's message
fail for ever).

Where ticks come from: the harnesses' ``advance`` (``Ticker`` below, on the fake clock),
``lunaflow dev``'s ticker thread (the same ``Ticker`` on the real clock) and, on AWS, one
EventBridge Scheduler schedule per declaration whose message reaches ``fire_tick`` through
the worker function (``AwsRuntime.tick``).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from runtime.core.journal import Status
from runtime.engine.schedules import Schedule, iso
from runtime.errors import InvalidInput, LunaflowError, RunIdTaken
from runtime.platform.platform import Platform
from runtime.platform.runs import Runs
from runtime.store.base import IndexedSearch, RunFilter, RunRecord

log = logging.getLogger("lunaflow.schedules")

LIVE = (Status.RUNNING, Status.SLEEPING, Status.AWAITING)
# After downtime a schedule fires its latest missed tick once, if that tick is at most this
# old; older ones, and every earlier missed tick, are not fired (documented catch-up rule).
CATCH_UP_MS = 24 * 3_600_000


@dataclass(frozen=True)
class Fired:
    schedule: str
    tick_ms: int
    run_id: str
    started: bool  # False: no run for this tick (``error`` says why; None: overlap or window)
    cancelled: tuple[str, ...] = ()
    error: str | None = None  # the tick cannot start its run: its id is another workflow's


def live_runs(platform: Platform, schedule: Schedule, but: str) -> list[RunRecord]:
    """The schedule's runs still going, other than ``but`` (the tick's own)."""
    prefix = f"{schedule.name}@"
    found = []
    for status in LIVE:
        for run in platform.runs(status=status.value, workflow=schedule.workflow):
            if run.id.startswith(prefix) and run.id != but:
                found.append(run)
    return found


def fire_tick(platform: Platform, schedule: Schedule, tick_ms: int, *, trigger: bool = False) -> Fired:
    """Start the tick's run (joining it if it exists), as its overlap policy says; a tick
    outside the window starts none unless it is a ``trigger``."""
    run_id = schedule.run_id(tick_ms)
    if not trigger and not schedule.in_window(tick_ms):
        log.info("schedule %s: tick %s is outside its window; no run", schedule.name, run_id)
        return Fired(schedule.name, tick_ms, run_id, started=False)
    existing = platform.store.get_run(run_id)
    if existing is not None and existing.workflow != schedule.workflow:
        # Checked before the overlap policy: a tick that cannot start must cancel nothing.
        return id_taken(platform, schedule, tick_ms, existing.workflow)
    cancelled: list[str] = []
    if schedule.overlap != "allow" and existing is None:
        earlier = live_runs(platform, schedule, run_id)
        if earlier and schedule.overlap == "skip":
            log.info("schedule %s: tick %s skipped, %s is still going", schedule.name, run_id, earlier[0].id)
            return Fired(schedule.name, tick_ms, run_id, started=False)
        for run in earlier:  # overlap = "cancel"
            platform.cancel(run.id)
            cancelled.append(run.id)
    try:
        platform.start(schedule.workflow, schedule.input, id=run_id)
    except RunIdTaken as e:  # started by someone else since the look above
        return id_taken(platform, schedule, tick_ms, e.held_by, tuple(cancelled))
    return Fired(schedule.name, tick_ms, run_id, started=True, cancelled=tuple(cancelled))


def id_taken(
    platform: Platform, schedule: Schedule, tick_ms: int, held_by: str, cancelled: tuple[str, ...] = ()
) -> Fired:
    """The tick skipped, its error logged and kept in the platform's log (``p.logs``)."""
    run_id = schedule.run_id(tick_ms)
    text = (
        f"schedule '{schedule.name}': the tick of {iso(tick_ms)} was skipped: its run id '{run_id}' is "
        f"held by a run of workflow '{held_by}', so it cannot start workflow '{schedule.workflow}'; "
        "a schedule's tick starts the run <schedule>@<tick time>, an id that belongs to the schedule; "
        "start your own runs under other ids (the schedule's other ticks fire as usual)"
    )
    log.error(text)
    platform.logs.append(
        {"level": "error", "message": text, "traceback": None, "run": run_id, "schedule": schedule.name}
    )
    return Fired(schedule.name, tick_ms, run_id, started=False, cancelled=cancelled, error=text)


def find(schedules: Mapping[str, Schedule], name: str) -> Schedule:
    found = schedules.get(name)
    if found is None:
        known = ", ".join(sorted(schedules)) or "none"
        raise InvalidInput(
            f"no schedule '{name}' is declared in this project (it declares: {known}); "
            f'declare it with schedule "{name}" {{ ... }} or name one of those'
        )
    return found


class Ticker:
    """Which ticks are due: the ticks of each schedule after the last one looked at, up to
    now. Several missed at once (a process that was down, a clock moved far) fire as their
    latest one alone. The schedules seen at the first look count from ``since``; one that
    appears later (a deploy, a reload) counts from when it is first seen, so new code does
    not fire a tick from before it existed. In memory: a restart begins at ``since`` again,
    which is harmless, as a tick fired twice joins its run."""

    def __init__(self, since_ms: int) -> None:
        self._since = since_ms
        self._last: dict[str, int] = {}
        self._looked = False

    def _from(self, schedules: Mapping[str, Schedule], now_ms: int) -> None:
        for name in schedules:
            if name not in self._last:
                self._last[name] = self._since if not self._looked else now_ms
        self._looked = True

    def due(self, schedules: Mapping[str, Schedule], now_ms: int) -> list[tuple[Schedule, int]]:
        self._from(schedules, now_ms)
        out = []
        for name, schedule in schedules.items():
            last = self._last[name]
            tick = schedule.latest_at_or_before(now_ms, max(0, now_ms - last))
            self._last[name] = max(last, now_ms)
            if tick is not None and tick > last:
                out.append((schedule, tick))
        return sorted(out, key=lambda d: d[1])

    def next_due(self, schedules: Mapping[str, Schedule], now_ms: int) -> int | None:
        self._from(schedules, now_ms)
        ticks = [
            t
            for name, s in schedules.items()
            if (t := s.next_after(max(now_ms, self._last[name]))) is not None
        ]
        return min(ticks) if ticks else None


PAUSES_FILE = "schedules.json"


class PauseFile:
    """Which schedules are paused in a data folder: ``schedules.json`` beside the store
    (``{"paused": [names]}``), so the store's schema holds nothing of schedules. Written
    whole through a rename; the CLI, ``lunaflow dev`` and ``LocalPlatform`` read it at each
    tick. A paused schedule fires no tick (the ticks it misses are not caught up on resume);
    "trigger now" still starts a run."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / PAUSES_FILE

    def paused(self) -> set[str]:
        try:
            found = json.loads(self.path.read_text(encoding="utf-8")).get("paused", [])
        except FileNotFoundError:
            return set()
        except (ValueError, AttributeError):
            raise InvalidInput(
                f"{self.path} is not the paused schedules' file lunaflow writes "
                '({"paused": [names]}); fix it or delete it (every schedule is then resumed)'
            ) from None
        return {str(n) for n in found}

    def set(self, name: str, paused: bool) -> None:
        names = self.paused()
        names = names | {name} if paused else names - {name}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temp = self.path.with_name(f".{PAUSES_FILE}.{os.getpid()}")
        temp.write_text(json.dumps({"paused": sorted(names)}), encoding="utf-8")
        os.replace(temp, self.path)


# --- what the console and the CLI show and do with schedules --------------------------------


class ScheduleControl(Protocol):
    """Where a platform keeps its schedules' pauses and how "trigger now" reaches it: the data
    folder's ``PauseFile`` and ``fire_tick`` locally (``LocalSchedules``), the Scheduler
    schedule's state and a tick message on the wake queue on AWS
    (``runtime/aws/schedules.py: AwsSchedules``)."""

    def is_paused(self, name: str) -> bool: ...

    def set_paused(self, name: str, paused: bool) -> None: ...

    def trigger(self, schedule: Schedule, tick_ms: int) -> bool:
        """Fire ``tick_ms`` now, paused or not; False when the overlap policy skipped it,
        ``LunaflowError`` when a run of another workflow holds its id (both known only where
        the tick fires in this process)."""


class LocalSchedules:
    """A data folder's schedules: pauses in its ``schedules.json``, triggers fired here on
    ``platform`` (None: a listing only, as ``lunaflow schedules`` without a store)."""

    def __init__(self, data_dir: Path, platform: Platform | None = None) -> None:
        self.pauses = PauseFile(data_dir)
        self.platform = platform

    def is_paused(self, name: str) -> bool:
        return name in self.pauses.paused()

    def set_paused(self, name: str, paused: bool) -> None:
        self.pauses.set(name, paused)

    def trigger(self, schedule: Schedule, tick_ms: int) -> bool:
        if self.platform is None:
            raise InvalidInput(
                f"schedule '{schedule.name}' cannot be triggered here: no platform runs its code"
            )
        fired = fire_tick(self.platform, schedule, tick_ms, trigger=True)
        if fired.error is not None:  # the person triggering it is told, not only the log
            raise LunaflowError(fired.error)
        return fired.started


@dataclass(frozen=True)
class ScheduleRow:
    """One declared schedule as the console and ``lunaflow schedules`` list it."""

    schedule: Schedule
    paused: bool
    next_tick_ms: int | None  # None: its window is over
    last_run: RunRecord | None  # its newest tick's run

    @property
    def when(self) -> str:
        s = self.schedule
        return s.cron.text if s.cron is not None else f"every {s.every_minutes}m"

    def as_json(self) -> dict[str, Any]:
        last = self.last_run
        return {
            "schedule": self.schedule.name,
            "workflow": self.schedule.workflow,
            "when": self.when,
            "timezone": self.schedule.timezone,
            "overlap": self.schedule.overlap,
            "paused": self.paused,
            "next_tick": None if self.next_tick_ms is None else iso(self.next_tick_ms),
            "last_run": None if last is None else {"id": last.id, "status": str(last.status)},
        }


# The runs a listing reads to find a schedule's newest run where the store has no index to
# search ids by (DynamoDB): its workflow's newest runs, newest first.
LAST_RUN_SCAN = 1000


def last_tick_run(runs: Runs, schedule: Schedule) -> RunRecord | None:
    """The schedule's newest run (ids ``<name>@<tick>``, which sort by tick time), or None."""
    prefix = f"{schedule.name}@"
    store = runs.store
    if isinstance(store, IndexedSearch):
        found = store.search_runs(
            RunFilter(workflow=schedule.workflow, id_prefix=prefix), status=None, offset=0, limit=1
        )
    else:
        found = [
            r for r in runs.runs(workflow=schedule.workflow, limit=LAST_RUN_SCAN) if r.id.startswith(prefix)
        ]
    return max(found, key=lambda r: r.id) if found else None


def schedule_rows(
    schedules: Mapping[str, Schedule], runs: Runs | None, control: ScheduleControl, now_ms: int
) -> list[ScheduleRow]:
    """Every declared schedule by name: paused or not, its next tick, its newest run."""
    return [
        ScheduleRow(
            schedule=s,
            paused=control.is_paused(name),
            next_tick_ms=s.next_after(now_ms),
            last_run=None if runs is None else last_tick_run(runs, s),
        )
        for name, s in sorted(schedules.items())
    ]
