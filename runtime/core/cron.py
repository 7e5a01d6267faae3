"""Cron expressions: the 5-field subset lunaflow supports, their next fire times in a time
zone, and their EventBridge Scheduler form.

The subset (the part of Unix cron EventBridge can express the same way):

- fields ``minute hour day-of-month month day-of-week``;
- in each field ``*``, a number, a range ``a-b``, a list ``a,b,c``, a step ``*/n``, ``a/n``
  or ``a-b/n``; months ``1-12`` or ``JAN``-``DEC``, days of the week ``0-7`` (0 and 7 are
  Sunday) or ``SUN``-``SAT``;
- at most one of day-of-month and day-of-week other than ``*``: Unix cron fires on either
  when both are set, EventBridge refuses the pair (one of them must be ``?``).

EventBridge's own 6-field form (``cron(min hour dom month dow year)``, days of the week
``1-7`` from Sunday, ``?`` in the day field left open) is what ``eventbridge()`` writes.

Daylight saving time, as EventBridge Scheduler does it: a local time the clocks skip does
not fire that day; a local time they pass twice fires once, the first time.

Pure: no clock is read; the caller hands in the time zone (a ``tzinfo``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from runtime.errors import InvalidInput

_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
# name, low, high, names (numbered from low)
_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)
_DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # Feb 29 fires in leap years
# Searching this many days ahead finds any tick an accepted expression has (a Feb 29 that
# is also a given weekday comes round within 28 years).
_HORIZON_DAYS = 366 * 29
_UTC = dt.UTC

HELP = (
    'a cron expression is 5 fields, "minute hour day-of-month month day-of-week", each *, a '
    'number, a range a-b, a list a,b or a step */n (e.g. "0 3 * * *" is 03:00 every day, '
    '"*/15 9-17 * * MON-FRI" every 15 minutes in office hours)'
)


def _refuse(expr: str, problem: str) -> InvalidInput:
    return InvalidInput(f'bad cron expression "{expr}": {problem}; {HELP}')


def _number(text: str, names: tuple[str, ...], low: int, expr: str, field: str) -> int:
    upper = text.upper()
    if upper in names:
        return names.index(upper) + low
    if not text.isdigit():
        raise _refuse(expr, f"'{text}' in the {field} field is not a number")
    return int(text)


def _field(text: str, index: int, expr: str) -> frozenset[int]:
    field, low, high, names = _FIELDS[index]
    values: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                raise _refuse(
                    expr, f"the step '/{step_text}' in the {field} field is not a whole number above 0"
                )
            step = int(step_text)
        if base == "*":
            first, last = low, high
        elif "-" in base:
            a, _, b = base.partition("-")
            first, last = _number(a, names, low, expr, field), _number(b, names, low, expr, field)
        else:
            first = _number(base, names, low, expr, field)
            last = high if step_text else first
        for v in (first, last):
            if not low <= v <= high:
                raise _refuse(expr, f"{v} is outside the {field} field's {low}-{high}")
        if first > last:
            raise _refuse(expr, f"the range {base} in the {field} field runs backwards")
        values.update(range(first, last + 1, step))
    if index == 4 and 7 in values:  # 7 is Sunday too
        values = (values - {7}) | {0}
    return frozenset(values)


@dataclass(frozen=True)
class Cron:
    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]  # of the month
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # day of month is *
    any_weekday: bool  # day of week is *

    @classmethod
    def parse(cls, expr: object) -> Cron:
        if not isinstance(expr, str):
            raise InvalidInput(f"a cron expression must be a string (got {type(expr).__name__}); {HELP}")
        parts = expr.split()
        if len(parts) == 6 and "?" in (parts[2], parts[4]):
            raise _refuse(
                expr,
                "this is EventBridge's 6-field form; write the 5 Unix fields without the year and "
                "with * for the day field left open (lunaflow writes the ? for EventBridge)",
            )
        if len(parts) != 5:
            raise _refuse(expr, f"it has {len(parts)} fields, not 5")
        for p in parts:
            if any(c in p for c in "?LW#"):
                raise _refuse(expr, f"'{p}' uses ?, L, W or #, which this subset does not support")
        sets = [_field(p, i, expr) for i, p in enumerate(parts)]
        any_day, any_weekday = parts[2] == "*", parts[4] == "*"
        if not any_day and not any_weekday:
            raise _refuse(
                expr,
                "it restricts both the day of month and the day of week, which EventBridge cannot "
                "express (Unix cron would fire on either); keep one of them *",
            )
        cron = cls(expr, sets[0], sets[1], sets[2], sets[3], sets[4], any_day, any_weekday)
        if not any(d <= _DAYS_IN_MONTH[m - 1] for m in cron.months for d in cron.days):
            raise InvalidInput(
                f'cron expression "{expr}" never fires: no month it names has a day it names '
                "(like February 30); name days that exist in those months"
            )
        return cron

    def _day_matches(self, day: dt.date) -> bool:
        if day.month not in self.months or day.day not in self.days:
            return False
        return (day.isoweekday() % 7) in self.weekdays

    def next_after(self, after_ms: int, tz: dt.tzinfo) -> int | None:
        """The first fire time later than ``after_ms`` (epoch milliseconds), or None."""
        start = dt.datetime.fromtimestamp(after_ms // 60_000 * 60, _UTC).astimezone(tz).replace(tzinfo=None)
        hours, minutes = sorted(self.hours), sorted(self.minutes)
        day = start.date()
        for _ in range(_HORIZON_DAYS):
            if self._day_matches(day):
                for h in hours:
                    for m in minutes:
                        local = dt.datetime(day.year, day.month, day.day, h, m)
                        if local < start:
                            continue
                        at = local.replace(tzinfo=tz)  # fold=0: the first of a repeated time
                        if at.astimezone(_UTC).astimezone(tz).replace(tzinfo=None) != local:
                            continue  # the clocks skip this time
                        ms = int(at.timestamp()) * 1000
                        if ms > after_ms:
                            return ms
            day += dt.timedelta(days=1)
        return None

    def eventbridge(self) -> str:
        """``cron(min hour dom month dow year)`` as EventBridge Scheduler reads it."""
        minute = _compact(self.minutes, 0, 59)
        hour = _compact(self.hours, 0, 23)
        month = _compact(self.months, 1, 12)
        if self.any_weekday:
            dom, dow = _compact(self.days, 1, 31), "?"
        else:
            dom, dow = "?", ",".join(_DAYS[d] for d in sorted(self.weekdays))
        return f"cron({minute} {hour} {dom} {month} {dow} *)"


def _compact(values: frozenset[int], low: int, high: int) -> str:
    """A field's values as EventBridge reads them: *, a/n, or ranges and numbers."""
    ordered = sorted(values)
    if ordered == list(range(low, high + 1)):
        return "*"
    if len(ordered) >= 3:
        step = ordered[1] - ordered[0]
        if ordered == list(range(ordered[0], high + 1, step)):
            return f"{ordered[0]}/{step}"
    out: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(f"{ordered[i]}-{ordered[j]}" if j - i >= 2 else ",".join(map(str, ordered[i : j + 1])))
        i = j + 1
    return ",".join(out)
