"""Issue 17, point 3: a misspelt ``wf`` method names the nearest one, at the user's line,
instead of Lua's "attempt to call a nil value (method 'awiat')"."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.testing import LocalPlatform


@pytest.mark.parametrize(
    "call, suggestion",
    [
        ('wf:awiat("go")', "wf:await"),
        ('wf:stpe("a", function() end)', "wf:step"),
        ('wf:sleeep("1s")', "wf:sleep"),
    ],
)
def test_a_misspelt_wf_method_suggests_the_nearest(
    make_project: Callable[[dict[str, str]], Path], tmp_path: Path, call: str, suggestion: str
) -> None:
    project = make_project({"main.lua": f'workflow "typo" (function(wf, input)\n    {call}\nend)\n'})
    with LocalPlatform(project, data_dir=tmp_path / "d") as p:
        p.start("typo", {}, id="r-typo")
        run = p.get("r-typo")
    assert run.status == "failed"
    assert run.error is not None
    assert run.error.startswith("main.lua:2: "), run.error
    assert f"did you mean {suggestion}?" in run.error, run.error


def test_a_name_far_from_every_method_lists_them(
    make_project: Callable[[dict[str, str]], Path], tmp_path: Path
) -> None:
    project = make_project({"main.lua": 'workflow "typo" (function(wf, input)\n    wf:frobnicate()\nend)\n'})
    with LocalPlatform(project, data_dir=tmp_path / "d") as p:
        p.start("typo", {}, id="r-typo")
        run = p.get("r-typo")
    assert run.error is not None and "frobnicate" in run.error, run.error
    for method in ("step", "sleep", "await", "race", "all", "version"):
        assert method in run.error, run.error


def test_reading_wf_fields_still_works(
    make_project: Callable[[dict[str, str]], Path], tmp_path: Path
) -> None:
    """wf.id and wf.workflow read as before; a method can be passed around as a value."""
    project = make_project(
        {
            "main.lua": 'workflow "ok" (function(wf, input)\n'
            "    local sleep = wf.sleep\n"
            '    return { id = wf.id, workflow = wf.workflow, has_sleep = type(sleep) == "function" }\n'
            "end)\n"
        }
    )
    with LocalPlatform(project, data_dir=tmp_path / "d") as p:
        p.start("ok", {}, id="r-ok")
        assert p.get("r-ok").result == {"id": "r-ok", "workflow": "ok", "has_sleep": True}
