#!/usr/bin/env python3
"""Crash torture on the AWS path: ``python3 bench/torture.py --aws``.

The torture project (tests/projects/torture) runs through the Lambda handlers on a moto
server process (``AwsPlatform``'s deployment, the real clock), while:

- several worker processes at once play the worker Lambda: each receives batches from the
  wake queue and calls the worker handler with a container of its own, and takes the fetch
  processes' hand-offs to the runner (Lambda's event queue, ``runtime.aws.runner_events``),
  calling the runner's handler; they are SIGKILLed at random instants (mid-step, mid-batch)
  and replaced;
- the workers take SQS at its worst: a share of the processed messages is delivered again
  (at-least-once delivery), a share of the received ones is lost (deleted unprocessed) or
  delayed (left invisible for 1-5 s);
- driver threads start runs and send signals through the fetch handler (a share twice, some
  before the run waits), each thread through a fetch process of its own (a container,
  which advances the runs it starts or signals there: eager activations, with the longest
  budget, so a step with an 8 s timeout runs in the request); fetch processes are
  SIGKILLed at random too (``fetch_kills`` of the kills), mid-request, and the thread sends
  its request again to a new one, as a client retries a 502;
- the reconcile rule runs every second, with its thresholds cut to seconds (a lost wake
  heals in about two; a start its killed fetch process left pending is indexed after 5 s,
  which also indexes some whose request is still advancing them: a worker then races the
  request, as the eager design allows), and leases last 5 s (a killed worker's run is free within 5 s; a
  killed fetch process's eager lease, taken for the request's 29 s, within 30 s).

The plans, the effects ledger and the driving are the dev server's torture's
(bench/torture_common.py): every step body posts its step id to the ledger, with its
worker's generation. At the end the deployment's runs, journals and signals are exported to
a SQLite store and bench/torture_check.py counts, as for the dev server; on top, an effect
recorded after its step's outcome was journaled is a bad repeat (generations overlap here,
so the check is by time). Every bad count must be 0.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import random
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.torture_check import Report, accept_killed_attempts, check  # noqa: E402
from bench.torture_common import (  # noqa: E402
    GEN_HEADER,
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

LEASE_MS = 5_000
RENEW_S = 1.5
RECONCILE_AFTER_S = 2.0
# A start still pending this long is indexed by the reconciler (a killed fetch process left
# it): over a request's eager budget (1 s), so mostly starts whose request died.
STRANDED_AFTER_S = 5.0
STALE_RUNNING_S = 8.0
WORKER_TIMEOUT_S = 120.0  # each batch's context: far more than a torture step needs


MIN_KILLS = 3  # kills go on past the driving until this many, however fast the machine
QUIESCE_S = 60.0  # the longest the driver waits, once every run settled, for no wake-up left


@dataclass
class AwsSettings:
    runs: int = 200
    rate: float = 6.0
    clients: int = 8
    seed: int = 1
    kills: bool = True
    kill_min: float = 0.5
    kill_max: float = 3.0
    dup: float = 0.3  # signals sent twice
    workers: int = 3  # worker processes at once
    fetch_kills: float = 0.3  # the share of kills that hit a fetch process (else a worker)
    redeliver: float = 0.1  # processed wake messages delivered again
    lose: float = 0.05  # received wake messages lost
    delay: float = 0.05  # received wake messages held back 1-5 s
    effect_ms: float = 10.0
    wait_s: float = 120.0
    settle_s: float = 180.0
    work: Path | None = None
    keep: bool = False


@dataclass
class AwsOutcome:
    report: Report
    text: str
    kills: int
    seconds: float
    work: Path
    driver_errors: list[str] = field(default_factory=list)
    failed_by_kills: int = 0  # planned runs failed after 3 starts, each start's worker killed
    awaiting_failed_child: int = 0  # parents still awaiting the signal of such a failed child
    fetch_kills: int = 0  # SIGKILLs of fetch processes

    @property
    def ok(self) -> bool:
        return self.report.ok and not self.driver_errors


# --- a worker process -------------------------------------------------------------------------


def _process_platform(project: str, data: str, endpoint: str, gen: int) -> Any:
    """A Lambda container of a process of its own (a worker's or a fetch function's) on the
    deployment: its step bodies post to the ledger with its generation, and every journal
    chunk it writes is logged (``audit``)."""
    from runtime.core.clock import SystemClock
    from runtime.services import builtins
    from runtime.testing import AwsPlatform

    def http(spec: dict[str, Any], body: bytes | None) -> dict[str, Any]:
        headers = {**(spec.get("headers") or {}), GEN_HEADER: str(gen)}
        return builtins.http_request({**spec, "headers": headers}, body)

    class Container(AwsPlatform):
        def settle(self) -> None:
            pass  # this process only plays its function: nothing else serves wakes here

    p = Container(project, data_dir=data, endpoint_url=endpoint, clock=SystemClock(), http=http, strict=False)
    audit(p.clients.dynamodb, Path(data).parent / "logs" / f"chunks-{gen}.txt")
    return p


def fetch_main(argv: list[str]) -> None:
    """One fetch function container's life: a request a line on stdin (``{"path", "value"}``),
    its answer a line on the pipe that was stdout; what the process prints (log lines) goes
    to its log, stderr."""
    ap = argparse.ArgumentParser()
    ap.add_argument("project")
    ap.add_argument("data")
    ap.add_argument("endpoint")
    ap.add_argument("gen", type=int)
    a = ap.parse_args(argv)
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)

    from runtime.aws.config import MAX_EAGER_MS
    from runtime.aws.contract import FETCH_TIMEOUT_S, Handler
    from runtime.aws.events import http_event

    p = _process_platform(a.project, a.data, a.endpoint, a.gen)
    rt = p.runtime
    # The longest budget (-c eagerMs=10000): the waits' "after-go" step (8 s timeout) then
    # runs in the signal's request, beside workers killed at random.
    rt.eager_ms = MAX_EAGER_MS
    answers.write("ready\n")
    answers.flush()
    for line in sys.stdin:
        request = json.loads(line)
        event = http_event(
            "POST",
            request["path"],
            json.dumps(request["value"]),
            {"content-type": "application/json"},
            now_s=time.time(),
        )
        try:
            answer = p.invoke(Handler.FETCH, event, FETCH_TIMEOUT_S, rt)
        except Exception as e:  # reported to the driver, which counts it as an error
            answer = {"statusCode": 599, "body": f"{type(e).__name__}: {e}"}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


def worker_main(argv: list[str]) -> None:
    """One worker Lambda's life: receive, maybe lose or delay, invoke, delete or redeliver."""
    ap = argparse.ArgumentParser()
    ap.add_argument("project")
    ap.add_argument("data")
    ap.add_argument("endpoint")
    ap.add_argument("gen", type=int)
    ap.add_argument("--redeliver", type=float)
    ap.add_argument("--lose", type=float)
    ap.add_argument("--delay", type=float)
    a = ap.parse_args(argv)

    from runtime.aws.contract import Handler
    from runtime.aws.events import sqs_event

    p = _process_platform(a.project, a.data, a.endpoint, a.gen)
    rt = p.runtime
    rt.lease_ms, rt.renew_s = LEASE_MS, RENEW_S
    # The runner is a function of its own: a container of its own here, with its own lease
    # owner, racing this process's worker and every other process's.
    runner = p.container(p.project)
    runner.lease_ms, runner.renew_s = LEASE_MS, RENEW_S
    rng = random.Random(a.gen)
    sqs, url, arn = p.clients.sqs, p.config.wake_queue_url, p.config.wake_queue_arn
    print(f"worker {a.gen} ready", flush=True)
    while True:
        # The fetch processes' hand-offs, as Lambda invokes the runner (the worker's code): an
        # event each, gone whatever becomes of it (no retries: the reconciler heals), and now
        # and then delivered twice (Lambda's event queue is at least once).
        for event in p.runner_events.take() if p.runner_events is not None else []:
            for _ in range(2 if rng.random() < a.redeliver else 1):
                try:
                    p.invoke(Handler.RUNNER, event, WORKER_TIMEOUT_S, runner)
                except Exception as e:  # dropped, as Lambda drops a failed event with no retries
                    print(f"hand-off of {event.get('run_id')} failed: {type(e).__name__}: {e}", flush=True)
        got = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"]
        ).get("Messages", [])
        if not got:
            time.sleep(0.05)  # an empty queue: poll again shortly (the server answers at once)
            continue
        batch = []
        for m in got:
            roll = rng.random()
            if roll < a.lose:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
                print(f"lost {m['Body']}", flush=True)
            elif roll < a.lose + a.delay:
                sqs.change_message_visibility(
                    QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=rng.randint(1, 5)
                )
            else:
                batch.append(m)
        if not batch:
            continue
        try:
            answer = p.invoke(Handler.WORKER, sqs_event(batch, arn, p.region), WORKER_TIMEOUT_S, rt)
            failed = {f["itemIdentifier"] for f in (answer or {}).get("batchItemFailures", [])}
        except Exception:
            failed = {m["MessageId"] for m in batch}
        for m in batch:
            if m["MessageId"] in failed:
                continue  # SQS keeps it (visible again after its timeout); the reconciler heals sooner
            if rng.random() < a.redeliver:
                sqs.change_message_visibility(
                    QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0
                )
            else:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def audit(dynamodb: Any, path: Path) -> None:
    """Log every journal chunk this process writes (its conditional PutItem succeeded): a
    journal position written twice would show as one slot logged twice."""
    pending = threading.local()
    out = open(path, "a", encoding="utf-8")  # noqa: SIM115 (lives as long as the process)

    def before(params: dict[str, Any], **_: Any) -> None:
        pending.slots = written_slots(params)

    def after(http_response: Any, **_: Any) -> None:
        slots = getattr(pending, "slots", [])
        if slots and http_response.status_code == 200:
            out.write("".join(f"{pk} {sk}\n" for pk, sk in slots))
            out.flush()
            os.fsync(out.fileno())
        pending.slots = []

    for op in ("PutItem", "UpdateItem"):
        dynamodb.meta.events.register(f"before-parameter-build.dynamodb.{op}", before)
        dynamodb.meta.events.register(f"after-call.dynamodb.{op}", after)


def written_slots(params: dict[str, Any]) -> list[tuple[str, str]]:
    """The journal entries a chunk's put or in-place growth writes, or a run item's head
    (``runtime.store.dynamodb_chunks.HEAD``), each as its own slot (``J#<seq>``): a chunk of
    the older layout is one slot, its first entry's."""
    item = params.get("Item", {})
    if item.get("sk", {}).get("S", "").startswith("J#"):
        if "rows" not in item:
            return [(item["pk"]["S"], item["sk"]["S"])]
        batches = [e["S"] for e in item["rows"]["L"]]
        pk = item["pk"]["S"]
    elif "list_append" in params.get("UpdateExpression", "") and params["Key"]["sk"]["S"].startswith("J#"):
        batches = [e["S"] for e in params["ExpressionAttributeValues"][":batch"]["L"]]
        pk = params["Key"]["pk"]["S"]
    elif ":hbatch" in params.get("ExpressionAttributeValues", {}):  # the run item's head
        batches = [e["S"] for e in params["ExpressionAttributeValues"][":hbatch"]["L"]]
        pk = params["Key"]["pk"]["S"]
    else:
        return []
    if any(b.startswith("@") for b in batches):  # the rows are in S3: the batch's last entry
        last = item["last"] if item else params["ExpressionAttributeValues"][":last"]
        return [(pk, f"J#{int(last['N']):010d}")]
    return [(pk, f"J#{row[0]:010d}") for b in batches for row in json.loads(b)]


def audited_slots(report: Report, logs: Path) -> None:
    """The chunk writes every worker logged: each slot of a run's journal written once."""
    written: Counter[str] = Counter()
    for path in logs.glob("chunks-*.txt"):
        written.update(line for line in path.read_text(encoding="utf-8").splitlines() if line)
    report.audit_installed = True
    for slot, times in written.items():
        if times > 1:
            report.note("positions_written_twice", f"{slot}: written {times} times")


class Workers:
    """The worker processes, each a generation in the ledger."""

    def __init__(self, settings: AwsSettings, data: Path, endpoint: str, ledger: Ledger, logs: Path) -> None:
        self.settings, self.data, self.endpoint, self.ledger, self.logs = (
            settings,
            data,
            endpoint,
            ledger,
            logs,
        )
        self.live: dict[int, subprocess.Popen[bytes]] = {}
        self.gen = 0
        self.kills = 0
        self.lock = threading.Lock()

    def next_gen(self) -> int:
        """A new generation, for a worker or a fetch process, recorded in the ledger."""
        with self.lock:
            self.gen += 1
            gen = self.gen
        self.ledger.write("INSERT INTO gens (gen, spawned_at) VALUES (?, ?)", (gen, time.time()))
        return gen

    def spawn(self) -> None:
        gen = self.next_gen()
        out = open(self.logs / f"worker-{gen}.log", "wb")  # noqa: SIM115 (the process owns it)
        process = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--worker",
                str(PROJECT),
                str(self.data),
                self.endpoint,
                str(gen),
                "--redeliver",
                str(self.settings.redeliver),
                "--lose",
                str(self.settings.lose),
                "--delay",
                str(self.settings.delay),
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), "POWERTOOLS_METRICS_DISABLED": "true"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        with self.lock:
            self.live[gen] = process

    def kill_one(self, rng: random.Random) -> None:
        with self.lock:
            if not self.live:
                return
            gen = rng.choice(sorted(self.live))
            process = self.live.pop(gen)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        # Dead on its own before the signal: the checker's server death, not a kill.
        ended_by = "sigkill" if process.returncode == -signal.SIGKILL else f"died (exit {process.returncode})"
        self.kills += ended_by == "sigkill"
        self.ledger.write(
            "UPDATE gens SET ended_at = ?, ended_by = ? WHERE gen = ?", (time.time(), ended_by, gen)
        )

    def stop(self) -> None:
        with self.lock:
            live, self.live = dict(self.live), {}
        for gen, process in live.items():
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
            self.ledger.write(
                "UPDATE gens SET ended_at = ?, ended_by = 'stop' WHERE gen = ?", (time.time(), gen)
            )

    def output(self) -> list[str]:
        return [
            p.read_text(encoding="utf-8", errors="replace") for p in sorted(self.logs.glob("worker-*.log"))
        ]


class Fetchers:
    """The fetch function's containers: a process per driver thread, started when the thread
    first sends, each a generation in the ledger. The killer SIGKILLs them as it does the
    workers, a process in the middle of a request first; a thread whose process died sends
    its request again to a new one (a client retrying a 502), so a start joins its run and a
    signal may be stored twice, as one sent twice is."""

    READY_S = 120.0  # the longest a new process may take to answer "ready" (a loaded machine)

    def __init__(self, workers: Workers, data: Path, endpoint: str) -> None:
        self.workers, self.data, self.endpoint = workers, data, endpoint
        self.local = threading.local()
        self.live: dict[int, subprocess.Popen[str]] = {}
        self.busy: set[int] = set()  # generations with a request sent and not yet answered
        self.lock = threading.Lock()
        self.closing = False
        self.kills = 0
        self.mid_request = 0  # kills of a process while it had a request
        self.resent = 0  # requests a process had when it died, sent again

    def _spawn(self) -> tuple[int, subprocess.Popen[str]]:
        gen = self.workers.next_gen()
        log = open(self.workers.logs / f"fetch-{gen}.log", "wb")  # noqa: SIM115 (the process owns it)
        with self.lock:
            if self.closing:
                log.close()
                self.workers.ledger.write(
                    "UPDATE gens SET ended_at = ?, ended_by = 'stop' WHERE gen = ?", (time.time(), gen)
                )
                raise RuntimeError("the torture is stopping: no new fetch process")
            process = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--fetch"]
                + [str(PROJECT), str(self.data), self.endpoint, str(gen)],
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT), "POWERTOOLS_METRICS_DISABLED": "true"},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
            # Live from its start: the killer may take it while it starts, and stop() ends it.
            self.live[gen] = process
        log.close()  # the child holds its own descriptor
        assert process.stdout is not None
        ready = select.select([process.stdout], [], [], self.READY_S)[0]
        if not ready or process.stdout.readline().strip() != "ready":
            self._ended(gen, process)
            raise _Died(gen)
        return gen, process

    def _ended(self, gen: int, process: subprocess.Popen[str]) -> None:
        """A process found ended (EOF, a broken pipe, no "ready"): killed by us, already
        recorded, or dead on its own, recorded here as the checker's server death."""
        with self.lock:
            ours = gen not in self.live
            self.live.pop(gen, None)
            self.busy.discard(gen)
        if not ours:
            process.kill()
            process.wait(timeout=30)
            self.workers.ledger.write(
                "UPDATE gens SET ended_at = ?, ended_by = ? WHERE gen = ?",
                (time.time(), f"died (exit {process.returncode})", gen),
            )
        for pipe in (process.stdin, process.stdout):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()

    def call(self, path: str, value: Any) -> dict[str, Any]:
        request = json.dumps({"path": path, "value": value}) + "\n"
        for _ in range(20):
            mine = getattr(self.local, "process", None)
            if mine is None:
                try:
                    mine = self.local.process = self._spawn()
                except _Died:
                    continue
            gen, process = mine
            assert process.stdin is not None and process.stdout is not None
            sent, line = False, ""
            with self.lock:
                self.busy.add(gen)
            try:
                process.stdin.write(request)
                process.stdin.flush()
                sent = True
                line = process.stdout.readline()
            except (BrokenPipeError, OSError):
                pass
            with self.lock:
                self.busy.discard(gen)
            if line.endswith("\n"):
                answer: dict[str, Any] = json.loads(line)
                return answer
            self.local.process = None
            self._ended(gen, process)
            if sent:
                with self.lock:
                    self.resent += 1
        raise RuntimeError(f"POST {path}: no fetch process answered in 20 tries")

    def kill_one(self, rng: random.Random) -> bool:
        """SIGKILL one live fetch process, one with a request if any; False if none is live."""
        with self.lock:
            if not self.live:
                return False
            busy = sorted(self.busy & set(self.live))
            gen = rng.choice(busy or sorted(self.live))
            process = self.live.pop(gen)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        # Dead on its own before the signal (not yet noticed by its thread): not a kill.
        ended_by = "sigkill" if process.returncode == -signal.SIGKILL else f"died (exit {process.returncode})"
        self.workers.ledger.write(
            "UPDATE gens SET ended_at = ?, ended_by = ? WHERE gen = ?", (time.time(), ended_by, gen)
        )
        if ended_by == "sigkill":
            self.kills += 1
            self.mid_request += bool(busy)
        return True

    def stop(self) -> None:
        with self.lock:
            self.closing = True
            live, self.live = dict(self.live), {}
        for gen, process in live.items():
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
            ended_by = (
                "stop" if process.returncode == -signal.SIGKILL else f"died (exit {process.returncode})"
            )
            self.workers.ledger.write(
                "UPDATE gens SET ended_at = ?, ended_by = ? WHERE gen = ?", (time.time(), ended_by, gen)
            )

    def output(self) -> list[str]:
        logs = sorted(self.workers.logs.glob("fetch-*.log"))
        return [p.read_text(encoding="utf-8", errors="replace") for p in logs]


class _Died(Exception):
    """A fetch process that never answered "ready"."""

    def __init__(self, gen: int) -> None:
        super().__init__(f"fetch process {gen} did not start")


# --- the driver --------------------------------------------------------------------------------


class Front(RunStates):
    """The fetch function (a process per driver thread: ``Fetchers``), and the runs' states."""

    interval_s = 0.25

    def __init__(self, platform: Any, fetchers: Fetchers, run_ids: list[str]) -> None:
        self.p = platform
        self.fetchers = fetchers
        self.store: Any = None  # the watching thread's container's
        self.run_ids = run_ids
        super().__init__()

    def call(self, path: str, value: Any) -> Any:
        answer = self.fetchers.call(path, value)
        if answer["statusCode"] != 200:
            raise RuntimeError(f"POST {path} {value}: {answer['statusCode']} {answer.get('body', '')[:300]}")
        return json.loads(answer["body"])

    def _read(self) -> dict[str, State] | None:
        """The planned runs' run items, by key, those not ended yet: a list of every run
        would query every shard of an index four times a second, and moto answers an index
        query by scanning the whole table, so the watching alone would slow the workers
        more and more as the journals grow."""
        if self.store is None:
            self.store = self.p.container(self.p.project).store
        states = dict(self.states)
        try:
            items = self.store._items(
                [r for r in self.run_ids if not has_ended(states.get(r))],
                "id, #st, current_step",
                {"#st": "status"},
            )
        except Exception:
            return None
        for run_id, item in items.items():
            step = item.get("current_step", {}).get("S")
            states[run_id] = (item["status"]["S"], step)
        return states


def drive(front: Front, ledger: Ledger, plan: Plan, wait_s: float, stats: Counter[str]) -> None:
    def count(what: str) -> None:
        stats[what] += 1

    front.call("/t/start", {"workflow": plan.workflow, "id": plan.run_id, "input": plan.input})
    count("runs started")
    send_signals(plan, ledger, front, wait_s, front.call, count)


# --- export and the check by time ---------------------------------------------------------------


def export(store: Any, data: Path) -> None:
    """The deployment's runs, journals and signals as a lunaflow SQLite store (what
    bench/torture_check.py reads). Signal ids are per run on DynamoDB and global in SQLite,
    so each run's are moved into a range of its own (journal references too)."""
    from runtime.core.values import compact
    from runtime.store.sqlite import STORE_FILE, SQLiteStore

    SQLiteStore(data / STORE_FILE).close()
    db = sqlite3.connect(str(data / STORE_FILE))
    try:
        for index, run in enumerate(store.list_runs(limit=10_000_000), start=1):
            base = index * 1_000_000
            journal = store.journal(run.id)
            db.execute(
                "INSERT INTO runs (id, workflow, status, input, result, error, parent_id, current_step, "
                "created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    run.id,
                    run.workflow,
                    run.status,
                    compact(run.input),
                    None if run.result is None else compact(run.result),
                    run.error,
                    run.parent_id,
                    run.current_step,
                    run.created_at,
                ),
            )
            for e in journal:
                data_ = dict(e.data)
                if e.kind == "wait.done" and data_.get("signal_id") is not None:
                    data_["signal_id"] = base + int(data_["signal_id"])
                db.execute(
                    "INSERT INTO journal (run_id, seq, kind, name, data, at) VALUES (?,?,?,?,?,?)",
                    (run.id, e.seq, e.kind, e.name, compact(data_), e.at),
                )
            for sig in store.signals(run.id):
                db.execute(
                    "INSERT INTO signals (id, run_id, name, payload, at, state, consumed_seq) "
                    "VALUES (?,?,?,?,?,?,?)",
                    (
                        base + sig.id,
                        run.id,
                        sig.name,
                        compact(sig.payload),
                        sig.at,
                        sig.state,
                        sig.consumed_seq,
                    ),
                )
        db.commit()
    finally:
        db.close()


def repeats_after_outcome(report: Report, data: Path, ledger_file: Path) -> None:
    """An effect the ledger recorded after its step's outcome was journaled ran when it
    should not have (the body that produced the outcome posted before it returned)."""
    from runtime.store.sqlite import STORE_FILE

    db = sqlite3.connect(str(data / STORE_FILE))
    outcome_at: dict[str, float] = {}
    try:
        open_intents: dict[tuple[str, str], str] = {}
        for run_id, kind, name, text_, at in db.execute(
            "SELECT run_id, kind, name, data, at FROM journal ORDER BY run_id, seq"
        ):
            if kind == "step.intent":
                open_intents[(run_id, name)] = json.loads(text_)["step_id"]
            elif kind in ("step.result", "step.failed") and (run_id, name) in open_intents:
                outcome_at[open_intents.pop((run_id, name))] = at
    finally:
        db.close()
    ledger = sqlite3.connect(str(ledger_file))
    try:
        for step_id, gen, at in ledger.execute("SELECT step_id, gen, at FROM effects"):
            done = outcome_at.get(step_id)
            if done is not None and at > done + 0.001:
                report.note(
                    "bad_repeats", f"{step_id}: run by generation {gen} after its outcome was journaled"
                )
    finally:
        ledger.close()


def interrupted_by_kills(report: Report, data: Path, logs: Path, ledger_file: Path) -> tuple[int, int, int]:
    """``accept_killed_attempts`` for the AWS path, where several workers write at once: an
    entry's writer is the generation whose chunk audit log (``chunks-<gen>.txt``) names the
    chunk the entry is in."""
    from runtime.store.sqlite import STORE_FILE

    chunks: dict[str, list[tuple[int, int]]] = {}  # run id -> (first seq, generation)
    for path in logs.glob("chunks-*.txt"):
        gen = int(path.stem.split("-", 1)[1])
        for line in path.read_text(encoding="utf-8").splitlines():
            if line:
                pk, sk = line.split()
                chunks.setdefault(pk.removeprefix("RUN#"), []).append((int(sk.removeprefix("J#")), gen))

    def writer(run_id: str, seq: int, at: float) -> int | None:
        before = [(first, gen) for first, gen in chunks.get(run_id, []) if first <= seq]
        return max(before)[1] if before else None

    return accept_killed_attempts(report, data / STORE_FILE, ledger_file, writer)


# --- the run -------------------------------------------------------------------------------------


def run_aws(settings: AwsSettings, out: Callable[[str], None] = print) -> AwsOutcome:
    from runtime.aws.motoserver import MotoServer
    from runtime.core.clock import SystemClock
    from runtime.testing import AwsPlatform

    rng = random.Random(settings.seed)
    work = Path(tempfile.mkdtemp(prefix="lunaflow-torture-aws-")) if settings.work is None else settings.work
    work.mkdir(parents=True, exist_ok=True)
    (work / "logs").mkdir(exist_ok=True)
    server = MotoServer()  # a server of its own: the torture's load stays out of other harnesses'
    deployment = work / "deployment"
    ledger = Ledger(work / "ledger.sqlite", settings.effect_ms)
    plans = make_plans(settings.runs, rng, ledger.url, settings.dup)
    record_plans(ledger, plans)
    platform = AwsPlatform(
        PROJECT, data_dir=deployment, endpoint_url=server.endpoint, clock=SystemClock(), strict=False
    )
    platform.runtime.reconcile_after_s, platform.runtime.stale_running_s = RECONCILE_AFTER_S, STALE_RUNNING_S
    platform.runtime.stranded_after_s = STRANDED_AFTER_S
    workers = Workers(settings, deployment, server.endpoint, ledger, work / "logs")
    fetchers = Fetchers(workers, deployment, server.endpoint)
    children = {c[0]: p.run_id for p in plans for c in p.children}
    front = Front(platform, fetchers, list(children) + [p.run_id for p in plans])
    stop = threading.Event()
    calm = threading.Event()  # set once every run is driven: no more kills
    stats: Counter[str] = Counter()
    errors: list[str] = []
    began = time.monotonic()
    try:
        for _ in range(settings.workers):
            workers.spawn()

        def reconcile_loop() -> None:
            while not stop.wait(1.0):
                try:
                    answer = platform.reconcile()
                    stats["wakes re-sent by the reconciler"] += len(answer.get("rewoken", []))
                    stats["pending starts indexed by the reconciler"] += len(platform.runtime.stranded)
                except Exception as e:
                    errors.append(f"reconcile: {e}")

        min_fetch_kills = 1 if settings.fetch_kills > 0 else 0

        def kill_loop() -> None:
            krng = random.Random(settings.seed + 1)
            while not stop.wait(krng.uniform(settings.kill_min, settings.kill_max)) and (
                not calm.is_set() or workers.kills < MIN_KILLS or fetchers.kills < min_fetch_kills
            ):
                if krng.random() < settings.fetch_kills and fetchers.kill_one(krng):
                    continue  # its thread starts a new one when it next sends
                workers.kill_one(krng)
                workers.spawn()

        threads = [threading.Thread(target=reconcile_loop, name="reconcile", daemon=True)]
        if settings.kills:
            threads.append(threading.Thread(target=kill_loop, name="killer", daemon=True))
        for t in threads:
            t.start()
        drive_all(
            plans,
            settings.clients,
            settings.rate,
            lambda plan: drive(front, ledger, plan, settings.wait_s, stats),
            errors.append,
        )
        # Every run is driven: the kills stop, so the runs left finish however slow the
        # machine is (a kill rate a loaded machine cannot outpace would decide the verdict).
        calm.set()
        all_ids = front.run_ids  # children first: parents follow them
        child_of = {parent: child for child, parent in children.items()}
        settle_by = time.monotonic() + settings.settle_s

        def settled(run_id: str, st: State | None) -> bool:
            if has_ended(st):
                return True
            # A parent awaiting a child that failed will never hear from it: settled too
            # (the checker judges whether the child's failure was the rule's).
            child = front.states.get(child_of.get(run_id, ""))
            return st is not None and st[0] == "awaiting" and child is not None and child[0] == "failed"

        for run_id in all_ids:
            ended = front.wait(
                run_id,
                functools.partial(settled, run_id),
                max(0.0, settle_by - time.monotonic()),
            )
            stats["runs ended" if ended else "runs not ended in time"] += 1
        # However fast the runs went, the workers were killed a few times.
        kills_by = time.monotonic() + MIN_KILLS * settings.kill_max * 2
        while (
            settings.kills
            and (workers.kills < MIN_KILLS or fetchers.kills < min_fetch_kills)
            and time.monotonic() < kills_by
        ):
            time.sleep(0.1)
        # A run woken after it settled (a wake delivered late or twice, a child's failure
        # waking its parent) is being served: the lease that serves it marks it running
        # until it parks again, and the workers are stopped by SIGKILL. So they are stopped
        # once no wake-up waits (an activation keeps its wake-up until it parks or ends).
        quiet_by = time.monotonic() + QUIESCE_S
        while platform.runtime.store.wakeups() and time.monotonic() < quiet_by:
            time.sleep(0.2)
        stats["wake-ups left at the stop"] = len(platform.runtime.store.wakeups())
        stop.set()
        for t in threads:
            t.join(timeout=30)
        workers.stop()
        fetchers.stop()
    finally:
        stop.set()
        front.stop()
        workers.stop()
        fetchers.stop()
        with contextlib.suppress(Exception):
            ledger.quiesce(timeout=5)
        ledger.close()
    seconds = time.monotonic() - began
    exported = work / "exported"
    exported.mkdir(exist_ok=True)
    export(platform.runtime.store, exported)
    server.close()
    logs = workers.output() + fetchers.output() + [json.dumps(r) for r in platform.logs]
    report = check(PROJECT, exported, work / "ledger.sqlite", logs=logs)
    repeats_after_outcome(report, exported, work / "ledger.sqlite")
    audited_slots(report, work / "logs")
    failed_by_kills, orphaned, retried = interrupted_by_kills(
        report, exported, work / "logs", work / "ledger.sqlite"
    )
    stats["runs failed after 3 killed starts"] = failed_by_kills
    stats["steps retried after 3 killed starts"] = retried
    stats["parents awaiting a child failed so"] = orphaned
    lost = sum(line.startswith("lost ") for text in workers.output() for line in text.splitlines())
    stats["wake messages lost (deleted unprocessed)"] = lost
    stats["requests resent as their fetch process died"] = fetchers.resent
    stats["fetch processes killed mid-request"] = fetchers.mid_request
    lines = [
        f"lunaflow crash torture on the AWS path: {settings.runs} runs started at most "
        f"{settings.rate:g}/s by {settings.clients} clients through the fetch handler (seed {settings.seed}, "
        f"{int(settings.dup * 100)}% of signals sent twice), project {PROJECT.relative_to(ROOT)}",
        f"{settings.workers} worker processes at once on a moto server; SQS: "
        f"{int(settings.redeliver * 100)}% of processed wakes delivered again, "
        f"{int(settings.lose * 100)}% of received wakes lost, "
        f"{int(settings.delay * 100)}% held back 1-5 s; leases {LEASE_MS // 1000} s, reconcile every 1 s "
        f"(a wake-up waiting {RECONCILE_AFTER_S:g} s is taken for lost)",
    ]
    if settings.kills:
        lines.append(
            f"SIGKILLs: {workers.kills} of worker processes, {fetchers.kills} of fetch processes "
            f"(a share of {settings.fetch_kills:g}), every {settings.kill_min:g}-{settings.kill_max:g} s"
        )
    lines += [f"wall time: {seconds:.1f} s", "driver"]
    for name, n in sorted(stats.items()):
        lines.append(f"  {name:<44}{n}")
    lines.append(f"  {'driver errors':<44}{len(errors)}")
    for e in errors[:5]:
        lines.append(f"      e.g. {e}")
    lines.append(report.format())
    text = "\n".join(lines)
    out(text)
    outcome = AwsOutcome(
        report, text, workers.kills, seconds, work, errors, failed_by_kills, orphaned, fetchers.kills
    )
    if not settings.keep and settings.work is None and outcome.ok:
        shutil.rmtree(work, ignore_errors=True)
    else:
        out(f"exported store, ledger and worker logs kept in {work}")
    return outcome


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2:])
    elif len(sys.argv) > 1 and sys.argv[1] == "--fetch":
        fetch_main(sys.argv[2:])
    else:
        sys.exit(run_aws(AwsSettings()).ok and 0 or 1)
