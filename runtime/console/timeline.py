"""A run's journal read as a timeline: what the console shows, in the terminal, on the web
page and in the CloudWatch widgets.

Each step becomes its attempts (start, end, outcome, step id, error, the retry it
scheduled); each wait its due time and what ended it (a signal, its timer, its timeout, or
the run's cancel); signals are listed as consumed, pending or set aside. An attempt's
outcome is ``ok``, ``failed``, ``timed out`` (its error says so), ``interrupted`` (the
process running it ended), ``cancelled`` (the run was cancelled while it ran) or
``running``. A cancelled run's cleanup (``wf:on_cancel``) is drawn after the cancel that
started it, each of its steps and waits titled ``cleanup: ...``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from runtime.core.journal import Entry, Kind, describe_wait
from runtime.core.values import compact
from runtime.store.base import SignalRecord

OUTCOMES = ("ok", "failed", "timed out", "interrupted", "cancelled", "running")


@dataclass
class Attempt:
    attempt: int
    step_id: str
    started_at: float
    ended_at: float | None = None
    outcome: str = "running"  # one of OUTCOMES
    error: str | None = None
    retry_at: float | None = None
    seq: int = 0  # the journal entry of its intent

    @property
    def took(self) -> float | None:
        return None if self.ended_at is None else max(0.0, self.ended_at - self.started_at)


@dataclass
class Item:
    seq: int
    at: float
    # start | step | wait | value | resumed | retried | handler | cancel | cancelled | completed
    # | failed
    kind: str
    title: str
    detail: str = ""
    attempts: list[Attempt] = field(default_factory=list)
    due_at: float | None = None
    resolved_at: float | None = None
    resolution: str | None = None
    name: str | None = None  # a step's name; a wait's kind (sleep, await, race, all)
    ended_by: str | None = None  # a wait's end: signal | timer | timeout | cancel | failure
    signal: str | None = None  # the signal that ended a wait
    value_seq: int | None = None  # the entry holding the item's value (a result, a payload)
    child: str | None = None  # the child run a child item or a child's result wait names

    @property
    def waited(self) -> float | None:
        return None if self.resolved_at is None else max(0.0, self.resolved_at - self.at)


def build(entries: list[Entry]) -> list[Item]:
    items: list[Item] = []
    open_step: Item | None = None
    cleanup = ""  # the prefix of titles once a cancel started the cleanup
    for e in entries:
        if e.kind == Kind.STARTED:
            items.append(Item(e.seq, e.at, "start", "started", short(e.data.get("input")), value_seq=e.seq))
        elif e.kind == Kind.STEP_INTENT:
            if open_step is None or open_step.name != e.name or _step_done(open_step):
                open_step = Item(
                    e.seq, e.at, "step", f"{cleanup}step '{e.name}'", f"pass {e.data['pass']}", name=e.name
                )
                items.append(open_step)
            open_step.attempts.append(
                Attempt(int(e.data["attempt"]), str(e.data["step_id"]), e.at, seq=e.seq)
            )
        elif e.kind == Kind.STEP_RERUN and open_step is not None and open_step.attempts:
            # The same attempt started again: the start before it was cut by its process's end.
            last = open_step.attempts[-1]
            last.outcome, last.ended_at = "interrupted", e.at
            open_step.attempts.append(Attempt(last.attempt, last.step_id, e.at, seq=e.seq))
        elif e.kind in (Kind.STEP_RESULT, Kind.STEP_FAILED) and open_step is not None and open_step.attempts:
            last = open_step.attempts[-1]
            last.ended_at = e.at
            if e.kind == Kind.STEP_RESULT:
                last.outcome = "ok"
                vals = e.data.get("values") or []
                open_step.value_seq = e.seq
                open_step.detail = (
                    "returned nothing"
                    if not vals
                    else f"returned {short(vals if len(vals) > 1 else vals[0])}"
                )
            else:
                last.error = str(e.data.get("error"))
                last.outcome = failure_kind(last.error)
                if e.data.get("retry_at") is not None:
                    last.retry_at = int(e.data["retry_at"]) / 1000
                if e.data.get("final"):
                    # Its final_error says why the attempts stopped (all used, or retry = false).
                    open_step.detail = str(e.data.get("final_error"))
        elif e.kind == Kind.STEP_RAISED and open_step is not None:
            open_step.detail = f"{e.data.get('error')} · raised into the workflow (catch = true)"
            open_step = None  # the name reached again is a new pass
        elif e.kind == Kind.STEP_RETRY_NOW:
            items.append(Item(e.seq, e.at, "retried", "retry now", f"step '{e.name}': its backoff cut short"))
        elif e.kind == Kind.WAIT:
            title = cleanup + describe_wait(e.name or "", list(e.data.get("names", [])))
            due = e.data.get("due_at")
            items.append(
                Item(e.seq, e.at, "wait", title, due_at=None if due is None else due / 1000, name=e.name)
            )
        elif e.kind == Kind.WAIT_DONE:
            wait = next((i for i in reversed(items) if i.kind == "wait"), None)
            if wait is not None:
                wait.resolved_at = e.at
                by = e.data.get("by")
                if by == "signal":
                    wait.ended_by, wait.signal, wait.value_seq = "signal", str(e.data.get("signal")), e.seq
                    wait.resolution = f"signal '{e.data.get('signal')}' {short(e.data.get('payload'))}"
                elif by == "timer":
                    wait.ended_by, wait.resolution = "timer", "timer fired"
                else:
                    wait.ended_by, wait.resolution = "timeout", "timed out"
        elif e.kind == Kind.VALUE:
            items.append(Item(e.seq, e.at, "value", f"{e.name}()", short(e.data.get("value"))))
        elif e.kind == Kind.CHILD_STARTED:
            child = str(e.data.get("child"))
            joined = " (joined: the run existed)" if e.data.get("joined") else ""
            items.append(
                Item(e.seq, e.at, "child", f"child '{child}'", f"workflow '{e.name}'{joined}", child=child)
            )
        elif e.kind == Kind.CHILD_WAIT:
            child = str(e.data.get("child"))
            due = e.data.get("due_at")
            items.append(
                Item(
                    e.seq,
                    e.at,
                    "wait",
                    f"result of child '{child}'",
                    due_at=None if due is None else due / 1000,
                    name="child",
                    child=child,
                )
            )
        elif e.kind == Kind.CHILD_DONE:
            wait = next((i for i in reversed(items) if i.kind == "wait" and i.name == "child"), None)
            if wait is not None:
                by = str(e.data.get("by"))
                wait.resolved_at, wait.value_seq = e.at, e.seq
                wait.ended_by = "timeout" if by == "timeout" else "child"
                if by == "completed":
                    wait.resolution = f"child completed {short(e.data.get('result'))}"
                elif by == "timeout":
                    wait.resolution = "timed out"
                else:
                    wait.resolution = f"child {by}: {short(e.data.get('message'))}"
        elif e.kind == Kind.RESUMED:
            items.append(Item(e.seq, e.at, "resumed", "resumed"))
            open_step = None  # attempts the resume allowed are listed after it
        elif e.kind == Kind.CANCEL_HANDLER:
            budget = _ms(int(e.data.get("timeout_ms") or 0))
            items.append(
                Item(e.seq, e.at, "handler", "on_cancel", f"a cancel runs its cleanup (budget {budget})")
            )
        elif e.kind == Kind.CANCEL_REQUESTED:
            _cut_by_cancel(items, e.at)
            items.append(
                Item(
                    e.seq,
                    e.at,
                    "cancel",
                    "cancel: cleanup",
                    "the workflow stops here; its on_cancel handler runs",
                )
            )
            cleanup, open_step = "cleanup: ", None
        elif e.kind == Kind.CANCELLED:
            _cut_by_cancel(items, e.at)
            outcome = e.data.get("cleanup")
            detail = "" if outcome is None else f"after its cleanup ({outcome})"
            if e.data.get("error"):
                detail += f": {e.data['error']}"
            items.append(Item(e.seq, e.at, "cancelled", "cancelled", detail))
        elif e.kind == Kind.COMPLETED:
            items.append(
                Item(
                    e.seq,
                    e.at,
                    "completed",
                    "completed",
                    f"returned {short(e.data.get('result'))}",
                    value_seq=e.seq,
                )
            )
    return items


def failed_unjournaled(items: list[Item], entries: list[Entry], at: float, error: str | None) -> None:
    """A run failed by what no journal entry records (a raise in the workflow's code, a
    journal divergence, a bad result): the wait it was parked on ended with it, and the
    failure is an item of its own at the run's last change. A final step failure and a run
    timeout are journaled, and say so themselves."""
    last = entries[-1] if entries else None
    if last is not None and (
        last.kind == Kind.TIMED_OUT or (last.kind == Kind.STEP_FAILED and last.data.get("final"))
    ):
        return
    for item in items:
        if item.kind == "wait" and item.resolved_at is None:
            item.resolved_at, item.ended_by, item.resolution = at, "failure", "ended by the run's failure"
    first_line = (error or "").split("\n", 1)[0]
    items.append(Item(0, at, "failed", "failed", first_line))


def awaited_child(items: list[Item]) -> str | None:
    """The child whose result the run is waiting for (its last wait, still open), if any."""
    wait = next((i for i in reversed(items) if i.kind == "wait"), None)
    if wait is None or wait.name != "child" or wait.resolved_at is not None:
        return None
    return wait.child


def failure_kind(error: str) -> str:
    """How a recorded failure reads: a timeout and an interruption say so in their error
    (``step 'x' timed out after Nms``; ``attempt N was interrupted``)."""
    if " timed out after " in error:
        return "timed out"
    if " was interrupted " in error:
        return "interrupted"
    return "failed"


def _cut_by_cancel(items: list[Item], at: float) -> None:
    """A cancel ends what was still open: the wait the run was parked on, an attempt whose
    result was never recorded."""
    for item in items:
        if item.kind == "wait" and item.resolved_at is None:
            item.resolved_at, item.ended_by, item.resolution = at, "cancel", "ended by cancel"
        for a in item.attempts:
            if a.ended_at is None:
                a.ended_at, a.outcome = at, "cancelled"


def _ms(ms: int) -> str:
    """A budget as it was likely written: ``1h``, ``15m``, ``90s``."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


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
