"""Flow control for people: a limit's setting changed at run time, and what waits behind
each key, said in words (``lunaflow limits``, the console, the why-line). The gate itself is
``runtime.engine.executor`` (``_admit``) on ``runtime.core.flow`` and the stores.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from runtime.core.flow import MAX_LIMIT, Admission, check_limit, parse_rate
from runtime.errors import InvalidInput
from runtime.store.base import Store


@dataclass(frozen=True)
class LimitRow:
    """One key's line: its limit (and whether a setting gave it), slots in use, runs waiting."""

    key: str
    limit: int
    in_use: int
    waiting: int
    setting: str | None
    next_in_line: list[str]


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def waiting_line(admission: Admission) -> str:
    """``waiting for a slot of sync/acme: 2 of 2 in use, 1st in line``."""
    if admission.key is None:
        return "waiting for a slot: one is free, and its wake is on the way"
    return (
        f"waiting for a slot of {admission.key}: {admission.in_use} of {admission.limit} in use, "
        f"{_ordinal(admission.place)} in line"
    )


def set_limit(store: Store, name: str, value: str | None) -> list[str]:
    """Set a limit without a deploy: ``sync/acme`` (one key), ``sync/*`` (every key of a
    keyed limit), ``sync`` (a keyless one) to a number of slots, or ``rate:<bucket>`` to a
    rate; None clears it (the code's limit holds again). Runs waiting that now fit are
    admitted at once; returns them."""
    if not name or len(name) > 256 or any(ord(c) < 32 for c in name):
        raise InvalidInput(
            f"bad limit name {name[:64]!r}: name a key as the console lists it, e.g. sync/acme, sync/* "
            "or rate:api"
        )
    if value is not None:
        if name.startswith("rate:"):
            parse_rate(value, f"the setting {name}")
        else:
            try:
                number = int(value)
            except ValueError:
                raise InvalidInput(
                    f"bad limit {value!r} for {name}: a concurrency limit is a whole number of runs, "
                    f"1 to {MAX_LIMIT:,}"
                ) from None
            value = str(check_limit(number, f"the setting {name}"))
    return store.set_flow_setting(name, value)


# A limit's ``scope = "name"`` as a script writes it; a limit without one is its workflow's.
_SCOPE = re.compile(r"""\bscope\s*=\s*(?:"([^"\n]*)"|'([^'\n]*)')""")


def unknown_scope(
    name: str, workflows: Iterable[str], texts: Iterable[str], in_use: Iterable[str]
) -> str | None:
    """A note when a concurrency setting names a scope the code has no limit of (a typo, or a
    limit not deployed yet): the setting is kept, and holds for no run until one has it.
    None for a scope a workflow, a ``scope = "..."`` or a key in use names, and for a rate
    (a step's bucket is any string its code computes)."""
    if name.startswith("rate:"):
        return None
    scope = name.split("/", 1)[0]
    scopes = set(workflows) | {a or b for text in texts for a, b in _SCOPE.findall(text)}
    scopes |= {key.split("/", 1)[0] for key in in_use}
    if scope in scopes:
        return None
    near = difflib.get_close_matches(scope, sorted(scopes), n=1)
    return (
        f"note: no limit of scope '{scope}' is in the project's code or in use: the setting {name} is "
        "kept, and holds for no run until a workflow's concurrency has that scope (its workflow's name, "
        'or scope = "..."); '
        + (f"did you mean '{near[0]}'? " if near else "")
        + f"lunaflow limits clear {name} takes it back"
    )


def limit_rows(store: Store, limit: int = 100) -> list[LimitRow]:
    settings = store.flow_settings()
    rows = []
    for v in store.slot_views(limit):
        setting = settings.get(v.key) or next(
            (settings[n] for n in (v.key.rsplit("/", 1)[0] + "/*",) if "/" in v.key and n in settings), None
        )
        rows.append(LimitRow(v.key, v.limit, v.in_use, v.queued, setting, v.waiting))
    return rows
