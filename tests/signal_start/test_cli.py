"""`lunaflow start WORKFLOW [JSON] --id ID --signal NAME [--payload JSON]` (issue 28.4), as a
real process on a data folder: what it prints, its exit codes, and what it refuses."""

from __future__ import annotations

import json
from pathlib import Path

from runtime.store.sqlite import STORE_FILE, SQLiteStore
from runtime.testing import LocalPlatform
from tests.support.cli import Done, cli

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "signal_start"


def lunaflow(data: Path, *args: str) -> Done:
    return cli(*args, "-p", str(PROJECT), "--data", str(data))


def signals(data: Path, run_id: str) -> list[tuple[str, object, str]]:
    store = SQLiteStore(data / STORE_FILE)
    try:
        return [(s.name, s.payload, s.state) for s in store.signals(run_id)]
    finally:
        store.close()


def test_start_with_a_signal_writes_the_run_and_its_signal(tmp_path: Path) -> None:
    done = lunaflow(
        tmp_path, "start", "order", '{"n": 3}', "--id", "o1", "--signal", "paid", "--payload", '{"by": "ada"}'
    )
    assert done.code == 0, done
    assert done.out.strip() == (
        f"run o1 of order is running; `lunaflow dev {PROJECT}` advances it; signal 'paid' delivered"
    )
    assert signals(tmp_path, "o1") == [("paid", {"by": "ada"}, "pending")]
    with LocalPlatform(PROJECT, data_dir=tmp_path) as p:
        assert p.get("o1").result == {"outcome": "paid", "by": "ada", "n": 3}


def test_start_with_a_signal_json_says_whether_it_was_delivered(tmp_path: Path) -> None:
    first = lunaflow(tmp_path, "start", "quick", "--id", "q1", "--signal", "go", "--json")
    assert first.code == 0, first
    assert {k: json.loads(first.out)[k] for k in ("id", "status", "signal", "delivered")} == {
        "id": "q1", "status": "running", "signal": "go", "delivered": True,
    }  # fmt: skip
    with LocalPlatform(PROJECT, data_dir=tmp_path) as p:
        assert p.get("q1").status == "completed"
    # The run has ended: the signal is set aside, and the exit code says so, as `signal`'s does.
    again = lunaflow(tmp_path, "start", "quick", "--id", "q1", "--signal", "go", "--json")
    assert again.code == 3, again
    assert json.loads(again.out)["delivered"] is False
    text = lunaflow(tmp_path, "start", "quick", "--id", "q1", "--signal", "go")
    assert (
        text.code == 3
        and text.out.strip() == "run q1 of quick has ended (completed); signal 'go' was set aside"
    )
    assert [s[2] for s in signals(tmp_path, "q1")] == ["set_aside", "set_aside", "set_aside"]


def test_start_refusals_write_nothing(tmp_path: Path) -> None:
    lunaflow(tmp_path, "start", "other", "--id", "x1")
    taken = lunaflow(tmp_path, "start", "order", '{"n": 1}', "--id", "x1", "--signal", "paid")
    assert taken.code == 1 and "held by a run of workflow 'other'" in taken.err, taken
    lone = lunaflow(tmp_path, "start", "order", "--id", "o2", "--payload", "{}")
    assert lone.code == 2 and "--payload is the payload of a signal sent with the start" in lone.err, lone
    empty = lunaflow(tmp_path, "start", "order", "--id", "o3", "--signal", "")
    assert empty.code == 1 and "a signal name must be a non-empty string" in empty.err, empty
    # A payload the platform refuses (past the nesting a value may have; one too big for
    # the limit cannot be passed as a single argument at all, the semantics suite has it).
    deep = "[" * 150 + "]" * 150
    over = lunaflow(tmp_path, "start", "order", "--id", "o4", "--signal", "paid", "--payload", deep)
    assert over.code == 1 and "the payload of signal 'paid' for run 'o4'" in over.err, over
    store = SQLiteStore(tmp_path / STORE_FILE)
    try:
        assert [r.id for r in store.list_runs()] == ["x1"] and store.signals("x1") == []
    finally:
        store.close()


def test_a_start_of_an_id_that_exists_says_it_joined_and_the_input_was_not_used(tmp_path: Path) -> None:
    """As the console says it. The CLI said `run q2 of quick is completed; lunaflow dev ...
    advances it`: no word of the join, and an ended run is advanced by nothing."""
    first = lunaflow(tmp_path, "start", "quick", '{"n": 1}', "--id", "q2", "--json")
    assert first.code == 0 and json.loads(first.out)["joined"] is False, first
    with LocalPlatform(PROJECT, data_dir=tmp_path) as p:
        assert p.get("q2").status == "completed"
    again = lunaflow(tmp_path, "start", "quick", '{"n": 2}', "--id", "q2")
    assert again.code == 0, again
    assert again.out.strip() == (
        "run q2 already existed, so the start joined it (the input given was not used); "
        "run q2 of quick is completed"
    )
    assert json.loads(lunaflow(tmp_path, "start", "quick", "--id", "q2", "--json").out)["joined"] is True
