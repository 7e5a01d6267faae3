"""Durations: ``"100ms"``, ``"30s"``, ``"1h30m"``, ``"7d"``, or a number of seconds."""

from __future__ import annotations

import math
import re

from runtime.errors import InvalidInput

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)")
_WHOLE = re.compile(r"(?:[0-9]+(?:\.[0-9]+)?(?:ms|s|m|h|d))+")
# A century bounds every duration so due times stay far inside 64-bit milliseconds.
MAX_DAYS = 100 * 365
MAX_MS = MAX_DAYS * _UNIT_MS["d"]


def _refuse(value: object, what: str) -> InvalidInput:
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    return InvalidInput(
        f"bad duration {shown} for {what}: a duration is one or more <number><unit> with units "
        'ms, s, m, h, d (e.g. "100ms", "30s", "1h30m", "7d") or a number of seconds'
    )


def _days(ms: float) -> str:
    days = ms / _UNIT_MS["d"]
    if days >= 1e12:
        return f"{days:.3g}"
    return f"{days:,.8f}".rstrip("0").rstrip(".")


def _too_long(value: object, what: str, ms: float) -> InvalidInput:
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    return InvalidInput(
        f"bad duration {shown} for {what}: it is {_days(ms)} days, over the limit of "
        f'{MAX_DAYS:,} days (100 years of 365 days); use at most "{MAX_DAYS}d"'
    )


def parse_ms(value: object, what: str = "a duration") -> int:
    """Return the duration in whole milliseconds, or raise InvalidInput naming the value."""
    if isinstance(value, bool):
        raise _refuse(value, what)
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise _refuse(value, what)
        exact = value * 1000
    elif isinstance(value, str):
        if not _WHOLE.fullmatch(value):
            raise _refuse(value, what)
        # Summed as floats, so 400 digits make infinity: compared before rounding.
        exact = sum(float(n) * _UNIT_MS[u] for n, u in _PART.findall(value))
    else:
        raise _refuse(value, what)
    if exact > MAX_MS + 0.5:
        raise _too_long(value, what, exact)
    return round(exact)
