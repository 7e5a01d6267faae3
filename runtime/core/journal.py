"""The journal's vocabulary: entries, their kinds, and how commands are described.

A run's journal is an append-only list of entries numbered from 1. Entry 1 is always
``run.started`` and carries ``format``, the journal format version, so a later engine
can replay old runs with the logic they were written under.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

FORMAT_VERSION = 1


class Kind(StrEnum):
    STARTED = "run.started"  # data: format, workflow, input, changes, timeout and deadline_at
    STEP_INTENT = "step.intent"  # name; data: pass, attempt, step_id
    STEP_RESULT = "step.result"  # name; data: n, values
    # name; data: attempt, error, final, retry_at (final: false), final_error (final: true),
    # retryable (false when the body's error said retry = false, which ends the attempts)
    STEP_FAILED = "step.failed"
    # name; data: step, attempts, message, error: a final failure of a step with catch = true,
    # raised into the workflow as a Lua error value (replay raises it again at this point)
    STEP_RAISED = "step.raised"
    # name; marker: an operator asked a step waiting out its backoff to retry now
    STEP_RETRY_NOW = "step.retry_now"
    # data: at (epoch ms): the start its step's rate reserved for its next attempt (the
    # attempt begins at that time, with no second reservation on replay).
    STEP_THROTTLED = "step.throttled"
    # name; data: attempt, start (2, 3...): the attempt's body runs again, its intent having no
    # outcome (the process running it ended); the start count bounds how often that happens
    STEP_RERUN = "step.rerun"
    VALUE = "value"  # name: the call (os.time...); data: value
    # name: the key; data: value (a string, number or boolean): wf:set published the value,
    # which the store keeps as the run's latest for that key (runtime.core.published)
    VALUE_SET = "value.set"
    # name: the child's workflow; data: child (its run id), joined (true: the id named a run
    # this run did not create). wf:child started the run, or joined it (runtime.core.children)
    CHILD_STARTED = "child.started"
    # name: the child's workflow; data: child, timeout_ms, due_at: c:result() began waiting
    CHILD_WAIT = "child.wait"
    # name: the child's workflow; data: child, by (completed|failed|cancelled|timeout), result
    # (completed) or message (its error): the child ended (or the wait timed out), c:result() answered
    CHILD_DONE = "child.done"
    WAIT = "wait"  # name: op; data: names, timeout_ms, due_at
    WAIT_DONE = "wait.done"  # name: op; data: by (signal|timeout|timer), signal, payload, signal_id
    RESUMED = "run.resumed"  # marker: a failed run was resumed
    # marker; data: after (the bound as given): the run passed its start's timeout and failed;
    # a resume after it continues the run with no bound
    TIMED_OUT = "run.timed_out"
    # data: timeout_ms: wf:on_cancel registered the run's cleanup (its time budget), at this
    # point of the workflow function; a cancel from here on runs it before the run ends
    CANCEL_HANDLER = "cancel.handler"
    # data: due_at (epoch ms: the cleanup's budget ends then): a cancel reached a run with a
    # cancel handler; replay leaves the workflow function here and runs the handler
    CANCEL_REQUESTED = "run.cancel_requested"
    # the run was cancelled; data after a cleanup: cleanup (done | failed | cut short), error
    CANCELLED = "run.cancelled"
    COMPLETED = "run.completed"  # data: result
    # data: generation (2, 3...), input, and run.started's format, changes, timeout and
    # deadline_at: wf:continue_as_new closed the generation before it; the function starts
    # again from the top with ``input``. Replay reads the journal from the last of these.
    CONTINUED = "run.continued"
    # data: at (epoch ms), rate: the start its workflow's rate reserved for the run (a
    # marker: the gate reads it, replay skips it).
    RUN_THROTTLED = "run.throttled"
    # data: input (what the run's function gets: the last input, or all of them), events (how
    # many starts were collected): a run of a workflow with debounce or batch (a marker).
    RUN_COLLECTED = "run.collected"


# Markers record what happened to the run, not what its code did; replay skips them.
MARKERS = frozenset(
    {Kind.RESUMED, Kind.STEP_RETRY_NOW, Kind.TIMED_OUT, Kind.RUN_THROTTLED, Kind.RUN_COLLECTED}
)


class Status(StrEnum):
    RUNNING = "running"
    SLEEPING = "sleeping"
    AWAITING = "awaiting"
    FAILED = "failed"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


ENDED = frozenset({Status.COMPLETED, Status.CANCELLED})
# Allowed transitions are data, checked in one place (runtime.platform.platform).
CANCELLABLE = frozenset({Status.RUNNING, Status.SLEEPING, Status.AWAITING, Status.FAILED})
RESUMABLE = frozenset({Status.FAILED})


@dataclass(frozen=True)
class Entry:
    seq: int
    kind: Kind
    name: str | None
    data: dict[str, Any] = field(default_factory=dict)
    at: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "kind": self.kind.value, "name": self.name, "data": self.data, "at": self.at}


@dataclass(frozen=True)
class Signal:
    """A signal waiting in a run's inbox, as replay sees it: ids give arrival order."""

    id: int
    name: str
    payload: Any
    at: float


@dataclass(frozen=True)
class StepValues:
    """What one step body returned: every value, nils included, so ``n`` may exceed the
    values Lua would count. Journaled as ``step.result``'s data ``{"n": n, "values": [...]}``
    and handed back to the body's caller as the same values."""

    values: tuple[Any, ...]

    @property
    def n(self) -> int:
        return len(self.values)

    def as_data(self) -> dict[str, Any]:
        return {"n": self.n, "values": list(self.values)}

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> StepValues:
        values = list(data.get("values") or [])
        n = int(data.get("n", len(values)))
        return cls(tuple(values[:n]) + (None,) * max(0, n - len(values)))


GENERATION_STARTS = frozenset({Kind.STARTED, Kind.CONTINUED})


def generation_start(entries: list[Entry]) -> int:
    """The index of the current generation's first entry (``run.started``, or the last
    ``run.continued``): replay, limits and cancels read the journal from there."""
    for i in range(len(entries) - 1, -1, -1):
        if entries[i].kind in GENERATION_STARTS:
            return i
    return 0


def current_generation(entries: list[Entry]) -> list[Entry]:
    """The entries of the run's current generation."""
    return entries[generation_start(entries) :]


def generations(entries: list[Entry]) -> list[dict[str, Any]]:
    """Every generation the journal still holds, oldest first: its number, first and last
    entry's seq, start time, input and how it ended (``continued`` for the closed ones)."""
    out: list[dict[str, Any]] = []
    for e in entries:
        if e.kind in GENERATION_STARTS:
            if out:
                out[-1]["ended"] = "continued"
                out[-1]["last_seq"] = e.seq - 1
            out.append(
                {
                    "generation": int(e.data.get("generation", 1)),
                    "first_seq": e.seq,
                    "last_seq": e.seq,
                    "started_at": e.at,
                    "input": e.data.get("input"),
                    "ended": None,
                }
            )
        elif out:
            out[-1]["last_seq"] = e.seq
    if out and out[0]["generation"] == 1 and len(entries) > 1 and entries[1].seq != entries[0].seq + 1:
        out.pop(0)  # generation 1 was dropped (GENERATIONS_KEPT): only run.started is kept of it
    return out


def kept_from(entries: list[Entry], kept: int) -> int | None:
    """The first seq of the oldest of the last ``kept`` generations, when older ones exist:
    entries from 2 up to it may be dropped (entry 1, ``run.started``, is always kept)."""
    starts = [e.seq for e in entries if e.kind in GENERATION_STARTS]
    if len(starts) <= kept:
        return None
    cut = starts[-kept]
    return cut if cut > 2 else None


def run_deadline(entries: list[Entry]) -> int | None:
    """When the run times out (epoch ms), from the generation's first entry; None when it has no bound or
    already timed out once (a resume after that continues it unbounded). A run cleaning up
    after a cancel is bounded by its cleanup's budget instead (``cleanup_deadline``)."""
    due = entries[0].data.get("deadline_at") if entries else None
    if due is None or any(e.kind == Kind.TIMED_OUT for e in entries):
        return None
    return int(due)


def cleanup_state(entries: list[Entry]) -> tuple[Entry | None, Entry | None]:
    """The run's cancel handler (``cancel.handler``) and the cancel that started its cleanup
    (``run.cancel_requested``), each None when the journal has none."""
    handler = request = None
    for e in current_generation(entries):  # a handler belongs to the generation that registered it
        if e.kind == Kind.CANCEL_HANDLER and handler is None:
            handler = e
        elif e.kind == Kind.CANCEL_REQUESTED and request is None:
            request = e
    return handler, request


def describe_wait(op: str, names: list[str]) -> str:
    if op == "sleep":
        return "sleep"
    quoted = ", ".join(f"'{n}'" for n in names)
    return f"{op} {quoted}" if len(names) == 1 else f"{op} ({quoted})"


STEP_KINDS = frozenset(
    {Kind.STEP_INTENT, Kind.STEP_RERUN, Kind.STEP_RESULT, Kind.STEP_FAILED, Kind.STEP_RAISED}
)


def describe(entry: Entry) -> str:
    """How an entry reads in a divergence message: ``step 'settle'``, ``await 'paid'``."""
    if entry.kind in STEP_KINDS:
        return f"step '{entry.name}'"
    if entry.kind in (Kind.WAIT, Kind.WAIT_DONE):
        return describe_wait(entry.name or "", list(entry.data.get("names", [])))
    if entry.kind == Kind.VALUE:
        return f"{entry.name}()"
    if entry.kind == Kind.VALUE_SET:
        return f"wf:set('{entry.name}', {json.dumps(entry.data.get('value'), ensure_ascii=False)})"
    if entry.kind == Kind.CHILD_STARTED:
        return f"child '{entry.data.get('child')}' of workflow '{entry.name}'"
    if entry.kind in (Kind.CHILD_WAIT, Kind.CHILD_DONE):
        return f"the result of child '{entry.data.get('child')}'"
    if entry.kind == Kind.COMPLETED:
        return "the workflow's return"
    if entry.kind == Kind.CONTINUED:
        return "wf:continue_as_new"
    if entry.kind == Kind.CANCEL_HANDLER:
        return "wf:on_cancel"
    if entry.kind == Kind.CANCEL_REQUESTED:
        return "the run's cancel"
    return entry.kind
