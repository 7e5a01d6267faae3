"""`lunaflow deploy PROJECT`: check in-flight runs against the new code before `cdk deploy`.

Issue: "A test shows a renamed step caught before deploy."
Seed (Gotchas): "Renaming a step breaks runs already in flight."
cli.py, cmd_deploy: "Check in-flight runs against the new code, then `npx cdk deploy`; refuse
on divergence"; `--data DIR` checks a local data folder instead of the deployed stack,
`--dry-run` prints the deploy command instead of running it, `--force` deploys anyway.

Every test here passes --data and --dry-run: nothing reaches AWS or runs npx. The data folder
holds runs of tests/projects/tools_deploy_v1: order-1 parked at await 'paid' after step
'reserve', and order-2 completed (not in flight). tools_deploy_v2 renames 'reserve' to
'hold'; tools_deploy_v3 adds a step after the await (a compatible change).
(wf:version, the way to change code under runs in flight, is tested in
tests/unit/test_versioning.py.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.testing import LocalPlatform

ROOT = Path(__file__).resolve().parents[2]
PROJECTS = ROOT / "tests" / "projects"
V1 = PROJECTS / "tools_deploy_v1"  # the code the runs were started on
V2 = PROJECTS / "tools_deploy_v2"  # step 'reserve' renamed to 'hold'
V3 = PROJECTS / "tools_deploy_v3"  # a step added after the await
RENAMED = "journal divergence: expected step 'reserve', code reached step 'hold'"
TIMEOUT_S = 60


def lunaflow(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a real process, run from outside the repository."""
    env = {k: v for k, v in os.environ.items() if k != "LUNAFLOW_PROJECT"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["COLUMNS"] = "300"  # rich reads it: keep table rows on one line
    return subprocess.run(
        [sys.executable, "-m", "runtime.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    with LocalPlatform(V1, data_dir=folder) as p:
        assert p.start("order", {"item": "tea"}, id="order-1").status == "awaiting"
        p.start("order", {"item": "tea"}, id="order-2")
        p.signal("order-2", "paid", {"by": "ada"})
        assert p.get("order-2").status == "completed"
    return folder


def row_of(out: str, run_id: str) -> str:
    rows = [line for line in out.splitlines() if f" {run_id} " in line]
    assert len(rows) == 1, out
    return rows[0]


def test_a_renamed_step_under_a_run_in_flight_refuses_the_deploy(tmp_path: Path, data: Path) -> None:
    """Issue: "a renamed step caught before deploy": exit 1, the diverging run listed with
    the divergence, and no deploy command."""
    done = lunaflow(tmp_path, "deploy", str(V2), "--data", str(data), "--dry-run")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 in-flight run(s), 1 would diverge" in done.stdout
    assert RENAMED in row_of(done.stdout, "order-1")
    assert "order-2" not in done.stdout, "a completed run is not in flight"
    assert "lunaflow deploy: refused" in done.stderr
    assert "--force" in done.stderr and 'wf:version("change-id")' in done.stderr
    assert "would run" not in done.stdout


def test_a_refused_deploy_leaves_the_runs_in_flight_as_they_were(tmp_path: Path, data: Path) -> None:
    """SPEC 5: the check "replays every in-flight run's journal against the current code,
    running no effects": after a refused deploy, the run carries on under the old code and
    the step's effect ran once."""
    with LocalPlatform(V1, data_dir=data) as p:
        before = p.journal("order-1")
    assert lunaflow(tmp_path, "deploy", str(V2), "--data", str(data), "--dry-run").returncode == 1
    with LocalPlatform(V1, data_dir=data) as p:
        assert p.journal("order-1") == before
        assert p.get("order-1").status == "awaiting"
        assert p.signal("order-1", "paid", {"by": "ada"})
        assert p.get("order-1").result == {"paid": True}
        # Stock("tea") was taken by order-1 and order-2 only: the check took none.
        assert p.start("order", {"item": "tea"}, id="order-3").status == "awaiting"
        assert p.journal("order-3")[2].data["values"] == [3]


def test_unchanged_code_deploys(tmp_path: Path, data: Path) -> None:
    """Exit 0 and the deploy command, `npx cdk deploy -c project=PROJECT`, when the runs in
    flight replay cleanly."""
    done = lunaflow(tmp_path, "deploy", str(V1), "--data", str(data), "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 in-flight run(s), 0 would diverge" in done.stdout
    assert "replays cleanly" in row_of(done.stdout, "order-1")
    assert done.stdout.splitlines()[-1] == f"would run: npx cdk deploy -c project={V1}"
    assert done.stderr == ""


def test_a_compatible_change_deploys(tmp_path: Path, data: Path) -> None:
    """Only a change that breaks replay is refused: a step added after the wait the runs are
    parked on is not."""
    done = lunaflow(tmp_path, "deploy", str(V3), "--data", str(data), "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == f"would run: npx cdk deploy -c project={V3}"


def test_force_deploys_despite_the_divergence_and_still_lists_it(tmp_path: Path, data: Path) -> None:
    """cli.py: "--force: deploy even if in-flight runs would diverge"."""
    done = lunaflow(tmp_path, "deploy", str(V2), "--data", str(data), "--dry-run", "--force")
    assert done.returncode == 0, done.stdout + done.stderr
    assert RENAMED in row_of(done.stdout, "order-1")
    # The stack's own gate would refuse the same deploy, so --force reaches it too.
    assert done.stdout.splitlines()[-1] == f"would run: npx cdk deploy -c project={V2} -c force=true"


def test_the_stack_name_is_passed_to_cdk(tmp_path: Path, data: Path) -> None:
    done = lunaflow(tmp_path, "deploy", str(V1), "--data", str(data), "--dry-run", "--stack", "shop-prod")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == f"would run: npx cdk deploy -c project={V1} -c stack=shop-prod"
