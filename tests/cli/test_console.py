"""The CLI console of SPEC section 4, run in-process against a local data folder.

SPEC 4: "The console lists runs with status, workflow, current step and times; shows one
run's journal as a timeline (each step's attempts with times, errors and step ids; waits;
signals; timers); resumes failed runs; cancels the rest. It exists as: a CLI: `lunaflow
runs`, `lunaflow show RUN_ID`, `lunaflow resume RUN_ID`, `lunaflow cancel RUN_ID`,
`lunaflow signal RUN_ID NAME [JSON]`, `lunaflow start WORKFLOW [JSON] --id ID` (each with
`--json`), against the local data folder".

The seed: "The console lists runs with status and current step, shows the journal as a
timeline, and offers resume for failed runs and cancel for the rest. Cancelling a run
cancels the runs it spawned."

Exit codes (runtime/cli/__init__.py): 0 done; 1 refused or failed (the reason on stderr); 2 bad
usage; 3 `signal` reached an ended run and was set aside.

State is built with LocalPlatform on a data folder (its fake clock starts at
2026-01-01 00:00:00 UTC), closed, and read by ``runtime.cli.main`` on the same folder.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from runtime import cli
from runtime.store.sqlite import STORE_FILE, SQLiteStore
from runtime.testing import LocalPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "cli_console"
T0 = 1_767_225_600.0  # LocalPlatform's fake clock at start: 2026-01-01 00:00:00 UTC
HOUR = 3600.0


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def lunaflow(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, data: Path
) -> Iterator[Callable[..., Result]]:
    """``lunaflow(*args)`` runs ``cli.main`` with ``--data DATA --project cli_console``
    appended, and returns its exit code and what it printed. The CLI's rich consoles are
    swapped for wide ones (same options) so table rows are not wrapped mid-cell."""
    monkeypatch.setattr(cli.output, "out", Console(highlight=False, soft_wrap=True, width=400))
    monkeypatch.setattr(cli.output, "err", Console(stderr=True, highlight=False, soft_wrap=True, width=400))

    def run(*args: str, project: Path | None = PROJECT, data_dir: Path | None = data) -> Result:
        capsys.readouterr()
        argv = list(args)
        if data_dir is not None:
            argv += ["--data", str(data_dir)]
        if project is not None:
            argv += ["--project", str(project)]
        code = cli.main(argv)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    yield run


def platform(data: Path) -> LocalPlatform:
    return LocalPlatform(PROJECT, data_dir=data)


def store_of(data: Path) -> SQLiteStore:
    return SQLiteStore(data / STORE_FILE)


def status_of(data: Path, run_id: str) -> str:
    store = store_of(data)
    try:
        run = store.get_run(run_id)
        assert run is not None
        return run.status
    finally:
        store.close()


def table_rows(text: str) -> list[list[str]]:
    """The body rows of rich tables in ``text``, as lists of stripped cells."""
    return [
        [c.strip() for c in line.strip().strip("│").split("│")]
        for line in text.splitlines()
        if line.startswith("│")
    ]


def line_with(text: str, *parts: str) -> str:
    """The one table line containing every part."""
    found = [line for line in text.splitlines() if line.startswith("│") and all(p in line for p in parts)]
    assert len(found) == 1, f"expected one line with {parts!r}, found {found!r} in:\n{text}"
    return found[0]


def in_order(text: str, parts: list[str]) -> None:
    """Each part appears in ``text`` after the one before it."""
    at = 0
    for part in parts:
        found = text.find(part, at)
        assert found >= 0, f"{part!r} not found after position {at} in:\n{text}"
        at = found + len(part)


# --- lunaflow runs ------------------------------------------------------------------------


@pytest.fixture
def several(data: Path) -> Path:
    """An awaiting order, a sleeping napper, a failed order and a completed order."""
    with platform(data) as p:
        p.start("order", {"fail_times": 0}, id="waiting")
        p.start("napper", None, id="nap")
        p.start("order", {"fail_times": 3}, id="broken")
        p.advance("5s")
        p.advance("10s")
        p.start("order", {"fail_times": 0}, id="finished")
        p.signal("finished", "paid", {"by": "ada"})
        assert p.get("broken").status == "failed"
    return data


def test_runs_lists_every_run_with_workflow_status_and_current_step(lunaflow, several):
    """SPEC 4: "The console lists runs with status, workflow, current step and times"."""
    r = lunaflow("runs")
    assert r.code == 0, r.err
    rows = {row[0]: row for row in table_rows(r.out)}
    assert set(rows) == {"waiting", "nap", "broken", "finished"}
    assert rows["waiting"][1:4] == ["order", "awaiting", "race ('paid', 'cancelled')"]
    assert rows["nap"][1:4] == ["napper", "sleeping", "sleep"]
    assert rows["broken"][1:4] == ["order", "failed", "step 'reserve'"]
    assert rows["finished"][1:4] == ["order", "completed", ""]
    # Why each is not moving (issue 29.4); the data folder's timers are long past due by the
    # real clock this command reads, and no server is running.
    assert rows["broken"][4].startswith("failed at 2026-01-01 00:00:15 UTC: step 'reserve' failed after 3")
    assert rows["waiting"][4].startswith("stuck: its timer was due at 2026-01-04 00:00:00 UTC")
    assert rows["finished"][4] == "completed at 2026-01-01 00:00:15 UTC"
    # Times: started and updated, from the fake clock.
    assert rows["broken"][5:7] == ["2026-01-01 00:00:00", "2026-01-01 00:00:15"]
    assert rows["finished"][5] == "2026-01-01 00:00:15"


def test_runs_filters_by_status(lunaflow, several):
    """SPEC 5's `p.runs(status="failed")`, from the CLI: `lunaflow runs --status failed`."""
    failed = lunaflow("runs", "--status", "failed", "--json")
    assert failed.code == 0, failed.err
    assert [r["id"] for r in failed.json()] == ["broken"]
    awaiting = lunaflow("runs", "--status", "awaiting", "--json").json()
    assert [r["id"] for r in awaiting] == ["waiting"]
    assert lunaflow("runs", "--status", "cancelled", "--json").json() == []
    text = lunaflow("runs", "--status", "sleeping")
    assert [row[0] for row in table_rows(text.out)] == ["nap"]


def test_runs_filters_by_workflow_and_status_together(lunaflow, several):
    r = lunaflow("runs", "--workflow", "order", "--json")
    assert r.code == 0, r.err
    assert sorted(x["id"] for x in r.json()) == ["broken", "finished", "waiting"]
    assert [x["id"] for x in lunaflow("runs", "--workflow", "napper", "--json").json()] == ["nap"]
    both = lunaflow("runs", "--workflow", "order", "--status", "completed", "--json").json()
    assert [x["id"] for x in both] == ["finished"]
    assert lunaflow("runs", "--workflow", "no-such-workflow", "--json").json() == []


def test_runs_json_carries_each_runs_fields(lunaflow, several):
    """Each run in `runs --json` has id, workflow, status, current step, input, result,
    error, parent and times."""
    by_id = {r["id"]: r for r in lunaflow("runs", "--json").json()}
    assert by_id["finished"] == {
        "id": "finished",
        "workflow": "order",
        "status": "completed",
        "current_step": None,
        "input": {"fail_times": 0},
        "result": {"outcome": "settled", "by": "ada", "reserved_on": 1},
        "error": None,
        "parent_id": None,
        "created_at": T0 + 15,
        "updated_at": T0 + 15,
        "values": {},
        "why": "completed at 2026-01-01 00:00:15 UTC",
        "stuck": False,
    }
    broken = by_id["broken"]
    assert broken["status"] == "failed"
    assert broken["current_step"] == "step 'reserve'"
    assert broken["error"] == "step 'reserve' failed after 3 attempts: card declined on attempt 3"
    assert broken["result"] is None
    assert (broken["created_at"], broken["updated_at"]) == (T0, T0 + 15)


def test_runs_lists_newest_first(lunaflow, data):
    with platform(data) as p:
        p.start("napper", None, id="first")
        p.advance("1m")
        p.start("napper", None, id="second")
        p.advance("1m")
        p.start("napper", None, id="third")
    assert [r["id"] for r in lunaflow("runs", "--json").json()] == ["third", "second", "first"]
    assert [r["id"] for r in lunaflow("runs", "--limit", "2", "--json").json()] == ["third", "second"]


def test_runs_with_an_unknown_status_is_bad_usage(lunaflow, several):
    with pytest.raises(SystemExit) as exit_:
        lunaflow("runs", "--status", "asleep")
    assert exit_.value.code == 2


# --- lunaflow show ------------------------------------------------------------------------


@pytest.fixture
def retried(data: Path) -> Path:
    """Run 'o1': step 'reserve' fails twice (backoff 5s, then 10s) and succeeds on the
    third attempt, the race is won by 'paid' an hour later, and the run completes."""
    with platform(data) as p:
        p.start("order", {"fail_times": 2}, id="o1")
        p.advance("5s")
        p.advance("10s")
        p.advance("1h")
        p.signal("o1", "paid", {"by": "ada"})
        assert p.get("o1").status == "completed"
    return data


def test_show_lists_each_attempt_of_a_retried_step_with_step_id_error_and_retry_time(lunaflow, retried):
    """SPEC 4: the timeline shows "each step's attempts with times, errors and step ids"."""
    r = lunaflow("show", "o1")
    assert r.code == 0, r.err
    in_order(
        r.out,
        [
            "step 'reserve'",
            "attempt 1 failed",
            "step id o1/reserve/1/1",
            "error: card declined on attempt 1",
            "retry at 2026-01-01 00:00:05",
            "attempt 2 failed",
            "step id o1/reserve/1/2",
            "error: card declined on attempt 2",
            "retry at 2026-01-01 00:00:15",
            "attempt 3 ok",
            "step id o1/reserve/1/3",
            "step 'ship'",
            "attempt 1 ok",
            "step id o1/ship/1/1",
        ],
    )
    # Each attempt's row carries the time it started.
    assert "2026-01-01 00:00:00" in line_with(r.out, "attempt 1 failed")
    assert "2026-01-01 00:00:05" in line_with(r.out, "attempt 2 failed")
    assert "2026-01-01 00:00:15" in line_with(r.out, "attempt 3 ok")
    assert 'returned {"attempt":3}' in line_with(r.out, "step 'reserve'")


def test_show_json_timeline_has_the_attempts_in_order(lunaflow, retried):
    r = lunaflow("show", "o1", "--json")
    assert r.code == 0, r.err
    steps = [i for i in r.json()["timeline"] if i["kind"] == "step"]
    assert [s["title"] for s in steps] == ["step 'reserve'", "step 'ship'"]
    attempts = steps[0]["attempts"]
    assert [(a["attempt"], a["step_id"], a["outcome"]) for a in attempts] == [
        (1, "o1/reserve/1/1", "failed"),
        (2, "o1/reserve/1/2", "failed"),
        (3, "o1/reserve/1/3", "ok"),
    ]
    assert [a["error"] for a in attempts] == [
        "card declined on attempt 1",
        "card declined on attempt 2",
        None,
    ]
    assert [a["retry_at"] for a in attempts] == [T0 + 5, T0 + 15, None]
    assert [a["started_at"] for a in attempts] == [T0, T0 + 5, T0 + 15]
    assert all(a["ended_at"] == a["started_at"] for a in attempts)  # the fake clock stood still


def test_show_a_wait_resolved_by_a_signal_gives_its_due_time_and_the_signal(lunaflow, retried):
    """SPEC 4: the timeline shows waits; a race waits 72h from when it was reached."""
    r = lunaflow("show", "o1")
    wait = line_with(r.out, "race ('paid', 'cancelled')")
    assert "due 2026-01-04 00:00:15" in wait  # reached at 00:00:15, timeout 72h
    assert 'signal \'paid\' {"by":"ada"} at 2026-01-01 01:00:15' in wait
    item = next(i for i in lunaflow("show", "o1", "--json").json()["timeline"] if i["kind"] == "wait")
    assert item["due_at"] == T0 + 15 + 72 * HOUR
    assert item["resolved_at"] == T0 + 15 + HOUR
    assert item["resolution"] == 'signal \'paid\' {"by":"ada"}'


def test_show_a_wait_that_timed_out_and_a_sleep_that_fired(lunaflow, data):
    with platform(data) as p:
        p.start("order", {"fail_times": 0}, id="late")
        p.start("napper", None, id="nap")
        p.advance("72h")
        assert p.get("late").result == {"outcome": "timed out"}
        assert p.get("nap").status == "completed"
    late = line_with(lunaflow("show", "late").out, "race ('paid', 'cancelled')")
    assert "due 2026-01-04 00:00:00" in late
    assert "timed out at 2026-01-04 00:00:00" in late
    nap = line_with(lunaflow("show", "nap").out, "sleep")
    assert "due 2026-01-01 01:00:00" in nap
    assert "timer fired at 2026-01-01 01:00:00" in nap


def test_show_an_unresolved_wait_says_it_is_waiting(lunaflow, data):
    with platform(data) as p:
        p.start("order", {"fail_times": 0}, id="o")
    wait = line_with(lunaflow("show", "o").out, "race ('paid', 'cancelled')")
    assert "due 2026-01-04 00:00:00" in wait
    assert "waiting" in wait


@pytest.fixture
def duplicate_signals(data: Path) -> Path:
    """Two 'paid' signals arrive while 'o' sleeps out a backoff; the race consumes the
    first, the run completes, the second is set aside. A third arrives after the end."""
    with platform(data) as p:
        p.start("order", {"fail_times": 1}, id="o")
        assert p.signal("o", "paid", {"by": "ada"}) is True
        assert p.signal("o", "paid", {"by": "bob"}) is True
        p.advance("5s")
        assert p.get("o").status == "completed"
        assert p.signal("o", "paid", {"by": "cy"}) is False
    return data


def test_show_lists_signals_consumed_and_set_aside(lunaflow, duplicate_signals):
    """Seed: "Duplicate signals are safe. An unconsumed extra is set aside rather than
    breaking replay"; SPEC 4: the timeline shows signals."""
    r = lunaflow("show", "o")
    assert r.code == 0, r.err
    signals = {row[0]: row for row in table_rows(r.out) if row[0] in {"1", "2", "3"} and "paid" in row}
    # The race consumed signal 1 at journal entry 7 (started, intent, failed, intent,
    # result, wait, wait.done).
    assert signals["1"][2:] == ["paid", "consumed (entry 7)", '{"by": "ada"}']
    assert signals["2"][2:] == ["paid", "set aside", '{"by": "bob"}']
    assert signals["3"][2:] == ["paid", "set aside", '{"by": "cy"}']
    assert 'signal \'paid\' {"by":"ada"}' in line_with(r.out, "race ('paid', 'cancelled')")


def test_show_json_signals_name_the_consuming_journal_entry(lunaflow, duplicate_signals):
    shown = lunaflow("show", "o", "--json").json()
    sigs = shown["signals"]
    assert [(s["id"], s["name"], s["state"], s["payload"]) for s in sigs] == [
        (1, "paid", "consumed", {"by": "ada"}),
        (2, "paid", "set_aside", {"by": "bob"}),
        (3, "paid", "set_aside", {"by": "cy"}),
    ]
    done = next(e for e in shown["journal"] if e["kind"] == "wait.done")
    assert done["data"]["signal_id"] == 1
    assert sigs[0]["consumed_seq"] == done["seq"]
    assert sigs[1]["consumed_seq"] is None and sigs[2]["consumed_seq"] is None


def test_show_gives_the_timer_due_time_of_a_parked_run(lunaflow, data):
    """SPEC 3: "A parked run ... is journal rows and a timer"; SPEC 4: the timeline shows
    timers. An awaiting run's timer is its timeout; a backoff's is the next attempt."""
    with platform(data) as p:
        p.start("order", {"fail_times": 0}, id="awaiting")
        p.start("order", {"fail_times": 1}, id="backoff")
        p.start("child", None, id="untimed")  # await 'go' with no timeout: no timer
        assert p.get("backoff").status == "sleeping"
    awaiting = lunaflow("show", "awaiting")
    assert "timer due 2026-01-04 00:00:00" in awaiting.out
    assert lunaflow("show", "awaiting", "--json").json()["timer_due_at"] == T0 + 72 * HOUR
    backoff = lunaflow("show", "backoff")
    assert "timer due 2026-01-01 00:00:05" in backoff.out
    assert "current step 'reserve'" in backoff.out
    assert lunaflow("show", "backoff", "--json").json()["timer_due_at"] == T0 + 5
    untimed = lunaflow("show", "untimed")
    assert "timer due" not in untimed.out
    assert lunaflow("show", "untimed", "--json").json()["timer_due_at"] is None


def test_show_gives_when_an_ended_run_is_deleted_and_nothing_for_one_in_flight(lunaflow, data):
    """[runs] retention: an ended run is deleted 30 days (the default) after its end."""
    with platform(data) as p:
        p.start("napper", None, id="rested")
        p.advance("1h")
        assert p.get("rested").status == "completed"
        p.start("napper", None, id="napping")
    rested = lunaflow("show", "rested")
    assert "deleted at 2026-01-31 01:00:00 UTC ([runs] retention in lunaflow.toml)" in rested.out
    assert lunaflow("show", "rested", "--json").json()["expires_at"] == T0 + HOUR + 30 * 24 * HOUR
    assert "deleted at" not in lunaflow("show", "napping").out
    assert lunaflow("show", "napping", "--json").json()["expires_at"] is None


def test_show_names_children_and_parent(lunaflow, data):
    """SPEC 3: "Starting a workflow from inside a step of another run records the parent"."""
    with platform(data) as p:
        p.start("parent", None, id="par")
    parent = lunaflow("show", "par")
    assert parent.code == 0, parent.err
    assert "children par-child" in parent.out
    assert not any(line.startswith("parent ") for line in parent.out.splitlines())
    child = lunaflow("show", "par-child")
    assert "parent par" in child.out.splitlines()
    assert "children" not in child.out
    assert lunaflow("show", "par", "--json").json()["children"] == ["par-child"]
    assert lunaflow("show", "par-child", "--json").json()["run"]["parent_id"] == "par"


def test_show_a_failed_run_gives_its_error(lunaflow, data):
    """Seed: "When a step exhausts its attempts the run parks as failed with step 'name'
    failed after N attempts, keeps its journal"."""
    with platform(data) as p:
        p.start("order", {"fail_times": 3}, id="broken")
        p.advance("5s")
        p.advance("10s")
    r = lunaflow("show", "broken")
    assert "error step 'reserve' failed after 3 attempts: card declined on attempt 3" in r.out
    assert "step 'reserve' failed after 3 attempts: card declined on attempt 3" in line_with(
        r.out, "step 'reserve'"
    )
    assert "status failed" in r.out


def test_show_json_has_run_timeline_signals_and_journal(lunaflow, duplicate_signals):
    with platform(duplicate_signals) as p:
        journal = [e.as_dict() for e in p.journal("o")]
        run = p.get("o")
    shown = lunaflow("show", "o", "--json").json()
    assert {"run", "timeline", "signals", "journal"} <= set(shown)
    assert shown["journal"] == journal
    assert shown["run"]["id"] == "o" and shown["run"]["status"] == "completed"
    assert shown["run"]["result"] == run.result
    assert [i["kind"] for i in shown["timeline"]] == ["start", "step", "wait", "step", "completed"]


def test_show_of_a_missing_run_is_refused(lunaflow, several):
    r = lunaflow("show", "nope")
    assert r.code == 1
    assert "no run 'nope'" in r.err
    # The fix: where it looked, and the command that lists what is there.
    assert "are listed by `lunaflow runs`" in r.err, r.err
    assert r.out == ""


def test_a_missing_run_named_by_the_start_of_an_id_is_answered_with_the_ids_it_begins(lunaflow, several):
    """`lunaflow show wait` (an id typed short): the refusal names the runs whose id begins so,
    where a bare `no run 'wait'` left the user to list them."""
    r = lunaflow("cancel", "wait")
    assert r.code == 1
    assert "no run 'wait'; runs whose id begins with 'wait': waiting" in r.err, r.err
    assert json.loads(lunaflow("show", "waiting", "--json").out)["run"]["status"] == "awaiting"


# --- lunaflow resume ----------------------------------------------------------------------


@pytest.fixture
def failed(data: Path) -> Path:
    """'broken' fails its three attempts; 'finished' completes."""
    with platform(data) as p:
        p.start("order", {"fail_times": 3}, id="broken")
        p.advance("5s")
        p.advance("10s")
        p.start("order", {"fail_times": 0}, id="finished")
        p.signal("finished", "paid", {"by": "ada"})
        assert p.get("broken").status == "failed"
    return data


def test_resume_of_a_failed_run_exits_0_and_leaves_it_running(lunaflow, failed):
    """Seed: "failed --> running: resume from the console"."""
    r = lunaflow("resume", "broken")
    assert r.code == 0, r.err
    assert "resumed broken" in r.out
    assert status_of(failed, "broken") == "running"
    assert lunaflow("runs", "--status", "failed", "--json").json() == []
    journal = lunaflow("show", "broken", "--json").json()["journal"]
    assert journal[-1]["kind"] == "run.resumed"


def test_a_resumed_run_is_advanced_with_a_fresh_set_of_attempts(lunaflow, failed):
    """SPEC 3: "resume grants the step a fresh set of attempts". Attempt 4 succeeds."""
    assert lunaflow("resume", "broken", "--json").json() == {"resumed": "broken"}
    with platform(failed) as p:  # what `lunaflow dev` does on the same folder
        run = p.get("broken")
        assert run.status == "awaiting", run
        intents = [e.data["step_id"] for e in p.journal("broken") if e.kind == "step.intent"]
        assert intents[-1] == "broken/reserve/1/4"


def test_show_a_resumed_run_keeps_every_attempt_before_and_after_the_resume(lunaflow, failed):
    """SPEC 3: the final failure "keeps the journal, and can be resumed; resume grants the
    step a fresh set of attempts". The timeline keeps attempts 1-3 with their errors and
    shows attempt 4 with a new step id."""
    assert lunaflow("resume", "broken").code == 0
    with platform(failed):
        pass
    r = lunaflow("show", "broken")
    assert r.code == 0, r.err
    in_order(
        r.out,
        [
            "attempt 1 failed",
            "step id broken/reserve/1/1",
            "attempt 2 failed",
            "attempt 3 failed",
            "step id broken/reserve/1/3",
            "error: card declined on attempt 3",
            "attempt 4 ok",
            "step id broken/reserve/1/4",
        ],
    )
    assert "resumed" in [row[2] for row in table_rows(r.out)]


def test_show_a_resumed_run_lists_the_resume_before_the_attempt_it_allowed(lunaflow, failed):
    """SPEC 4: "shows one run's journal as a timeline": the resume (journal entry 8) comes
    before attempt 4 (entry 9)."""
    assert lunaflow("resume", "broken").code == 0
    with platform(failed):
        pass
    journal = lunaflow("show", "broken", "--json").json()["journal"]
    resumed = next(e["seq"] for e in journal if e["kind"] == "run.resumed")
    fourth = next(e["seq"] for e in journal if e["data"].get("step_id") == "broken/reserve/1/4")
    assert resumed < fourth
    in_order(lunaflow("show", "broken").out, ["attempt 3 failed", "resumed", "attempt 4 ok"])


def test_resume_of_a_completed_run_is_refused_with_the_reason_on_stderr(lunaflow, failed):
    """SPEC 3: "resume applies to `failed` only"."""
    r = lunaflow("resume", "finished")
    assert r.code == 1
    assert "run 'finished' is completed, so it cannot be resumed" in r.err
    assert r.out == ""
    assert status_of(failed, "finished") == "completed"


def test_resume_of_a_missing_run_is_refused(lunaflow, failed):
    r = lunaflow("resume", "nope")
    assert r.code == 1
    assert "no run 'nope'" in r.err


# --- lunaflow cancel ----------------------------------------------------------------------


def test_cancel_cascades_to_children_and_names_them(lunaflow, data):
    """Seed: "Cancelling a run cancels the runs it spawned"."""
    with platform(data) as p:
        p.start("parent", None, id="par")
        assert p.get("par-child").status == "awaiting"
    r = lunaflow("cancel", "par")
    assert r.code == 0, r.err
    assert "cancelled par and the runs it started: par-child" in r.out
    assert status_of(data, "par") == "cancelled"
    assert status_of(data, "par-child") == "cancelled"


def test_a_run_cancelled_from_the_cli_expires_by_the_projects_retention(lunaflow, data):
    """`lunaflow cancel` ends runs outside any platform: it reads [runs] retention from the
    project (30 days by default here) so the runs it ends expire as others do."""
    with platform(data) as p:
        p.start("parent", None, id="par")
    before = time.time()
    assert lunaflow("cancel", "par").code == 0
    for run_id in ("par", "par-child"):
        expires = lunaflow("show", run_id, "--json").json()["expires_at"]
        assert expires is not None and before + 30 * 24 * HOUR <= expires <= time.time() + 30 * 24 * HOUR


def test_a_cancel_whose_project_cannot_be_read_says_its_runs_are_kept(lunaflow, data, tmp_path):
    """Without the project there is no [runs] retention: the run is kept, and now said to
    be, where the cancel was silent and the run never expired."""
    with platform(data) as p:
        p.start("parent", None, id="par")
    done = lunaflow("cancel", "par", project=tmp_path / "nope")
    assert done.code == 0, done.err
    assert "note: the project cannot be read" in done.err and "a run this command ends is kept" in done.err
    assert lunaflow("show", "par", "--json").json()["expires_at"] is None


def test_cancel_cascades_to_grandchildren(lunaflow, data):
    """SPEC 3: `run:cancel()` "cancels the run and, recursively, the runs it spawned"."""
    with platform(data) as p:
        p.start("grandparent", None, id="gp")
        assert p.get("gp-parent-child").parent_id == "gp-parent"
    r = lunaflow("cancel", "gp")
    assert r.code == 0, r.err
    assert "gp-parent" in r.out
    for run_id in ("gp", "gp-parent", "gp-parent-child"):
        assert status_of(data, run_id) == "cancelled", run_id


def test_cancel_names_every_run_the_cascade_cancelled(lunaflow, data):
    with platform(data) as p:
        p.start("grandparent", None, id="gp")
    r = lunaflow("cancel", "gp", "--json")
    assert r.code == 0, r.err
    named = json.dumps(r.json())
    assert "gp-parent-child" in named


def test_cancel_json_lists_the_children(lunaflow, data):
    with platform(data) as p:
        p.start("parent", None, id="par")
        p.start("order", {"fail_times": 0}, id="solo")
    assert lunaflow("cancel", "par", "--json").json() == {
        "cancelled": "par",
        "children": ["par-child"],
        "already_cancelled": False,
        "newly_cancelled": ["par", "par-child"],
        "cleanup": False,
    }
    assert lunaflow("cancel", "solo", "--json").json() == {
        "cancelled": "solo",
        "children": [],
        "already_cancelled": False,
        "newly_cancelled": ["solo"],
        "cleanup": False,
    }
    # Issue 24.2: a repeat finishes the cascade instead of being refused, and says so.
    assert lunaflow("cancel", "par", "--json").json() == {
        "cancelled": "par",
        "children": ["par-child"],
        "already_cancelled": True,
        "newly_cancelled": [],
        "cleanup": False,
    }
    assert status_of(data, "solo") == "cancelled"


def test_cancel_of_a_failed_run_is_allowed(lunaflow, failed):
    """SPEC 3: "Cancel applies to every state but `completed` and `cancelled`"."""
    r = lunaflow("cancel", "broken")
    assert r.code == 0, r.err
    assert r.out.strip() == "cancelled broken"
    assert status_of(failed, "broken") == "cancelled"


def test_cancel_of_a_completed_run_is_refused(lunaflow, failed):
    r = lunaflow("cancel", "finished")
    assert r.code == 1
    assert "run 'finished' is completed, so it cannot be cancelled" in r.err
    assert status_of(failed, "finished") == "completed"


def test_a_cancelled_run_stays_cancelled_when_the_platform_opens(lunaflow, data):
    with platform(data) as p:
        p.start("order", {"fail_times": 1}, id="o")  # sleeping out a backoff
    assert lunaflow("cancel", "o").code == 0
    with platform(data) as p:
        p.advance("1h")
        assert p.get("o").status == "cancelled"
        assert not any(e.data.get("step_id") == "o/reserve/1/2" for e in p.journal("o"))


# --- lunaflow signal ----------------------------------------------------------------------


@pytest.fixture
def awaiting(data: Path) -> Path:
    with platform(data) as p:
        p.start("order", {"fail_times": 0}, id="live")
        p.start("order", {"fail_times": 0}, id="ended")
        p.signal("ended", "paid", {"by": "ada"})
    return data


def test_signal_to_a_live_run_exits_0_and_the_run_consumes_it(lunaflow, awaiting):
    """SPEC 3: `run:signal` is "true if a live run got it"."""
    r = lunaflow("signal", "live", "paid", '{"by": "bob"}')
    assert r.code == 0, r.err
    assert "signal 'paid' sent to live" in r.out
    with platform(awaiting) as p:
        assert p.get("live").result == {"outcome": "settled", "by": "bob", "reserved_on": 1}


def test_signal_to_an_ended_run_exits_3_and_is_set_aside(lunaflow, awaiting):
    """SPEC 3: `run:signal` is "false if the run has ended (the signal is set aside)"."""
    r = lunaflow("signal", "ended", "paid", '{"by": "bob"}')
    assert r.code == 3
    assert "run ended has ended; signal 'paid' was set aside" in r.out
    sigs = lunaflow("show", "ended", "--json").json()["signals"]
    assert sigs[-1]["payload"] == {"by": "bob"} and sigs[-1]["state"] == "set_aside"


def test_signal_json_says_whether_it_was_delivered(lunaflow, awaiting):
    live = lunaflow("signal", "live", "cancelled", "--json")
    assert live.code == 0
    assert live.json() == {"run": "live", "signal": "cancelled", "delivered": True}
    ended = lunaflow("signal", "ended", "paid", "--json")
    assert ended.code == 3
    assert ended.json() == {"run": "ended", "signal": "paid", "delivered": False}
    # No payload: the signal carries null.
    sent = lunaflow("show", "live", "--json").json()["signals"]
    assert [(s["name"], s["payload"]) for s in sent] == [("cancelled", None)]
    with platform(awaiting) as p:
        assert p.get("live").result == {"outcome": "cancelled"}


def test_signal_with_a_malformed_json_payload_is_bad_usage(lunaflow, awaiting):
    before = lunaflow("show", "live", "--json").json()["signals"]
    r = lunaflow("signal", "live", "paid", "{by: ada}")
    assert r.code == 2
    assert "not valid JSON" in r.err
    assert lunaflow("show", "live", "--json").json()["signals"] == before
    assert status_of(awaiting, "live") == "awaiting"


def test_signal_to_a_missing_run_is_refused(lunaflow, awaiting):
    r = lunaflow("signal", "nope", "paid", '{"by": "bob"}')
    assert r.code == 1
    assert "no run 'nope'" in r.err


def test_signal_with_an_oversized_payload_is_refused(lunaflow, awaiting):
    """SPEC 3: a signal payload is at most 256 KiB encoded; larger is refused."""
    r = lunaflow("signal", "live", "paid", json.dumps({"blob": "x" * (300 * 1024)}))
    assert r.code == 1
    assert "paid" in r.err
    assert lunaflow("show", "live", "--json").json()["signals"] == []


# --- lunaflow start -----------------------------------------------------------------------


def test_start_leaves_the_run_running_for_a_dev_server_to_advance(lunaflow, data, caplog):
    """`lunaflow start` records the run; a platform on the same folder (what `lunaflow
    dev` runs) advances it."""
    r = lunaflow("start", "order", '{"fail_times": 0}', "--id", "o-7")
    assert r.code == 0, r.err
    assert "run o-7 of order is running" in r.out
    assert status_of(data, "o-7") == "running"
    journal = lunaflow("show", "o-7", "--json").json()["journal"]
    assert [e["kind"] for e in journal] == ["run.started"]  # no body ran in the CLI
    with platform(data) as p:
        run = p.get("o-7")
        assert run.status == "awaiting", run
        assert run.current_step == "race ('paid', 'cancelled')"
        assert [log["message"] for log in p.logs] == ["body reserve"]


def test_start_json_gives_the_run(lunaflow, data):
    r = lunaflow("start", "napper", "--id", "nap", "--json")
    assert r.code == 0, r.err
    run = r.json()
    assert (run["id"], run["workflow"], run["status"], run["input"]) == ("nap", "napper", "running", None)
    assert run["parent_id"] is None


def test_start_without_an_id_uses_a_fresh_uuid(lunaflow, data):
    first = lunaflow("start", "napper", "--json").json()["id"]
    second = lunaflow("start", "napper", "--json").json()["id"]
    assert first != second
    assert len(first) == 36 and first.count("-") == 4


def test_start_with_an_existing_id_joins_that_run(lunaflow, data):
    """Seed: "The id is the run's identity, so a retried start joins the run instead of
    making a second one"; SPEC 3: "the input of the second start is ignored"."""
    first = lunaflow("start", "order", '{"fail_times": 0}', "--id", "o-1", "--json")
    again = lunaflow("start", "order", '{"fail_times": 2}', "--id", "o-1", "--json")
    assert again.code == 0, again.err
    assert again.json()["id"] == "o-1"
    assert again.json()["input"] == {"fail_times": 0}
    assert again.json()["created_at"] == first.json()["created_at"]
    assert [r["id"] for r in lunaflow("runs", "--json").json()] == ["o-1"]


def test_start_joins_a_run_the_platform_already_advanced(lunaflow, data):
    with platform(data) as p:
        p.start("order", {"fail_times": 0}, id="o-1")
    r = lunaflow("start", "order", '{"fail_times": 9}', "--id", "o-1", "--json")
    assert r.code == 0, r.err
    assert (r.json()["status"], r.json()["input"]) == ("awaiting", {"fail_times": 0})


def test_start_with_an_id_held_by_another_workflow_is_refused(lunaflow, data):
    """SPEC 3: "An id held by a run of another workflow is refused, naming both workflows"."""
    assert lunaflow("start", "napper", "--id", "x").code == 0
    r = lunaflow("start", "order", "--id", "x")
    assert r.code == 1
    assert "napper" in r.err and "order" in r.err


def test_start_of_an_unknown_workflow_is_refused(lunaflow, data):
    r = lunaflow("start", "no-such-flow", "--id", "x")
    assert r.code == 1
    assert "no workflow 'no-such-flow'" in r.err
    assert lunaflow("runs", "--json").json() == []


def test_start_with_a_bad_run_id_is_refused(lunaflow, data):
    """SPEC 3: "run id must be a non-empty string without '/' (got "a/b")"."""
    r = lunaflow("start", "napper", "--id", "a/b")
    assert r.code == 1
    assert """run id must be a non-empty string without '/' (got "a/b")""" in r.err


def test_start_with_malformed_json_input_is_bad_usage(lunaflow, data):
    r = lunaflow("start", "order", "{fail_times: 1}", "--id", "o")
    assert r.code == 2
    assert "not valid JSON" in r.err


def test_start_without_project_reads_the_current_folder_and_refuses(lunaflow, data, tmp_path, monkeypatch):
    """Start needs the project's code: without --project (and no $LUNAFLOW_PROJECT) it
    reads the current folder, which here holds no scripts, so the start is refused and no
    run is made."""
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    monkeypatch.chdir(empty)
    monkeypatch.delenv("LUNAFLOW_PROJECT", raising=False)
    r = lunaflow("start", "order", "--id", "o", project=None)
    assert r.code == 2  # bad usage: the command line names no project with scripts
    assert "declares no workflow 'order'" in r.err
    with_project = lunaflow("start", "order", "--id", "o")
    assert with_project.code == 0, with_project.err


def test_start_without_project_says_which_project_it_read(lunaflow, data, tmp_path, monkeypatch):
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    monkeypatch.chdir(empty)
    monkeypatch.delenv("LUNAFLOW_PROJECT", raising=False)
    r = lunaflow("start", "order", "--id", "o", project=None)
    assert r.code != 0
    assert "--project" in r.err or str(empty) in r.err


# --- lunaflow secret set ------------------------------------------------------------------


def test_secret_set_adds_increasing_versions(lunaflow, data):
    """SPEC 5: `set_secret` "adds a new version of a secret"."""
    first = lunaflow("secret", "set", "api-key", "one", "--json")
    assert first.code == 0, first.err
    assert first.json() == {"secret": "api-key", "version": 1}
    second = lunaflow("secret", "set", "api-key", "two")
    assert second.code == 0
    assert "secret api-key is now version 2" in second.out
    assert lunaflow("secret", "set", "api-key", "three", "--json").json()["version"] == 3
    assert lunaflow("secret", "set", "other", "x", "--json").json()["version"] == 1
    store = store_of(data)
    try:
        assert store.secret("api-key") == (3, "three")
        assert store.secret("api-key", 1) == (1, "one")
    finally:
        store.close()


def test_a_run_pinned_before_secret_set_keeps_its_version(lunaflow, data):
    """Seed: "`secret "name"` pinned to the version the run first resolved"; SPEC 5: "runs
    already pinned keep theirs"."""
    assert lunaflow("secret", "set", "api-key", "v1", "--json").json()["version"] == 1
    with platform(data) as p:
        p.start("secretive", None, id="early")
        assert p.get("early").status == "awaiting"
    assert lunaflow("secret", "set", "api-key", "v2", "--json").json()["version"] == 2
    with platform(data) as p:
        p.signal("early", "go")
        assert p.get("early").result == {"first": "v1", "second": "v1"}
        p.start("secretive", None, id="late")
        p.signal("late", "go")
        assert p.get("late").result == {"first": "v2", "second": "v2"}


# --- a missing data folder ----------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["runs"],
        ["show", "o1"],
        ["resume", "o1"],
        ["cancel", "o1"],
        ["signal", "o1", "paid", "{}"],
    ],
    ids=lambda a: a[0],
)
def test_a_console_command_on_a_missing_data_folder_is_bad_usage_naming_it(lunaflow, tmp_path, args):
    missing = tmp_path / "nowhere"
    r = lunaflow(*args, data_dir=missing)
    assert r.code == 2
    assert str(missing) in r.err
    assert "no lunaflow data" in r.err
    assert not missing.exists()  # looking did not create it


def test_without_data_the_folder_defaults_to_the_projects_lunaflow_folder(lunaflow, tmp_path):
    """SPEC 5: state lives "under `DIR` (default `PROJECT/.lunaflow/`)"."""
    project = tmp_path / "proj"
    project.mkdir()
    r = lunaflow("runs", project=project, data_dir=None)
    assert r.code == 2
    assert str(project / ".lunaflow") in r.err
