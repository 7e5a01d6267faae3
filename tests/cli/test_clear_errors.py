"""Issue 24 §5: a corrupt data file and a reader that goes away are said in a line, never
with a traceback.

Real processes on real files: a ``lunaflow.sqlite`` overwritten with bytes that are not a
database (and one that keeps SQLite's header but not its pages), and a shell pipe into
``head``, which exits after its first lines.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.store.sqlite import STORE_FILE
from runtime.testing import LocalPlatform
from tests.support.cli import ROOT, cli, worktree_env
from tests.support.devserver import PROJECTS, Servers

CONSOLE = PROJECTS / "cli_console"
GARBAGE = {
    "not-sqlite": os.urandom(8192),
    "sqlite-header-then-noise": b"SQLite format 3\x00" + os.urandom(8192),
}


@pytest.fixture(params=sorted(GARBAGE))
def corrupt(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    (data / STORE_FILE).write_bytes(GARBAGE[request.param])
    return data


def _said_in_a_line(err: str, data: Path) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and "sqlite3." not in err, err
    assert len(lines) == 1, err
    line = " ".join(err.split())  # rich may wrap the line at 80 columns
    assert str(data / STORE_FILE) in line, err
    assert "move" in line and "backup" in line, err  # what to do


@pytest.mark.parametrize("command", [["runs"], ["runs", "--json"], ["show", "run-1"], ["cancel", "run-1"]])
def test_console_commands_on_a_corrupt_store_say_so_in_a_line(corrupt: Path, command: list[str]) -> None:
    """Before: a ``sqlite3.DatabaseError: file is not a database`` traceback, exit 1."""
    done = cli(*command, "-p", str(CONSOLE), "--data", str(corrupt))
    assert done.code != 0, str(done)
    _said_in_a_line(done.err, corrupt)


def test_lunaflow_dev_on_a_corrupt_store_says_so_in_a_line_and_exits(corrupt: Path, tmp_path: Path) -> None:
    s = Servers(tmp_path)
    try:
        server = s.start(CONSOLE, corrupt, wait=False)
        code = server.wait_exit(60)
        assert code is not None and code != 0, server.output_tail()
        _said_in_a_line(server.stderr(), corrupt)
    finally:
        s.close()


# --- a reader that goes away -----------------------------------------------------------------


@pytest.fixture(scope="module")
def many_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Runs enough that their listing is far more than a pipe holds (64 KiB)."""
    data = tmp_path_factory.mktemp("pipe") / "data"
    with LocalPlatform(CONSOLE, data_dir=data) as p:
        for i in range(60):
            p.start("order", {"pad": "x" * 4000, "i": i}, id=f"run-{i:03d}")
    return data


# ``python -m runtime.cli`` and the ``lunaflow`` script pip installs (it calls ``main``).
LAUNCHERS = {
    "module": [sys.executable, "-m", "runtime.cli"],
    "script": [sys.executable, "-c", "import sys; from runtime.cli import main; sys.exit(main())"],
}


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
@pytest.mark.parametrize("flags", [["--json"], []], ids=["json", "table"])
def test_runs_piped_into_head_prints_no_traceback(many_runs: Path, launcher: str, flags: list[str]) -> None:
    """Before: the installed script printed a ``BrokenPipeError`` traceback."""
    argv = [*LAUNCHERS[launcher], "runs", "-p", str(CONSOLE), "--data", str(many_runs), *flags]
    proc = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {shlex.join(argv)} | head -n 3"],
        cwd=ROOT,
        env=worktree_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert len(proc.stdout.splitlines()) == 3, proc.stdout
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == "", proc.stderr
    assert proc.returncode == 0, (proc.returncode, proc.stderr)


def test_check_on_a_corrupt_store_says_so_in_a_line(corrupt: Path) -> None:
    """``check`` opens the store read-only, a path of its own: the same one line, no traceback."""
    done = cli("check", str(CONSOLE), "--data", str(corrupt))
    assert done.code != 0, str(done)
    _said_in_a_line(done.err, corrupt)


@pytest.mark.parametrize(
    "command",
    [["secret", "set", "api-key", "v"], ["schedule", "pause", "nightly"]],
    ids=["secret", "pause"],
)
def test_a_setting_for_a_project_folder_that_is_none_is_refused_and_writes_nothing(
    command: list[str], tmp_path: Path
) -> None:
    """``lunaflow secret set`` (and a schedule's pause) on a mistyped project folder made that
    folder and a data folder inside it, and said the secret was set: no server ever read it."""
    missing = tmp_path / "no-such-project"
    done = cli(*command, "-p", str(missing))
    assert done.code == 2, str(done)
    assert f"project folder {missing} does not exist" in done.err
    assert not missing.exists()


def test_a_secret_set_in_a_data_folder_named_alone_needs_no_project(tmp_path: Path) -> None:
    """--data names where the secret goes; the project (here the current folder, no project)
    is not read."""
    data = tmp_path / "data"
    done = cli("secret", "set", "api-key", "v", "--data", str(data))
    assert done.code == 0, str(done)
    assert (data / STORE_FILE).exists()


def test_a_secret_set_in_a_data_folder_with_no_data_yet_says_so(tmp_path: Path) -> None:
    """Setting a secret before the first ``lunaflow dev`` is fine, and said, so a mistyped
    ``--data`` is seen: the folder it names holds no data yet."""
    data = tmp_path / "fresh"
    first = cli("secret", "set", "api-key", "v", "-p", str(CONSOLE), "--data", str(data))
    assert first.code == 0, str(first)
    assert f"note: {data} holds no lunaflow data yet" in first.err
    again = cli("secret", "set", "api-key", "w", "-p", str(CONSOLE), "--data", str(data))
    assert again.code == 0, str(again)
    assert "no lunaflow data yet" not in again.err
    assert "secret api-key is now version 2" in again.out


@pytest.mark.parametrize("port", ["70000", "-1", "http"])
def test_a_port_out_of_range_is_a_usage_error_before_anything_is_made(port: str, tmp_path: Path) -> None:
    """``--port 70000`` was a traceback from bind() (OverflowError), after the data folder and
    its PostgreSQL files were made."""
    data = tmp_path / "data"
    done = cli("dev", str(CONSOLE), "--data", str(data), f"--port={port}")
    assert done.code == 2, str(done)
    assert "--port takes a whole number from 0 to 65535" in done.err
    assert "Traceback" not in done.err
    assert not data.exists()


@pytest.mark.parametrize(
    "command",
    [
        ["start", "w", "--id", "x"],
        ["schedules"],
        ["schedule", "pause", "nightly"],
    ],
    ids=lambda c: "-".join(c[:2]),
)
def test_a_project_folder_that_does_not_exist_is_bad_usage_for_every_command(
    command: list[str], tmp_path: Path
) -> None:
    """The reference's exit codes: 2 for "a project folder that does not exist". `start`,
    `check`, `schedules` and `schedule` said 1, `dev` and `record` 2."""
    missing = tmp_path / "nope"
    done = cli(*command, "-p", str(missing), "--data", str(tmp_path / "data"))
    assert done.code == 2, str(done)
    assert f"project folder {missing} does not exist" in done.err


def test_check_of_a_project_folder_that_does_not_exist_is_bad_usage(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    done = cli("check", str(missing), "--data", str(tmp_path / "data"))
    assert done.code == 2, str(done)
    assert f"project folder {missing} does not exist" in done.err
