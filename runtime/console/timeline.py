"""A run's journal read as a timeline: what the console shows, in the terminal and on the
web. Each step becomes its attempts (start, end, duration, step id, error); each wait its
due time and how it resolved; signals are listed as consumed or set aside."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from runtime.core.journal import Entry, Kind, describe_wait
from runtime.core.values import compact
from runtime.store.base import SignalRecord


@dataclass
class Attempt:
    attempt: int
    step_id: str
    started_at: float
    ended_at: float | None = None
    outcome: str = "running"  # running | ok | failed | interrupted (its process ended; run again)
    error: str | None = None
    retry_at: float | None = None


@dataclass
class Item:
    seq: int
    at: float
    kind: str  # start | step | wait | value | resumed | cancelled | completed
    title: str
    detail: str = ""
    attempts: list[Attempt] = field(default_factory=list)
    due_at: float | None = None
    resolved_at: float | None = None
    resolution: str | None = None


def build(entries: list[Entry]) -> list[Item]:
    items: list[Item] = []
    open_step: Item | None = None
    for e in entries:
        if e.kind == Kind.STARTED:
            items.append(Item(e.seq, e.at, "start", "started", short(e.data.get("input"))))
        elif e.kind == Kind.STEP_INTENT:
            if open_step is None or open_step.title != f"step '{e.name}'" or _step_done(open_step):
                open_step = Item(e.seq, e.at, "step", f"step '{e.name}'", f"pass {e.data['pass']}")
                items.append(open_step)
            open_step.attempts.append(Attempt(int(e.data["attempt"]), str(e.data["step_id"]), e.at))
        elif e.kind == Kind.STEP_RERUN and open_step is not None and open_step.attempts:
            # The same attempt started again: the start before it was cut by its process's end.
            last = open_step.attempts[-1]
            last.outcome = "interrupted"
            open_step.attempts.append(Attempt(last.attempt, last.step_id, e.at))
        elif e.kind in (Kind.STEP_RESULT, Kind.STEP_FAILED) and open_step is not None and open_step.attempts:
            last = open_step.attempts[-1]
            last.ended_at = e.at
            if e.kind == Kind.STEP_RESULT:
                last.outcome = "ok"
                vals = e.data.get("values") or []
                open_step.detail = (
                    "returned nothing"
                    if not vals
                    else f"returned {short(vals if len(vals) > 1 else vals[0])}"
                )
            else:
                last.outcome = "failed"
                last.error = str(e.data.get("error"))
                if e.data.get("retry_at") is not None:
                    last.retry_at = int(e.data["retry_at"]) / 1000
                if e.data.get("final"):
                    open_step.detail = str(e.data.get("final_error"))
        elif e.kind == Kind.WAIT:
            title = describe_wait(e.name or "", list(e.data.get("names", [])))
            due = e.data.get("due_at")
            items.append(Item(e.seq, e.at, "wait", title, due_at=None if due is None else due / 1000))
        elif e.kind == Kind.WAIT_DONE:
            wait = next((i for i in reversed(items) if i.kind == "wait"), None)
            if wait is not None:
                wait.resolved_at = e.at
                by = e.data.get("by")
                if by == "signal":
                    wait.resolution = f"signal '{e.data.get('signal')}' {short(e.data.get('payload'))}"
                else:
                    wait.resolution = "timer fired" if by == "timer" else "timed out"
        elif e.kind == Kind.VALUE:
            items.append(Item(e.seq, e.at, "value", f"{e.name}()", short(e.data.get("value"))))
        elif e.kind == Kind.RESUMED:
            items.append(Item(e.seq, e.at, "resumed", "resumed"))
            open_step = None  # attempts the resume allowed are listed after it
        elif e.kind == Kind.CANCELLED:
            items.append(Item(e.seq, e.at, "cancelled", "cancelled"))
        elif e.kind == Kind.COMPLETED:
            items.append(
                Item(e.seq, e.at, "completed", "completed", f"returned {short(e.data.get('result'))}")
            )
    return items


def _step_done(item: Item) -> bool:
    last = item.attempts[-1]
    return last.outcome == "ok"


def short(value: Any, limit: int = 80) -> str:
    """A value's compact JSON, cut to ``limit`` characters."""
    text = compact(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def signals_view(signals: list[SignalRecord]) -> list[dict[str, Any]]:
    return [
        {
            "id": s.id,
            "name": s.name,
            "at": s.at,
            "state": s.state,
            "consumed_seq": s.consumed_seq,
            "payload": s.payload,
        }
        for s in signals
    ]


def as_dicts(items: list[Item]) -> list[dict[str, Any]]:
    return [asdict(i) for i in items]
