"""The cron subset (runtime/core/cron.py): parsing, next fire times across time zones and
daylight saving, the EventBridge form, and the refusals with what/rule/fix."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest

from runtime.core.cron import Cron
from runtime.errors import InvalidInput

UTC = dt.UTC
PARIS = zoneinfo.ZoneInfo("Europe/Paris")
NEW_YORK = zoneinfo.ZoneInfo("America/New_York")


def ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).timestamp() * 1000)


def at(value: int | None) -> str:
    assert value is not None
    return dt.datetime.fromtimestamp(value / 1000, UTC).strftime("%Y-%m-%dT%H:%M")


def ticks(expr: str, start: str, n: int, tz: dt.tzinfo = UTC) -> list[str]:
    cron, t, out = Cron.parse(expr), ms(start), []
    for _ in range(n):
        nxt = cron.next_after(t, tz)
        out.append(at(nxt))
        assert nxt is not None
        t = nxt
    return out


def test_every_day_at_three_in_utc_and_in_paris() -> None:
    assert ticks("0 3 * * *", "2026-01-01T00:00+00:00", 2) == ["2026-01-01T03:00", "2026-01-02T03:00"]
    assert ticks("0 3 * * *", "2026-01-01T00:00+00:00", 1, PARIS) == ["2026-01-01T02:00"]
    assert ticks("0 3 * * *", "2026-07-01T00:00+00:00", 1, PARIS) == ["2026-07-01T01:00"]


def test_next_is_strictly_after() -> None:
    assert ticks("0 3 * * *", "2026-01-01T03:00+00:00", 1) == ["2026-01-02T03:00"]
    assert ticks("* * * * *", "2026-01-01T03:00:30+00:00", 1) == ["2026-01-01T03:01"]


def test_steps_ranges_lists_and_names() -> None:
    assert ticks("*/20 9-10 * * MON-FRI", "2026-01-02T08:00+00:00", 7) == [
        "2026-01-02T09:00",
        "2026-01-02T09:20",
        "2026-01-02T09:40",
        "2026-01-02T10:00",
        "2026-01-02T10:20",
        "2026-01-02T10:40",
        "2026-01-05T09:00",  # Friday, then Monday
    ]
    assert ticks("30 12 1,15 JAN,jul *", "2026-01-02T00:00+00:00", 3) == [
        "2026-01-15T12:30",
        "2026-07-01T12:30",
        "2026-07-15T12:30",
    ]
    assert ticks("0 0 * * 0", "2026-01-01T00:00+00:00", 1) == ticks("0 0 * * 7", "2026-01-01T00:00+00:00", 1)
    assert ticks("5/30 0 * * *", "2026-01-01T00:00+00:00", 2) == ["2026-01-01T00:05", "2026-01-01T00:35"]


def test_february_29_fires_in_leap_years() -> None:
    assert ticks("0 0 29 2 *", "2026-01-01T00:00+00:00", 2) == ["2028-02-29T00:00", "2032-02-29T00:00"]


def test_daylight_saving_skips_a_missing_time_and_fires_a_repeated_one_once() -> None:
    # New York springs forward at 02:00 on 2026-03-08: 02:30 does not exist that day.
    assert ticks("30 2 * * *", "2026-03-07T00:00+00:00", 2, NEW_YORK) == [
        "2026-03-07T07:30",
        "2026-03-09T06:30",
    ]
    # It falls back at 02:00 on 2026-11-01: 01:30 happens twice and fires once (the first).
    assert ticks("30 1 * * *", "2026-10-31T12:00+00:00", 3, NEW_YORK) == [
        "2026-11-01T05:30",
        "2026-11-02T06:30",
        "2026-11-03T06:30",
    ]


@pytest.mark.parametrize(
    ("expr", "eventbridge"),
    [
        ("0 3 * * *", "cron(0 3 * * ? *)"),
        ("*/15 * * * *", "cron(0/15 * * * ? *)"),
        ("0 9-17 * * MON-FRI", "cron(0 9-17 ? * MON,TUE,WED,THU,FRI *)"),
        ("0 0 1,15 * *", "cron(0 0 1,15 * ? *)"),
        ("0 12 * JAN-MAR *", "cron(0 12 * 1-3 ? *)"),
        ("0 0 * * 0,7", "cron(0 0 ? * SUN *)"),
        ("1,2,3,10 0 * * *", "cron(1-3,10 0 * * ? *)"),
    ],
)
def test_the_eventbridge_form(expr: str, eventbridge: str) -> None:
    assert Cron.parse(expr).eventbridge() == eventbridge


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        ("0 3 * *", "it has 4 fields, not 5"),
        ("0 3 * * ? *", "EventBridge's 6-field form"),
        ("60 3 * * *", "60 is outside the minute field's 0-59"),
        ("0 24 * * *", "outside the hour field's 0-23"),
        ("0 3 1 * MON", "restricts both the day of month and the day of week"),
        ("0 3 L * *", "uses ?, L, W or #"),
        ("*/0 * * * *", "is not a whole number above 0"),
        ("0 3 * FOO *", "'FOO' in the month field is not a number"),
        ("0 5-3 * * *", "runs backwards"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 31 4,6,9,11 *", "never fires"),
    ],
)
def test_bad_expressions_are_refused_with_the_rule(expr: str, problem: str) -> None:
    with pytest.raises(InvalidInput) as e:
        Cron.parse(expr)
    assert problem in str(e.value)
    if "never fires" not in problem:
        assert "a cron expression is 5 fields" in str(e.value)  # the rule and an example
