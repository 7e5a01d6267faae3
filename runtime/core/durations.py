"""Durations: ``"100ms"``, ``"30s"``, ``"1h30m"``, ``"7d"``, or a number of seconds."""

from __future__ import annotations

import math
import re

from runtime.errors import InvalidInput

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)")
_WHOLE = re.compile(r"(?:[0-9]+(?:\.[0-9]+)?(?:ms|s|m|h|d))+")
# A century bounds every duration so due times stay far inside 64-bit milliseconds.
MAX_MS = 100 * 365 * _UNIT_MS["d"]


def _refuse(value: object, what: str) -> InvalidInput:
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    return InvalidInput(
        f"bad duration {shown} for {what}: a duration is one or more <number><unit> with units "
        'ms, s, m, h, d (e.g. "100ms", "30s", "1h30m", "7d") or a number of seconds'
    )


def parse_ms(value: object, what: str = "a duration") -> int:
    """Return the duration in whole milliseconds, or raise InvalidInput naming the value."""
    if isinstance(value, bool):
        raise _refuse(value, what)
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise _refuse(value, what)
        ms = round(value * 1000)
    elif isinstance(value, str):
        if not _WHOLE.fullmatch(value):
            raise _refuse(value, what)
        ms = round(sum(float(n) * _UNIT_MS[u] for n, u in _PART.findall(value)))
    else:
        raise _refuse(value, what)
    if ms > MAX_MS:
        raise _refuse(value, what)
    return ms
