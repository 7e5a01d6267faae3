"""Issue 17, point 3: ``lunaflow dev`` refuses in one line what it cannot serve: a port in
use, a project folder that does not exist, a folder holding no scripts."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from tests.support.cli import cli, worktree_env
from tests.support.devserver import PROJECTS, Servers

EVENTS = PROJECTS / "events"


def test_port_in_use_is_one_line_naming_the_port_and_the_fix(tmp_path: Path) -> None:
    """``lunaflow dev --port P`` with P taken exits 1 with no traceback: one line that names
    the port and the fix (--port)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        d = cli("dev", str(EVENTS), "--data", str(tmp_path / "d"), "--port", str(port), timeout=30)
    assert d.code == 1, str(d)
    assert "Traceback" not in d.err, str(d)
    printed = [ln for ln in d.err.splitlines() if ln.strip()]
    assert len(printed) == 1, f"{len(printed)} lines for a port in use:\n{d}"
    assert str(port) in printed[0] and "--port" in printed[0], str(d)


def test_dev_refuses_a_folder_that_does_not_exist(tmp_path: Path) -> None:
    """``lunaflow dev ./typo`` (no such folder, default data folder) is refused: exit 2,
    the folder named, and the folder not created."""
    p = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "dev", "./typo", "--port", "0"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=worktree_env(),
    )
    try:
        out, err = p.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate(timeout=10)
        raise AssertionError(
            f"lunaflow dev ./typo kept running (serving an empty project):\n{out}{err}"
        ) from None
    assert p.returncode == 2, out + err
    assert "typo" in err and "Traceback" not in err, err
    assert not (tmp_path / "typo").exists(), "lunaflow dev created the mistyped project folder"


def test_dev_refuses_a_folder_without_scripts(tmp_path: Path, servers: Servers) -> None:
    """``lunaflow dev EMPTY`` on an existing folder holding no .lua script exits 2 (within
    15 s) with a message naming the folder, instead of serving."""
    empty = tmp_path / "empty"
    (empty / "notes").mkdir(parents=True)
    (empty / "README.md").write_text("not a script\n")
    server = servers.start(empty, tmp_path / "d", wait=False)
    code = server.wait_exit(15)
    assert code is not None, f"lunaflow dev served a folder with no scripts:\n{server.output_tail()}"
    assert code == 2 and "empty" in server.stderr(), server.output_tail()
    assert "Traceback" not in server.stderr(), server.output_tail()
