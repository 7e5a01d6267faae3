"""CI's smoke run of the benchmark command: `python3 bench/run_all.py --quick`.

Issue 8: "Benchmarks are not timed tests: CI runs a small smoke version of the bench
command to keep it working, and asserts no speed." These tests run the one command once,
with tiny sizes, in a subprocess, and check that every section ran and printed its table.
No figure is compared with any target or bound.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PEERS = {
    "DBOS (SQLite)": "dbos",
    "AWS durable runner": "aws_durable_execution_sdk_python_testing",
}


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("bench")
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "run_all.py"),
            "--quick",
            "--dir",
            str(tmp),
            "--plots",
            str(tmp / "plots"),
            "--json",
            str(tmp / "figures.json"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    figures = json.loads((tmp / "figures.json").read_text()) if (tmp / "figures.json").exists() else {}
    return {"proc": out, "stdout": out.stdout, "figures": figures, "plots": tmp / "plots", "tmp": tmp}


def test_bench_command_completes_and_prints_every_section(bench: dict[str, Any]) -> None:
    """ "One command runs everything and prints a table of figures and ratios." """
    proc = bench["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    for heading in (
        "== machine",
        "== 1. lunaflow beside its peers",
        "== 2a. resume cost against journal length",
        "== 2b. parked runs in lunaflow dev",
        "== 3. signal to resume over HTTP on lunaflow dev",
        "== 4. Lambda cold-start proxy",
        "== targets",
    ):
        assert heading in bench["stdout"], f"missing section {heading!r}"


def test_peers_table_has_lunaflow_figures_for_every_workload(bench: dict[str, Any]) -> None:
    """ "Print lunaflow's figure, each peer's, and the ratio. Document the durability
    settings each ran with." """
    lines = bench["stdout"].splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("workload") and "lunaflow" in line)
    for label in (
        "10-step workflow, per step",
        "50-step workflow, per step",
        "5 signal waits, signal to resume",
        "20 concurrent 3-step runs",
    ):
        row = next((line for line in lines[header:] if line.startswith(label)), None)
        assert row is not None, f"no row {label!r}"
        lunaflow_cell = row[len(label) :].split()[0]
        assert lunaflow_cell != "-", row
        float(lunaflow_cell.replace(",", ""))
    assert "lunaflow             SQLite journal_mode=wal, synchronous=FULL" in bench["stdout"]


def test_installed_peers_are_measured_and_missing_ones_skipped(bench: dict[str, Any]) -> None:
    """ "...skipping peers that are not installed": a peer is either measured, with its
    durability setting printed, or named as not installed."""
    figures = bench["figures"]["peers"]["figures"]
    for label, module in PEERS.items():
        system = "dbos" if module == "dbos" else "aws"
        if importlib.util.find_spec(module) is not None:
            assert set(figures[system]) >= {"steps:10", "steps:50", "signals:5", "concurrent:20"}
            assert f"  {label}" in bench["stdout"]  # its durability line
        else:
            assert f"{label}: not installed, skipped" in bench["stdout"]
            assert system not in figures


def test_scaling_sections_report_counters_memory_and_latency(bench: dict[str, Any]) -> None:
    """The scaling figures are present: resume per journal length with its wake counters,
    resident memory of `lunaflow dev` for parked runs, HTTP latency percentiles and the
    cold-start breakdown (values are not judged)."""
    f = bench["figures"]
    assert [p["entries"] for p in f["resume"]] == [100, 400]
    for point in f["resume"]:
        assert point["cold_counts"]["entries_read"] >= point["entries"]
        assert set(point["warm_counts"]) == {"replays", "new_runs", "drives", "entries_read"}
    assert [p["runs"] for p in f["parked"]["points"]] == [0, 200]
    assert all(p["rss_mb"] > 0 for p in f["parked"]["points"])
    assert f["parked"]["woken"]["runs"] == 20
    assert f["latency"]["resume"]["n"] == 20
    assert {"imports_ms", "clients_ms", "project_ms", "spawn_to_ready_ms"} <= set(f["coldstart"])


def test_plots_are_written_when_matplotlib_is_installed(bench: dict[str, Any]) -> None:
    """ "Plots as PNG with matplotlib": with matplotlib present each section writes its PNG;
    without it the command says so and still completes."""
    names = [
        "bench_peers.png",
        "bench_resume.png",
        "bench_parked.png",
        "bench_latency.png",
        "bench_coldstart.png",
    ]
    if importlib.util.find_spec("matplotlib") is not None:
        for name in names:
            path = bench["plots"] / name
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    else:
        assert "matplotlib is not installed: no plots" in bench["stdout"]
