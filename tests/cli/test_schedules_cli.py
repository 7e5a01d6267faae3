"""``lunaflow schedules`` and ``lunaflow schedule pause|resume|trigger NAME`` on a data folder:
the list (state, next tick, last run), the pause a running ``lunaflow dev`` (and
``LocalPlatform``) honours, and a trigger that starts the tick's run for the server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime import cli
from runtime.platform.schedules import PauseFile
from runtime.store.sqlite import STORE_FILE, SQLiteStore
from runtime.testing import LocalPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "schedules"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(list(args))
    got = capsys.readouterr()
    return code, got.out, got.err


def test_the_list_shows_each_schedule_with_its_next_tick_and_last_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    with LocalPlatform(PROJECT, data_dir=data) as p:
        p.advance("20m")
    code, out, _ = run(capsys, "schedules", "-p", str(PROJECT), "--data", str(data), "--json")
    assert code == 0
    rows = {r["schedule"]: r for r in json.loads(out)}
    assert sorted(rows) == ["nightly", "quarter", "slow-allow", "slow-cancel", "slow-skip"]
    assert rows["nightly"]["when"] == "0 3 * * *" and rows["nightly"]["timezone"] == "Europe/Paris"
    assert rows["nightly"]["last_run"] is None
    assert rows["quarter"]["last_run"] == {"id": "quarter@2026-01-01T00:15:00Z", "status": "completed"}
    assert rows["quarter"]["next_tick"] is None  # its window (2026-01-01 00:00 to 01:00) is over
    assert rows["nightly"]["next_tick"].endswith(("T02:00:00Z", "T01:00:00Z"))  # 03:00 in Paris
    code, out, _ = run(capsys, "schedules", "-p", str(PROJECT), "--data", str(data))
    assert code == 0 and "5 schedule(s)" in out and "quarter@2026-01-01T00:15:00Z" in out


def test_pause_and_resume_write_the_data_folder_and_the_harness_honours_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    code, out, _ = run(capsys, "schedule", "pause", "quarter", "-p", str(PROJECT), "--data", str(data))
    assert code == 0 and "schedule quarter is paused" in out
    assert PauseFile(data).paused() == {"quarter"}
    with LocalPlatform(PROJECT, data_dir=data) as p:
        p.advance("20m")
        assert [r.id for r in p.runs() if r.id.startswith("quarter@")] == []
    code, out, _ = run(capsys, "schedules", "-p", str(PROJECT), "--data", str(data), "--json")
    assert {r["schedule"]: r["paused"] for r in json.loads(out)}["quarter"] is True
    code, out, _ = run(capsys, "schedule", "resume", "quarter", "-p", str(PROJECT), "--data", str(data))
    assert code == 0 and PauseFile(data).paused() == set()


def test_trigger_starts_the_tick_run_for_the_server_to_advance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    code, out, _ = run(
        capsys, "schedule", "trigger", "nightly", "-p", str(PROJECT), "--data", str(data), "--json"
    )
    assert code == 0
    run_id = json.loads(out)["run_id"]
    assert run_id.startswith("nightly@")
    store = SQLiteStore(data / STORE_FILE)
    try:
        found = store.get_run(run_id)
        assert found is not None and found.workflow == "report"
    finally:
        store.close()


def test_an_unknown_schedule_is_refused_with_the_names_declared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "schedule", "pause", "nope", "-p", str(PROJECT), "--data", str(tmp_path))
    assert code == 1
    assert "no schedule 'nope' is declared in this project" in err and "nightly" in err
