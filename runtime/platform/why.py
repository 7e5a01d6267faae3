"""Why is this run not moving? One line per run, from its journal, its timer, its wake-up and
its lease (issue 29.4), for ``lunaflow show``, ``lunaflow runs`` and the console alike.

A parked run says what it waits for and until when: a signal (since when, its timeout), a
child, a sleep, a step's next attempt after a backoff. A run that should be moving says
what holds it: another worker's lease, a wake-up no worker has taken yet, or a timer past
due. Past ``stuck_after_s`` either of the last two is *stuck* (the dev server warns of it,
and on AWS the reconciler counts it in the ``StuckRuns`` metric, which an alarm watches).
A failed run says whether its code cannot replay it (a divergence) or a step ran out of
attempts. Pure: the caller reads what it needs and passes ``now``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from runtime.core.journal import Entry, Kind, Status, describe_wait, generation_start
from runtime.store.base import Progress, RunRecord

# A run that should move (a wake-up waiting, a timer past due) and has not for this long is
# stuck. The reconciler re-sends a lost wake after a minute; five leave it room to work.
STUCK_AFTER_S = 300.0


@dataclass(frozen=True)
class Why:
    text: str  # one line: what the run waits for, or what holds it
    stuck: bool = False  # it should have moved by now and has not


def when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def why(
    run: RunRecord,
    entries: list[Entry],
    timer_due_ms: int | None,
    progress: Progress,
    now: float,
    *,
    stuck_after_s: float = STUCK_AFTER_S,
) -> Why:
    if run.status == Status.COMPLETED:
        return Why(f"completed at {when(run.updated_at)}")
    if run.status == Status.CANCELLED:
        return Why(f"cancelled at {when(run.updated_at)}")
    if run.status == Status.FAILED:
        error = run.error or "no error recorded"
        if error.startswith("journal divergence"):
            return Why(
                f"stuck: its code cannot replay it ({error}); deploy code that keeps its path and resume it",
                stuck=True,
            )
        return Why(f"failed at {when(run.updated_at)}: {error}; resume it once the cause is fixed")
    held = _held(progress, now)
    if held is not None:
        return held
    late = _late(run, timer_due_ms, progress, now, stuck_after_s)
    if late is not None:
        return late
    parked = _parked(entries[generation_start(entries) :], timer_due_ms)
    if parked is not None:
        return Why(parked)
    if run.status == Status.RUNNING:
        return Why(f"running since {when(run.updated_at)}")
    return Why(f"{run.status.value} since {when(run.updated_at)}")


def _held(progress: Progress, now: float) -> Why | None:
    if progress.lease_owner is None or progress.lease_until_ms is None:
        return None
    if progress.lease_until_ms < now * 1000:
        return None  # an expired lease holds nothing
    until = when(progress.lease_until_ms / 1000)
    return Why(f"being advanced by {progress.lease_owner} (its lease runs until {until})")


def _late(
    run: RunRecord, timer_due_ms: int | None, progress: Progress, now: float, stuck_after_s: float
) -> Why | None:
    """A run that should be moving: woken and not taken, or its timer past due."""
    if progress.wakeup_at is not None:
        waited = now - progress.wakeup_at
        if progress.wake_resends:
            return Why(
                f"stuck: woken and not taken by a worker; the reconciler re-sent its wake "
                f"{progress.wake_resends} time(s) and looks again at {when(progress.wakeup_at)}",
                stuck=now - run.updated_at > stuck_after_s,
            )
        if waited > stuck_after_s:
            return Why(
                f"stuck: woken at {when(progress.wakeup_at)} and not taken by a worker since (is a "
                "worker running? on AWS the reconciler re-sends a lost wake within a few minutes)",
                stuck=True,
            )
        return Why(f"queued: woken at {when(progress.wakeup_at)}, waiting for a worker")
    if timer_due_ms is not None and timer_due_ms / 1000 < now - stuck_after_s:
        owner, until_ms = progress.lease_owner, progress.lease_until_ms
        taken = run.status == Status.RUNNING and owner is not None
        if taken and until_ms is not None and timer_due_ms <= until_ms < now * 1000:
            # Its timer did fire: a worker's lease at it marked the run running (DynamoDB's,
            # which leaves the timer where it is, the crash backstop), and the worker stopped
            # without a park or an end.
            return Why(
                f"stuck: its timer was due at {when(timer_due_ms / 1000)}; {owner} took the run at "
                f"it and its lease ran out at {when(until_ms / 1000)} with the run neither parked "
                "nor ended (did that worker stop? on AWS the reconciler fires the timer again once "
                "the lease has lapsed)",
                stuck=True,
            )
        return Why(
            f"stuck: its timer was due at {when(timer_due_ms / 1000)} and has not fired (is a worker "
            "running? on AWS the reconciler turns a late timer into a wake)",
            stuck=True,
        )
    return None


def _parked(entries: list[Entry], timer_due_ms: int | None) -> str | None:
    """What the current generation's last open command waits for."""
    open_wait: Entry | None = None
    open_child: Entry | None = None
    failed: Entry | None = None
    throttled: Entry | None = None  # a start its rate reserved, not begun yet
    for e in entries:
        if e.kind == Kind.WAIT:
            open_wait = e
        elif e.kind == Kind.WAIT_DONE:
            open_wait = None
        elif e.kind == Kind.CHILD_WAIT:
            open_child = e
        elif e.kind == Kind.CHILD_DONE:
            open_child = None
        elif e.kind == Kind.STEP_FAILED:
            failed = None if e.data.get("final") else e
        elif e.kind in (Kind.STEP_THROTTLED, Kind.RUN_THROTTLED):
            throttled = e
        elif e.kind in (Kind.STEP_INTENT, Kind.STEP_RESULT, Kind.RESUMED):
            failed = None
        if e.kind in (Kind.STEP_INTENT, Kind.WAIT, Kind.CHILD_STARTED, Kind.VALUE):
            throttled = None
    if open_child is not None:
        return f"waiting for child '{open_child.data.get('child')}' since {when(open_child.at)}" + _until(
            open_child.data.get("due_at"), "times out"
        )
    if open_wait is not None:
        op = open_wait.name or ""
        if op == "sleep":
            due = open_wait.data.get("due_at") or timer_due_ms
            return "sleeping" + (f" until {when(int(due) / 1000)}" if due is not None else "")
        names = [str(n) for n in open_wait.data.get("names", [])]
        what = "signal " + " or ".join(f"'{n}'" for n in names) if op != "all" else describe_wait(op, names)
        return f"waiting on {what} since {when(open_wait.at)}" + _until(
            open_wait.data.get("bound_at") or open_wait.data.get("due_at"), "times out"
        )
    if throttled is not None:
        what = f"step '{throttled.name}'" if throttled.kind == Kind.STEP_THROTTLED else "its start"
        at = when(int(throttled.data["at"]) / 1000)
        return f"waiting for its rate: {what} goes at {at}, the start reserved for it"
    if failed is not None:
        attempt = int(failed.data.get("attempt", 1))
        due = failed.data.get("retry_at")
        return (
            f"attempt {attempt + 1} of step '{failed.name}'"
            + (f" due at {when(int(due) / 1000)}" if due is not None else "")
            + f" (attempt {attempt} failed: {str(failed.data.get('error', ''))[:200]})"
        )
    return None


def _until(due_ms: object, verb: str) -> str:
    if isinstance(due_ms, int | float) and not isinstance(due_ms, bool):
        return f" ({verb} at {when(due_ms / 1000)})"
    return " (no timeout)"
