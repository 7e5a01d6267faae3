"""Issue 29.4: "a dev-server warning for runs that have not moved for longer than a setting
although they should have". One run worker, three branches whose steps each take two
seconds, ``--stuck-after 1s``: the branches woken behind the first wait longer than that, and
``lunaflow dev`` says so once per run, naming why (woken, not taken by a worker); all of them
finish."""

from __future__ import annotations

import http.server
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

from tests.support.devserver import Servers

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "branches_dev"


class Slow(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the handler's name
        time.sleep(2.0)
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


def test_lunaflow_dev_warns_once_of_each_run_woken_and_not_taken(tmp_path: Path) -> None:
    slow = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=slow.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{slow.server_address[1]}/slow"
    servers = Servers(tmp_path)
    try:
        dev = servers.start(
            PROJECT, tmp_path / "data", ["--no-reload", "--workers", "1", "--stuck-after", "1s"]
        )
        started = dev.post_json("/start", {"workflow": "fan", "input": {"n": 3, "url": url}, "id": "fan-1"})
        assert started.status == 200, started
        done = dev.wait_status("fan-1", {"completed", "failed"}, timeout=60)
        assert done["status"] == "completed", done
        warned = re.findall(
            r"run (\S+) has not moved for over 1\.0s although it should have: (.*) \(lunaflow show (\S+)\)",
            dev.stdout(),
        )
        ids = [w[0] for w in warned]
        # The branches woken behind the first (and the parent, woken by each end while the
        # worker ran the next branch).
        assert {"fan-1.child-2", "fan-1.child-3"} <= set(ids), dev.output_tail()
        assert len(ids) == len(set(ids)), f"a run was warned of twice: {ids}"
        assert all(w[1].startswith("stuck: woken at ") and w[2] == w[0] for w in warned), warned
        # Child 1 is taken once the parent's activation that woke it parks: at once, unless a
        # loaded machine made that activation take over the setting (then its warning is due,
        # and the run cannot show the point below, being warned once at most).
        shown = json.loads(dev.cli("show", "fan-1.child-1", "--json").out)
        began = next(e["at"] for e in shown["journal"] if e["seq"] == 2)
        if began - shown["run"]["created_at"] < 0.8:
            assert "fan-1.child-1 has not moved" not in dev.stdout(), (
                "a run at work (its lease live) is not stuck"
            )
    finally:
        servers.close()
        slow.shutdown()
