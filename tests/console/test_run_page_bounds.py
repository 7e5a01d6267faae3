"""Issue 24, section 3: a run page's size does not grow with its journal, and the page of
an ended run does not poll. A real SQLite store; the run's journal is written through the
store's own append, as a run of 10,000 steps leaves it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runtime.console import render
from runtime.console.page import render_console
from runtime.core.clock import FakeClock
from runtime.core.journal import Entry, Kind
from runtime.platform.runs import Runs
from runtime.store.base import RunRecord, RunUpdate
from runtime.store.sqlite import STORE_FILE, SQLiteStore

T0 = 1_767_225_600.0
STEPS = 10_000


def _long_run(store: SQLiteStore, run_id: str, steps: int, status: str) -> None:
    run = RunRecord(run_id, "loop", "running", {"n": steps}, created_at=T0, updated_at=T0)
    store.create_run(run, Entry(1, Kind.STARTED, "loop", {"format": 1, "input": {"n": steps}}, T0))
    entries: list[Entry] = []
    seq = 1
    for i in range(1, steps + 1):
        at = T0 + i / 1000
        step_id = f"{run_id}/s/{i}/1"
        entries.append(
            Entry(seq + 1, Kind.STEP_INTENT, "s", {"pass": i, "attempt": 1, "step_id": step_id}, at)
        )
        entries.append(Entry(seq + 2, Kind.STEP_RESULT, "s", {"n": 1, "values": [i]}, at))
        seq += 2
    entries.append(Entry(seq + 1, Kind.COMPLETED, None, {"result": {"total": steps}}, T0 + steps / 1000))
    length = 1
    for start in range(0, len(entries) - 1, 1000):
        batch = entries[start : start + 1000]
        store.append(run_id, length, batch)
        length += len(batch)
    if status == "completed":
        store.append(
            run_id, length, [entries[-1]], update=RunUpdate("completed", None, result={"total": steps})
        )
    # else: left running at its last step's result


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    store = SQLiteStore(tmp_path_factory.mktemp("long") / STORE_FILE, synchronous="OFF")
    _long_run(store, "long-done", STEPS, "completed")
    _long_run(store, "long-live", STEPS, "running")
    parked = RunRecord("parked", "loop", "running", None, created_at=T0, updated_at=T0)
    store.create_run(parked, Entry(1, Kind.STARTED, "loop", {"format": 1, "input": None}, T0))
    wait = Entry(
        2, Kind.WAIT, "await", {"names": ["shipped", "lost"], "timeout_ms": None, "due_at": None}, T0
    )
    store.append("parked", 1, [wait], update=RunUpdate("awaiting", "await 'shipped'"))
    yield Runs(store, FakeClock(T0 + 60))
    store.close()


def _get(runs: Runs, target: str) -> str:
    response = render_console(runs, "GET", target, {}, poke=lambda: None, token="t")
    assert response.status_code == 200, response.body
    return str(response.body)


@pytest.mark.parametrize("target", ["/_console/runs/long-live", "/_console/runs/long-live?part=live"])
def test_the_page_of_a_10000_step_run_pages_its_journal(runs: Runs, target: str) -> None:
    """Before: every journal item and every shape was sent, 4.1 MB a poll."""
    page = _get(runs, target)
    assert len(page.encode()) < 400_000, len(page.encode())
    listed = page.count("<tr id='e")
    assert listed == render.JOURNAL_PAGE
    assert f"of {2 * STEPS + 1:,} (the newest)" in page  # the newest by default
    # 10,001 items: the newest 200 are items 9,801 on; item 9,800 is on page 49 (9,800-9,999).
    assert "?journal=0'>oldest</a>" in page and "?journal=49'>older</a>" in page


def test_an_earlier_page_of_the_journal_is_reached_by_its_link(runs: Runs) -> None:
    page = _get(runs, "/_console/runs/long-live?journal=0&part=live")
    assert "<tr id='e1'>" in page and "entries 1–398 of" in page
    assert "?journal=1'>newer</a>" in page and "long-live'>newest</a>" in page
    assert page.count("<tr id='e") == render.JOURNAL_PAGE


def test_the_page_of_an_ended_run_does_not_poll(runs: Runs) -> None:
    """Before: a completed run's page asked for its live region every 1.5 s forever."""
    done = _get(runs, "/_console/runs/long-done")
    assert "data-poll" not in done
    live = _get(runs, "/_console/runs/long-live")
    assert "data-poll='1500'" in live and "<span data-ended" not in live
    # A page that was polling while the run ended gets a region saying so; the script stops.
    assert "data-ended" in _get(runs, "/_console/runs/long-done?part=live")
    assert "clearInterval" in done


def test_the_signal_form_suggests_the_names_the_runs_code_waits_for(runs: Runs) -> None:
    """Before: every run's form suggested 'paid' and a payload {"by": "ada"}, an example's."""
    page = _get(runs, "/_console/runs/parked")
    assert "placeholder='shipped, lost'" in page
    assert "paid" not in page and "ada" not in page
