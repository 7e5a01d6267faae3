#!/usr/bin/env python3
"""Crash torture: a ``lunaflow dev`` process serving tests/projects/torture, killed with
SIGKILL at random instants and started again on the same data folder, while a driver
starts runs and sends signals over HTTP (some duplicated, some before the run waits).
At the end an invariant checker (bench/torture_check.py) reads the journal and the
effects ledger and prints what it counted; every bad count must be 0.

    python3 bench/torture.py                 # defaults: 500 runs, a SIGKILL every 0.05-2 s
    python3 bench/torture.py --runs 50 --seed 7 --keep
    python3 bench/torture.py --servers 2 --no-kills   # two dev servers on one data folder

The effects ledger is a separate SQLite file written by a small HTTP server this script
runs on loopback: every step body calls the project's ``Ledger`` object, whose method
POSTs ``wf.step_id`` to it and succeeds once the row is on disk. Each row carries the
server generation that posted it (a generation is one dev server process between two
kills; the next starts only after the ledger has answered every request of the one
before). The script exits 0 when every bad count is 0, 1 otherwise.

Mixed in with those runs are the runtime's own limits (tests/projects/torture/limits.lua,
a project with 32 MiB Lua states): steps whose first attempt runs its state out of memory,
a fetch handler that fills its state and keeps the hoard (and starts carrying a 200 KB
body), steps that time out in host calls (HTTP to a slow loopback server, a long database
query), and a step whose first attempt asks the ledger to SIGKILL the server running it,
every time (the fourth start must record it as interrupted and go on to attempt 2).

The plans, the ledger and the driving this shares with the AWS mode (``--aws``,
bench/torture_aws.py) live in bench/torture_common.py.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import queue
import random
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.torture_check import Report, accept_killed_attempts, check, install_audit  # noqa: E402
from bench.torture_common import (  # noqa: E402
    BASE_MIX,
    LIMITS_MIX,
    PROJECT,
    Ledger,
    Plan,
    RunStates,
    State,
    drive_all,
    has_ended,
    make_plans,
    record_plans,
    send_signals,
)
from runtime.store.sqlite import STORE_FILE  # noqa: E402
from tests.support.devserver import DevServer  # noqa: E402

CALL_S = 180.0  # bound on one driver call getting an answer, restarts included


# --- a slow upstream --------------------------------------------------------------------


class SlowServer:
    """A loopback server whose ``GET /slow?ms=N`` answers after N ms: the slow upstream
    that step timeouts must cut."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                ms = int(self.path.partition("ms=")[2] or 0)
                time.sleep(ms / 1000)
                with contextlib.suppress(OSError):  # the caller gave up at its deadline
                    self.send_response(200)
                    self.send_header("content-length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass

        self.server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, name="slow", daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --- the dev server, killed and started again --------------------------------------------


class Fleet:
    """The ``lunaflow dev`` processes of the moment (one; two on one data folder for the
    race tests), their generations and their kills."""

    def __init__(self, project: Path, data: Path, logs: Path, ledger: Ledger, size: int = 1) -> None:
        self.project, self.data, self.logs, self.ledger = project, data, logs, ledger
        self.size = size
        self.cond = threading.Condition()
        self.servers: list[DevServer] = []
        self.rng = random.Random(0)
        self.gen = 0
        self.all: list[DevServer] = []
        self.kills = 0
        self.asked_kills = 0  # kills a step body asked for
        self.failed: str | None = None
        self.turn = threading.Lock()  # one kill-and-restart at a time (the killer, a body's ask)
        self.asks: queue.Queue[int | None] = queue.Queue()
        self.reaper = threading.Thread(target=self._reap, name="reaper", daemon=True)
        self.reaper.start()
        ledger.on_kill = self.asks.put

    def spawn(self) -> None:
        self.gen += 1
        self.ledger.gen = self.gen
        self.ledger.write("INSERT INTO gens (gen, spawned_at) VALUES (?,?)", (self.gen, time.time()))
        started = []
        try:
            for i in range(self.size):
                name = f"gen{self.gen:03d}" + ("" if self.size == 1 else f"-{i + 1}")
                started.append(DevServer(self.project, self.data, self.logs, name))
        except AssertionError as e:
            with self.cond:
                self.failed = str(e)
                self.cond.notify_all()
            raise
        finally:
            self.all += started
        with self.cond:
            self.servers = started
            self.cond.notify_all()

    def _end(self, how: str, stop: Callable[[DevServer], Any]) -> None:
        with self.cond:
            servers, self.servers = self.servers, []
        if not servers:
            return
        died = [s for s in servers if s.proc.poll() is not None]  # before ours: on their own
        if died:
            how = "died (" + ", ".join(f"{s.name} exit {s.proc.returncode}" for s in died) + ")"
        for server in servers:
            stop(server)
        self.ledger.ended(self.gen).set()
        self.ledger.quiesce()
        self.ledger.write(
            "UPDATE gens SET ended_at = ?, ended_by = ? WHERE gen = ?", (time.time(), how, self.gen)
        )

    def kill(self, after_s: float) -> None:
        self._end("sigkill", lambda s: s.kill())
        self.kills += 1
        self.ledger.write("INSERT INTO kills (gen, after_s) VALUES (?,?)", (self.gen, after_s))

    def stop(self) -> None:
        self.asks.put(None)
        self._end("stop", lambda s: s.stop(signal.SIGTERM))

    def _reap(self) -> None:
        """Kill the generation a step body asked to end, and start the next."""
        while (gen := self.asks.get()) is not None:
            with self.turn:
                if gen != self.gen or not self.servers:
                    continue  # already gone (a random kill came first)
                self.asked_kills += 1
                self.kill(0.0)
                self.spawn()

    def current(self) -> DevServer:
        with self.cond:
            ok = self.cond.wait_for(lambda: self.servers or self.failed, timeout=CALL_S)
            if self.failed:
                raise RuntimeError(f"the dev server could not start: {self.failed}")
            if not ok or not self.servers:
                raise RuntimeError(f"no dev server came up within {CALL_S}s")
            return self.servers[0] if self.size == 1 else self.rng.choice(self.servers)

    def close(self) -> None:
        self.asks.put(None)
        for server in self.all:
            if server.proc.poll() is None:
                server.proc.kill()
                with contextlib.suppress(Exception):
                    server.proc.wait(timeout=20)


# --- watching the store ---------------------------------------------------------------------


class Watch(RunStates):
    """Every run's status and current step, read from the store file every 100 ms."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.db: sqlite3.Connection | None = None  # the watching thread's
        super().__init__()

    def _read(self) -> dict[str, State] | None:
        if self.db is None:
            self.db = sqlite3.connect(str(self.store), timeout=30.0)
        try:
            rows = self.db.execute("SELECT id, status, current_step FROM runs").fetchall()
        except sqlite3.Error:
            return None
        return {r[0]: (r[1], r[2]) for r in rows}

    def _close(self) -> None:
        if self.db is not None:
            self.db.close()


# --- the driver -------------------------------------------------------------------------------


class Driver:
    def __init__(self, fleet: Fleet, ledger: Ledger, watch: Watch, wait_s: float) -> None:
        self.fleet, self.ledger, self.watch = fleet, ledger, watch
        self.wait_s = wait_s  # bound on a run reaching a wait or its end
        self.stats: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.errors: list[str] = []

    def count(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.stats[what] += n

    def post(self, path: str, value: Any) -> Any:
        """POST JSON to the dev server of the moment until it answers (below 500)."""
        body = json.dumps(value)
        deadline = time.monotonic() + CALL_S
        while True:
            server = self.fleet.current()
            reply = server.try_request(
                "POST", path, body, headers={"content-type": "application/json"}, timeout=30.0
            )
            if reply is not None and reply.status < 500:
                if reply.status != 200:
                    raise RuntimeError(f"POST {path} {body}: {reply.status} {reply.body[:300]}")
                return reply.json()
            self.count("calls retried (server killed or 5xx)")
            if reply is not None:
                self.count("5xx answers")
            if time.monotonic() > deadline:
                raise RuntimeError(f"POST {path} got no answer within {CALL_S}s")
            time.sleep(0.02)

    def drive(self, plan: Plan) -> None:
        start: dict[str, Any] = {"workflow": plan.workflow, "id": plan.run_id, "input": plan.input}
        if plan.workflow == "hungry":
            # A handler fills a request state to its limit; the next big request meets it.
            self.post("/t/hoard", {})
            self.count("memory-hungry requests")
            start["pad"] = "p" * 200_000
        self.post("/t/start", start)
        self.count("runs started")
        send_signals(plan, self.ledger, self.watch, self.wait_s, self.post, self.count)
        ended = self.watch.wait(plan.run_id, has_ended, self.wait_s)
        self.count("runs ended" if ended else "runs not ended in time")

    def failed(self, error: str) -> None:
        with self.lock:
            self.errors.append(error)


@dataclass
class Settings:
    runs: int = 500
    rate: float = 6.0  # runs started per second at most, so the load spans the kills
    clients: int = 12
    seed: int = 1
    kills: bool = True
    max_kills: int | None = None  # stop killing after this many (the small test's 3-4)
    kill_min: float = 0.3  # seconds a server lives before its SIGKILL, most of the time
    kill_max: float = 2.0
    early: float = 0.25  # share of kills within 0.05-0.6 s of the server coming up (recovery)
    dup: float = 0.3  # share of signals sent twice
    effect_ms: float = 10.0  # mean delay between an effect's commit and the ledger's answer
    servers: int = 1  # dev servers on the one data folder (2: the race tests)
    limits: bool = True  # mix in the limit cases (memory, host-call timeouts, a killing step)
    wait_s: float = 120.0  # bound on one run reaching a wait, or its end
    settle_s: float = 60.0  # bound on every run ending once the driver is done
    work: Path | None = None  # default: a fresh temporary folder
    keep: bool = False


@dataclass
class Outcome:
    report: Report
    text: str
    kills: int
    seconds: float
    work: Path
    driver_errors: list[str]

    @property
    def ok(self) -> bool:
        return self.report.ok and not self.driver_errors


def generation_at(ledger_file: Path) -> Callable[[str, int, float], int | None]:
    """The generation that wrote a journal entry, by the entry's time: one dev server runs
    at a time, each generation from its spawn (noted before its process starts) to its end
    (noted once it is killed or stopped)."""
    db = sqlite3.connect(str(ledger_file))
    try:
        spans = [
            (gen, float(spawned), float("inf") if ended is None else float(ended))
            for gen, spawned, ended in db.execute("SELECT gen, spawned_at, ended_at FROM gens ORDER BY gen")
        ]
    finally:
        db.close()

    def writer(run_id: str, seq: int, at: float) -> int | None:
        return next((gen for gen, spawned, ended in spans if spawned <= at < ended), None)

    return writer


def run(settings: Settings, out: Callable[[str], None] = print) -> Outcome:
    rng = random.Random(settings.seed)
    work = Path(tempfile.mkdtemp(prefix="lunaflow-torture-")) if settings.work is None else settings.work
    work.mkdir(parents=True, exist_ok=True)
    data = work / "data"
    install_audit(data)
    ledger = Ledger(work / "ledger.sqlite", settings.effect_ms)
    slow = SlowServer()
    fleet = Fleet(PROJECT, data, work, ledger, settings.servers)
    mix = dict(BASE_MIX)
    if settings.limits:
        mix.update(LIMITS_MIX)
        if not settings.kills:
            del mix["doomed"]  # no kills means none, asked for or not
    plans = make_plans(settings.runs, rng, ledger.url, settings.dup, mix, slow.url)
    record_plans(ledger, plans)
    began = time.monotonic()
    watch: Watch | None = None
    stop_killing = threading.Event()
    driver: Driver | None = None
    try:
        fleet.spawn()
        watch = Watch(data / STORE_FILE)
        driver = Driver(fleet, ledger, watch, settings.wait_s)

        def kill_loop() -> None:
            krng = random.Random(settings.seed + 1)
            while not stop_killing.is_set():
                if settings.max_kills is not None and fleet.kills >= settings.max_kills:
                    return
                if krng.random() < settings.early:
                    delay = krng.uniform(0.05, 0.6)
                else:
                    delay = krng.uniform(settings.kill_min, settings.kill_max)
                if stop_killing.wait(delay):
                    return
                with fleet.turn:
                    fleet.kill(delay)
                    fleet.spawn()

        killer = threading.Thread(target=kill_loop, name="killer", daemon=True)
        if settings.kills:
            killer.start()
        drive_all(plans, settings.clients, settings.rate, driver.drive, driver.failed)
        stop_killing.set()
        if killer.is_alive():
            killer.join(timeout=60)
        # The last generation lives on until every planned run (children too) has ended.
        all_ids = [p.run_id for p in plans] + [c[0] for p in plans for c in p.children]
        settle_by = time.monotonic() + settings.settle_s
        for run_id in all_ids:
            watch.wait(run_id, has_ended, max(0.0, settle_by - time.monotonic()))
        fleet.stop()
    finally:
        stop_killing.set()
        if watch is not None:
            watch.stop()
        fleet.close()
        with contextlib.suppress(Exception):
            ledger.quiesce(timeout=5)
        ledger.close()
        slow.close()
    seconds = time.monotonic() - began
    report = check(PROJECT, data, work / "ledger.sqlite", logs=[s.output() for s in fleet.all])
    assert driver is not None
    if settings.kills and settings.servers == 1:
        failed, orphaned, retried = accept_killed_attempts(
            report, data / STORE_FILE, work / "ledger.sqlite", generation_at(work / "ledger.sqlite")
        )
        driver.stats["runs failed after 3 killed starts"] = failed
        driver.stats["parents awaiting a child failed so"] = orphaned
        driver.stats["steps retried after 3 killed starts"] = retried
    what = (
        f"{settings.servers} dev servers on one data folder, no kills"
        if settings.servers > 1 and not settings.kills
        else f"{settings.servers} dev server(s)"
    )
    lines = [
        f"lunaflow crash torture: {settings.runs} runs started at most {settings.rate:g}/s by "
        f"{settings.clients} clients (seed {settings.seed}, "
        f"{int(settings.dup * 100)}% of signals sent twice), {what}, project {PROJECT.relative_to(ROOT)}",
    ]
    if settings.kills:
        lines.append(
            f"SIGKILLs: {fleet.kills}: {fleet.kills - fleet.asked_kills} at random instants "
            f"({int(settings.early * 100)}% within 0.05-0.6 s of a start, the others "
            f"{settings.kill_min:g}-{settings.kill_max:g} s after it), {fleet.asked_kills} asked for by "
            "a step body"
        )
    if settings.limits:
        kinds = Counter(p.workflow for p in plans)
        lines.append(
            "limit cases: "
            + ", ".join(f"{kinds[k]} {k}" for k in LIMITS_MIX if k in mix)
            + " runs (32 MiB Lua states)"
        )
    if ledger.answers_lost:
        driver.stats["ledger answers cut by a SIGKILL"] = ledger.answers_lost
    lines += [f"wall time: {seconds:.1f} s", "driver"]
    for name, n in sorted(driver.stats.items()):
        lines.append(f"  {name:<40}{n}")
    lines.append(f"  {'driver errors':<40}{len(driver.errors)}")
    for e in driver.errors[:5]:
        lines.append(f"      e.g. {e}")
    lines.append(report.format())
    if driver.errors:
        lines.append("verdict: FAILED (driver errors)")
    text = "\n".join(lines)
    out(text)
    outcome = Outcome(report, text, fleet.kills, seconds, work, list(driver.errors))
    if not settings.keep and settings.work is None and outcome.ok:
        shutil.rmtree(work, ignore_errors=True)
    else:
        out(f"data folder, ledger and server logs kept in {work}")
    return outcome


def main(argv: list[str] | None = None) -> int:
    d = Settings()
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    # --aws has defaults of its own (AwsSettings): None here means "the mode's default".
    ap.add_argument(
        "--runs", type=int, help=f"runs the driver starts (children come on top; default {d.runs}, --aws 200)"
    )
    ap.add_argument("--rate", type=float, help=f"runs started per second at most (default {d.rate:g})")
    ap.add_argument(
        "--clients", type=int, help=f"driver threads, one run at a time each (default {d.clients}, --aws 8)"
    )
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--kill-min", type=float, default=d.kill_min)
    ap.add_argument("--kill-max", type=float, default=d.kill_max)
    ap.add_argument("--early", type=float, default=d.early)
    ap.add_argument("--no-kills", action="store_true", help="no SIGKILLs (a baseline)")
    ap.add_argument("--servers", type=int, default=d.servers, help="dev servers on the one data folder")
    ap.add_argument("--no-limits", action="store_true", help="leave out the limit cases")
    ap.add_argument("--dup", type=float, default=d.dup)
    ap.add_argument(
        "--effect-ms",
        type=float,
        default=d.effect_ms,
        help="mean ms the ledger takes to answer, after its write",
    )
    ap.add_argument("--dir", type=Path, default=None, help="work folder (default: a temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder even when all is well")
    ap.add_argument(
        "--aws",
        action="store_true",
        help="the AWS path instead: the Lambda handlers on a moto server (bench/torture_aws.py)",
    )
    ap.add_argument("--workers", type=int, default=3, help="--aws: worker processes at once")
    a = ap.parse_args(argv)
    if a.aws:
        from bench.torture_aws import AwsSettings, run_aws

        aws = AwsSettings()
        return (
            0
            if run_aws(
                AwsSettings(
                    runs=aws.runs if a.runs is None else a.runs,
                    rate=aws.rate if a.rate is None else a.rate,
                    clients=aws.clients if a.clients is None else a.clients,
                    seed=a.seed,
                    kills=not a.no_kills,
                    dup=a.dup,
                    workers=a.workers,
                    work=a.dir,
                    keep=a.keep,
                )
            ).ok
            else 1
        )
    settings = Settings(
        runs=d.runs if a.runs is None else a.runs,
        rate=d.rate if a.rate is None else a.rate,
        clients=d.clients if a.clients is None else a.clients,
        seed=a.seed,
        kills=not a.no_kills,
        kill_min=a.kill_min,
        kill_max=a.kill_max,
        early=a.early,
        dup=a.dup,
        effect_ms=a.effect_ms,
        servers=a.servers,
        limits=not a.no_limits,
        work=a.dir,
        keep=a.keep,
    )
    return 0 if run(settings).ok else 1


if __name__ == "__main__":
    sys.exit(main())
