"""The seed's "Gotchas", through LocalPlatform.

- "retries = 3 is three attempts in total, not one plus three."
- "Steps do not nest. One effect per step; a wf:step inside a step body is an error."
- "Renaming a step breaks runs already in flight. Replay compares the journal against the
  code it re-executes, and a mismatch fails the run with journal divergence: expected
  step, code reached step 'other' rather than guessing."
- "One script per project declares a given workflow. A second script publishing the same
  name is refused; reach it with workflows."

``Effect(wf.id):did(label)`` is an object stand-in recording every effect.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import ProjectLoadError
from runtime.testing import LocalPlatform

PROJECTS = Path(__file__).resolve().parent.parent / "projects"

NEST = "steps do not nest: step 'inner' was called inside step 'outer'"
RENAMED = "journal divergence: expected step 'settle', code reached step 'other'"
REWAITED = "journal divergence: expected await 'paid', code reached sleep"
DUPLICATE = (
    "workflow 'settle-sale' is declared in both sale.lua and other.lua; one script per "
    'project declares a given workflow — reach it elsewhere with workflows "settle-sale"'
)


class Effects:
    def __init__(self) -> None:
        self.labels: list[str] = []

    def __call__(self, cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        self.labels.append(args[0])
        return [args[0]]


@pytest.fixture
def effects() -> Effects:
    return Effects()


@pytest.fixture
def platform(harness: Any) -> Any:
    """platform(project, tmp_path, effects): a platform of the harness under test."""

    def make(project: str, tmp_path: Path, effects: Effects) -> LocalPlatform:
        return harness(PROJECTS / project, data_dir=tmp_path / "data", objects=effects)  # type: ignore[no-any-return]

    return make


# --- retries = 3 -----------------------------------------------------------------------


def test_retries_three_is_three_attempts_in_total(platform: Any, tmp_path: Path, effects: Effects) -> None:
    """ "retries = 3 is three attempts in total, not one plus three.\""""
    with platform("seed_gotchas", tmp_path, effects) as p:
        p.start("three", None, id="t-1")
        p.advance("365d")
        assert effects.labels == ["flaky", "flaky", "flaky"]
        assert p.get("t-1").error == "step 'flaky' failed after 3 attempts: still broken"


# --- steps do not nest -----------------------------------------------------------------


def test_nested_step_is_an_error_with_the_reference_message(
    platform: Any, tmp_path: Path, effects: Effects
) -> None:
    """ "a wf:step inside a step body is an error"; SPEC 3: `steps do not nest: step
    'inner' was called inside step 'outer'`. The inner body never runs."""
    with platform("seed_gotchas", tmp_path, effects) as p:
        run = p.start("nest-caught", None, id="n-1")
        assert run.status == "completed"
        assert run.result["ok"] is False
        assert re.fullmatch(r"(main\.lua:\d+: )?" + re.escape(NEST), run.result["err"]), run.result["err"]
        assert "inner" not in effects.labels


def test_nested_step_fails_the_outer_attempt(platform: Any, tmp_path: Path, effects: Effects) -> None:
    """Uncaught, the nesting error fails the outer step's attempt, and so the run; the
    inner body and the rest of the outer body never run."""
    with platform("seed_gotchas", tmp_path, effects) as p:
        run = p.start("nest", None, id="n-1")
        assert run.status == "failed"
        assert run.error is not None and run.error.startswith("step 'outer' failed after 1 attempts: ")
        assert run.error.endswith(NEST)
        assert effects.labels == ["outer"]
        assert [e.name for e in p.journal("n-1") if e.kind == "step.intent"] == ["outer"]


# --- renaming a step breaks runs in flight --------------------------------------------


def test_renamed_step_fails_the_run_with_journal_divergence(
    platform: Any, tmp_path: Path, effects: Effects
) -> None:
    """ "Renaming a step breaks runs already in flight ... a mismatch fails the run with
    journal divergence: expected step, code reached step 'other' rather than guessing"."""
    with platform("seed_rename_v1", tmp_path, effects) as p:
        p.start("rename", None, id="sale-1")
        before = [(e.seq, e.kind, e.name) for e in p.journal("sale-1")]
        p.deploy(PROJECTS / "seed_rename_v2")
        assert p.get("sale-1").status == "awaiting"  # the deploy alone wakes nothing
        p.signal("sale-1", "go", "now")
        run = p.get("sale-1")
        assert run.status == "failed"
        assert run.error == RENAMED
        # Rather than guessing: the renamed body never ran, and nothing was journaled.
        assert effects.labels == ["settle-v1"]
        assert [(e.seq, e.kind, e.name) for e in p.journal("sale-1")] == before


def test_changed_wait_fails_the_run_with_journal_divergence(
    platform: Any, tmp_path: Path, effects: Effects
) -> None:
    """SPEC 3, the wait form: `journal divergence: expected await 'paid', code reached
    sleep` — here woken by the wait's own timeout."""
    with platform("seed_rename_v1", tmp_path, effects) as p:
        p.start("waiter", None, id="w-1")
        p.deploy(PROJECTS / "seed_rename_v2")
        p.advance("72h")
        run = p.get("w-1")
        assert run.status == "failed"
        assert run.error == REWAITED
        assert effects.labels == []


def test_changed_wait_diverges_when_woken_by_a_signal(
    platform: Any, tmp_path: Path, effects: Effects
) -> None:
    """The same divergence when a signal wakes the run."""
    with platform("seed_rename_v1", tmp_path, effects) as p:
        p.start("waiter", None, id="w-1")
        p.deploy(PROJECTS / "seed_rename_v2")
        p.signal("w-1", "paid", {"by": "ada"})
        assert p.get("w-1").error == REWAITED


def test_divergence_is_found_after_restart_too(platform: Any, tmp_path: Path, effects: Effects) -> None:
    """A restarted platform on renamed code finds the same divergence."""
    with platform("seed_rename_v1", tmp_path, effects) as p:
        p.start("rename", None, id="sale-1")
    with platform("seed_rename_v2", tmp_path, effects) as p:
        p.signal("sale-1", "go", None)
        assert p.get("sale-1").error == RENAMED


def test_resume_after_a_fixing_deploy_replays_with_the_new_code(
    platform: Any, tmp_path: Path, effects: Effects
) -> None:
    """SPEC 3: "Resume after a fixing deploy replays with the new code": the recorded
    step keeps its result, the code after it is the fixed version's, and the signal that
    woke the divergent run is still there to be consumed."""
    with platform("seed_rename_v1", tmp_path, effects) as p:
        p.start("rename", None, id="sale-1")
        p.deploy(PROJECTS / "seed_rename_v2")
        p.signal("sale-1", "go", "now")
        assert p.get("sale-1").status == "failed"
        p.deploy(PROJECTS / "seed_rename_v3")
        assert p.get("sale-1").status == "failed"
        p.resume("sale-1")
        run = p.get("sale-1")
        assert run.status == "completed"
        assert run.result == {"version": 3, "go": "now"}
        assert effects.labels == ["settle-v1", "audit-v3"]


def test_resume_after_fixing_a_changed_wait(platform: Any, tmp_path: Path, effects: Effects) -> None:
    """The wait form, fixed and resumed: the timed-out await replays as timed out."""
    with platform("seed_rename_v1", tmp_path, effects) as p:
        p.start("waiter", None, id="w-1")
        p.deploy(PROJECTS / "seed_rename_v2")
        p.signal("w-1", "paid", {"by": "ada"})
        p.deploy(PROJECTS / "seed_rename_v3")
        p.resume("w-1")
        run = p.get("w-1")
        assert run.status == "completed"
        assert run.result == {"version": 3, "paid": {"by": "ada"}}
        assert effects.labels == ["record-v3"]


def test_resume_without_a_fix_diverges_again(platform: Any, tmp_path: Path, effects: Effects) -> None:
    """Resume does not guess either: on the same renamed code the run fails again."""
    with platform("seed_rename_v1", tmp_path, effects) as p:
        p.start("rename", None, id="sale-1")
        p.deploy(PROJECTS / "seed_rename_v2")
        p.signal("sale-1", "go", None)
        p.resume("sale-1")
        run = p.get("sale-1")
        assert run.status == "failed"
        assert run.error == RENAMED
        assert effects.labels == ["settle-v1"]


def test_new_runs_use_the_renamed_code(platform: Any, tmp_path: Path, effects: Effects) -> None:
    """Only runs already in flight break: a run started after the deploy is fine."""
    with platform("seed_rename_v1", tmp_path, effects) as p:
        p.deploy(PROJECTS / "seed_rename_v2")
        p.start("rename", None, id="sale-2")
        p.signal("sale-2", "go", 1)
        assert p.get("sale-2").result == {"version": 2, "go": 1}


# --- one script per project declares a given workflow --------------------------------


def test_second_script_declaring_a_workflow_is_refused_with_the_reference_message(
    harness: Any,
    tmp_path: Path,
) -> None:
    """ "A second script publishing the same name is refused"; SPEC 1: `workflow
    'settle-sale' is declared in both sale.lua and other.lua; one script per project
    declares a given workflow — reach it elsewhere with workflows "settle-sale"`."""
    with pytest.raises(ProjectLoadError) as refused:
        harness(PROJECTS / "seed_dup", data_dir=tmp_path / "data")
    assert DUPLICATE in str(refused.value)


def test_second_script_declaring_a_workflow_is_refused(harness: Any, tmp_path: Path) -> None:
    """The refusal names the workflow, both scripts, the rule and the fix, whatever order
    the scripts are named in (the exact text is the test above)."""
    with pytest.raises(ProjectLoadError) as refused:
        harness(PROJECTS / "seed_dup", data_dir=tmp_path / "data")
    message = str(refused.value)
    both = re.search(r"workflow 'settle-sale' is declared in both (\S+) and (\S+); ", message)
    assert both is not None, message
    assert {both.group(1), both.group(2)} == {"sale.lua", "other.lua"}
    assert message.endswith(
        '; one script per project declares a given workflow — reach it elsewhere with workflows "settle-sale"'
    )


def test_deploying_a_project_with_a_duplicate_is_refused(
    platform: Any, tmp_path: Path, effects: Effects
) -> None:
    """A refused deploy changes nothing: the running code keeps serving."""
    with platform("seed_rename_v1", tmp_path, effects) as p:
        p.start("rename", None, id="sale-1")
        with pytest.raises(ProjectLoadError) as refused:
            p.deploy(PROJECTS / "seed_dup")
        assert "is declared in both" in str(refused.value)
        p.signal("sale-1", "go", 1)
        assert p.get("sale-1").result == {"version": 1, "go": 1}


def test_workflows_reaches_a_workflow_declared_in_another_script(harness: Any, tmp_path: Path) -> None:
    """ "reach it with workflows": other.lua starts, signals and reads a run of the
    workflow sale.lua declares."""
    with harness(PROJECTS / "seed_reach", data_dir=tmp_path / "data") as p:
        started = p.fetch("POST", "/start", body=json.dumps({"id": "lot-42"}))
        assert (started.status_code, started.body) == (200, "sale-lot-42")
        run = p.get("sale-lot-42")
        assert (run.workflow, run.status, run.input) == ("settle-sale", "awaiting", {"id": "lot-42"})
        paid = p.fetch("POST", "/pay", body=json.dumps({"id": "lot-42", "user": "ada"}))
        assert paid.body == "true"
        status = json.loads(p.fetch("POST", "/status", body=json.dumps({"id": "lot-42"})).body)
        assert status == {
            "status": "completed",
            "result": {"outcome": "settled", "by": "ada", "lot": "lot-42"},
        }
