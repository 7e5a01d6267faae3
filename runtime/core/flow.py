"""Flow control as data: a workflow's concurrency limits, rates and priority, and the
arithmetic both stores share (the rank waiting runs are ordered by, a rate's next free time).

A run of a workflow that declares limits passes a *gate* before its function runs
(``GateCmd``). The gate is not journaled: whether a run holds its slots is the store's to
say, so the gate is asked again at each activation that starts the function from the top,
and a replay-only check passes it. Pure: no I/O, no clock read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from runtime.errors import InvalidInput

# A run of priority p waits as if it had queued p * PRIORITY_STEP_MS earlier: urgent work
# goes first, and nothing waits behind work that queued more than (p' - p) minutes after it
# (the starvation bound, docs/reference.md "Flow control").
PRIORITY_STEP_MS = 60_000
MIN_PRIORITY, MAX_PRIORITY = -100, 100
MAX_LIMIT = 100_000  # runs holding one key's slots at once
MAX_KEY_BYTES = 200
MAX_LIMITS_PER_RUN = 4
_UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_RATE = re.compile(r"([1-9][0-9]{0,8})/([0-9]*)(s|m|h|d)")


@dataclass(frozen=True)
class SlotWant:
    """One concurrency limit a run must fit in: ``key`` (``sync`` or ``sync/acme``) and the
    limit its code declared; ``name`` is the setting that overrides it (``sync/*``)."""

    key: str
    limit: int
    name: str


@dataclass(frozen=True)
class Rate:
    """``limit`` starts per ``period_ms``; ``key`` is the bucket (``stripe``)."""

    key: str
    limit: int
    period_ms: int

    @property
    def interval_ms(self) -> float:
        return self.period_ms / self.limit


@dataclass(frozen=True)
class GateCmd:
    """The gate a run of a limited workflow passes before its function runs."""

    workflow: str
    slots: tuple[SlotWant, ...] = ()
    rate: Rate | None = None
    priority: int = 0


@dataclass(frozen=True)
class Admit:
    """The core's answer to a gate: the executor asks the store (a replay-only check passes)."""

    gate: GateCmd


@dataclass(frozen=True)
class Admission:
    """What a store answered a run at its gate: ``admitted``, or the key it waits for, that
    key's slots in use and limit, and its place in that key's line (1 = next)."""

    admitted: bool
    key: str | None = None
    in_use: int = 0
    limit: int = 0
    place: int = 0


@dataclass(frozen=True)
class SlotView:
    """One key's slots, as the console and ``lunaflow limits`` list them."""

    key: str
    limit: int
    in_use: int
    queued: int
    holders: list[str] = field(default_factory=list)  # the first few
    waiting: list[str] = field(default_factory=list)  # the first few in line, in order


def rank(queued_ms: int, priority: int) -> int:
    """The order of a run waiting for a slot: lower goes first."""
    return queued_ms - priority * PRIORITY_STEP_MS


def parse_rate(value: object, what: str) -> tuple[int, int]:
    """``"10/s"``, ``"600/m"``, ``"5/10s"`` -> (limit, period in ms)."""
    if isinstance(value, str) and (m := _RATE.fullmatch(value.strip())):
        count = int(m.group(2) or 1)
        if count > 0:
            return int(m.group(1)), count * _UNITS_MS[m.group(3)]
    raise InvalidInput(
        f"bad rate {value!r} for {what}: a rate is <count>/<period>, the period a unit s, m, h or d "
        'with an optional number before it (e.g. "10/s", "600/m", "5/10s")'
    )


def check_limit(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise InvalidInput(
            f"bad limit {value!r} for {what}: a concurrency limit is a whole number of runs, "
            f"1 to {MAX_LIMIT:,} (e.g. limit = 2)"
        )
    if not 1 <= int(value) <= MAX_LIMIT:
        raise InvalidInput(
            f"bad limit {int(value)} for {what}: a concurrency limit is 1 to {MAX_LIMIT:,} runs; "
            "to stop a workflow's runs, pause what starts them instead"
        )
    return int(value)


def check_key(value: object, workflow: str) -> str:
    """A key function's answer: a string or a whole number, short, without '/' control chars."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidInput(
            f"workflow '{workflow}': a concurrency or rate key function returned a {type(value).__name__}; "
            "it must return a string or a number, e.g. key = function(input) return input.customer end"
        )
    key = str(int(value)) if isinstance(value, float) and value == int(value) else str(value)
    if not key or len(key.encode()) > MAX_KEY_BYTES or any(ord(c) < 32 for c in key):
        raise InvalidInput(
            f"workflow '{workflow}': the key {key[:64]!r} is empty, longer than {MAX_KEY_BYTES} bytes or "
            "holds control characters; return a short name such as the customer's id"
        )
    return key


def check_priority(value: object, workflow: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise InvalidInput(
            f"workflow '{workflow}': priority must be a whole number from {MIN_PRIORITY} to {MAX_PRIORITY} "
            f"(got {value!r}); higher goes first"
        )
    return max(MIN_PRIORITY, min(MAX_PRIORITY, int(value)))


def reserve(tat_ms: float | None, now_ms: int, rate: Rate) -> tuple[int, float]:
    """The generic cell rate algorithm with reservations: (when this start may go, the bucket's
    next theoretical arrival time). Up to ``limit`` starts go at once after a quiet
    ``period``; after that, one per ``interval``. A reserved time is never given twice, so
    waiters wake at their own time instead of all at once."""
    tat = max(float(now_ms), tat_ms if tat_ms is not None else float(now_ms))
    burst_ms = rate.period_ms - rate.interval_ms
    go_at = max(now_ms, int(tat - burst_ms + 0.999999))
    return go_at, tat + rate.interval_ms


def setting_names(want: SlotWant) -> tuple[str, ...]:
    """The settings that may override a key's limit, the most specific first."""
    return (want.key, want.name) if want.key != want.name else (want.key,)
