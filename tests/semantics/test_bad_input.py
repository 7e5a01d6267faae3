"""Acceptance: bad input never corrupts a run. A refused call leaves the journal as it
was and the run resumable: after a deploy of fixed code, resume completes it (SPEC 3:
"Anything else is refused", "Resume after a fixing deploy replays with the new code")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.core.journal import Kind
from runtime.errors import InvalidInput, ProjectLoadError
from runtime.testing import LocalPlatform

PROJECTS = Path(__file__).resolve().parents[1] / "projects"
BROKEN = PROJECTS / "spec_bad_input"
FIXED = PROJECTS / "spec_bad_input_fixed"
LIMIT = 256 * 1024

# Refused before the engine records anything: the message names the bad value.
COMMAND_REFUSALS = {
    "bad-sleep": '"soon"',
    "bad-await-timeout": '"forever"',
    "bad-race-timeout": '"1 hour"',
    "bad-retries": "three",
    "bad-backoff": '"fast"',
    "bad-timeout": '"30 seconds"',
}
# Refused inside a step body: the attempt is journaled as failed, its value never.
BODY_REFUSALS = {
    "fn-result": "function",
    "big-result": str(LIMIT),
    "bad-child-id": "run id must be a non-empty string without '/' (got \"a/b\")",
    "big-signal": str(LIMIT),
}


@pytest.fixture
def p(harness: Any, tmp_path: Path):
    with harness(BROKEN, data_dir=tmp_path) as plat:
        plat.start("sink", {}, id="sink-1")
        yield plat


def reach_the_refused_call(p: LocalPlatform, workflow: str):
    """Start the run, snapshot its journal while it waits for "go", then let it reach the
    refused call. Returns (journal before, journal after)."""
    run = p.start(workflow, {}, id="r1")
    assert run.status == "awaiting", run.error
    before = p.journal("r1")
    p.signal("r1", "go", {})
    return before, p.journal("r1")


@pytest.mark.parametrize("workflow", [*COMMAND_REFUSALS, *BODY_REFUSALS])
def test_a_refused_call_fails_the_run_naming_the_bad_value(p: LocalPlatform, workflow: str) -> None:
    """SPEC 3: "Anything else is refused with the bad value in the message"."""
    reach_the_refused_call(p, workflow)
    run = p.get("r1")
    assert run.status == "failed"
    detail = {**COMMAND_REFUSALS, **BODY_REFUSALS}[workflow]
    assert detail in run.error, run.error


@pytest.mark.parametrize("workflow", list(COMMAND_REFUSALS))
def test_a_refused_command_records_nothing(p: LocalPlatform, workflow: str) -> None:
    """Bad input never corrupts a run: a refused wait or step option leaves the journal as
    it was — the only new entry is the "go" signal the run consumed on its way there."""
    before, after = reach_the_refused_call(p, workflow)
    assert after[: len(before)] == before
    new = after[len(before) :]
    assert [(e.kind, e.name) for e in new] == [(Kind.WAIT_DONE, "await")]
    assert new[0].data["signal"] == "go"


@pytest.mark.parametrize("workflow", list(BODY_REFUSALS))
def test_a_refused_step_value_records_only_the_failed_attempt(p: LocalPlatform, workflow: str) -> None:
    """Bad input never corrupts a run: a refused step value is never recorded — the
    journal keeps what it had, plus the attempt's intent and its failure."""
    before, after = reach_the_refused_call(p, workflow)
    assert after[: len(before)] == before
    new = after[len(before) :]
    assert [(e.kind, e.name) for e in new] == [
        (Kind.WAIT_DONE, "await"),
        (Kind.STEP_INTENT, "b"),
        (Kind.STEP_FAILED, "b"),
    ]
    assert new[2].data["final"] is True
    # The refused effect did not happen elsewhere either.
    assert {r.id for r in p.runs()} == {"sink-1", "r1"}
    assert p.get("sink-1").status == "awaiting"
    assert [e.kind for e in p.journal("sink-1")] == [Kind.STARTED, Kind.WAIT]


@pytest.mark.parametrize("workflow", [*COMMAND_REFUSALS, *BODY_REFUSALS])
def test_a_run_failed_by_bad_input_survives_restart_and_resume_of_unchanged_code(
    p: LocalPlatform, workflow: str
) -> None:
    """Bad input never corrupts a run: after a restart the failed run reads back the same,
    and resuming it on the same code refuses the same call again without harm."""
    reach_the_refused_call(p, workflow)
    failed = p.get("r1")
    journal = p.journal("r1")
    p.restart()
    assert p.get("r1").status == "failed"
    assert p.get("r1").error == failed.error
    assert p.journal("r1") == journal
    p.resume("r1")
    again = p.get("r1")
    assert again.status == "failed"
    assert again.error == failed.error
    assert p.journal("r1")[: len(journal)] == journal
    assert not any(e.kind == Kind.STEP_RESULT and e.name == "b" for e in p.journal("r1"))


@pytest.mark.parametrize("workflow", [*COMMAND_REFUSALS, *BODY_REFUSALS])
def test_a_run_failed_by_bad_input_completes_after_a_fixing_deploy_and_resume(
    p: LocalPlatform, workflow: str
) -> None:
    """SPEC 3: "Resume after a fixing deploy replays with the new code" — the journal the
    refused call left replays cleanly and the run completes."""
    _, failed_journal = reach_the_refused_call(p, workflow)
    p.deploy(FIXED)
    p.resume("r1")
    p.advance("1m")
    run = p.get("r1")
    assert run.status == "completed", run.error
    assert run.result == "done"
    journal = p.journal("r1")
    assert journal[: len(failed_journal)] == failed_journal
    # Step "a" ran once: its recorded result was replayed, not re-run.
    assert len([e for e in journal if e.kind == Kind.STEP_INTENT and e.name == "a"]) == 1
    if workflow == "big-signal":
        assert p.get("sink-1").result == {"got": "small"}
    if workflow == "bad-child-id":
        assert p.get("a-b").parent_id == "r1"


# --- refused calls from outside the run -------------------------------------------------


@pytest.mark.parametrize("bad_id", ["a/b", "", "x" * 201, "new\nline"])
def test_a_bad_run_id_from_python_changes_no_run(p: LocalPlatform, bad_id: str) -> None:
    """SPEC 3: "Anything else is refused: `run id must be a non-empty string without '/'
    (got "a/b")`" — and nothing else changes."""
    journal = p.journal("sink-1")
    with pytest.raises(InvalidInput):
        p.signal(bad_id, "data", "x")
    with pytest.raises(InvalidInput):
        p.start("sink", {}, id=bad_id)
    assert [r.id for r in p.runs()] == ["sink-1"]
    assert p.journal("sink-1") == journal
    p.signal("sink-1", "data", "fine")
    assert p.get("sink-1").result == {"got": "fine"}


def test_an_oversized_signal_payload_is_not_buffered(p: LocalPlatform) -> None:
    """SPEC 3: "larger is refused with the size and the limit. Same limits for ... signal
    payloads" — a refused signal is not kept for a later wait."""
    journal = p.journal("sink-1")
    with pytest.raises(InvalidInput):
        p.signal("sink-1", "data", "x" * LIMIT)
    assert p.journal("sink-1") == journal
    assert p.get("sink-1").status == "awaiting"
    p.signal("sink-1", "data", "fine")
    assert p.get("sink-1").result == {"got": "fine"}


def test_a_refused_project_deploy_leaves_runs_on_the_old_code(p: LocalPlatform, tmp_path: Path) -> None:
    """SPEC 1: "Loading is refused ... when a script fails to parse" — a refused deploy
    changes nothing, and runs go on under the code they had."""
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "main.lua").write_text('workflow "sink" (function(wf) wf:await("data") end\n', encoding="utf-8")
    journal = p.journal("sink-1")
    with pytest.raises(ProjectLoadError):
        p.deploy(broken)
    assert p.journal("sink-1") == journal
    p.signal("sink-1", "data", "fine")
    assert p.get("sink-1").result == {"got": "fine"}
