"""JSON-like values: the only data that crosses the journal and the Lua boundary.

Lua encodes its own values (``lua/prelude.lua`` checks shapes and names the bad path);
this module checks Python-side values, enforces the size limit and builds Lua tables.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from runtime.errors import InvalidInput

MAX_VALUE_BYTES = 256 * 1024
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

JSONValue = Any  # None | bool | int | float | str | list[JSONValue] | dict[str, JSONValue]

# Built once: json.dumps with options builds an encoder per call, a cost every journal
# entry would pay.
compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
"""The compact JSON text of a value (UTF-8 kept as is), as the journal stores it."""


def check_size(encoded: str, what: str, framing: int = 0) -> None:
    """``framing``: bytes of ``encoded`` that join several values (a step's commas), not counted."""
    size = len(encoded.encode("utf-8")) - framing
    if size > MAX_VALUE_BYTES:
        raise InvalidInput(too_large(what, size))


# Lua's JSON of a value is at most six times Python's compact one (a DEL is written
# \u007f; a float no longer, a subnormal's 15 digits aside): a run's result whose Lua text is
# longer is over the limit however Python would write it, and is refused before it is
# copied into Python, parsed and measured there.
SURELY_OVER_IN_LUA = 6 * MAX_VALUE_BYTES


def too_large(what: str, size: int) -> str:
    """The refusal of a value of ``size`` bytes encoded, over ``MAX_VALUE_BYTES``."""
    return (
        f"{what} is {size} bytes encoded, over the limit of {MAX_VALUE_BYTES} bytes (256 KiB); "
        "keep large data elsewhere (a database row, an object) and pass its key"
    )


MAX_DEPTH = 100  # tables nested deeper are refused (Lua and JSON both recurse per level)


def _find_problem(value: object, path: str, seen: set[int], depth: int = 0) -> str | None:
    if depth > MAX_DEPTH:
        return f"tables nested deeper than {MAX_DEPTH} levels at {path}"
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if INT64_MIN <= value <= INT64_MAX else f"an integer beyond 64 bits at {path}"
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"a string that is not valid UTF-8 at {path}"
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"a non-finite number at {path}"
    if isinstance(value, list | tuple):
        if id(value) in seen:
            return f"a cycle at {path}"
        seen.add(id(value))
        for i, item in enumerate(value):
            problem = _find_problem(item, f"{path}[{i + 1}]", seen, depth + 1)
            if problem:
                return problem
        seen.discard(id(value))
        return None
    if isinstance(value, dict):
        if id(value) in seen:
            return f"a cycle at {path}"
        seen.add(id(value))
        for key, item in value.items():
            if not isinstance(key, str):
                return f"a non-string key {key!r} at {path}"
            problem = _find_problem(item, f"{path}.{key}", seen, depth + 1)
            if problem:
                return problem
        seen.discard(id(value))
        return None
    return f"a {type(value).__name__} at {path}"


def encode(value: object, what: str) -> str:
    """Encode a Python value for the journal, refusing what is not JSON-like or too big."""
    problem = _find_problem(value, "value", set())
    if problem:
        raise InvalidInput(
            f"{what} holds {problem}; values must be JSON-like (nil, booleans, numbers, strings, "
            "tables with string keys or 1..n arrays) — pass plain data"
        )
    encoded = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    check_size(encoded, what)
    return encoded


def decode(encoded: str) -> JSONValue:
    return json.loads(encoded)


def loads_bounded(text: str, what: str) -> JSONValue:
    """json.loads, with nesting too deep for Python's parser refused by name."""
    try:
        return json.loads(text)
    except RecursionError as e:
        raise InvalidInput(
            f"{what} is nested too deeply to read; keep values under {MAX_DEPTH} levels"
        ) from e


def check_lua_value(value: JSONValue, what: str) -> JSONValue:
    """Refuse what a Lua value cannot hold: integers beyond 64 bits, infinite floats,
    strings that are not UTF-8 (lone surrogates). Returns the value."""

    def walk(v: JSONValue, path: str) -> None:
        if isinstance(v, bool) or v is None:
            return
        if isinstance(v, int):
            if not INT64_MIN <= v <= INT64_MAX:
                raise InvalidInput(
                    f"{what}: the number at {path} does not fit a Lua integer (64 bits); send it as a string"
                )
        elif isinstance(v, float):
            if not math.isfinite(v):
                raise InvalidInput(f"{what}: the number at {path} is not finite")
        elif isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError as e:
                raise InvalidInput(f"{what}: the string at {path} is not valid UTF-8 ({e.reason})") from e
        elif isinstance(v, list):
            for i, item in enumerate(v):
                walk(item, f"{path}[{i + 1}]")
        elif isinstance(v, dict):
            for k, item in v.items():
                walk(k, f"{path} (a key)")
                walk(item, f"{path}.{k}")

    walk(value, "value")
    return value


def to_lua(table_from: Callable[[Any], Any], value: JSONValue) -> Any:
    """Build the Lua value for a decoded JSON value. Lists become 1..n arrays."""
    if isinstance(value, dict):
        return table_from({k: to_lua(table_from, v) for k, v in value.items() if v is not None})
    if isinstance(value, list):
        return table_from({i + 1: to_lua(table_from, v) for i, v in enumerate(value) if v is not None})
    return value
