"""Values a run publishes (``wf:set("month", 7)``): their rules, their latest state, and the
filters that find runs by them (``--where month=7``, ``month>=3``). Pure: no I/O.

A published value is journaled (``value.set``) like any decision, so replay checks it; each
store also keeps the latest value per key beside the run, written in the journal's own
write, so a reader (a run handle, ``lunaflow show``, the console) needs no replay, and an
index over (key, value) finds runs without reading journals. Values are scalars (a string,
a number, a boolean): what a search compares. Keys and values are small and few per run
(``runtime.core.bounds``), so they fit one DynamoDB transaction with the journal chunk.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from runtime.core.bounds import MAX_PUBLISHED_KEY_BYTES, MAX_PUBLISHED_KEYS, MAX_PUBLISHED_VALUE_BYTES
from runtime.core.journal import Entry, Kind
from runtime.errors import InvalidInput

Scalar = str | int | float | bool

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
KEY_RULE = (
    "a key is a letter or underscore then letters, digits, '_', '.' or '-', "
    f"at most {MAX_PUBLISHED_KEY_BYTES} bytes"
)


def check_key(key: object, what: str = "wf:set") -> str:
    """The key, or ``InvalidInput`` naming it and the rule."""
    if (
        not isinstance(key, str)
        or not _KEY.fullmatch(key)
        or len(key.encode("utf-8")) > MAX_PUBLISHED_KEY_BYTES
    ):
        shown = key[:60] if isinstance(key, str) else type(key).__name__
        raise InvalidInput(
            f"{what}: key {shown!r} is not allowed: {KEY_RULE}, so a search can name it "
            "(--where key=value); name it like 'month' or 'sale.state'"
        )
    return key


def check_value(key: str, value: object) -> Scalar:
    """The value, or ``InvalidInput``: a string of at most 256 bytes, a finite number, a boolean."""
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        raise InvalidInput(f"wf:set('{key}', ...): the value is not a finite number; publish a finite number")
    if isinstance(value, str):
        size = len(value.encode("utf-8"))
        if size <= MAX_PUBLISHED_VALUE_BYTES:
            return value
        raise InvalidInput(
            f"wf:set('{key}', ...): the value is {size} bytes, over the limit of {MAX_PUBLISHED_VALUE_BYTES} "
            "bytes of a published string; publish a short label or an id, and keep the data elsewhere "
            "(a step's result, a database row)"
        )
    kind = "nil" if value is None else "a table" if isinstance(value, list | dict) else type(value).__name__
    raise InvalidInput(
        f"wf:set('{key}', ...): the value is {kind}; a published value is a string, a number or a "
        "boolean (what a search compares) — publish one field, e.g. wf:set('state', sale.state)"
    )


def too_many_keys(run_id: str, key: str) -> str:
    return (
        f"run '{run_id}' cannot publish key '{key}': it already published {MAX_PUBLISHED_KEYS} keys, "
        "the most a run may; set the keys it has again, or publish fewer"
    )


def same(a: object, b: object) -> bool:
    """Whether two published values are the same (a boolean is never a number)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def latest(entries: Iterable[Entry]) -> dict[str, Scalar]:
    """The latest value per key the entries publish, in the order keys were first set."""
    out: dict[str, Scalar] = {}
    for e in entries:
        if e.kind == Kind.VALUE_SET and e.name is not None:
            out[e.name] = e.data["value"]
    return out


# --- finding runs by them ------------------------------------------------------------------

OPS = ("=", "!=", ">=", "<=", ">", "<")


@dataclass(frozen=True)
class Where:
    """One filter on a published key: ``key op value``."""

    key: str
    op: str
    value: Scalar

    def holds(self, value: Any) -> bool:
        """Whether a run whose latest ``key`` is ``value`` matches (a missing key: no)."""
        if value is None:
            return False
        if self.op in ("=", "!="):
            return same(value, self.value) == (self.op == "=")
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        v, w = float(value), float(self.value)
        return {">": v > w, ">=": v >= w, "<": v < w, "<=": v <= w}[self.op]

    def __str__(self) -> str:
        return f"{self.key}{self.op}{self.value}"


def parse_where(text: str) -> Where:
    """``month=7``, ``state=paid``, ``month>=3``, ``late=true``: a number is a number, ``true``
    and ``false`` booleans, anything else a string (``"7"`` in quotes: the string 7)."""
    m = re.fullmatch(r"\s*([^=!<>\s]+)\s*(!=|>=|<=|=|>|<)\s*(.*?)\s*", text)
    if m is None:
        raise InvalidInput(
            f"--where {text!r}: a filter is key=value, key!=value or a number range key>=n, key>n, "
            "key<=n, key<n; e.g. --where month=7 or --where 'month>=3'"
        )
    key = check_key(m.group(1), f"--where {text!r}")
    op, raw = m.group(2), m.group(3)
    value: Scalar
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        value = raw[1:-1]
    elif raw in ("true", "false"):
        value = raw == "true"
    else:
        number = _number(raw)
        value = raw if number is None else number
    if op not in ("=", "!=") and isinstance(value, bool | str):
        raise InvalidInput(
            f"--where {text!r}: {op} compares numbers, and {raw!r} is not one; use = for a string "
            "or a boolean"
        )
    return Where(key, op, value)


def _number(raw: str) -> int | float | None:
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        f = float(raw)
    except ValueError:
        return None
    return f if math.isfinite(f) else None


# --- an order-preserving text of a value (DynamoDB's index sort key) ------------------------


def sort_text(value: Scalar) -> str:
    """A text whose order is the value's: numbers (``n`` + 16 hex digits of the IEEE 754
    double, sign-adjusted so text order is numeric order) before booleans (``b0``, ``b1``)
    before strings (``s`` + the string). Equal values, equal texts (7 and 7.0 alike)."""
    if isinstance(value, bool):
        return "b1" if value else "b0"
    if isinstance(value, int | float):
        (bits,) = struct.unpack(">Q", struct.pack(">d", float(value) + 0.0))
        bits = bits ^ 0xFFFFFFFFFFFFFFFF if bits >> 63 else bits | 1 << 63
        return f"n{bits:016x}"
    return "s" + value


def sort_range(where: Where) -> tuple[str, str] | None:
    """The inclusive range of ``sort_text`` an index query reads for ``where`` (``>`` and
    ``<`` read their bound too; the caller drops it with ``Where.holds``); None for ``!=``,
    which no range answers."""
    if where.op == "=":
        t = sort_text(where.value)
        return t, t
    if where.op == "!=":
        return None
    t = sort_text(where.value)
    if where.op in (">", ">="):
        return t, "n~"  # '~' sorts after every hex digit
    return "n", t
