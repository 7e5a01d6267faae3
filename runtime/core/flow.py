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

# A run of priority p ranks as if it had started p * PRIORITY_STEP_MS earlier: urgent work
# goes first, and nothing waits behind work started more than (p' - p) minutes after it
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


def rank(started_ms: int, priority: int) -> int:
    """The order of a run waiting for a slot: lower goes first."""
    return started_ms - priority * PRIORITY_STEP_MS


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


# --- debounce and batching: starts collected into one run ------------------------------

MAX_COLLECTED = 1000  # events one run collects at most (a batch's size)
MAX_COLLECTED_BYTES = 200 * 1024  # their JSON, under a run input's 256 KiB with room to spare


@dataclass(frozen=True)
class Collect:
    """A workflow's ``debounce`` or ``batch``: starts without an id are collected per key
    (the input's field ``key``, a dotted path) into one run, which begins once the collection
    closes. Debounce closes when no start came for ``window_ms`` (or ``max_wait_ms`` after
    the first); a batch ``window_ms`` after its first start, or at ``size`` starts. The run
    gets the last input (debounce, ``keep = "last"``) or the list of them all."""

    kind: str  # "debounce" | "batch"
    window_ms: int
    key: str | None = None
    max_wait_ms: int | None = None
    size: int = MAX_COLLECTED
    keep_all: bool = False

    def due(self, first_ms: int, last_ms: int, count: int) -> int:
        """When a collection opened at ``first_ms``, last added to at ``last_ms``, closes."""
        if self.kind == "batch":
            return first_ms if count >= self.size else first_ms + self.window_ms
        quiet = last_ms + self.window_ms
        return quiet if self.max_wait_ms is None else min(quiet, first_ms + self.max_wait_ms)

    def handed(self, events: list[object]) -> object:
        """What the run's function gets: the list, or the last input."""
        return list(events) if self.keep_all else (events[-1] if events else None)


@dataclass(frozen=True)
class CollectCmd:
    """The gate of a workflow with ``debounce`` or ``batch``: the run waits for its
    collection to close, then runs on what it collected (journaled ``run.collected``)."""


@dataclass(frozen=True)
class Gather:
    """The core's answer to a ``CollectCmd`` whose journal holds no ``run.collected``."""

    cmd: CollectCmd


def collect_key(spec: Collect, input_value: object, workflow: str) -> str:
    """The collection a start joins: its input's ``spec.key`` field (``""``: the one of the
    workflow, when the workflow names no key or the input lacks it)."""
    value: object = input_value
    for part in (spec.key or "").split(".") if spec.key else []:
        value = value.get(part) if isinstance(value, dict) else None
    if value is None or spec.key is None:
        return workflow
    return f"{workflow}/{check_key(value, workflow)}"
