"""Issue 27.1: a `lunaflow dev` SIGKILLed between a child's end and its parent's wake. The
child's end write records the parent's wake-up in the same transaction, so the server
killed right after that write (``LUNAFLOW_KILL_AFTER_END``, runtime/platform/faults.py: the
parent has not run) leaves the wake-up in the store, and the restarted server hands the
parent its child's result."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from runtime.platform.faults import KILL_AFTER_END
from runtime.store.sqlite import STORE_FILE, SQLiteStore
from tests.support.devserver import Servers, wait_for

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "children"


def test_a_parent_gets_its_childs_result_after_a_sigkill_between_the_end_and_the_wake(tmp_path: Path) -> None:
    data = tmp_path / "data"
    servers = Servers(tmp_path)
    try:
        first = servers.start(PROJECT, data, ["--no-reload"], env={KILL_AFTER_END: "card-1"})
        started = first.post_json(
            "/start", {"workflow": "order", "input": {"amount": 5, "child_id": "card-1"}, "id": "order-1"}
        )
        assert started.status == 200, started
        assert first.wait_status("order-1", {"awaiting"})["current_step"] == "child 'card-1'"
        first.wait_status("card-1", {"awaiting"})
        # The kill after the child's end can cut this very answer short (a run worker may
        # finish the child before the reply is written): what the signal did is checked below.
        signal_body = {"workflow": "charge-card", "id": "card-1", "name": "go", "payload": "ok"}
        first.try_request(
            "POST", "/signal", json.dumps(signal_body), headers={"content-type": "application/json"}
        )
        wait_for("the server to kill itself", lambda: not first.alive, timeout=30)
        assert first.proc.returncode == -signal.SIGKILL, first.output_tail()
        store = SQLiteStore(data / STORE_FILE)
        try:
            assert store.get_run("card-1").status == "completed"  # type: ignore[union-attr]
            assert store.get_run("order-1").status == "awaiting"  # type: ignore[union-attr]
            assert "order-1" in [run_id for run_id, _ in store.wakeups()]  # written with the end
        finally:
            store.close()
        second = servers.start(PROJECT, data, ["--no-reload"])
        done = second.wait_status("order-1", {"completed", "failed"})
        assert done["status"] == "completed", done
        assert done["result"] == {"ok": True, "child": "card-1", "result": {"charged": 5, "how": "ok"}}
    finally:
        servers.close()
