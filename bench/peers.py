"""lunaflow side by side with its peers, on the same workloads, in the same run.

    python3 bench/peers.py [--dir DIR] [--trials 3] [--steps 100,1000] [--waits 100]
                           [--runs 1000] [--systems lunaflow,dbos,aws]

The systems:

- lunaflow: ``LocalPlatform`` on the project bench/projects/perf_peers, SQLite in WAL mode
  with ``synchronous=FULL`` (an fsync per commit, the platform's default).
- DBOS (``pip install dbos``) on a SQLite system database, with the settings DBOS gives
  it (rollback journal, SQLite's default ``synchronous=FULL``). For the signal workload the
  notification listener polls every 1 ms instead of the default 1 s
  (``notification_listener_polling_interval_sec=0.001``, the lowest DBOS accepts): at the
  default every ``DBOS.recv`` waits for the next poll, about a second. The other workloads
  run at the defaults.
- The AWS durable execution SDK's local runner (``pip install
  aws-durable-execution-sdk-python-testing``): ``DurableFunctionTestRunner`` in process,
  with its default in-memory store (nothing is written to disk; its SQLite store grows
  with the square of a run's steps).

The workloads, the same in each system:

1. steps: one run of N sequential steps (each returns a number); wall time per step,
   from the call that starts the run to its result.
2. signals: one run waiting N times for a signal; per wait, the time from sending the
   signal until the run has resumed and is waiting for the next one.
3. concurrent: N runs of a 3-step workflow started at once; runs per second from the
   first start to the last result.

Every measurement runs in a fresh Python process (one per system, workload and trial,
trials interleaved across systems so disk and CPU noise falls on all of them), after a
small warm-up run in that process. A peer that is not installed is reported as such.
Not a test: it prints figures and exits 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PROJECT = ROOT / "bench" / "projects" / "perf_peers"
SYSTEMS = ("lunaflow", "dbos", "aws")
LABELS = {"lunaflow": "lunaflow", "dbos": "DBOS (SQLite)", "aws": "AWS durable runner"}
PEER_MODULES = {"dbos": "dbos", "aws": "aws_durable_execution_sdk_python_testing"}
WORKLOADS = ("steps", "signals", "concurrent")
DBOS_SIGNAL_POLL_S = 0.001
CHILD_TIMEOUT_S = 1800


def installed(system: str) -> bool:
    module = PEER_MODULES.get(system)
    return module is None or importlib.util.find_spec(module) is not None


def version(system: str) -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    dist = {
        "lunaflow": "lupa",
        "dbos": "dbos",
        "aws": "aws-durable-execution-sdk-python-testing",
    }[system]
    try:
        v = dist_version(dist)
    except PackageNotFoundError:
        return "not installed"
    return f"lupa {v}" if system == "lunaflow" else v


# --- the child side: one system, one workload ---------------------------------------------


def _lunaflow(workload: str, sizes: list[int], data: Path) -> dict[str, Any]:
    from runtime.testing import LocalPlatform

    out: dict[str, Any] = {}
    with LocalPlatform(PROJECT, data_dir=data) as p:
        db = getattr(p.platform.store, "_db", None)
        if db is not None:
            mode = db.execute("PRAGMA journal_mode").fetchone()[0]
            sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[
                db.execute("PRAGMA synchronous").fetchone()[0]
            ]
            out["durability"] = f"SQLite journal_mode={mode}, synchronous={sync}"
        if workload == "steps":
            out.update(_lunaflow_steps(p, sizes))
        elif workload == "signals":
            for n, run_id in ((3, "warm-up"), (sizes[0], "waiter")):
                p.start("waiter", {"n": n}, id=run_id)
                samples = []
                for i in range(1, n + 1):
                    t = time.perf_counter()
                    p.signal(run_id, "go", {"i": i})
                    samples.append((time.perf_counter() - t) * 1000)
                    run = p.get(run_id)
                    _check(run.status == ("completed" if i == n else "awaiting"), run)
                _check(p.get(run_id).result == {"got": n * (n + 1) // 2}, p.get(run_id))
            out[f"signals:{sizes[0]}"] = statistics.fmean(samples)
            out["samples"] = samples
        else:
            n = sizes[0]
            for i in range(10):
                p.platform.start("steps", {"n": 3}, id=f"warm-{i}")
            p.settle()
            t = time.perf_counter()
            for i in range(n):
                p.platform.start("steps", {"n": 3}, id=f"run-{i}")
            p.settle()
            elapsed = time.perf_counter() - t
            done = p.platform.runs(status="completed", limit=n + 100)
            _check(len(done) == n + 10, f"{len(done)} of {n + 10} runs completed")
            out[f"concurrent:{n}"] = n / elapsed
    if workload == "steps":
        # For reference only: the same runs without the fsync per commit (synchronous=OFF).
        with LocalPlatform(PROJECT, data_dir=data / "sync-off", synchronous="OFF") as p:
            out.update({k.replace("steps:", "steps_off:"): v for k, v in _lunaflow_steps(p, sizes).items()})
    return out


def _lunaflow_steps(p: Any, sizes: list[int]) -> dict[str, float]:
    out = {}
    p.start("steps", {"n": 10}, id="warm-up")
    for n in sizes:
        t = time.perf_counter()
        run = p.start("steps", {"n": n}, id=f"steps-{n}")
        elapsed = time.perf_counter() - t
        _check(run.status == "completed" and run.result == {"total": n * (n + 1) // 2}, run)
        out[f"steps:{n}"] = elapsed * 1000 / n
    return out


def _dbos(workload: str, sizes: list[int], data: Path, poll_s: float | None) -> dict[str, Any]:
    import logging

    from dbos import DBOS

    logging.getLogger("dbos").setLevel(logging.WARNING)
    config: dict[str, Any] = {
        "name": "lunaflow-bench",
        "system_database_url": f"sqlite:///{data / 'dbos.sqlite'}",
        "run_admin_server": False,
        "log_level": "WARNING",
    }
    if poll_s is not None:
        config["notification_listener_polling_interval_sec"] = poll_s
    DBOS(config=config)  # type: ignore[arg-type]
    ready: queue.Queue[int] = queue.Queue()

    @DBOS.step()
    def s(i: int) -> int:
        return i

    @DBOS.workflow()
    def steps(n: int) -> dict[str, int]:
        total = 0
        for i in range(1, n + 1):
            total += s(i)
        return {"total": total}

    @DBOS.workflow()
    def waiter(n: int) -> dict[str, int]:
        got = 0
        for _ in range(n):
            ready.put(0)  # observation only: the driver's cue that the run waits again
            payload = DBOS.recv("go", timeout_seconds=600)
            got += payload["i"]
        return {"got": got}

    DBOS.launch()
    out: dict[str, Any] = {"durability": _dbos_durability(poll_s)}
    try:
        if workload == "steps":
            steps(10)
            for n in sizes:
                t = time.perf_counter()
                result = steps(n)
                elapsed = time.perf_counter() - t
                _check(result == {"total": n * (n + 1) // 2}, result)
                out[f"steps:{n}"] = elapsed * 1000 / n
        elif workload == "signals":
            for n in (3, sizes[0]):
                handle = DBOS.start_workflow(waiter, n)
                ready.get(timeout=600)
                samples = []
                for i in range(1, n + 1):
                    t = time.perf_counter()
                    DBOS.send(handle.workflow_id, {"i": i}, "go")
                    if i < n:
                        ready.get(timeout=600)
                    else:
                        result = handle.get_result()
                    samples.append((time.perf_counter() - t) * 1000)
                _check(result == {"got": n * (n + 1) // 2}, result)
            out[f"signals:{sizes[0]}"] = statistics.fmean(samples)
            out["samples"] = samples
        else:
            n = sizes[0]
            for h in [DBOS.start_workflow(steps, 3) for _ in range(10)]:
                h.get_result()
            t = time.perf_counter()
            handles = [DBOS.start_workflow(steps, 3) for _ in range(n)]
            results = [h.get_result() for h in handles]
            elapsed = time.perf_counter() - t
            _check(all(r == {"total": 6} for r in results), "a run's result differs")
            out[f"concurrent:{n}"] = n / elapsed
    finally:
        DBOS.destroy()
    return out


def _dbos_durability(poll_s: float | None) -> str:
    try:
        import sqlalchemy as sa
        from dbos._dbos import _get_dbos_instance

        with _get_dbos_instance()._sys_db.engine.connect() as c:
            mode = c.execute(sa.text("PRAGMA journal_mode")).scalar()
            level = int(c.execute(sa.text("PRAGMA synchronous")).scalar() or 0)
            sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[level]
        text = f"SQLite system database, journal_mode={mode}, synchronous={sync}"
    except Exception as e:  # a private API; the figure stands without it
        text = f"SQLite system database (settings unread: {e})"
    if poll_s is not None:
        text += f"; notification polling every {poll_s * 1000:g} ms"
    return text


def _aws(workload: str, sizes: list[int]) -> dict[str, Any]:
    import logging

    from aws_durable_execution_sdk_python import DurableContext, durable_execution
    from aws_durable_execution_sdk_python_testing import DurableFunctionTestRunner

    logging.getLogger("aws_durable_execution_sdk_python").setLevel(logging.WARNING)
    logging.getLogger("aws_durable_execution_sdk_python_testing").setLevel(logging.WARNING)
    callbacks: queue.Queue[str] = queue.Queue()

    @durable_execution
    def steps(event: dict[str, int], context: DurableContext) -> dict[str, int]:
        total = 0
        for i in range(1, event["n"] + 1):
            total += context.step(lambda _c, i=i: i, name="s")  # type: ignore[misc]
        return {"total": total}

    @durable_execution
    def waiter(event: dict[str, int], context: DurableContext) -> dict[str, int]:
        got = 0
        for _ in range(event["n"]):
            callback = context.create_callback(name="go")
            # Observation only: replays put ids already seen again; the driver skips them.
            callbacks.put(callback.callback_id)
            payload = json.loads(callback.result() or "{}")
            got += payload["i"]
        return {"got": got}

    out: dict[str, Any] = {"durability": "in-memory store (InMemoryExecutionStore): nothing written to disk"}
    if workload == "steps":
        with DurableFunctionTestRunner(handler=steps) as runner:
            runner.run(input=json.dumps({"n": 10}), execution_timeout=3600, execution_name="warm-up")
            for n in sizes:
                t = time.perf_counter()
                res = runner.run(
                    input=json.dumps({"n": n}), execution_timeout=3600, execution_name=f"steps-{n}"
                )
                elapsed = time.perf_counter() - t
                _check(json.loads(res.result or "null") == {"total": n * (n + 1) // 2}, res.result)
                out[f"steps:{n}"] = elapsed * 1000 / n
    elif workload == "signals":
        with DurableFunctionTestRunner(handler=waiter) as runner:
            seen: set[str] = set()

            def next_callback() -> str:
                while True:
                    cid = callbacks.get(timeout=600)
                    if cid not in seen:
                        seen.add(cid)
                        return cid

            for n, name in ((3, "warm-up"), (sizes[0], "waiter")):
                arn = runner.run_async(
                    input=json.dumps({"n": n}), execution_timeout=3600, execution_name=name
                )
                cid = next_callback()
                samples = []
                for i in range(1, n + 1):
                    t = time.perf_counter()
                    runner.send_callback_success(cid, json.dumps({"i": i}).encode())
                    if i < n:
                        cid = next_callback()
                    else:
                        res = runner.wait_for_result(arn, timeout=3600)
                    samples.append((time.perf_counter() - t) * 1000)
                _check(json.loads(res.result or "null") == {"got": n * (n + 1) // 2}, res.result)
            out[f"signals:{sizes[0]}"] = statistics.fmean(samples)
            out["samples"] = samples
    else:
        n = sizes[0]
        with DurableFunctionTestRunner(handler=steps) as runner:
            for arn in [
                runner.run_async(input='{"n": 3}', execution_timeout=3600, execution_name=f"warm-{i}")
                for i in range(10)
            ]:
                runner.wait_for_result(arn, timeout=3600)
            t = time.perf_counter()
            arns = [
                runner.run_async(input='{"n": 3}', execution_timeout=3600, execution_name=f"run-{i}")
                for i in range(n)
            ]
            results = [runner.wait_for_result(arn, timeout=3600) for arn in arns]
            elapsed = time.perf_counter() - t
            _check(all(json.loads(r.result or "null") == {"total": 6} for r in results), "a result differs")
            out[f"concurrent:{n}"] = n / elapsed
    return out


def _check(ok: bool, what: Any) -> None:
    if not ok:
        raise SystemExit(f"a benchmark run did not end as expected: {what}")


def child_main(system: str, workload: str, sizes: list[int], data: Path, poll_s: float | None) -> None:
    if system == "lunaflow":
        out = _lunaflow(workload, sizes, data)
    elif system == "dbos":
        out = _dbos(workload, sizes, data, poll_s)
    else:
        out = _aws(workload, sizes)
    print(json.dumps(out))


# --- the parent side -------------------------------------------------------------------------


def measure(
    system: str, workload: str, sizes: list[int], base: Path, poll_s: float | None = None
) -> dict[str, Any]:
    """Run one measurement in a fresh process on a fresh data folder; its figures as a dict
    (``{"error": ...}`` when the process failed)."""
    data = Path(tempfile.mkdtemp(prefix=f"{system}-{workload}-", dir=base))
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        system,
        workload,
        ",".join(map(str, sizes)),
        str(data),
    ]
    if poll_s is not None:
        cmd.append(str(poll_s))
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {CHILD_TIMEOUT_S} s"}
    finally:
        shutil.rmtree(data, ignore_errors=True)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
        return {"error": " | ".join(tail) or f"exit {out.returncode}"}
    figures: dict[str, Any] = json.loads(lines[-1])
    return figures


def run(
    base: Path,
    *,
    steps: list[int],
    waits: int,
    runs: int,
    trials: int,
    systems: list[str],
    dbos_default_waits: int = 3,
    step_trials: int | None = None,
    log: Any = print,
) -> dict[str, Any]:
    """All workloads for every installed system, ``trials`` times (the steps workload
    ``step_trials`` times, as it is quick and the disk is noisy), interleaved. Returns
    ``{"figures": {system: {key: median}}, "trials": ..., "durability": ..., "skipped": ...}``."""
    present = [s for s in systems if installed(s)]
    skipped = [s for s in systems if not installed(s)]
    plan = [("steps", steps), ("signals", [waits]), ("concurrent", [runs])]
    collected: dict[str, dict[str, list[float]]] = {s: {} for s in present}
    durability: dict[str, str] = {}
    errors: dict[str, list[str]] = {}
    samples: dict[str, list[float]] = {}
    step_trials = trials if step_trials is None else step_trials
    for trial in range(max(trials, step_trials)):
        for workload, sizes in plan:
            planned = step_trials if workload == "steps" else trials
            if trial >= planned:
                continue
            for system in present:
                poll = DBOS_SIGNAL_POLL_S if (system == "dbos" and workload == "signals") else None
                t = time.perf_counter()
                got = measure(system, workload, sizes, base, poll)
                log(
                    f"  trial {trial + 1}/{planned} {LABELS[system]:<20} {workload:<10} "
                    f"{'failed: ' + got['error'] if 'error' in got else 'done'} "
                    f"({time.perf_counter() - t:.1f} s)"
                )
                if "error" in got:
                    errors.setdefault(system, []).append(f"{workload}: {got['error']}")
                    continue
                if "durability" in got and (workload != "signals" or system not in durability):
                    durability[system] = got.pop("durability")
                else:
                    got.pop("durability", None)
                if "samples" in got:
                    samples[system] = samples.get(system, []) + got.pop("samples")
                for key, value in got.items():
                    collected[system].setdefault(key, []).append(value)
    reference: dict[str, Any] = {}
    if "dbos" in present and dbos_default_waits > 0:
        got = measure("dbos", "signals", [dbos_default_waits], base, None)
        log(f"  reference: DBOS signals at its default polling ({dbos_default_waits} waits) done")
        if "error" not in got:
            reference["dbos_default_poll_signal_ms"] = got[f"signals:{dbos_default_waits}"]
            reference["dbos_default_poll_waits"] = dbos_default_waits
    figures = {s: {k: statistics.median(v) for k, v in d.items()} for s, d in collected.items()}
    return {
        "figures": figures,
        "trials": collected,
        "durability": durability,
        "skipped": skipped,
        "errors": errors,
        "samples": samples,
        "reference": reference,
        "sizes": {"steps": steps, "waits": waits, "runs": runs, "trials": trials, "step_trials": step_trials},
        "versions": {s: version(s) for s in systems},
    }


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per workload: lunaflow's figure, each peer's, and the ratios (how many times
    lunaflow is faster: peer time / lunaflow time, lunaflow rate / peer rate)."""
    sizes = result["sizes"]
    figures = result["figures"]
    out = []
    keys = [(f"steps:{n}", f"{n}-step workflow, per step", "ms", False) for n in sizes["steps"]]
    keys.append(
        (f"signals:{sizes['waits']}", f"{sizes['waits']} signal waits, signal to resume", "ms", False)
    )
    keys.append((f"concurrent:{sizes['runs']}", f"{sizes['runs']} concurrent 3-step runs", "runs/s", True))
    for key, label, unit, higher_better in keys:
        row: dict[str, Any] = {"key": key, "label": label, "unit": unit, "values": {}, "ratios": {}}
        for system in SYSTEMS:
            value = figures.get(system, {}).get(key)
            row["values"][system] = value
        lf = row["values"].get("lunaflow")
        for system in ("dbos", "aws"):
            v = row["values"].get(system)
            if lf and v:
                row["ratios"][system] = (lf / v) if higher_better else (v / lf)
        out.append(row)
    return out


TARGETS = {"dbos": 10.0, "aws": 5.0}  # per-step time: lunaflow at least this many times lower


def table(result: dict[str, Any], references: bool = True) -> str:
    def fmt(v: float | None, unit: str) -> str:
        if v is None:
            return "-"
        if unit == "runs/s":
            return f"{v:,.0f} runs/s"
        return f"{v:.3f} ms" if v < 10 else f"{v:,.1f} ms"

    def ratio(r: float | None) -> str:
        return "-" if r is None else f"{r:.1f}x"

    lines = []
    head = (
        f"{'workload':<40} {'lunaflow':>14} {'DBOS (SQLite)':>15} {'ratio':>7} "
        f"{'AWS runner':>14} {'ratio':>7}"
    )
    lines.append(head)
    lines.append("-" * len(head))
    for row in rows(result):
        v, r = row["values"], row["ratios"]
        lines.append(
            f"{row['label']:<40} {fmt(v.get('lunaflow'), row['unit']):>14} "
            f"{fmt(v.get('dbos'), row['unit']):>15} "
            f"{ratio(r.get('dbos')):>7} {fmt(v.get('aws'), row['unit']):>14} {ratio(r.get('aws')):>7}"
        )
    lines.append(
        "ratio: how many times lunaflow is faster (peer time / lunaflow time; lunaflow rate / peer rate)"
    )
    for row in rows(result):
        if not row["key"].startswith("steps:"):
            continue
        for system, target in TARGETS.items():
            got = row["ratios"].get(system)
            if got is not None:
                verdict = "meets" if got >= target else "MISSES"
                lines.append(
                    f"target: {row['label']}, lunaflow at least {target:g}x lower than {LABELS[system]}: "
                    f"{got:.1f}x, {verdict} target"
                )
    for row in rows(result):
        if row["key"].startswith("steps:"):
            per_trial = "; ".join(
                f"{LABELS[s]} " + ", ".join(f"{x:.3f}" for x in result["trials"][s].get(row["key"], []))
                for s in SYSTEMS
                if s in result["trials"]
            )
            lines.append(f"trials, {row['label']} (ms): {per_trial}")
    lf = result["figures"].get("lunaflow", {}) if references else {}
    for n in result["sizes"]["steps"]:
        off, full = lf.get(f"steps_off:{n}"), lf.get(f"steps:{n}")
        if off and full:
            lines.append(
                f"reference: lunaflow {n}-step workflow at synchronous=OFF "
                "(no fsync; not a durable setting): "
                f"{off:.3f} ms per step, so the commit's fsync is {full - off:.3f} of the {full:.3f} ms "
                f"({(full - off) / full:.0%})"
            )
    ref = result.get("reference", {}) if references else {}
    if "dbos_default_poll_signal_ms" in ref:
        lines.append(
            f"reference: DBOS signal to resume at its default notification polling (1 s): "
            f"{ref['dbos_default_poll_signal_ms']:,.0f} ms per wait ({ref['dbos_default_poll_waits']} waits)"
        )
    for system in result["skipped"]:
        lines.append(f"{LABELS[system]}: not installed, skipped (pip install '.[bench]')")
    for system, errs in result["errors"].items():
        for e in errs:
            lines.append(f"{LABELS[system]} failed: {e}")
    lines.append("durability:")
    for system in SYSTEMS:
        if system in result["durability"]:
            lines.append(f"  {LABELS[system]:<20} {result['durability'][system]}")
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = rows(result)
    time_rows = [r for r in data if r["unit"] == "ms"]
    rate_rows = [r for r in data if r["unit"] == "runs/s"]
    colors = {"lunaflow": "#2b6cb0", "dbos": "#dd6b20", "aws": "#718096"}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [3, 1]})
    ax = axes[0]
    width = 0.26
    for i, system in enumerate(SYSTEMS):
        xs = [j + (i - 1) * width for j in range(len(time_rows))]
        ys = [r["values"].get(system) or 0 for r in time_rows]
        bars = ax.bar(xs, ys, width, label=LABELS[system], color=colors[system])
        for b, y in zip(bars, ys, strict=True):
            if y:
                ax.annotate(
                    f"{y:.2f}" if y < 10 else f"{y:.0f}",
                    (b.get_x() + b.get_width() / 2, y),
                    ha="center",
                    va="bottom",
                    fontsize=7,
                )
    ax.set_yscale("log")
    ax.set_xticks(range(len(time_rows)))
    ax.set_xticklabels([r["label"] for r in time_rows], fontsize=8)
    ax.set_ylabel("ms (log scale, lower is better)")
    ax.set_title("time per step / per signal wait")
    ax.legend(fontsize=8)
    ax = axes[1]
    for i, system in enumerate(SYSTEMS):
        y = rate_rows[0]["values"].get(system) or 0 if rate_rows else 0
        ax.bar(i, y, color=colors[system])
        if y:
            ax.annotate(f"{y:,.0f}", (i, y), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(SYSTEMS)))
    ax.set_xticklabels([LABELS[s] for s in SYSTEMS], fontsize=7, rotation=15)
    ax.set_ylabel("runs per second (higher is better)")
    ax.set_title(rate_rows[0]["label"] if rate_rows else "")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        system, workload, sizes, data = sys.argv[2], sys.argv[3], sys.argv[4], Path(sys.argv[5])
        poll = float(sys.argv[6]) if len(sys.argv) > 6 else None
        child_main(system, workload, [int(x) for x in sizes.split(",")], data, poll)
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=None, help="where to create data folders")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--steps", default="100,1000", help="step counts, comma-separated")
    ap.add_argument("--waits", type=int, default=100)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument(
        "--dbos-default-waits", type=int, default=3, help="waits at DBOS's default polling (0: skip)"
    )
    ap.add_argument("--plot", type=Path, default=None, help="write the bar chart to this PNG")
    a = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="lunaflow-peers-", dir=a.dir))
    try:
        result = run(
            base,
            steps=[int(x) for x in a.steps.split(",")],
            waits=a.waits,
            runs=a.runs,
            trials=a.trials,
            systems=a.systems.split(","),
            dbos_default_waits=a.dbos_default_waits,
        )
        print()
        print(table(result))
        if a.plot is not None:
            plot(result, a.plot)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
