"""(Re)create the golden journals in tests/golden/journals/ from tests/projects/golden_order.

Run by hand from the repository root, never by tests:

    python3 tests/golden/make_golden.py

Each scenario runs the current engine (LocalPlatform, fake clock, a fresh data folder)
to a known point and writes the run's journal exactly as ``p.journal(...)`` returns it,
with what a test needs to load it into a fresh store (the run row, its signals and its
timer) and, for mid-flight runs, the actions that finish it and what they produce.

Regenerating changes the goldens on purpose: do it only when the journal format changes
(and bump ``runtime.core.journal.FORMAT_VERSION``), never to make tests/golden/test_golden.py pass.
A new kind of entry that journals written before it never hold extends format 1 without a
bump, as ``step.rerun`` did (issue 14): the earlier goldens replay unchanged, and a new
golden records the new kind.

``Warehouse`` is also the stand-in test_golden.py uses, so both see the same object.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runtime.core.clock import FakeClock, now_ms  # noqa: E402
from runtime.core.durations import parse_ms  # noqa: E402
from runtime.engine.executor import ActivationDeadline  # noqa: E402
from runtime.testing import LocalPlatform  # noqa: E402

JOURNALS = Path(__file__).resolve().parent / "journals"
PROJECT = "tests/projects/golden_order"
RENAMED = "tests/projects/golden_order_renamed"
WORKFLOW = "order"
INPUT = {"sku": "tea", "qty": 2}


class Warehouse:
    """Stand-in for ``objects "Warehouse"``: records every call, answers deterministically
    from the step id it is handed (the effect's name). ``stall_s`` makes each call take
    that long first (an activation's cap then falls inside the step body)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, list[Any]]] = []
        self.stall_s = 0.0

    def __call__(self, cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        self.calls.append((cls, key, method, list(args)))
        time.sleep(self.stall_s)
        if method == "reserve":
            qty, step_id = args
            return [{"hold_id": f"H:{step_id}", "sku": key, "qty": qty}]
        if method == "ship":
            hold_id, step_id = args
            return [{"parcel": f"P:{step_id}", "hold_id": hold_id}]
        raise AssertionError(f"unexpected call {cls}({key!r}):{method}")


def apply(
    p: LocalPlatform, run_id: str, actions: list[dict[str, Any]], warehouse: Warehouse | None = None
) -> None:
    """Actions as stored in a golden file: {"advance": "1s"}, {"signal": name, "payload": v},
    {"cancel": true}, or {"cut": "1s"}: move the clock that far and run the work then due under an
    activation cap that falls inside the step body (the Warehouse stalls past it), so the
    attempt ends with no outcome, as when the process running it ends."""
    for action in actions:
        if "advance" in action:
            p.advance(action["advance"])
        elif "signal" in action:
            p.signal(run_id, action["signal"], action.get("payload"))
        elif "cancel" in action:
            p.cancel(run_id)
        elif "cut" in action:
            assert warehouse is not None, "a cut needs the Warehouse to stall"
            clock = p.platform.clock
            assert isinstance(clock, FakeClock)
            clock.advance(parse_ms(action["cut"], "cut") / 1000)
            p.platform.store.fire_due_timers(now_ms(clock))
            warehouse.stall_s = 0.2
            try:
                for woken, token in p.platform.store.wakeups():
                    cap = time.monotonic() + 0.05
                    p.platform.advance(woken, deadline=ActivationDeadline(cap, cap), token=token)
            finally:
                warehouse.stall_s = 0.0
        else:
            raise ValueError(f"unknown action {action!r}")


def snapshot(p: LocalPlatform, run_id: str) -> dict[str, Any]:
    """The run as a golden file stores it."""
    run = p.get(run_id)
    return {
        "project": None,
        "workflow": run.workflow,
        "run_id": run.id,
        "now": p.now,
        "run": {
            "status": run.status,
            "current_step": run.current_step,
            "result": run.result,
            "error": run.error,
            "created_at": run.created_at,
            "updated_at": run.updated_at,
        },
        "timer_ms": p.platform.store.timer(run_id),
        "signals": [
            {
                "id": s.id,
                "name": s.name,
                "payload": s.payload,
                "at": s.at,
                "state": s.state,
                "consumed_seq": s.consumed_seq,
            }
            for s in p.platform.store.signals(run_id)
        ],
        "entries": [e.as_dict() for e in p.journal(run_id)],
    }


# Each scenario: (file name, description, run id, actions to reach the recorded point,
# actions that finish the run afterwards or None).
TO_AWAIT = [{"advance": "1s"}]  # attempt 1 of "reserve" fails; the retry is due 1s later
FINISH = [{"signal": "paid", "payload": {"by": "ada"}}, {"advance": "10m"}]

SCENARIOS: list[dict[str, Any]] = [
    {
        "file": "complete.json",
        "case": "complete",
        "description": "a completed run: step 'reserve' retried after a failed attempt, "
        "await 'paid' consumed a signal, a 10m sleep, a journaled os.time(), step 'ship'",
        "run_id": "golden-complete",
        "record_after": TO_AWAIT + FINISH,
        "finish": None,
    },
    {
        "file": "midflight_awaiting.json",
        "case": "mid-flight",
        "description": "parked awaiting signal 'paid' after step 'reserve' succeeded on attempt 2",
        "run_id": "golden-awaiting",
        "record_after": TO_AWAIT,
        "finish": FINISH,
    },
    {
        "file": "midflight_backoff.json",
        "case": "mid-flight",
        "description": "sleeping in the backoff of step 'reserve' after attempt 1 failed",
        "run_id": "golden-backoff",
        "record_after": [],
        "finish": TO_AWAIT + FINISH,
    },
    {
        "file": "midflight_interrupted.json",
        "case": "interrupted",
        "description": "attempt 2 of step 'reserve' started three times (its intent, then two "
        "step.rerun entries), each start cut before its outcome as when the process running it "
        "ends; the next activation records it as interrupted and retries",
        "run_id": "golden-interrupted",
        "record_after": [{"cut": "1s"}, {"cut": "0s"}, {"cut": "0s"}],
        "finish": [{"signal": "paid", "payload": {"by": "ada"}}, {"advance": "11m"}],
    },
    {
        "file": "divergent_renamed_step.json",
        "case": "divergent",
        "description": "parked awaiting 'paid' under golden_order; the current code "
        "(golden_order_renamed) calls step 'reserve' 'hold'",
        "run_id": "golden-divergent",
        "record_after": TO_AWAIT,
        "finish": FINISH,
        "replay_project": RENAMED,
        # The SPEC's message, written by hand: not what the engine happens to say.
        "expected_error": "journal divergence: expected step 'reserve', code reached step 'hold'",
    },
    {
        # Added with step.raised (issue 26), which earlier journals never hold: format 1 stays.
        "file": "midflight_caught.json",
        "case": "caught",
        "description": "step 'charge' failed twice (the second error said retry = false) and, "
        "with catch = true, was raised into the workflow (step.raised); its compensation "
        "'release' is sleeping in its backoff after attempt 1 failed",
        "run_id": "golden-caught",
        "project": "tests/projects/golden_saga",
        "workflow": "order-saga",
        "record_after": [{"advance": "1s"}],
        "finish": [{"advance": "1s"}],
    },
    {
        # Added with child runs (issue 27.1: child.started, child.wait, child.done), which
        # earlier journals never hold: format 1 stays.
        "file": "midflight_children.json",
        "case": "children",
        "description": "wf:child started 'quick' (a derived id) and read its result; then "
        "'slow' (an id of its own), whose result the run awaits with a timeout of 1h while "
        "the child sleeps 1s",
        "run_id": "golden-children",
        "project": "tests/projects/golden_children",
        "workflow": "order",
        "record_after": [],
        "finish": [{"advance": "1s"}],
    },
    {
        # Added with cancel.handler and run.cancel_requested (issue 26): format 1 stays.
        "file": "midflight_cleanup.json",
        "case": "cleanup",
        "description": "wf:on_cancel registered after step 'reserve' (cancel.handler), then a "
        "cancel while awaiting 'paid' (run.cancel_requested): the cleanup's step 'release' failed "
        "once and is sleeping in its backoff; the run ends cancelled once it is done",
        "run_id": "golden-cleanup",
        "project": "tests/projects/golden_cleanup",
        "workflow": "order-cleanup",
        "record_after": [{"cancel": True}],
        "finish": [{"advance": "1s"}],
    },
]


def record(scenario: dict[str, Any]) -> dict[str, Any]:
    """Run one scenario on the current engine and return its golden document."""
    run_id = scenario["run_id"]
    warehouse = Warehouse()
    project = scenario.get("project", PROJECT)
    with LocalPlatform(ROOT / project, objects=warehouse) as p:
        p.start(scenario.get("workflow", WORKFLOW), INPUT, id=run_id)
        apply(p, run_id, scenario["record_after"], warehouse)
        doc: dict[str, Any] = {"case": scenario["case"], "description": scenario["description"]}
        doc.update(snapshot(p, run_id))
        doc["project"] = project
        if scenario["finish"] is not None:
            apply(p, run_id, scenario["finish"])
            end = p.get(run_id)
            doc["finish"] = {
                "actions": scenario["finish"],
                "status": end.status,
                "result": end.result,
                "entries": [e.as_dict() for e in p.journal(run_id)],
            }
    if "replay_project" in scenario:
        doc["replay_project"] = scenario["replay_project"]
        doc["expected_error"] = scenario["expected_error"]
    return doc


def main() -> None:
    JOURNALS.mkdir(parents=True, exist_ok=True)
    for scenario in SCENARIOS:
        doc = record(scenario)
        path = JOURNALS / scenario["file"]
        path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}: {len(doc['entries'])} entries, run {doc['run']['status']}")


if __name__ == "__main__":
    main()
