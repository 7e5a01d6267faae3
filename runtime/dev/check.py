"""``lunaflow check``: replay in-flight runs against the current code, running no effects,
and report each run that would diverge.

The same replay core and Lua driver as live runs, stopped at the first command the journal
does not answer (a step that would run, a value that would be drawn, a wait that would
park): everything before it is what replay would do on the next wake.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.core.journal import ENDED
from runtime.core.replay import (
    Complete,
    Execute,
    Fail,
    NeedValue,
    Park,
    Replay,
    Resume,
)
from runtime.engine.code import Raised, Returned
from runtime.engine.executor import decide
from runtime.platform.platform import Worker
from runtime.store.base import RunRecord, Store

MAX_COMMANDS = 1_000_000


@dataclass(frozen=True)
class Verdict:
    run_id: str
    workflow: str
    status: str
    diverges: bool
    message: str


def check_runs(worker: Worker, store: Store) -> list[Verdict]:
    verdicts = []
    for run in store.list_runs(limit=1_000_000):
        if run.status in ENDED:
            continue
        verdicts.append(check_run(worker, store, run))
    return verdicts


def check_run(worker: Worker, store: Store, run: RunRecord) -> Verdict:
    def verdict(diverges: bool, message: str) -> Verdict:
        return Verdict(run.id, run.workflow, run.status, diverges, message)

    if run.workflow not in worker.code.workflows:
        return verdict(True, f"workflow '{run.workflow}' is no longer declared in this project")
    code = worker.code
    # No signals and time zero: any wait the journal has not resolved parks, so nothing new
    # is decided; the run stops where the journal ends.
    replay = Replay(run.id, store.journal(run.id), 0, ())
    lua = code.new_run(run.id, run.workflow, run.input)
    reply = None
    worker.executor.current_run = run.id
    try:
        for _ in range(MAX_COMMANDS):
            out = code.drive(lua, reply)
            if isinstance(out, Returned):
                decision = replay.complete(out.result)
            elif isinstance(out, Raised):
                return verdict(False, f"the code raises on replay: {out.message}")
            elif out.command is None:
                return verdict(False, f"the code makes a refused call on replay: {out.refusal}")
            else:
                decision = decide(replay, out.command)
            if isinstance(decision, Resume):
                reply = code.reply(decision.value)
                continue
            if isinstance(decision, Fail):
                diverges = decision.error.startswith("journal divergence")
                return verdict(diverges, decision.error)
            if isinstance(decision, Execute):
                return verdict(False, f"replays cleanly; would run step '{decision.name}' next")
            if isinstance(decision, Park):
                return verdict(False, f"replays cleanly; parked at {decision.current}")
            if isinstance(decision, NeedValue):
                return verdict(False, f"replays cleanly; would record {decision.call}() next")
            if isinstance(decision, Complete):
                return verdict(False, "replays cleanly to its return")
        return verdict(False, "replay did not settle; the run may loop without end")
    finally:
        worker.executor.current_run = None
