"""Issue 29.2: "A crash test: SIGKILL lunaflow dev while old and new code serve pinned runs."
A project with ``[deploys] pin_runs = true``: a run parked on version 1, the project edited to
version 2 (a renamed step) while ``lunaflow dev`` runs, so the reload pins that run to
version 1 and new runs start on version 2. The server is SIGKILLed with both parked; the
restarted one still runs the pinned run on version 1 (loaded from the data folder's
snapshot: the project's files are version 2 now) and the new one on version 2; ``lunaflow
show`` says which code each runs on, and ``lunaflow migrate`` refuses to move the pinned run
while version 2 cannot replay it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from runtime.engine.project import ProjectSource
from tests.support.devserver import Servers, wait_for

PROJECTS = Path(__file__).resolve().parents[1] / "projects"


def test_pinned_and_current_runs_finish_on_their_own_code_after_a_sigkill(tmp_path: Path) -> None:
    project = tmp_path / "shop"
    shutil.copytree(PROJECTS / "pins_v1", project)
    v1 = ProjectSource.read(project).digest
    data = tmp_path / "data"
    servers = Servers(tmp_path)
    try:
        first = servers.start(project, data)
        assert first.cli("start", "order", "--id", "old").code == 0
        first.wait_status("old", {"awaiting"})
        mark = first.mark()
        shutil.copy(PROJECTS / "pins_v2" / "main.lua", project / "main.lua")
        wait_for("the reload", lambda: "the new code is live" in first.output_since(mark), timeout=30)
        said = first.output_since(mark)
        assert "run old (order, awaiting) would diverge on the new code" in said, said
        assert "it keeps running on the code it ran on (pinned)" in said, said
        assert first.cli("start", "order", "--id", "new").code == 0
        first.wait_status("new", {"awaiting"})
        first.kill()

        second = servers.start(project, data)
        shown = json.loads(second.cli("show", "old", "--json").out)
        assert shown["code"] == {"started_on": v1, "pinned_to": v1}
        refused = second.cli("migrate", "old")
        assert refused.code == 1 and "cannot move to the current code" in refused.err, str(refused)
        for run_id in ("old", "new"):
            assert second.cli("signal", run_id, "paid", '{"by": "ada"}').code == 0
        old = second.wait_status("old", {"completed", "failed"}, timeout=30)
        new = second.wait_status("new", {"completed", "failed"}, timeout=30)
        assert old["result"] == {"reserved": "reserved by v1", "paid": True, "shipped": "shipped by v1"}, old
        assert new["result"] == {"reserved": "reserved by v2", "paid": True, "shipped": "shipped by v2"}, new
        assert json.loads((data / "pins.json").read_text(encoding="utf-8")) == {"pins": {}}
    finally:
        servers.close()
