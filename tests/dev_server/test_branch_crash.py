"""Issue 27.4 for branches: a `lunaflow dev` SIGKILLed while a map's branches run. Four run
workers advance four branches at once; the server kills itself right after the second
branch's end is written (``LUNAFLOW_KILL_AFTER_END``), with the others in the middle of their
steps (each makes a half-second call). The restarted server finishes every branch and hands
the parent their results in order: no branch is started twice, and an effect is made again
only under the step id it had (the attempt the kill interrupted), never under a new one."""

from __future__ import annotations

import http.server
import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

from runtime.platform.faults import KILL_AFTER_END
from runtime.store.sqlite import STORE_FILE, SQLiteStore
from tests.support.devserver import Servers, wait_for

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "branches_dev"
BRANCHES = 6


class Slow(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the handler's name
        time.sleep(0.5)
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


def test_a_maps_branches_finish_once_each_after_a_sigkill_in_their_middle(tmp_path: Path) -> None:
    slow = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=slow.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{slow.server_address[1]}/slow"
    data = tmp_path / "data"
    servers = Servers(tmp_path)
    try:
        first = servers.start(
            PROJECT, data, ["--no-reload", "--workers", "4"], env={KILL_AFTER_END: "fan-1.child-2"}
        )
        started = first.post_json(
            "/start", {"workflow": "fan", "input": {"n": BRANCHES, "url": url}, "id": "fan-1"}
        )
        assert started.status == 200, started
        wait_for("the server to kill itself", lambda: not first.alive, timeout=60)
        assert first.proc.returncode == -signal.SIGKILL, first.output_tail()
        store = SQLiteStore(data / STORE_FILE)
        try:
            assert store.get_run("fan-1.child-2").status == "completed"  # type: ignore[union-attr]
            assert store.get_run("fan-1").status == "awaiting"  # type: ignore[union-attr]
        finally:
            store.close()

        second = servers.start(PROJECT, data, ["--no-reload", "--workers", "4"])
        done = second.wait_status("fan-1", {"completed", "failed"}, timeout=60)
        assert done["status"] == "completed", done
        assert done["result"] == [10 * i for i in range(1, BRANCHES + 1)]

        store = SQLiteStore(data / STORE_FILE)
        try:
            branches = sorted(r.id for r in store.list_runs(workflow="branch", limit=100))
            assert branches == sorted(f"fan-1.child-{i}" for i in range(1, BRANCHES + 1)), "a branch twice"
            step_ids = {
                e.data["step_id"] for b in branches for e in store.journal(b) if e.kind.value == "step.intent"
            }
            results = [e for b in branches for e in store.journal(b) if e.kind.value == "step.result"]
            assert len(results) == BRANCHES, "each branch's step recorded one result"
        finally:
            store.close()
        effects = {e["key"]: e["value"] for e in json.loads(second.post_json("/effects", {}).body)}
        # Every effect was made under a step id its branch's journal holds: a repeat after the
        # kill (a count of 2) kept the id of the attempt it interrupted.
        assert set(effects) == step_ids, (effects, step_ids)
        assert all(1 <= n <= 2 for n in effects.values()), effects
    finally:
        servers.close()
        slow.shutdown()
