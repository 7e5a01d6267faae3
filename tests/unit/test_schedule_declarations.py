"""``schedule "name" {...}`` at load: every bad declaration refuses the project with what,
the rule and the fix (naming the script and line), and ``lunaflow check`` refuses it too."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime import cli
from runtime.errors import ProjectLoadError
from runtime.testing import LocalPlatform

WORKFLOW = 'workflow "report" (function(wf, input) return input end)\n'


def project(tmp_path: Path, *lines: str, name: str = "main.lua") -> Path:
    folder = tmp_path / "proj"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(WORKFLOW + "\n".join(lines) + "\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    ("declaration", "message"),
    [
        (
            'schedule "n" { cron = "0 3 * * *", timezone = "Mars/Olympus", workflow = "report" }',
            "time zone 'Mars/Olympus' does not exist; name an IANA time zone",
        ),
        ('schedule "n" { cron = "0 0 30 2 *", workflow = "report" }', "never fires"),
        ('schedule "n" { cron = "0 3 * *", workflow = "report" }', "it has 4 fields, not 5"),
        ('schedule "n" { every = "90s", workflow = "report" }', "every must be a whole number of minutes"),
        ('schedule "n" { every = "15m", cron = "* * * * *", workflow = "report" }', "exactly one of cron"),
        ('schedule "n" { every = "15m" }', 'needs workflow = "<name of a workflow>"'),
        ('schedule "n" { every = "15m", workflow = "report", overlap = "queue" }', "overlap must be one of"),
        ('schedule "n" { every = "15m", workflow = "report", colour = 1 }', "unknown option 'colour'"),
        (
            'schedule "n" { every = "15m", workflow = "report", start_at = "tomorrow" }',
            "start_at must be a UTC",
        ),
        (
            'schedule "n" { cron = "0 3 * * *", workflow = "report", '
            'start_at = "2026-01-01T04:00:00Z", end_at = "2026-01-02T02:00:00Z" }',
            "no tick falls inside its window",
        ),
        ('schedule "a@b" { every = "15m", workflow = "report" }', "may not hold '@'"),
    ],
)
def test_a_bad_schedule_refuses_the_load_at_its_line(tmp_path: Path, declaration: str, message: str) -> None:
    folder = project(tmp_path, declaration)
    with pytest.raises(ProjectLoadError) as e:
        LocalPlatform(folder)
    assert message in str(e.value)
    assert "main.lua:2:" in str(e.value)


def test_two_schedules_with_one_name_are_refused(tmp_path: Path) -> None:
    folder = project(tmp_path, 'schedule "n" { every = "15m", workflow = "report" }')
    (folder / "other.lua").write_text(
        'schedule "n" { every = "1h", workflow = "report" }\n', encoding="utf-8"
    )
    with pytest.raises(ProjectLoadError, match="schedule 'n' is declared in both other.lua and main.lua"):
        LocalPlatform(folder)


def test_a_schedule_of_an_unknown_workflow_is_refused(tmp_path: Path) -> None:
    folder = project(tmp_path, 'schedule "n" { every = "15m", workflow = "reprot" }')
    with pytest.raises(ProjectLoadError) as e:
        LocalPlatform(folder)
    assert "schedule 'n' (main.lua:2) starts workflow 'reprot', which the project does not declare" in str(
        e.value
    )
    assert "it declares: report" in str(e.value)


def test_a_workflow_declared_in_a_later_script_is_known(tmp_path: Path) -> None:
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "a.lua").write_text('schedule "n" { every = "15m", workflow = "late" }\n', encoding="utf-8")
    (folder / "b.lua").write_text('workflow "late" (function(wf) return 1 end)\n', encoding="utf-8")
    with LocalPlatform(folder) as p:
        assert sorted(p.platform.worker.schedules) == ["n"]


def test_lunaflow_check_refuses_a_bad_schedule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = project(tmp_path, 'schedule "n" { cron = "0 0 31 4 *", workflow = "report" }')
    code = cli.main(["check", str(folder), "--data", str(tmp_path / "none")])
    err = capsys.readouterr().err
    assert code == 1
    assert "never fires" in err
