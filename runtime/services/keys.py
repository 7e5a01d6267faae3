"""Keys, names and stored values of kv and objects: the one set of limits every store honours.

DynamoDB refuses a sort key over 1,024 bytes and an item over 400 KB; SQLite would take
either. So that code behaves alike under ``lunaflow dev`` and on AWS, both stores check the
same bounds before they write, and refuse with the limit named. Long keys are refused, not
hashed: a hashed key would no longer sort or match a ``list`` prefix as the text does.
A stored value is bounded as a journaled one is (``runtime.core.values.MAX_VALUE_BYTES``), well
inside an item with its key and bookkeeping.
"""

from __future__ import annotations

from typing import Any

from runtime.core.values import check_size, compact
from runtime.services.base import ServiceError

MAX_KEY_BYTES = 1024  # a kv key, an object key, a kv namespace or object class name (UTF-8)


def _size(text: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: not text any store keeps
        raise ServiceError("a key or name holds a string that is not valid UTF-8") from None


def shown(text: str) -> str:
    """A key or name as an error message shows it: cut to 60 characters."""
    return text if len(text) <= 60 else text[:60] + "..."


def check_key(key: str, what: str) -> str:
    """The key, or a refusal naming ``what`` (``kv 'ns':put``, ``Box('k'):method``)."""
    size = _size(key)
    if size > MAX_KEY_BYTES:
        raise ServiceError(
            f"{what}: the key is {size} bytes, over the limit of {MAX_KEY_BYTES} bytes; use a shorter "
            "key (keep long text in the value, and key it by an id or a hash of the text)"
        )
    return key


def check_name(name: str, what: str) -> str:
    """A kv namespace or object class name, which is part of every key the store writes."""
    size = _size(name)
    if size > MAX_KEY_BYTES:
        raise ServiceError(
            f"{what}: the name is {size} bytes, over the limit of {MAX_KEY_BYTES} bytes; use a shorter name"
        )
    return name


def fits_a_key(prefix: str) -> bool:
    """Whether any key can start with ``prefix`` (a longer prefix lists nothing)."""
    return _size(prefix) <= MAX_KEY_BYTES


def stored(value: Any, what: str) -> str:
    """The JSON text a store keeps for a kv value or an object's state (the same text on every
    store, so the same size), refused over ``MAX_VALUE_BYTES``."""
    encoded: str = compact(value)
    check_size(encoded, what)
    return encoded


def options(opts: Any, allowed: tuple[str, ...], what: str, example: str) -> dict[str, Any]:
    """A call's options table (None: none), with only the options ``allowed``: a misspelt one
    (``{ tll = "1h" }``) was ignored, so the option it meant silently did nothing."""
    if opts is None:
        return {}
    if not isinstance(opts, dict):
        raise ServiceError(f"{what} options must be a table like {example}")
    for key in sorted(opts, key=str):
        if key not in allowed:
            shown_key = f"'{shown(key)}'" if isinstance(key, str) else f"[{key}]"
            raise ServiceError(
                f"{what}: unknown option {shown_key}; the options are {' and '.join(allowed)}, e.g. "
                f"{example} — check its spelling"
            )
    return opts
