"""The `lunaflow` command as a real process: exit codes, stdout and stderr end to end.

runtime/cli/__init__.py: "Exit codes: 0 done; 1 refused or failed (the reason on stderr; for
``check``, a run would diverge); 2 bad usage; 3 ``signal`` reached an ended run and was set
aside." SPEC 4: each console command has `--json`.

Each test runs ``python -m runtime.cli`` from a folder outside the repository, on a data
folder a LocalPlatform filled and closed first.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runtime.testing import LocalPlatform

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = ROOT / "tests" / "projects" / "cli_console"
CHECK = ROOT / "tests" / "projects" / "cli_check"
TIMEOUT_S = 60  # a bound, so a hung CLI fails the test instead of hanging CI


@dataclass
class Done:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    folder = tmp_path / "cwd"
    folder.mkdir()
    return folder


def lunaflow(cwd: Path, *args: str) -> Done:
    env = {k: v for k, v in os.environ.items() if k != "LUNAFLOW_PROJECT"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["COLUMNS"] = "300"  # rich reads it: keep table rows on one line
    proc = subprocess.run(
        [sys.executable, "-m", "runtime.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    return Done(proc.returncode, proc.stdout, proc.stderr)


def test_signal_exit_codes_end_to_end(tmp_path, cwd):
    """0 for a live run, 3 for an ended run (set aside), 2 for a malformed payload, 1 for a
    missing run; the reason for 1 and 2 on stderr."""
    data = tmp_path / "data"
    with LocalPlatform(CONSOLE, data_dir=data) as p:
        p.start("order", {"fail_times": 0}, id="live")
        p.start("order", {"fail_times": 0}, id="ended")
        p.signal("ended", "paid", {"by": "ada"})
    where = ("--data", str(data))

    live = lunaflow(cwd, "signal", "live", "paid", '{"by": "bob"}', *where)
    assert live.code == 0, live.err
    assert "signal 'paid' sent to live" in live.out

    ended = lunaflow(cwd, "signal", "ended", "paid", '{"by": "bob"}', "--json", *where)
    assert ended.code == 3, ended.err
    assert ended.json() == {"run": "ended", "signal": "paid", "delivered": False}

    malformed = lunaflow(cwd, "signal", "live", "paid", "{by: bob}", *where)
    assert malformed.code == 2
    assert "not valid JSON" in malformed.err
    assert malformed.out == ""

    missing = lunaflow(cwd, "signal", "nope", "paid", *where)
    assert missing.code == 1
    assert "no run 'nope'" in missing.err
    assert missing.out == ""


def test_start_resume_and_runs_end_to_end(tmp_path, cwd):
    data = tmp_path / "data"
    where = ("--data", str(data), "--project", str(CONSOLE))
    started = lunaflow(cwd, "start", "order", '{"fail_times": 3}', "--id", "o", "--json", *where)
    assert started.code == 0, started.err
    assert (started.json()["id"], started.json()["status"]) == ("o", "running")

    with LocalPlatform(CONSOLE, data_dir=data) as p:  # what `lunaflow dev` would do
        p.advance("5s")
        p.advance("10s")
        assert p.get("o").status == "failed"

    failed = lunaflow(cwd, "runs", "--status", "failed", "--json", *where)
    assert failed.code == 0, failed.err
    assert [r["id"] for r in failed.json()] == ["o"]

    resumed = lunaflow(cwd, "resume", "o", *where)
    assert resumed.code == 0, resumed.err
    assert [r["status"] for r in lunaflow(cwd, "runs", "--json", *where).json()] == ["running"]

    again = lunaflow(cwd, "resume", "o", *where)
    assert again.code == 1
    assert "run 'o' is running, so it cannot be resumed" in again.err

    unknown = lunaflow(cwd, "start", "no-such-flow", *where)
    assert unknown.code == 1
    assert "no workflow 'no-such-flow'" in unknown.err


def test_check_exit_codes_end_to_end(tmp_path, cwd):
    """Exit 0 when no in-flight run would diverge; 1 and the divergence message for each
    affected run when a step was renamed."""
    data = tmp_path / "data"
    with LocalPlatform(CHECK, data_dir=data) as p:
        p.start("order", {"fail_times": 0}, id="a")
        p.start("order", {"fail_times": 1}, id="b")
        p.start("napper", None, id="c")

    clean = lunaflow(cwd, "check", str(CHECK), "--data", str(data))
    assert clean.code == 0, clean.out + clean.err
    assert "3 in-flight run(s), 0 would diverge" in clean.out

    renamed = tmp_path / "renamed"
    shutil.copytree(CHECK, renamed)
    script = renamed / "main.lua"
    script.write_text(
        script.read_text(encoding="utf-8").replace('wf:step("reserve"', 'wf:step("hold"'), encoding="utf-8"
    )
    diverging = lunaflow(cwd, "check", str(renamed), "--data", str(data))
    assert diverging.code == 1, diverging.out + diverging.err
    message = "journal divergence: expected step 'reserve', code reached step 'hold'"
    lines = [line for line in diverging.out.splitlines() if message in line]
    assert sorted(line.strip("│ ").split()[0] for line in lines) == ["a", "b"]

    as_json = lunaflow(cwd, "check", str(renamed), "--data", str(data), "--json")
    assert as_json.code == 1
    assert sorted(v["run_id"] for v in as_json.json() if v["diverges"]) == ["a", "b"]


def test_a_missing_data_folder_is_bad_usage_naming_the_folder(tmp_path, cwd):
    missing = tmp_path / "nowhere"
    for args in (("runs",), ("show", "x"), ("check", str(CHECK))):
        done = lunaflow(cwd, *args, "--data", str(missing))
        assert done.code == 2, (args, done.err)
        assert str(missing) in done.err, args
    assert not missing.exists()


def test_bad_command_lines_are_usage_errors(cwd):
    assert lunaflow(cwd).code == 2
    assert lunaflow(cwd, "frobnicate").code == 2
    assert lunaflow(cwd, "show").code == 2  # RUN_ID missing
    version = lunaflow(cwd, "--version")
    assert version.code == 0
    assert version.out.startswith("lunaflow ")
