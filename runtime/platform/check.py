"""Replaying in-flight runs on new code before it serves them: ``lunaflow check``,
``lunaflow deploy`` and the deploy gate inside ``cdk deploy`` (``functions/gate.py``) all
come here, so the three say the same thing about the same runs.

Each replay is ``Executor.check``: the live loop in replay-only mode, stopped at the first
command the journal does not answer, writing nothing. The gate fans the replays out over
threads, each with its own ``Worker`` (a Lua state is not shared between threads): the
work is mostly reading journals (DynamoDB round trips), which threads overlap. It is
bounded by a deadline: a run not reached in time is reported unchecked, and an unchecked
run refuses the deploy as a diverging one does, since nothing says it replays.

A run that moves while the check runs (a wake on the old code, or a new run started
through the old code) is covered by further passes: each pass lists the in-flight runs
again and replays those it has not seen at their current position (new ids, or an
``updated_at`` that changed), until a pass finds none or the passes are spent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from runtime.core.journal import ENDED
from runtime.engine.executor import Verdict
from runtime.engine.worker import Worker
from runtime.errors import NewerLayout
from runtime.store.base import RunRecord, Store

__all__ = [
    "GateReport",
    "Verdict",
    "check_in_flight",
    "check_run",
    "check_runs",
    "in_flight",
]

DEFAULT_THREADS = 16
DEFAULT_PASSES = 3
SHOWN_RUNS = 10  # runs named in a one-line reason (a CloudFormation reason holds about 4 KB)


def in_flight(store: Store) -> list[RunRecord]:
    """Every run not ended (on DynamoDB the status index's in-flight partitions, where
    listing every run would read the ended ones too)."""
    return store.in_flight_runs()


def check_runs(worker: Worker, store: Store) -> list[Verdict]:
    """Replay every in-flight run on ``worker``'s code, one after another (the local path)."""
    return [check_run(worker, run) for run in store.list_runs(limit=1_000_000) if run.status not in ENDED]


def check_run(worker: Worker, run: RunRecord) -> Verdict:
    """The run replayed on ``worker``'s code; a run written by a newer lunaflow is not read
    (its layout is not this code's) and does not hold a deploy back: new code of this
    version leaves it as it is, for the newer code to serve again."""
    try:
        return worker.executor.check(run, worker.code)
    except NewerLayout as e:
        return Verdict(run.id, run.workflow, run.status, False, str(e), newer=True)


@dataclass
class GateReport:
    """What the gate found: the verdict on each run checked (its last, if checked in more
    than one pass), and the runs it could not reach before its deadline."""

    verdicts: dict[str, Verdict] = field(default_factory=dict)
    unchecked: list[str] = field(default_factory=list)
    passes: int = 0

    @property
    def diverging(self) -> list[Verdict]:
        return sorted((v for v in self.verdicts.values() if v.diverges), key=lambda v: v.run_id)

    @property
    def clean(self) -> bool:
        return not self.diverging and not self.unchecked

    def summary(self) -> str:
        """One line: the count, then the diverging runs with their first diverging entry."""
        checked = len(self.verdicts)
        newer = sorted(v.run_id for v in self.verdicts.values() if v.newer)
        left = ""
        if newer:
            shown = ", ".join(newer[:SHOWN_RUNS])
            more = f" and {len(newer) - SHOWN_RUNS} more" if len(newer) > SHOWN_RUNS else ""
            left = (
                f"; {len(newer)} run(s) written by a newer lunaflow were not replayed and are left as "
                f"they are: {shown}{more}"
            )
        if self.clean:
            return (
                f"{checked - len(newer)} in-flight run(s) replayed on the new code in {self.passes} "
                f"pass(es); none diverges{left}"
            )
        parts: list[str] = []
        diverging = self.diverging
        if diverging:
            shown = "; ".join(
                f"{v.run_id} ({v.workflow}, {v.status}): {v.message}" for v in diverging[:SHOWN_RUNS]
            )
            more = f"; and {len(diverging) - SHOWN_RUNS} more" if len(diverging) > SHOWN_RUNS else ""
            parts.append(
                f"{len(diverging)} of {checked} in-flight run(s) would diverge on the new code: {shown}{more}"
            )
        if self.unchecked:
            shown = ", ".join(self.unchecked[:SHOWN_RUNS])
            more = f" and {len(self.unchecked) - SHOWN_RUNS} more" if len(self.unchecked) > SHOWN_RUNS else ""
            parts.append(
                f"{len(self.unchecked)} run(s) were not checked before the gate's deadline: {shown}{more}"
            )
        return ". ".join(parts) + left


def check_in_flight(
    new_worker: Callable[[], Worker],
    store: Store,
    *,
    deadline: float,
    threads: int = DEFAULT_THREADS,
    passes: int = DEFAULT_PASSES,
) -> GateReport:
    """Replay every in-flight run on the code ``new_worker`` loads, ``threads`` at a time,
    until ``deadline`` (a ``time.monotonic()`` value), in up to ``passes`` passes."""
    report = GateReport()
    seen: dict[str, float] = {}  # run id -> the updated_at it was checked at
    local = threading.local()

    def check(run: RunRecord) -> Verdict | None:
        if time.monotonic() >= deadline:
            return None
        worker = getattr(local, "worker", None)
        if worker is None:
            worker = local.worker = new_worker()
        return check_run(worker, run)

    with ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="gate") as pool:
        for _ in range(max(1, passes)):
            todo = [r for r in in_flight(store) if seen.get(r.id) != r.updated_at]
            if not todo and report.passes:
                break
            report.passes += 1
            report.unchecked = []
            for run, verdict in zip(todo, pool.map(check, todo), strict=True):
                if verdict is None:
                    report.unchecked.append(run.id)
                    continue
                seen[run.id] = run.updated_at
                report.verdicts[run.id] = verdict
            if report.unchecked or time.monotonic() >= deadline:
                break
    _drop_ended(report, store)
    return report


def _drop_ended(report: GateReport, store: Store) -> None:
    """A run that ended while the gate ran (on the old code) meets no new code: its verdict
    no longer counts."""
    live = {r.id for r in in_flight(store)}
    for run_id in list(report.verdicts):
        if run_id not in live:
            del report.verdicts[run_id]
