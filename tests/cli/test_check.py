"""`lunaflow check PROJECT`: replay every in-flight run's journal against the current code,
running no effects, and list the runs that would diverge.

SPEC 5: "`lunaflow check PROJECT [--aws]`: replays every in-flight run's journal against
the current code, running no effects, and lists each run that would diverge."
Seed (Gotchas): "Renaming a step breaks runs already in flight. Replay compares the
journal against the code it re-executes, and a mismatch fails the run with journal
divergence: expected step, code reached step 'other' rather than guessing."
SPEC 3: "`journal divergence: expected step 'settle', code reached step 'other'` (for
waits: `expected await 'paid', code reached sleep`)".
runtime/cli/project_commands.py (check): exit status 1 when a run would diverge.

The data folder holds runs of tests/projects/cli_check in every in-flight state: awaiting
a signal, sleeping out a step's backoff, failed, sleeping, and two started by `lunaflow
start` that no platform has advanced yet; plus one completed run, which is not in flight.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from runtime import cli
from runtime.store.sqlite import STORE_FILE, SQLiteStore
from runtime.testing import LocalPlatform
from tests.support import databases
from tests.support.cli import copy_kept, in_process

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "cli_check"
IN_FLIGHT = {"awaiting", "backoff", "failed", "nap", "sec", "fresh", "fresh-sec"}
RENAMED = "journal divergence: expected step 'reserve', code reached step 'hold'"


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def lunaflow(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Result]]:
    """``lunaflow(*args)`` runs ``cli.main`` in-process and returns exit code and output;
    the CLI's rich consoles are swapped for wide ones so table rows are not wrapped."""
    monkeypatch.setattr(cli.output, "out", Console(highlight=False, soft_wrap=True, width=400))
    monkeypatch.setattr(cli.output, "err", Console(stderr=True, highlight=False, soft_wrap=True, width=400))

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = cli.main(list(args))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    yield run


@pytest.fixture(scope="module")
def ran_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The data folder of runs in every in-flight state, made once: each test gets a copy
    (``data``), as some change theirs."""
    folder = tmp_path_factory.mktemp("check") / "data"
    with LocalPlatform(PROJECT, data_dir=folder) as p:
        p.set_secret("api-key", "v1")
        p.start("order", {"fail_times": 3}, id="failed")  # backoff 1h, then 2h, then final
        p.advance("1h")
        p.advance("2h")
        p.start("order", {"fail_times": 0}, id="done")
        p.signal("done", "paid", {"by": "ada"})
        p.start("order", {"fail_times": 0}, id="awaiting")
        p.start("napper", None, id="nap")
        p.start("secretive", None, id="sec")
        p.start("order", {"fail_times": 1}, id="backoff")
        status = {r.id: r.status for r in p.runs()}
    assert status == {
        "failed": "failed",
        "done": "completed",
        "awaiting": "awaiting",
        "nap": "sleeping",
        "sec": "awaiting",
        "backoff": "sleeping",
    }
    for workflow, run_id in (("order", "fresh"), ("secretive", "fresh-sec")):
        done = in_process(
            ["start", workflow, "--id", run_id, "--data", str(folder), "--project", str(PROJECT)]
        )
        assert done.code == 0, done
    return folder


@pytest.fixture
def data(ran_data: Path, tmp_path: Path) -> Path:
    """A copy of ``ran_data``, its server stopped: owners and modes kept, as the cluster's
    server runs as another user when the tests run as root."""
    return copy_kept(ran_data, tmp_path / "data")


def copy_project(tmp_path: Path, name: str, edit: Callable[[str], str] | None = None) -> Path:
    """A copy of cli_check, optionally with main.lua edited."""
    target = tmp_path / name
    shutil.copytree(PROJECT, target)
    if edit is not None:
        script = target / "main.lua"
        text = script.read_text(encoding="utf-8")
        edited = edit(text)
        assert edited != text
        script.write_text(edited, encoding="utf-8")
    return target


def rename_reserve(text: str) -> str:
    assert text.count('wf:step("reserve"') == 1
    return text.replace('wf:step("reserve"', 'wf:step("hold"')


def sleep_before_await(text: str) -> str:
    anchor = '    local paid = wf:await("paid"'
    assert text.count(anchor) == 1
    return text.replace(anchor, '    wf:sleep("1m")\n' + anchor)


def drop_napper(text: str) -> str:
    start = text.index('workflow "napper"')
    end = text.index("\nend)\n", start) + len("\nend)\n")
    return text[:start] + text[end:]


def verdict_rows(out: str) -> dict[str, list[str]]:
    rows = [
        [c.strip() for c in line.strip().strip("│").split("│")]
        for line in out.splitlines()
        if line.startswith("│")
    ]
    return {row[0]: row for row in rows}


def snapshot(folder: Path) -> dict[str, Any]:
    """Every file under the data folder with a hash of its bytes, and the rows of the
    project's database on whichever engine holds it."""
    return {"files": databases.files(folder), "orders": databases.contents(folder, "orders")}


def journals(folder: Path) -> dict[str, list[dict[str, Any]]]:
    store = SQLiteStore(folder / STORE_FILE)
    try:
        return {r.id: [e.as_dict() for e in store.journal(r.id)] for r in store.list_runs()}
    finally:
        store.close()


# --- unchanged code -----------------------------------------------------------------------


def test_check_of_the_unchanged_project_finds_no_divergence(lunaflow, data):
    """Acceptance: `lunaflow check` "finds nothing when the code is unchanged"."""
    r = lunaflow("check", str(PROJECT), "--data", str(data))
    assert r.code == 0, r.out + r.err
    assert "7 in-flight run(s), 0 would diverge" in r.out
    rows = verdict_rows(r.out)
    assert set(rows) == IN_FLIGHT  # the completed run is not in flight
    assert not any("divergence" in " ".join(row) for row in rows.values())


def test_check_of_an_unchanged_copy_finds_no_divergence(lunaflow, data, tmp_path):
    copy = copy_project(tmp_path, "copy")
    r = lunaflow("check", str(copy), "--data", str(data), "--json")
    assert r.code == 0, r.out + r.err
    verdicts = {v["run_id"]: v for v in r.json()}
    assert set(verdicts) == IN_FLIGHT
    assert [v for v in verdicts.values() if v["diverges"]] == []
    assert {v["run_id"]: v["status"] for v in verdicts.values()} == {
        "awaiting": "awaiting",
        "backoff": "sleeping",
        "failed": "failed",
        "nap": "sleeping",
        "sec": "awaiting",
        "fresh": "running",
        "fresh-sec": "running",
    }
    # A failed run replays to its recorded failure; that is not a divergence.
    assert (
        verdicts["failed"]["message"] == "step 'reserve' failed after 3 attempts: out of stock on attempt 3"
    )


# --- changed code -------------------------------------------------------------------------


def test_check_finds_a_renamed_step_in_every_run_that_recorded_it(lunaflow, data, tmp_path):
    """Acceptance: "`lunaflow check` finds a renamed step in a test project with in-flight
    runs"; the message is SPEC 3's, for each affected run."""
    renamed = copy_project(tmp_path, "renamed", rename_reserve)
    r = lunaflow("check", str(renamed), "--data", str(data))
    assert r.code == 1, r.out + r.err
    assert "7 in-flight run(s), 3 would diverge" in r.out
    rows = verdict_rows(r.out)
    for run_id in ("awaiting", "backoff", "failed"):
        assert RENAMED in rows[run_id], rows[run_id]
    # Runs that never recorded 'reserve' replay cleanly: the napper and secretive runs,
    # and the started-but-unadvanced order run, which would simply run 'hold' first.
    for run_id in ("nap", "sec", "fresh", "fresh-sec"):
        assert not any("divergence" in cell for cell in rows[run_id]), rows[run_id]
    assert "would run step 'hold' next" in rows["fresh"][3]
    assert r.out.count(RENAMED) == 3


def test_check_json_gives_each_runs_verdict(lunaflow, data, tmp_path):
    renamed = copy_project(tmp_path, "renamed", rename_reserve)
    r = lunaflow("check", str(renamed), "--data", str(data), "--json")
    assert r.code == 1
    verdicts = {v["run_id"]: v for v in r.json()}
    assert set(verdicts) == IN_FLIGHT
    assert verdicts["backoff"] == {
        "run_id": "backoff",
        "workflow": "order",
        "status": "sleeping",
        "diverges": True,
        "message": RENAMED,
        "newer": False,  # written by a newer lunaflow: not replayed (runtime.platform.check)
    }
    assert sorted(k for k, v in verdicts.items() if v["diverges"]) == ["awaiting", "backoff", "failed"]
    assert all(v["message"] == RENAMED for v in verdicts.values() if v["diverges"])


def test_check_finds_a_sleep_added_before_an_await(lunaflow, data, tmp_path):
    """SPEC 3: "for waits: `expected await 'paid', code reached sleep`". Only the run that
    recorded the await diverges; the others have not reached that point."""
    changed = copy_project(tmp_path, "slept", sleep_before_await)
    r = lunaflow("check", str(changed), "--data", str(data), "--json")
    assert r.code == 1, r.out + r.err
    diverging = {v["run_id"]: v["message"] for v in r.json() if v["diverges"]}
    assert diverging == {"awaiting": "journal divergence: expected await 'paid', code reached sleep"}


def test_check_lists_a_run_whose_workflow_is_no_longer_declared(lunaflow, data, tmp_path):
    changed = copy_project(tmp_path, "no-napper", drop_napper)
    r = lunaflow("check", str(changed), "--data", str(data), "--json")
    assert r.code == 1, r.out + r.err
    diverging = {v["run_id"]: v["message"] for v in r.json() if v["diverges"]}
    assert list(diverging) == ["nap"]
    assert "napper" in diverging["nap"]


# --- no effects ---------------------------------------------------------------------------


@pytest.mark.parametrize("code", ["unchanged", "renamed"])
def test_check_runs_no_effects_and_writes_nothing(lunaflow, data, tmp_path, caplog, code):
    """SPEC 5: check replays "running no effects". No step body runs (each would log
    "body ran", put a kv entry and write a database row), and every file of the data folder
    — journal store, services, the database — is byte-identical afterwards. The unadvanced
    run 'fresh' is the sharpest case: the code's next command is a step that would run."""
    project = PROJECT if code == "unchanged" else copy_project(tmp_path, "renamed", rename_reserve)
    before, before_journals = snapshot(data), journals(data)
    assert {"lunaflow.sqlite", "services.sqlite"} <= set(before["files"])
    assert ("awaiting", "reserved") in before["orders"]["orders"], before["orders"]
    caplog.set_level(logging.INFO, logger="lunaflow.lua")
    caplog.clear()
    r = lunaflow("check", str(project), "--data", str(data))
    assert r.code == (0 if code == "unchanged" else 1), r.out + r.err
    assert [rec.getMessage() for rec in caplog.records if "body ran" in rec.getMessage()] == []
    assert snapshot(data) == before
    assert journals(data) == before_journals
    store = SQLiteStore(data / STORE_FILE)
    try:
        assert store.pinned_secret("fresh-sec", "api-key") is None  # resolved read-only, not pinned
        assert store.pinned_secret("sec", "api-key") == 1
        assert store.timer("backoff") is not None and store.timer("nap") is not None
    finally:
        store.close()
    # The probe works: a real platform on the folder runs the body that check did not.
    with LocalPlatform(PROJECT, data_dir=data) as p:
        assert p.get("fresh").status == "awaiting"
        ran = [log["fields"]["step_id"] for log in p.logs if log["message"] == "body ran"]
        assert "fresh/reserve/1/1" in ran
    assert any("body ran" in rec.getMessage() for rec in caplog.records)


def test_runs_checked_as_diverging_are_left_as_they_were(lunaflow, data, tmp_path):
    """Check only reports: a run it finds diverging is not failed by it, and carries on
    under the code it was written for."""
    renamed = copy_project(tmp_path, "renamed", rename_reserve)
    assert lunaflow("check", str(renamed), "--data", str(data)).code == 1
    with LocalPlatform(PROJECT, data_dir=data) as p:
        assert p.get("awaiting").status == "awaiting"
        p.signal("awaiting", "paid", {"by": "ada"})
        assert p.get("awaiting").result == {"reserved_on": 1, "paid": {"by": "ada"}}


# --- usage --------------------------------------------------------------------------------


def test_check_of_a_missing_data_folder_is_bad_usage_naming_it(lunaflow, tmp_path):
    missing = tmp_path / "nowhere"
    r = lunaflow("check", str(PROJECT), "--data", str(missing))
    assert r.code == 2
    assert str(missing) in r.err
    assert not missing.exists()


def test_check_of_a_project_that_fails_to_load_is_refused(lunaflow, data, tmp_path):
    """SPEC 1: loading "is refused, with an error naming the script and line"."""
    broken = copy_project(tmp_path, "broken", lambda text: text + "\nlocal x = (\n")
    r = lunaflow("check", str(broken), "--data", str(data))
    assert r.code == 1
    assert "main.lua:" in r.err
    assert r.out == ""


def test_check_without_data_or_goldens_still_refuses_a_project_that_fails_to_load(lunaflow, tmp_path):
    """Before, with no data folder and no golden journals the check said "no runs to check"
    (exit 2) without loading the code, so a script that cannot load passed a CI check made
    before any run existed. It loads the code (in a throwaway store) and refuses it."""
    broken = copy_project(tmp_path, "broken", lambda text: text + "\nlocal x = (\n")
    missing = tmp_path / "nowhere"
    r = lunaflow("check", str(broken), "--data", str(missing))
    assert r.code == 1, r
    assert "main.lua:" in r.err and "no lunaflow data" not in r.err
    assert not missing.exists() and not (broken / ".lunaflow").exists()
    fine = lunaflow("check", str(PROJECT), "--data", str(missing))
    assert fine.code == 2 and "the project loads" in fine.err, fine
    assert not missing.exists()


def test_check_with_no_runs_in_flight_finds_nothing(lunaflow, tmp_path):
    folder = tmp_path / "data"
    with LocalPlatform(PROJECT, data_dir=folder) as p:
        p.start("order", {"fail_times": 0}, id="done")
        p.signal("done", "paid")
    r = lunaflow("check", str(PROJECT), "--data", str(folder), "--json")
    assert r.code == 0, r.err
    assert r.json() == []
