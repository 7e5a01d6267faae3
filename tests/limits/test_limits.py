"""Per-run bounds fail clearly and lose nothing already journaled."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import runtime.platform.runs
from runtime.core.journal import Entry, Kind
from runtime.core.replay import Fail, Replay, StepCmd, ValueCmd, WaitCmd
from runtime.errors import InvalidInput
from runtime.testing import LocalPlatform

MakeProject = Callable[[dict[str, str]], Path]


def started() -> list[Entry]:
    return [Entry(1, Kind.STARTED, "w", {"format": 1, "input": None}, 0.0)]


@pytest.mark.parametrize(
    "command",
    [StepCmd("s", 1, 0, None), WaitCmd("await", ("x",), None), ValueCmd("os.time")],
    ids=["step", "wait", "value"],
)
def test_a_run_at_its_journal_limit_fails_naming_the_limit_and_the_way_out(command: object) -> None:
    replay = Replay("long", started(), 0, max_entries=1)
    if isinstance(command, StepCmd):
        decision = replay.step(command)
    elif isinstance(command, WaitCmd):
        decision = replay.wait(command)
    else:
        assert isinstance(command, ValueCmd)
        decision = replay.value(command)
    assert isinstance(decision, Fail)
    assert decision.error.startswith("run 'long' reached the limit of 1 journal entries in generation 1;")
    assert "wf:continue_as_new(state)" in decision.error
    assert replay.take_unsaved() == []


def test_a_run_replaying_a_journal_at_the_limit_still_replays(tmp_path: Path) -> None:
    entries = started() + [
        Entry(2, Kind.STEP_INTENT, "s", {"pass": 1, "attempt": 1, "step_id": "long/s/1/1"}, 0.0),
        Entry(3, Kind.STEP_RESULT, "s", {"n": 0, "values": []}, 0.0),
    ]
    replay = Replay("long", entries, 0, max_entries=3)
    assert not isinstance(replay.step(StepCmd("s", 1, 0, None)), Fail)


def test_a_signal_beyond_the_backlog_limit_is_refused_and_the_run_keeps_the_rest(
    make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime.platform.runs, "MAX_SIGNAL_BACKLOG", 3)
    project = make_project({"main.lua": 'workflow "w" (function(wf) return wf:await("go") end)'})
    with LocalPlatform(project) as p:
        p.start("w", id="r")
        for i in range(3):
            assert p.signal("r", "noise", i)
        with pytest.raises(InvalidInput, match="already has 3 unconsumed signals"):
            p.signal("r", "noise", 3)
        assert len(p.platform.store.pending_signals("r")) == 3
        p.platform.store.add_signal("r", "go", "ok", p.now)  # below the API: the run still works
        p.settle()
        assert p.get("r").result == "ok"


def test_the_cpu_time_limit_comes_from_lunaflow_toml_and_stops_slow_instructions(
    make_project: MakeProject,
) -> None:
    """What instructions cannot bound (each one a copy of megabytes) stops at the project's
    CPU time limit; the next call of the same state runs as usual."""
    project = make_project(
        {
            "lunaflow.toml": "[limits]\ncpu_seconds = 0.2\n",
            "main.lua": """
workflow "slow" (function(wf)
    return wf:step("s", function()
        local s = string.rep("x", 5000000)
        for i = 1, 1e9 do local t = s:upper() end
    end)
end)
workflow "ok" (function(wf) return wf:step("s", function() return 1 end) end)
""",
        }
    )
    with LocalPlatform(project) as p:
        run = p.start("slow")
        assert run.status == "failed"
        assert "call stopped: it used more than 0.2 s of CPU time" in (run.error or "")
        assert "raise limits.cpu_seconds in lunaflow.toml" in (run.error or "")
        assert p.start("ok").result == 1


@pytest.mark.parametrize("value", ["0", "-1", '"fast"', "true"])
def test_a_cpu_time_limit_that_is_not_a_positive_number_refuses_the_project(
    make_project: MakeProject, value: str
) -> None:
    from runtime.errors import ProjectLoadError

    project = make_project(
        {"lunaflow.toml": f"[limits]\ncpu_seconds = {value}\n", "main.lua": 'workflow "w" (function() end)'}
    )
    with pytest.raises(ProjectLoadError, match=r"limits\.cpu_seconds must be a number of seconds above 0"):
        LocalPlatform(project)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        *(
            (name, value)
            for name in ("memory_mb", "instructions")
            for value in ("0", "-1", "1.5", '"abc"', "true")
        ),
        ("memory_mb", '"\u00b2"'),  # a digit to str.isdigit, not to int()
        ("memory_mb", "1048577"),  # a MiB past a TiB
        ("memory_mb", "17592186044416"),  # 2**44 MiB: lupa crashed
        ("instructions", "4611686018427387905"),
    ],
)
def test_a_memory_or_instruction_limit_that_is_not_a_whole_number_in_range_refuses_the_project(
    make_project: MakeProject, name: str, value: str
) -> None:
    """``int()`` alone took 1.5 as 1 and "abc" as a crash with a traceback, a memory bound of
    0 refused every script as out of memory, and one of 2**44 MiB crashed lupa."""
    from runtime.errors import ProjectLoadError

    project = make_project(
        {"lunaflow.toml": f"[limits]\n{name} = {value}\n", "main.lua": 'workflow "w" (function() end)'}
    )
    with pytest.raises(
        ProjectLoadError, match=rf"limits\.{name} must be a whole number from 1 to [0-9,]+ \(got "
    ):
        LocalPlatform(project)


@pytest.mark.parametrize(("value", "mib"), [('"512"', 512), ("1e3", 1000), ("1048576", 1048576)])
def test_a_memory_limit_written_as_a_string_or_a_whole_float_is_read_as_its_number(
    make_project: MakeProject, value: str, mib: int
) -> None:
    """``int()`` took "512", and a code snapshot may hold it so."""
    from runtime.engine.project import ProjectSource

    project = make_project(
        {"lunaflow.toml": f"[limits]\nmemory_mb = {value}\n", "main.lua": 'workflow "w" (function() end)'}
    )
    assert ProjectSource.read(project).limits.memory_bytes == mib * 2**20
    with LocalPlatform(project) as p:
        assert p.start("w").status == "completed"
