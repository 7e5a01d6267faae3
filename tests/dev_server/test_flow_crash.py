"""Issue 30: a slot is never leaked by a SIGKILLed `lunaflow dev`. On SQLite the write that ends
a run frees its slots and records the wake-up of the next run in line, in one transaction, so
a server killed right after that write (``LUNAFLOW_KILL_AFTER_END``) leaves the slot with the
next run and its wake-up in the store; the restarted server runs it. A server killed while a
run holds its slot leaves the slot with that run, which goes on after the restart."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from runtime.platform.faults import KILL_AFTER_END
from runtime.store.sqlite import STORE_FILE, SQLiteStore
from tests.support.devserver import Servers, wait_for

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "flow"


def start(server: object, run_id: str, n: int) -> None:
    got = server.post_json(  # type: ignore[attr-defined]
        "/start", {"workflow": "one", "input": {"n": n, "wait": True}, "id": run_id}
    )
    assert got.status == 200, got


def test_no_slot_is_leaked_by_a_sigkill_after_a_holders_end_or_while_it_holds(tmp_path: Path) -> None:
    data = tmp_path / "data"
    servers = Servers(tmp_path)
    try:
        first = servers.start(PROJECT, data, ["--no-reload"], env={KILL_AFTER_END: "h1"})
        start(first, "h1", 1)  # through its gate first: the server's four workers race otherwise
        wait_for("h1 past its gate", lambda: first.run("h1")["current_step"] == "await 'go'", 15)
        for i in (2, 3):
            start(first, f"h{i}", i)
        for run_id in ("h2", "h3"):
            assert first.wait_status(run_id, {"awaiting"})["current_step"] == "a slot of one"
        # The kill after h1's end can cut this very answer short (a run worker may end h1
        # before the reply is written): what the signal did is checked below.
        first.try_request(
            "POST",
            "/signal",
            json.dumps({"workflow": "one", "id": "h1", "name": "go"}),
            headers={"content-type": "application/json"},
        )
        wait_for("the server to kill itself", lambda: not first.alive, timeout=30)
        assert first.proc.returncode == -signal.SIGKILL, first.output_tail()
        store = SQLiteStore(data / STORE_FILE)
        try:
            assert store.get_run("h1").status == "completed"  # type: ignore[union-attr]
            (view,) = store.slot_views()
            assert (view.holders, view.waiting) == (["h2"], ["h3"]), "the end handed the slot on"
            assert "h2" in [run_id for run_id, _ in store.wakeups()], "with the next run's wake-up"
        finally:
            store.close()
        # Killed again while h2 holds the slot and waits: the slot stays h2's.
        second = servers.start(PROJECT, data, ["--no-reload"])
        wait_for("h2 past its gate", lambda: second.run("h2")["current_step"] == "await 'go'", 15)
        second.proc.send_signal(signal.SIGKILL)
        wait_for("the server to die", lambda: not second.alive, timeout=30)
        third = servers.start(PROJECT, data, ["--no-reload"])
        third.post_json("/signal", {"workflow": "one", "id": "h2", "name": "go"})
        assert third.wait_status("h2", {"completed"})["result"] == 2
        wait_for("h3 past its gate", lambda: third.run("h3")["current_step"] == "await 'go'", 15)
        third.post_json("/signal", {"workflow": "one", "id": "h3", "name": "go"})
        assert third.wait_status("h3", {"completed"})["result"] == 3
    finally:
        servers.close()
