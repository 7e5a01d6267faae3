"""Issue 29.4 on AWS: "A CloudWatch alarm for runs that have not moved for longer than a
setting although they should have." A run whose wake is lost keeps being re-sent by the
reconciler, each time after a pause that doubles; once it has waited past
``LUNAFLOW_STUCK_AFTER_S`` (the stack sets it from ``-c stuckAfterMinutes``, 15 by default)
the reconcile invocation counts it in the ``StuckRuns`` metric and names it. The wakes it
re-sends are left undelivered here, as a worker that never takes them would leave them."""

from __future__ import annotations

from pathlib import Path

from runtime.aws.contract import RECONCILE_EVENT, WORKER_TIMEOUT_S, Handler
from runtime.testing import AwsPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "why"


def test_a_run_whose_wake_keeps_being_lost_is_reported_stuck_after_the_setting() -> None:
    with AwsPlatform(PROJECT) as p:
        p.start("waiter", None, id="lost")
        p.runtime.store.add_wakeup("lost")  # asked to advance; its message never arrives
        seen: list[tuple[float, list[str]]] = []
        waited = 0.0
        for _ in range(8):
            p._clock.advance(p.runtime.reconcile_after_s * 2 ** len(seen) + 1)
            waited = p._clock.now() - p.get("lost").updated_at
            answer = p.invoke(Handler.WORKER, dict(RECONCILE_EVENT), WORKER_TIMEOUT_S)
            assert "lost" in answer["rewoken"], answer
            seen.append((waited, answer["stuck"]))
            if answer["stuck"]:
                break
        assert seen[0][1] == [], "a wake lost a minute ago is healing, not stuck"
        assert seen[-1][1] == ["lost"], seen
        assert p.runtime.config.stuck_after_s == 900.0
        assert waited >= 900, f"reported stuck after {waited} s, before the setting"
        assert not any(stuck for w, stuck in seen if w < 900 - p.runtime.reconcile_after_s * 2), seen
        line = p.platform.why(p.get("lost"))
        assert line.text.startswith("stuck: woken and not taken by a worker; the reconciler re-sent its wake")
