"""Issue 27.3/27.4: a `lunaflow dev` SIGKILLed at the moment of continue-as-new. The
generation's close (``run.continued``) is one write; the server killed right after it
(``LUNAFLOW_KILL_AT_CONTINUE``, runtime/platform/faults.py: the next generation has run
nothing) leaves a running run, and the restarted server runs the new generation once: the
first month is not billed again, the second is billed once, nothing is lost."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from runtime.core.journal import Kind
from runtime.platform.faults import KILL_AT_CONTINUE
from runtime.store.sqlite import STORE_FILE, SQLiteStore
from tests.support.devserver import Servers, wait_for

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "continue"


def _kinds(data: Path, run_id: str) -> list[Kind]:
    store = SQLiteStore(data / STORE_FILE)
    try:
        return [e.kind for e in store.journal(run_id)]
    finally:
        store.close()


def test_a_sigkill_at_continue_as_new_loses_nothing_and_runs_nothing_twice(tmp_path: Path) -> None:
    data = tmp_path / "data"
    servers = Servers(tmp_path)
    try:
        first = servers.start(PROJECT, data, ["--no-reload"], env={KILL_AT_CONTINUE: "sub-1"})
        started = first.post_json(
            "/start", {"workflow": "subscription", "input": {"customer": "ada", "months": 2}, "id": "sub-1"}
        )
        assert started.status == 200, started
        first.wait_status("sub-1", {"awaiting"})
        # The server kills itself at the continue the signal leads to, which may come before
        # the signal's answer is written: a cut connection is that kill, checked below.
        signalled = first.try_request(
            "POST",
            "/signal",
            json.dumps({"workflow": "subscription", "id": "sub-1", "name": "renew", "payload": None}),
            headers={"content-type": "application/json"},
        )
        assert signalled is None or signalled.status == 200, signalled
        wait_for("the server to kill itself", lambda: not first.alive, timeout=30)
        assert first.proc.returncode == -signal.SIGKILL, first.output_tail()
        kinds = _kinds(data, "sub-1")
        assert kinds[-1] == Kind.CONTINUED and kinds.count(Kind.STEP_RESULT) == 1
        second = servers.start(PROJECT, data, ["--no-reload"])
        done = second.wait_status("sub-1", {"completed", "failed"})
        assert done["status"] == "completed", done
        assert done["result"] == {"customer": "ada", "months_billed": 2, "ended_by": "term"}
        kinds = _kinds(data, "sub-1")
        assert kinds.count(Kind.CONTINUED) == 1
        assert kinds.count(Kind.STEP_INTENT) == 2 and kinds.count(Kind.STEP_RESULT) == 2
    finally:
        servers.close()
