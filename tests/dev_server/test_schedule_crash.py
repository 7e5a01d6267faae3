"""Issue 28: ``lunaflow dev`` SIGKILLed at a schedule's tick, just before the tick's run is
started and just after its start committed (``LUNAFLOW_KILL_AT_TICK``, faults.py). After a
restart the tick's run exists exactly once and completes: the restart's catch-up fires the
same tick, whose run id (``daily@<tick>``) joins the run the killed process started."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from runtime.platform.faults import KILL_AT_TICK
from runtime.store.sqlite import STORE_FILE, SQLiteStore
from tests.support.devserver import Servers, wait_for

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "dev_schedule"


def today_tick() -> str:
    return time.strftime("daily@%Y-%m-%dT00:00:00Z", time.gmtime())


def daily_runs(data: Path) -> list[tuple[str, str]]:
    if not (data / STORE_FILE).exists():
        return []
    store = SQLiteStore(data / STORE_FILE, read_only=True)
    try:
        return [(r.id, r.status.value) for r in store.list_runs(workflow="report")]
    finally:
        store.close()


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_tick_cut_short_by_sigkill_has_its_run_exactly_once_after_restart(
    servers: Servers, tmp_path: Path, when: str
) -> None:
    data = tmp_path / "data"
    tick = today_tick()
    killed = servers.start(PROJECT, data, wait=False, env={KILL_AT_TICK: when})
    assert killed.wait_exit(60) == -signal.SIGKILL, killed.output_tail()
    if when == "after":
        assert daily_runs(data) == [(tick, "running")]  # started, never advanced
    else:
        assert daily_runs(data) == []
    if tick != today_tick():
        pytest.skip("midnight UTC passed during the test: the tick moved on")
    server = servers.start(PROJECT, data)
    found = wait_for("the tick's run to complete", lambda: daily_runs(data) == [(tick, "completed")], 30)
    assert found
    # The restart's recovery may finish the killed process's run before the ticker thread's
    # first look fires the tick (which then joins the ended run), so the line can come later.
    wait_for("the tick's line", lambda: f"schedule daily: tick {tick}" in server.stdout(), 30)
    server.stop(signal.SIGTERM)
    assert daily_runs(data) == [(tick, "completed")]
