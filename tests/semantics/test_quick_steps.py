"""Steps whose timeout fits a request's budget, started and signalled through the project's
fetch handler: on AWS the request that signals the run runs such a step itself (issue 31,
tests/aws/test_eager.py pins where); the outcome is the same on both harnesses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_eager"


@pytest.fixture
def p(harness: Any, tmp_path: Path) -> Iterator[Any]:
    with harness(PROJECT, data_dir=tmp_path / "data") as platform:
        yield platform


def signalled(p: Any, workflow: str, run_id: str, payload: Any) -> Any:
    assert p.fetch("POST", f"/start/{workflow}/{run_id}", json.dumps({})).status_code == 201
    assert p.fetch("POST", f"/signal/{workflow}/{run_id}/go", json.dumps(payload)).status_code == 202
    return p.get(run_id)


def test_a_quick_step_after_a_signal_completes_the_run(p: Any) -> None:
    run = signalled(p, "quick", "q-1", {"n": 4})
    assert (run.status, run.result) == ("completed", {"n": 5})
    kinds = [str(e.kind) for e in p.journal("q-1")]
    assert kinds == ["run.started", "wait", "wait.done", "step.intent", "step.result", "run.completed"]


def test_a_quick_step_then_one_with_no_timeout_each_run_once(p: Any) -> None:
    run = signalled(p, "mixed", "m-1", {"n": 3})
    assert (run.status, run.result) == ("completed", {"a": 3, "b": 30})
    assert [e.name for e in p.journal("m-1") if str(e.kind) == "step.intent"] == ["a", "b"]


def test_a_quick_step_that_never_ends_fails_at_its_timeout(p: Any) -> None:
    run = signalled(p, "endless", "e-1", None)
    assert run.status == "failed"
    assert run.error == "step 'spin' failed after 1 attempts: step 'spin' timed out after 200ms"
