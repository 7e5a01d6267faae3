"""Issue 29.3 on both harnesses: repair by query selects through each store's indexes
(SQLite's search, DynamoDB's status and workflow index), previews with a replay on the
current code, and acts on what the preview listed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime.platform import bulk

PROJECTS = Path(__file__).resolve().parents[1] / "projects"


def test_a_repair_selects_previews_and_acts_alike_on_both_stores(harness: Any, tmp_path: Path) -> None:
    with harness(PROJECTS / "why", data_dir=tmp_path) as p:
        for i in (1, 2):
            p.start("flaky", None, id=f"f{i}")
        p.advance("1m")
        p.start("waiter", None, id="diverged")
        p.deploy(PROJECTS / "why_v2")
        p.signal("diverged", "paid", {"by": "ada"})
        p.advance("1h")
        p.start("waiter", None, id="parked-new")
        runs, worker = p.platform, p.platform.worker
        failed = bulk.preview(runs, "resume", bulk.Selection(status="failed"), worker)
        assert sorted(r.id for r in failed.todo) == ["f1", "f2"]
        assert list(failed.diverging) == ["diverged"]
        outcome = bulk.act(runs, "resume", failed.todo)
        assert sorted(outcome.done) == ["f1", "f2"] and outcome.refused == {}
        p.settle()
        # Resumed: each failed step has fresh attempts (the first fails again, a backoff follows).
        assert [p.get(r).status for r in ("f1", "f2", "diverged")] == ["sleeping", "sleeping", "failed"]
        assert "run.resumed" in [e.kind for e in p.journal("f1")]
        # A time window: the runs started in the last second of the clock only.
        late = bulk.Selection(workflow="waiter", since=p.now - 1)
        assert [r.id for r in bulk.select(runs, late)] == ["parked-new"]
        cancelled = bulk.act(runs, "cancel", bulk.preview(runs, "cancel", late, None).todo)
        assert cancelled.done == ["parked-new"] and p.get("parked-new").status == "cancelled"
