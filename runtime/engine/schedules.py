"""Schedules a project declares: ``schedule "nightly" { cron = "0 3 * * *", workflow = ... }``.

A schedule names a workflow, when it ticks (``cron`` in a time zone, or ``every`` a whole
number of minutes), the input each tick's run gets, what a tick does while the previous
tick's run is still live (``overlap``) and an optional window (``start_at``/``end_at``).
Each tick starts the run ``<schedule>@<tick time, UTC ISO 8601>``, so a tick fired twice
(a retried delivery, a restarted server) joins the run it started the first time.

This module parses and checks a declaration (loading refuses a bad one) and computes ticks;
firing them is the platform's (``runtime/platform/schedules.py``).
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from runtime.core.cron import Cron
from runtime.core.values import encode
from runtime.errors import InvalidInput, ProjectLoadError

OVERLAPS = ("skip", "allow", "cancel")
_OPTIONS = ("cron", "every", "timezone", "workflow", "input", "overlap", "start_at", "end_at")
_EVERY = re.compile(r"([1-9][0-9]*)(m|h|d)")
_UNIT_MINUTES = {"m": 1, "h": 60, "d": 1440}
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?Z")


@dataclass(frozen=True)
class Schedule:
    name: str
    workflow: str
    input: Any
    timezone: str
    overlap: str
    cron: Cron | None = None
    every_minutes: int | None = None
    start_ms: int | None = None
    end_ms: int | None = None

    @property
    def zone(self) -> dt.tzinfo:
        return zoneinfo.ZoneInfo(self.timezone)

    def run_id(self, tick_ms: int) -> str:
        return f"{self.name}@{iso(tick_ms)}"

    def in_window(self, tick_ms: int) -> bool:
        """Whether ``tick_ms`` falls within ``start_at``..``end_at`` (both inclusive)."""
        return (self.start_ms is None or tick_ms >= self.start_ms) and (
            self.end_ms is None or tick_ms <= self.end_ms
        )

    def next_after(self, after_ms: int) -> int | None:
        """The first tick later than ``after_ms`` inside the window, or None."""
        if self.start_ms is not None and after_ms < self.start_ms:
            after_ms = self.start_ms - 1
        if self.every_minutes is not None:
            # Locally rates count from the window's start, else from 1970-01-01T00:00Z.
            period = self.every_minutes * 60_000
            anchor = self.start_ms or 0
            ms: int | None = anchor + ((after_ms - anchor) // period + 1) * period
        else:
            assert self.cron is not None
            ms = self.cron.next_after(after_ms, self.zone)
        if ms is None or (self.end_ms is not None and ms > self.end_ms):
            return None
        return ms

    def latest_at_or_before(self, now_ms: int, within_ms: int) -> int | None:
        """The last tick in ``(now - within, now]``: what a restart catches up on."""
        tick, last = self.next_after(now_ms - within_ms), None
        while tick is not None and tick <= now_ms:
            last, tick = tick, self.next_after(tick)
        return last

    def expression(self) -> str:
        """The EventBridge Scheduler expression."""
        if self.cron is not None:
            return self.cron.eventbridge()
        assert self.every_minutes is not None
        n = self.every_minutes
        if n % 1440 == 0:
            return f"rate({n // 1440} {'day' if n == 1440 else 'days'})"
        if n % 60 == 0:
            return f"rate({n // 60} {'hour' if n == 60 else 'hours'})"
        return f"rate({n} {'minute' if n == 1 else 'minutes'})"


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> int:
    """``2026-12-02T02:00:00Z`` (EventBridge's scheduled time) in epoch milliseconds."""
    try:
        at = dt.datetime.strptime(text.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        raise InvalidInput(f'tick time {text!r} is not a UTC time like "2026-12-02T02:00:00Z"') from None
    return int(at.timestamp() * 1000)


def _refuse(name: str, problem: str) -> InvalidInput:
    return InvalidInput(f"schedule '{name}': {problem}")


def _when(name: str, key: str, value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _ISO.fullmatch(value):
        raise _refuse(name, f'{key} must be a UTC time like "2026-12-01T00:00:00Z" (got {value!r})')
    return parse_iso(value if value.count(":") == 2 else value.replace("Z", ":00Z"))


def parse_schedule(name: str, opts: Any) -> Schedule:
    """Check one declaration's options, raising what/rule/fix for the first bad one."""
    if not isinstance(opts, dict):
        raise _refuse(name, f'needs options: schedule "{name}" {{ cron = "0 3 * * *", workflow = "report" }}')
    for key in opts:
        if key not in _OPTIONS:
            raise _refuse(name, f"unknown option '{key}'; the options are {', '.join(_OPTIONS)}")
    if "@" in name or "/" in name:
        raise _refuse(name, "a schedule's name may not hold '@' or '/' (its runs are named <name>@<tick>)")
    workflow = opts.get("workflow")
    if not isinstance(workflow, str) or not workflow:
        raise _refuse(name, 'needs workflow = "<name of a workflow>", the workflow each tick starts')
    has_cron, has_every = "cron" in opts, "every" in opts
    if has_cron == has_every:
        raise _refuse(
            name, 'needs exactly one of cron = "0 3 * * *" (a cron expression) and every = "15m" (a rate)'
        )
    timezone = opts.get("timezone", "UTC")
    try:
        if not isinstance(timezone, str) or not timezone:
            raise ValueError
        zoneinfo.ZoneInfo(timezone)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        raise _refuse(
            name,
            f'time zone {timezone!r} does not exist; name an IANA time zone like "Europe/Paris" or "UTC"',
        ) from None
    cron = every = None
    if has_cron:
        try:
            cron = Cron.parse(opts["cron"])
        except InvalidInput as e:
            raise _refuse(name, str(e)) from None
    else:
        if has_every and "timezone" in opts:
            raise _refuse(name, "a rate (every) ticks alike in every time zone; drop timezone, or use cron")
        text = opts["every"]
        m = _EVERY.fullmatch(text) if isinstance(text, str) else None
        if m is None:
            raise _refuse(
                name,
                f'every must be a whole number of minutes, hours or days like "15m", "2h" or "1d" '
                f"(got {text!r}): EventBridge's rate() takes those units",
            )
        every = int(m.group(1)) * _UNIT_MINUTES[m.group(2)]
    overlap = opts.get("overlap", "skip")
    if overlap not in OVERLAPS:
        raise _refuse(
            name,
            f"overlap must be one of {', '.join(OVERLAPS)} (got {overlap!r}): what a tick does while "
            "the previous tick's run is still going",
        )
    start, end = _when(name, "start_at", opts.get("start_at")), _when(name, "end_at", opts.get("end_at"))
    if start is not None and end is not None and end <= start:
        raise _refuse(name, "end_at is not after start_at; the window would hold no tick")
    input_value = opts.get("input")
    try:
        encode(input_value, f"the input of schedule '{name}'")
    except InvalidInput as e:
        raise _refuse(name, str(e)) from None
    schedule = Schedule(name, workflow, input_value, timezone, overlap, cron, every, start, end)
    if start is not None and end is not None and schedule.next_after(start - 1) is None:
        raise _refuse(name, "no tick falls inside its window (start_at to end_at); widen it")
    return schedule


def schedules_of(
    project: str, declarations: Sequence[Any], workflows: Collection[str]
) -> dict[str, Schedule]:
    """The schedules among a loaded project's declarations (each checked when declared),
    refusing one whose workflow the project does not declare (known only once every script
    has loaded)."""
    found: dict[str, Schedule] = {}
    for d in declarations:
        if d.kind != "schedule":
            continue
        schedule = parse_schedule(d.name, d.opts)
        if schedule.workflow not in workflows:
            known = ", ".join(sorted(workflows)) or "none"
            raise ProjectLoadError(
                f"project {project}: schedule '{d.name}' ({d.where}) starts workflow "
                f"'{schedule.workflow}', which the project does not declare (it declares: {known}); "
                "name a declared workflow, or declare it"
            )
        found[d.name] = schedule
    return found
