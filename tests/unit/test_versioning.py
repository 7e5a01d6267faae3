"""wf:version: changing code under runs in flight without breaking their replay."""

from __future__ import annotations

from pathlib import Path

from runtime.testing import LocalPlatform

PROJECTS = Path(__file__).resolve().parent.parent / "projects"


def test_runs_started_before_a_change_finish_on_the_old_path_and_new_runs_take_the_new_one(
    tmp_path: Path,
) -> None:
    with LocalPlatform(PROJECTS / "version_v1", data_dir=tmp_path) as p:
        p.start("w", id="before")
        p.deploy(PROJECTS / "version_v2")
        p.start("w", id="after")
        p.signal("before", "go")
        p.signal("after", "go")
        assert p.get("before").result == "old"
        assert p.get("after").result == "new"
        # Replays agree with what happened, in a cold process too.
        p.restart()
        assert p.get("before").result == "old" and p.get("after").result == "new"


def test_the_changes_a_run_knows_are_recorded_when_it_starts(tmp_path: Path) -> None:
    with LocalPlatform(PROJECTS / "version_v2", data_dir=tmp_path) as p:
        p.start("w", id="r")
        assert p.journal("r")[0].data["changes"] == ["new-ending"]


def test_a_run_started_before_the_change_replays_without_divergence_after_a_crash(tmp_path: Path) -> None:
    with LocalPlatform(PROJECTS / "version_v1", data_dir=tmp_path, cache_size=0) as p:
        p.start("w", id="before")
        p.deploy(PROJECTS / "version_v2")
        p.restart()
        p.signal("before", "go")
        run = p.get("before")
        assert run.status == "completed" and run.error is None and run.result == "old"
