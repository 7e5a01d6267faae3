"""``lunaflow check``: replay in-flight runs against the current code, running no effects,
and report each run that would diverge.

The executor's own loop in replay-only mode (``Executor.check``): the same replay core and
Lua driver as live runs, stopped at the first command the journal does not answer (a step
that would run, a value that would be drawn, a wait that would park). Everything before it
is what replay would do on the next wake.
"""

from __future__ import annotations

from runtime.core.journal import ENDED
from runtime.engine.executor import Verdict
from runtime.engine.worker import Worker
from runtime.store.base import RunRecord, Store

__all__ = ["Verdict", "check_run", "check_runs"]


def check_runs(worker: Worker, store: Store) -> list[Verdict]:
    return [check_run(worker, run) for run in store.list_runs(limit=1_000_000) if run.status not in ENDED]


def check_run(worker: Worker, run: RunRecord) -> Verdict:
    return worker.executor.check(run, worker.code)
