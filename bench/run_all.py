"""Every benchmark in one run: lunaflow beside its peers, then lunaflow's own scaling.

    pip install -e '.[bench]'          # the peers (dbos, the AWS durable runner), matplotlib, psutil
    python3 bench/run_all.py           # about ten minutes; plots go to docs/bench_*.png
    python3 bench/run_all.py --quick   # tiny sizes, a few seconds per section (CI's smoke run)

Sections (each is also a script of its own, with its options and its documentation):

1. bench/peers.py     the same workloads in lunaflow, DBOS on SQLite and the AWS durable
                      execution runner, side by side: figures and ratios, and each system's
                      durability setting. A peer that is not installed is skipped. Also run
                      on tmpfs, for reference, where fsync costs nothing (--no-tmpfs to skip).
2. bench/scaling.py   resume cost against journal length (cold process, warm cache, with
                      counters), and memory and store size of parked runs in `lunaflow dev`.
3. bench/latency.py   signal-to-resume latency over HTTP on `lunaflow dev`.
4. bench/coldstart.py the Lambda cold-start proxy.

It prints the machine, each section's table, then every target with its verdict. Not a
test: it asserts nothing about speed and exits 0 whether targets are met or not (it exits
1 only when a benchmark could not run at all).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
for path in (ROOT, BENCH):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import coldstart  # noqa: E402
import latency  # noqa: E402
import peers  # noqa: E402
import scaling  # noqa: E402

FULL: dict[str, Any] = {
    "steps": [100, 1000],
    "waits": 100,
    "runs": 1000,
    "peer_trials": 3,
    "step_trials": 5,
    "reference_trials": 1,
    "dbos_default_waits": 5,
    "lengths": [100, 1000, 2000, 5000, 10000, 20000],
    "resume_trials": 3,
    "parked": [0, 25_000, 50_000, 100_000],
    "wake": 2000,
    "settle_s": 2.0,
    "signals": 200,
    "cold_trials": 5,
}
QUICK: dict[str, Any] = {
    "steps": [10, 50],
    "waits": 5,
    "runs": 20,
    "peer_trials": 1,
    "step_trials": 1,
    "reference_trials": 0,
    "dbos_default_waits": 0,
    "lengths": [100, 400],
    "resume_trials": 1,
    "parked": [0, 200],
    "wake": 20,
    "settle_s": 0.3,
    "signals": 20,
    "cold_trials": 1,
}


def fs_type(path: Path) -> str:
    """The file system holding ``path`` (from /proc/mounts)."""
    try:
        best, kind, device = "", "unknown", ""
        real = str(path.resolve())
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            mount, fstype = parts[1], parts[2]
            if (real == mount or real.startswith(mount.rstrip("/") + "/")) and len(mount) > len(best):
                best, kind, device = mount, fstype, parts[0]
        return f"{kind} on {device} (mounted at {best})" if best else kind
    except OSError:
        return "unknown"


def commit_cost_ms(base: Path, synchronous: str = "FULL", n: int = 300) -> float:
    """Median time of one committed one-row insert in WAL mode: the disk's fsync, mostly."""
    data = Path(tempfile.mkdtemp(prefix="fsync-", dir=base))
    try:
        db = sqlite3.connect(str(data / "probe.sqlite"), isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={synchronous}")
        db.execute("CREATE TABLE t (a INTEGER, b TEXT)")
        times = []
        for i in range(n):
            t = time.perf_counter()
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO t VALUES (?, ?)", (i, "x" * 100))
            db.execute("COMMIT")
            times.append((time.perf_counter() - t) * 1000)
        db.close()
        return statistics.median(times)
    finally:
        shutil.rmtree(data, ignore_errors=True)


def machine(base: Path) -> dict[str, Any]:
    def read(path: str) -> str:
        try:
            return Path(path).read_text()
        except OSError:
            return ""

    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in read("/proc/cpuinfo").splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown",
    )
    mem_kb = next(
        (int(line.split()[1]) for line in read("/proc/meminfo").splitlines() if line.startswith("MemTotal")),
        0,
    )
    os_name = next(
        (
            line.split("=", 1)[1].strip('"')
            for line in read("/etc/os-release").splitlines()
            if line.startswith("PRETTY_NAME=")
        ),
        platform.system(),
    )
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=10,
        ).stdout.strip()
        commit = f"{commit}{' with uncommitted changes' if dirty else ''}" if commit else "unknown"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    import lupa

    try:
        load = "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = ""
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": f"{cpu}, {os.cpu_count()} CPUs",
        "memory": f"{mem_kb / 1024 / 1024:.1f} GiB",
        "os": f"{os_name}, Linux {platform.release()}" if platform.system() == "Linux" else os_name,
        "python": (
            f"Python {platform.python_version()}, lupa {lupa.__version__} (Lua 5.4), "
            f"SQLite {sqlite3.sqlite_version}"
        ),
        "disk": fs_type(base),
        "commit_ms": commit_cost_ms(base),
        "commit": commit,
        "load": load,
        "peers": {s: peers.version(s) for s in ("dbos", "aws")},
    }


def machine_text(m: dict[str, Any], base: Path) -> str:
    return "\n".join(
        [
            f"date:      {m['date']} ({m['load']} at the start)",
            f"machine:   {m['cpu']}, {m['memory']} RAM",
            f"system:    {m['os']}",
            f"software:  {m['python']}; dbos {m['peers']['dbos']}, "
            f"aws-durable-execution-sdk-python-testing {m['peers']['aws']}",
            f"data:      {base}, {m['disk']}",
            f"disk:      one SQLite commit (WAL, synchronous=FULL) takes {m['commit_ms']:.3f} ms "
            "here (median)",
            f"lunaflow:  commit {m['commit']}",
        ]
    )


def heading(text: str) -> None:
    print()
    print(f"== {text} " + "=" * max(0, 86 - len(text)))
    sys.stdout.flush()


def log(text: str) -> None:
    print(text, flush=True)


def verdicts(result: dict[str, Any]) -> list[str]:
    out = []
    for block in ("peers", "scaling_resume", "scaling_parked", "latency"):
        text = result.get(f"{block}_table", "")
        out += [line for line in text.splitlines() if line.startswith("target:")]
    return out


def plots(result: dict[str, Any], folder: Path) -> list[Path]:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        log("matplotlib is not installed: no plots (pip install '.[bench]')")
        return []
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    if "peers" in result:
        peers.plot(result["peers"], folder / "bench_peers.png")
        written.append(folder / "bench_peers.png")
    if "resume" in result:
        scaling.plot_resume(result["resume"], folder / "bench_resume.png")
        written.append(folder / "bench_resume.png")
    if "parked" in result:
        scaling.plot_parked(result["parked"], folder / "bench_parked.png")
        written.append(folder / "bench_parked.png")
    if "latency" in result:
        latency.plot(result["latency"], folder / "bench_latency.png")
        written.append(folder / "bench_latency.png")
    if "coldstart" in result:
        coldstart.plot(result["coldstart"], folder / "bench_coldstart.png")
        written.append(folder / "bench_coldstart.png")
    return written


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes and one trial: checks that it all runs")
    ap.add_argument(
        "--dir", type=Path, default=None, help="where to create data folders (default: system temp)"
    )
    ap.add_argument(
        "--plots", type=Path, default=None, help="folder for the PNGs (default: docs/, none with --quick)"
    )
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--json", type=Path, default=None, help="also write every figure to this JSON file")
    ap.add_argument("--systems", default=",".join(peers.SYSTEMS), help="peers section: which systems")
    ap.add_argument("--no-tmpfs", action="store_true", help="skip the peers' reference run on tmpfs")
    ap.add_argument(
        "--only", default="peers,scaling,latency,coldstart", help="sections to run, comma-separated"
    )
    a = ap.parse_args()
    sizes = QUICK if a.quick else FULL
    only = set(a.only.split(","))
    plot_dir = a.plots if a.plots is not None else (None if a.quick else ROOT / "docs")
    base = Path(tempfile.mkdtemp(prefix="lunaflow-bench-", dir=a.dir))
    result: dict[str, Any] = {
        "sizes": sizes,
        "command": " ".join(["python3", "bench/run_all.py", *sys.argv[1:]]),
    }
    t_all = time.perf_counter()
    try:
        heading("machine")
        result["machine"] = machine(base)
        print(machine_text(result["machine"], base))

        if "peers" in only:
            heading("1. lunaflow beside its peers (bench/peers.py)")
            systems = a.systems.split(",")
            res = peers.run(
                base,
                steps=sizes["steps"],
                waits=sizes["waits"],
                runs=sizes["runs"],
                trials=sizes["peer_trials"],
                systems=systems,
                dbos_default_waits=sizes["dbos_default_waits"],
                step_trials=sizes["step_trials"],
                log=log,
            )
            result["peers"] = res
            result["peers_table"] = peers.table(res)
            print()
            print(result["peers_table"])
            shm = Path("/dev/shm")
            if sizes["reference_trials"] and not a.no_tmpfs and shm.is_dir() and os.access(shm, os.W_OK):
                heading("1b. for reference: the same on tmpfs, where fsync costs nothing (not durable)")
                ref_base = Path(tempfile.mkdtemp(prefix="lunaflow-bench-", dir=shm))
                try:
                    ref = peers.run(
                        ref_base,
                        steps=sizes["steps"],
                        waits=sizes["waits"],
                        runs=sizes["runs"],
                        trials=sizes["reference_trials"],
                        systems=systems,
                        dbos_default_waits=0,
                        log=log,
                    )
                finally:
                    shutil.rmtree(ref_base, ignore_errors=True)
                result["peers_tmpfs"] = ref
                text = peers.table(ref, references=False).replace("target:", "on tmpfs, for reference:")
                result["peers_tmpfs_table"] = text
                print()
                print(f"data on {fs_type(shm)}")
                print(text)

        if "scaling" in only:
            heading("2a. resume cost against journal length (bench/scaling.py)")
            points = scaling.resume_curve(base, sizes["lengths"], sizes["resume_trials"], log=log)
            result["resume"] = points
            result["scaling_resume_table"] = scaling.resume_table(points)
            print()
            print(result["scaling_resume_table"])
            heading("2b. parked runs in lunaflow dev (bench/scaling.py)")
            parked = scaling.parked_memory(
                base, sizes["parked"], sizes["wake"], log=log, settle_s=sizes["settle_s"]
            )
            result["parked"] = parked
            result["scaling_parked_table"] = scaling.parked_table(parked)
            print()
            print(result["scaling_parked_table"])

        if "latency" in only:
            heading("3. signal to resume over HTTP on lunaflow dev (bench/latency.py)")
            lat = latency.measure(base, sizes["signals"], log=log)
            result["latency"] = lat
            result["latency_table"] = latency.table(lat)
            print()
            print(result["latency_table"])

        if "coldstart" in only:
            heading("4. Lambda cold-start proxy (bench/coldstart.py)")
            cold = coldstart.measure(sizes["cold_trials"], log=log)
            result["coldstart"] = cold
            result["coldstart_table"] = coldstart.table(cold)
            print()
            print(result["coldstart_table"])

        result["machine"]["commit_ms_end"] = commit_cost_ms(base)
        heading("targets")
        print(
            f"disk: one SQLite commit (WAL, synchronous=FULL) took {result['machine']['commit_ms']:.3f} ms "
            f"at the start of this run and {result['machine']['commit_ms_end']:.3f} ms at its end (medians)"
        )
        if a.quick:
            print("(--quick: tiny sizes, one trial; these verdicts are not taken at the targets' sizes)")
        for line in verdicts(result):
            print(line)
        if plot_dir is not None and not a.no_plots:
            for path in plots(result, plot_dir):
                print(f"plot: {path}")
        print(f"whole run: {time.perf_counter() - t_all:.0f} s")
        if a.json is not None:
            a.json.write_text(json.dumps(result, indent=1, default=str))
            print(f"figures: {a.json}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
