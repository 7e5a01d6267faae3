"""A harness given no data folder makes its own under the temporary folder and removes it
when closed. A test's subprocess killed mid-run cannot: its folder (a SQLite store and its
services, about 350 KB) stayed, some 40 a full test run. Folders are named for their
process, and a harness removes those whose process is gone before it makes its own."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

from runtime.testing import LocalPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "continue"
HOLD = (
    "import sys, time\n"
    "from runtime.testing import LocalPlatform\n"
    "p = LocalPlatform(sys.argv[1])\n"
    "print(p.data_dir, flush=True)\n"
    "time.sleep(120)\n"
)


def holder() -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(PROJECT)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


def test_a_killed_processs_folder_is_removed_by_the_next_harness_and_a_live_ones_kept() -> None:
    dead, dead_dir = holder()
    live, live_dir = holder()
    try:
        dead.send_signal(signal.SIGKILL)
        dead.wait()
        assert dead_dir.is_dir()  # nothing removed it
        with LocalPlatform(PROJECT) as p:
            assert p.data_dir.is_dir() and p.data_dir != dead_dir
            assert not dead_dir.exists()
            assert live_dir.is_dir()  # its process still runs
        assert not p.data_dir.exists()
    finally:
        for proc in (dead, live):
            proc.kill()
            proc.wait()
        shutil.rmtree(live_dir, ignore_errors=True)
