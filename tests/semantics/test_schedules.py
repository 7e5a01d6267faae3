"""Declared schedules on both harnesses: ``advance`` fires each tick as the run
``<schedule>@<tick time>`` (on AWS through the Scheduler schedule's target input and the
worker function), a repeated tick joins its run, the overlap policies, the window, and
"trigger now". The fake clock starts at 2026-01-01T00:00:00Z."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.errors import InvalidInput, LunaflowError

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "schedules"


def ids(p: Any, prefix: str) -> list[str]:
    return sorted(r.id for r in p.runs() if r.id.startswith(prefix + "@"))


def test_a_cron_tick_in_its_time_zone_starts_the_run_named_for_it(harness: Any) -> None:
    with harness(PROJECT) as p:
        p.advance("1d")
        # 03:00 in Paris in January is 02:00 UTC.
        assert ids(p, "nightly") == ["nightly@2026-01-01T02:00:00Z"]
        run = p.get("nightly@2026-01-01T02:00:00Z")
        assert run.status.value == "completed"
        assert run.workflow == "report"
        assert run.result["input"] == {"kind": "nightly"}
        assert run.result["at"] == 1767232800  # the run started at its tick


def test_a_rate_ticks_within_its_window_only(harness: Any) -> None:
    with harness(PROJECT) as p:
        p.advance("3h")
        assert ids(p, "quarter") == [
            "quarter@2026-01-01T00:15:00Z",
            "quarter@2026-01-01T00:30:00Z",
            "quarter@2026-01-01T00:45:00Z",
            "quarter@2026-01-01T01:00:00Z",
        ]


def test_a_repeated_tick_joins_its_run(harness: Any) -> None:
    with harness(PROJECT) as p:
        p.advance("20m")
        first = p.get("quarter@2026-01-01T00:15:00Z")
        schedule = p.platform.worker.schedules["quarter"]
        p._fire(schedule, first_tick := 1767226500000)  # the same tick delivered again
        p.settle()
        assert schedule.run_id(first_tick) == first.id
        assert ids(p, "quarter") == [first.id]
        assert p.get(first.id).created_at == first.created_at


def test_overlap_skip_starts_no_run_while_the_last_one_is_going(harness: Any) -> None:
    with harness(PROJECT) as p:
        p.advance("3h")
        # Ticks at 01:00, 02:00, 03:00; each run sleeps 90 minutes: 02:00 finds 01:00's going.
        assert ids(p, "slow-skip") == ["slow-skip@2026-01-01T01:00:00Z", "slow-skip@2026-01-01T03:00:00Z"]


def test_overlap_cancel_cancels_the_last_run_and_starts(harness: Any) -> None:
    with harness(PROJECT) as p:
        p.advance("3h")
        assert ids(p, "slow-cancel") == [
            "slow-cancel@2026-01-01T01:00:00Z",
            "slow-cancel@2026-01-01T02:00:00Z",
            "slow-cancel@2026-01-01T03:00:00Z",
        ]
        assert p.get("slow-cancel@2026-01-01T01:00:00Z").status.value == "cancelled"
        assert p.get("slow-cancel@2026-01-01T02:00:00Z").status.value == "cancelled"
        assert p.get("slow-cancel@2026-01-01T03:00:00Z").status.value == "sleeping"


def test_overlap_allow_starts_every_tick(harness: Any) -> None:
    with harness(PROJECT) as p:
        p.advance("3h")
        runs = ids(p, "slow-allow")
        assert len(runs) == 3
        assert p.get("slow-allow@2026-01-01T01:00:00Z").status.value == "completed"
        assert p.get("slow-allow@2026-01-01T02:00:00Z").status.value == "sleeping"


def test_trigger_starts_a_tick_now(harness: Any) -> None:
    with harness(PROJECT) as p:
        p.advance("10m")
        run = p.trigger("nightly")
        assert run.id == "nightly@2026-01-01T00:10:00Z"
        assert run.status.value == "completed"
        with pytest.raises(InvalidInput, match="no schedule 'nope'.*it declares: nightly"):
            p.trigger("nope")


def test_a_restart_fires_no_tick_twice(harness: Any) -> None:
    with harness(PROJECT) as p:
        p.advance("30m")
        p.restart()
        p.advance("20m")
        assert ids(p, "quarter") == [
            "quarter@2026-01-01T00:15:00Z",
            "quarter@2026-01-01T00:30:00Z",
            "quarter@2026-01-01T00:45:00Z",
        ]


def test_a_paused_schedule_fires_nothing_until_resumed_and_catches_nothing_up(harness: Any) -> None:
    with harness(PROJECT) as p:
        p.advance("20m")
        p.pause_schedule("quarter")
        p.advance("20m")  # 00:30 passes while paused
        assert ids(p, "quarter") == ["quarter@2026-01-01T00:15:00Z"]
        assert p.trigger("quarter").id == "quarter@2026-01-01T00:40:00Z"  # a trigger still starts
        p.resume_schedule("quarter")
        p.advance("10m")
        assert ids(p, "quarter") == [
            "quarter@2026-01-01T00:15:00Z",
            "quarter@2026-01-01T00:40:00Z",
            "quarter@2026-01-01T00:45:00Z",
        ]
        with pytest.raises(InvalidInput, match="no schedule 'nope'"):
            p.pause_schedule("nope")


def test_a_deploy_that_drops_a_schedule_stops_its_ticks(harness: Any, tmp_path: Path) -> None:
    changed = tmp_path / "changed"
    changed.mkdir()
    text = (PROJECT / "main.lua").read_text(encoding="utf-8")
    kept = "\n".join(line for line in text.splitlines() if not line.startswith('schedule "quarter"'))
    (changed / "main.lua").write_text(kept + "\n", encoding="utf-8")
    with harness(PROJECT) as p:
        p.advance("20m")
        p.deploy(changed)
        p.advance("40m")
        assert ids(p, "quarter") == ["quarter@2026-01-01T00:15:00Z"]


def test_a_schedule_a_deploy_adds_fires_no_tick_from_before_the_deploy(harness: Any, tmp_path: Path) -> None:
    without = tmp_path / "without"
    without.mkdir()
    text = (PROJECT / "main.lua").read_text(encoding="utf-8")
    kept = "\n".join(line for line in text.splitlines() if not line.startswith('schedule "quarter"'))
    (without / "main.lua").write_text(kept + "\n", encoding="utf-8")
    with harness(without) as p:
        p.advance("20m")  # 00:15 passes before "quarter" exists
        p.deploy(PROJECT)
        p.advance("5m")
        assert ids(p, "quarter") == []
        p.advance("10m")
        assert ids(p, "quarter") == ["quarter@2026-01-01T00:30:00Z"]


CLASH = """
workflow "job" (function(wf, input) return "tick" end)
workflow "other" (function(wf, input) return wf:await("x") end)
schedule "a" { every = "1h", workflow = "job" }
schedule "b" { every = "1h", workflow = "job" }
"""


def _clash(tmp_path: Path) -> Path:
    project = tmp_path / "clash"
    project.mkdir()
    (project / "main.lua").write_text(CLASH, encoding="utf-8")
    return project


def test_a_tick_whose_run_id_another_workflow_holds_is_skipped_and_logged(
    harness: Any, tmp_path: Path
) -> None:
    with harness(_clash(tmp_path)) as p:
        p.start("other", None, id="a@2026-01-01T01:00:00Z")
        p.advance("3h")  # neither raises nor leaves a message failing for ever (AWS: strict)
        assert ids(p, "a") == ["a@2026-01-01T01:00:00Z", "a@2026-01-01T02:00:00Z", "a@2026-01-01T03:00:00Z"]
        assert ids(p, "b") == ["b@2026-01-01T01:00:00Z", "b@2026-01-01T02:00:00Z", "b@2026-01-01T03:00:00Z"]
        held = p.get("a@2026-01-01T01:00:00Z")
        assert (held.workflow, held.status.value) == ("other", "awaiting")
        assert all(p.get(r).status.value == "completed" for r in ids(p, "a")[1:] + ids(p, "b"))
        errors = [r["message"] for r in p.logs if r.get("level") == "error"]
        assert len(errors) == 1
        assert errors[0].startswith(
            "schedule 'a': the tick of 2026-01-01T01:00:00Z was skipped: its run id "
            "'a@2026-01-01T01:00:00Z' is held by a run of workflow 'other', so it cannot start workflow 'job'"
        )
        assert "start your own runs under other ids" in errors[0]


@pytest.mark.local_only("on AWS a trigger is a message the worker fires later: its skip is only logged")
def test_a_trigger_whose_run_id_another_workflow_holds_is_refused_to_the_one_triggering(
    harness: Any, tmp_path: Path
) -> None:
    with harness(_clash(tmp_path)) as p:
        p.start("other", None, id="a@2026-01-01T00:00:00Z")
        schedule = p.platform.worker.schedules["a"]
        with pytest.raises(LunaflowError, match="held by a run of workflow 'other'.*under other ids"):
            p.schedule_control.trigger(schedule, 1767225600000)
        assert ids(p, "a") == ["a@2026-01-01T00:00:00Z"]


# The window lies before the machine's real clock (moto's Scheduler, as AWS's, refused such
# a StartDate) and after the fake one's start, 2026-01-01T00:00:00Z.
WINDOWED = """
workflow "job" (function(wf, input) return "tick" end)
schedule "daily" {
  cron = "0 3 * * *", workflow = "job", start_at = "2026-01-02T00:00:00Z", end_at = "2026-01-04T00:00:00Z"
}
"""


def test_a_cron_window_begun_before_the_real_clock_opens_and_ticks_inside_it_only(
    harness: Any, tmp_path: Path
) -> None:
    project = tmp_path / "windowed"
    project.mkdir()
    (project / "main.lua").write_text(WINDOWED, encoding="utf-8")
    with harness(project) as p:
        p.advance("5d")
        assert ids(p, "daily") == ["daily@2026-01-02T03:00:00Z", "daily@2026-01-03T03:00:00Z"]
        schedule = p.platform.worker.schedules["daily"]
        # Ticks outside the window delivered as the platform delivers ticks (on AWS Scheduler,
        # which holds no window, sends them): the worker starts no run for them.
        for before_or_after in (1767236400000, 1767495600000):  # 2026-01-01T03:00Z, 2026-01-04T03:00Z
            p._fire(schedule, before_or_after)
        p.settle()
        assert ids(p, "daily") == ["daily@2026-01-02T03:00:00Z", "daily@2026-01-03T03:00:00Z"]
        assert p.trigger("daily").id == "daily@2026-01-06T00:00:00Z"  # a trigger, whatever the window
