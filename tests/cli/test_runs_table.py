"""Issue 17, point 3: ``lunaflow runs`` never cuts a run id, and refuses a negative
``--limit``. The CLI runs as a real process with COLUMNS set as a narrow terminal would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.testing import LocalPlatform
from tests.support.cli import ROOT, cli, worktree_env
from tests.support.devserver import PROJECTS

EVENTS = PROJECTS / "events"
IDS = [f"sale-lot-2024-11-17-auction-house-00000{i}" for i in (1, 2)]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("runs") / "data"
    for run_id in IDS:
        d = cli("start", "waiter", "--id", run_id, "-p", str(EVENTS), "--data", str(folder))
        assert d.code == 0, str(d)
    return folder


@pytest.mark.parametrize("columns", [80, 60, 40])
def test_runs_never_cuts_run_ids(data: Path, columns: int) -> None:
    """At 80, 60 and 40 columns every run id is printed whole on one line (other columns
    give way or wrap), so two runs never look alike and ids can be copied."""
    d = cli("runs", "-p", str(EVENTS), "--data", str(data), env={"COLUMNS": str(columns)})
    assert d.code == 0, str(d)
    for run_id in IDS:
        assert run_id in d.out, f"run id {run_id} is not printed whole at {columns} columns:\n{d.out}"


@pytest.mark.parametrize("limit", ["-5", "0", "x"])
def test_runs_refuses_a_limit_that_is_not_a_positive_number(data: Path, limit: str) -> None:
    """``lunaflow runs --limit -5`` (or 0, or x) is bad usage: exit 2 with a message naming
    --limit."""
    d = cli("runs", "-p", str(EVENTS), "--data", str(data), "--limit", limit)
    assert d.code == 2, str(d)
    assert "--limit" in d.err, str(d)


def test_runs_limit_one_lists_one_run(data: Path) -> None:
    """The smallest legal limit lists exactly one run."""
    d = cli("runs", "-p", str(EVENTS), "--data", str(data), "--limit", "1", "--json")
    assert d.code == 0, str(d)
    assert len(json.loads(d.out)) == 1, d.out


@pytest.fixture(scope="module")
def six_hundred(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """600 runs: a listing far more than a pipe's buffer (64 KiB)."""
    data = tmp_path_factory.mktemp("six-hundred") / "data"
    with LocalPlatform(EVENTS, data_dir=data) as p:
        for i in range(600):
            p.start("good", {"pad": "x" * 100}, id=f"run-{i:04d}")
    return data


def test_runs_json_piped_into_a_reader_that_stops_ends_quietly(six_hundred: Path) -> None:
    """``lunaflow runs --json | head -c 1``: the reader closing the pipe while the CLI still
    writes is not a traceback."""
    data = six_hundred
    line = f"{sys.executable} -m runtime.cli runs --json --limit 1000 -p {EVENTS} --data {data} | head -c 1"
    proc = subprocess.run(
        ["bash", "-c", line], cwd=ROOT, capture_output=True, text=True, timeout=60, env=worktree_env()
    )
    assert proc.stdout == "[", proc.stdout[:100]
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


def test_the_runs_table_piped_into_a_reader_that_stops_exits_0(six_hundred: Path) -> None:
    """``set -o pipefail; lunaflow runs | head -n 1``: the table (written whole at its end,
    by rich) into a closed pipe exits 0, as the JSON listing does. Before, rich's own answer
    to the closed pipe (exit 1) made the pipeline fail."""
    line = (
        f"set -o pipefail; {sys.executable} -m runtime.cli runs --limit 1000 -p {EVENTS} --data "
        f"{six_hundred} | head -n 1"
    )
    proc = subprocess.run(
        ["bash", "-c", line], cwd=ROOT, capture_output=True, text=True, timeout=60, env=worktree_env()
    )
    assert proc.stdout.startswith("600 run(s)"), proc.stdout[:100]
    assert proc.stderr == "", proc.stderr
    assert proc.returncode == 0, (proc.returncode, proc.stderr)


def test_output_that_cannot_be_written_is_said_in_a_line(six_hundred: Path) -> None:
    """``lunaflow runs > /dev/full``: the device refusing the write is one line on stderr
    and exit 1, not a traceback."""
    line = f"{sys.executable} -m runtime.cli runs -p {EVENTS} --data {six_hundred} > /dev/full"
    proc = subprocess.run(
        ["bash", "-c", line], cwd=ROOT, capture_output=True, text=True, timeout=60, env=worktree_env()
    )
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("lunaflow runs: the output could not be written"), proc.stderr
    assert "No space left on device" in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
