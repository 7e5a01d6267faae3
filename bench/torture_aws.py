#!/usr/bin/env python3
"""Crash torture on the AWS path: ``python3 bench/torture.py --aws``.

The torture project (tests/projects/torture) runs through the Lambda handlers on a moto
server process (``AwsPlatform``'s deployment, the real clock), while:

- several worker processes at once play the worker Lambda: each receives batches from the
  wake queue and calls the worker handler with a container of its own; they are SIGKILLed
  at random instants (mid-step, mid-batch) and replaced;
- the workers take SQS at its worst: a share of the processed messages is delivered again
  (at-least-once delivery), a share of the received ones is lost (deleted unprocessed) or
  delayed (left invisible for 1-5 s);
- driver threads start runs and send signals through the fetch handler (a share twice, some
  before the run waits), each thread with a container of its own;
- the reconcile rule runs every second, with its thresholds cut to seconds (a lost wake
  heals in about two), and leases last 5 s (a killed worker's run is free within 5 s).

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

from bench.torture_check import Report, check  # noqa: E402
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

    @property
    def ok(self) -> bool:
        return self.report.ok and not self.driver_errors


# --- a worker process -------------------------------------------------------------------------


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
    from runtime.core.clock import SystemClock
    from runtime.services import builtins
    from runtime.testing import AwsPlatform

    def http(spec: dict[str, Any], data: bytes | None) -> dict[str, Any]:
        headers = {**(spec.get("headers") or {}), GEN_HEADER: str(a.gen)}
        return builtins.http_request({**spec, "headers": headers}, data)

    class Worker(AwsPlatform):
        def settle(self) -> None:
            pass  # this process only plays the worker Lambda, below

    p = Worker(
        a.project, data_dir=a.data, endpoint_url=a.endpoint, clock=SystemClock(), http=http, strict=False
    )
    rt = p.runtime
    rt.lease_ms, rt.renew_s = LEASE_MS, RENEW_S
    audit(p.clients.dynamodb, Path(a.data).parent / "logs" / f"chunks-{a.gen}.txt")
    rng = random.Random(a.gen)
    sqs, url, arn = p.clients.sqs, p.config.wake_queue_url, p.config.wake_queue_arn
    print(f"worker {a.gen} ready", flush=True)
    while True:
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
    """The journal entries a chunk's put or in-place growth writes, each as its own slot
    (``J#<seq>``): a chunk of the older layout is one slot, its first entry's."""
    item = params.get("Item", {})
    if item.get("sk", {}).get("S", "").startswith("J#"):
        if "rows" not in item:
            return [(item["pk"]["S"], item["sk"]["S"])]
        batches = [e["S"] for e in item["rows"]["L"]]
        pk = item["pk"]["S"]
    elif "list_append" in params.get("UpdateExpression", "") and params["Key"]["sk"]["S"].startswith("J#"):
        batches = [e["S"] for e in params["ExpressionAttributeValues"][":batch"]["L"]]
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

    def spawn(self) -> None:
        with self.lock:
            self.gen += 1
            gen = self.gen
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
        self.ledger.write("INSERT INTO gens (gen, spawned_at) VALUES (?, ?)", (gen, time.time()))
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
        self.kills += 1
        self.ledger.write(
            "UPDATE gens SET ended_at = ?, ended_by = 'sigkill' WHERE gen = ?", (time.time(), gen)
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


# --- the driver --------------------------------------------------------------------------------


class Front(RunStates):
    """The fetch function: one container per driver thread, and the runs' states."""

    interval_s = 0.25

    def __init__(self, platform: Any, run_ids: list[str]) -> None:
        self.p = platform
        self.local = threading.local()
        self.store: Any = None  # the watching thread's container's
        self.run_ids = run_ids
        super().__init__()

    def call(self, path: str, value: Any) -> Any:
        from runtime.aws.config import MAX_EAGER_MS
        from runtime.aws.contract import FETCH_TIMEOUT_S, Handler
        from runtime.aws.events import http_event

        rt = getattr(self.local, "rt", None)
        if rt is None:
            rt = self.local.rt = self.p.container(self.p.project)
            # The longest budget (-c eagerMs=10000): the waits' "after-go" step (8 s timeout)
            # then runs in the signal's request, beside workers killed at random.
            rt.eager_ms = MAX_EAGER_MS
        event = http_event(
            "POST", path, json.dumps(value), {"content-type": "application/json"}, now_s=time.time()
        )
        answer = self.p.invoke(Handler.FETCH, event, FETCH_TIMEOUT_S, rt)
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
    """Planned runs changed by the rule for interrupted attempts (``... was interrupted 3
    times: the process running it ended``) where the rule was what the platform promises:
    each of the attempt's three starts was journaled by a worker generation that was
    SIGKILLed before the attempt's next entry. With workers killed every few seconds, and a
    killed worker's object lock holding its key for up to 10 s (a start waiting on it is
    killed too), this happens to a run now and then. Such a run is counted here, not as a
    run not as expected; one changed by the rule without three killed writers stays a bad
    count. The rule's consequences are accepted too:

    - a step without retries fails its run;
    - a parent still awaits the signal such a failed child would have sent (``parent``
      awaits ``child_done``, which the failed child never sends);
    - a ``chain`` run's ``flaky`` step, which has retries, goes on to its next attempt, so
      it completes with an attempt number one higher per such failure than planned (and
      ``last`` higher by as much): it is counted as completed as expected.

    Returns ``(failed by the rule, parents awaiting such a child, chains retried so)``."""
    from runtime.store.sqlite import STORE_FILE

    chunks: dict[str, list[tuple[int, int]]] = {}  # run id -> (first seq, generation)
    for path in logs.glob("chunks-*.txt"):
        gen = int(path.stem.split("-", 1)[1])
        for line in path.read_text(encoding="utf-8").splitlines():
            if line:
                pk, sk = line.split()
                chunks.setdefault(pk.removeprefix("RUN#"), []).append((int(sk.removeprefix("J#")), gen))
    ledger = sqlite3.connect(str(ledger_file))
    try:
        plans = {row[0]: (row[1], json.loads(row[2])) for row in ledger.execute("SELECT * FROM plans")}
        killed_at = {
            gen: float(ended_at)
            for gen, ended_at, ended_by in ledger.execute("SELECT gen, ended_at, ended_by FROM gens")
            if ended_by == "sigkill" and ended_at is not None
        }
    finally:
        ledger.close()

    def killed_before(run_id: str, seq: int, end: float) -> bool:
        """Whether the worker that wrote entry ``seq`` was killed by ``end``."""
        before = [(first, gen) for first, gen in chunks.get(run_id, []) if first <= seq]
        gen = max(before)[1] if before else None
        return gen in killed_at and killed_at[gen] <= end

    db = sqlite3.connect(str(data / STORE_FILE))

    def interrupted(run_id: str) -> list[tuple[str, int, bool]]:
        """Each attempt of the run failed as interrupted: (step, attempt, whether each of its
        three starts was written by a worker killed before the attempt's next entry)."""
        found: list[tuple[str, int, bool]] = []
        starts: list[int] = []
        ends: list[float] = []
        query = "SELECT seq, kind, name, data, at FROM journal WHERE run_id = ? ORDER BY seq"
        for seq, kind, name, text, at in db.execute(query, (run_id,)).fetchall():
            if kind == "step.intent":
                starts, ends = [seq], []
            elif kind in ("step.rerun", "step.failed") and len(ends) < len(starts):
                ends.append(at)
                if kind == "step.rerun":
                    starts.append(seq)
            if kind == "step.failed":
                data = json.loads(text)
                if "was interrupted 3 times" in str(data.get("error", "")):
                    pairs = list(zip(starts, ends, strict=False))
                    killed = len(pairs) == len(starts) == 3 and all(killed_before(run_id, *p) for p in pairs)
                    found.append((name, int(data.get("attempt", 0)), killed))
        return found

    def accept(run_id: str) -> None:
        report.runs_not_as_expected -= 1
        notes = report.examples.get("runs_not_as_expected", [])
        report.examples["runs_not_as_expected"] = [n for n in notes if not n.startswith(f"{run_id}:")]

    accepted: list[str] = []
    retried = 0
    try:
        query = "SELECT DISTINCT run_id FROM journal WHERE kind = 'step.failed' AND data LIKE ?"
        candidates = [row[0] for row in db.execute(query, ("%was interrupted 3 times%",)).fetchall()]
        for run_id in candidates:
            if run_id not in plans:
                continue
            failures = interrupted(run_id)
            if not failures or not all(killed for _, _, killed in failures):
                continue
            status, result = db.execute("SELECT status, result FROM runs WHERE id = ?", (run_id,)).fetchone()
            workflow, expected = plans[run_id]
            if status == "failed":
                accept(run_id)
                accepted.append(run_id)
            elif status == "completed" and workflow == "chain" and all(f[0] == "flaky" for f in failures):
                fails = expected["flaky"] - 1  # the attempts that fail by the plan
                extra = sum(1 for _, attempt, _ in failures if attempt > fails)
                moved = {**expected, "flaky": expected["flaky"] + extra, "last": expected["last"] + extra}
                if extra and result is not None and json.loads(result) == moved:
                    accept(run_id)
                    report.runs_completed_as_expected += 1
                    retried += 1
        parents = 0
        for run_id in accepted:
            row = db.execute("SELECT parent_id FROM runs WHERE id = ?", (run_id,)).fetchone()
            parent = row[0] if row else None
            if parent is None or parent not in plans:
                continue
            found = db.execute("SELECT status FROM runs WHERE id = ?", (parent,)).fetchone()
            if found is not None and found[0] == "awaiting":
                accept(parent)
                parents += 1
    finally:
        db.close()
    return len(accepted), parents, retried


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
    workers = Workers(settings, deployment, server.endpoint, ledger, work / "logs")
    children = {c[0]: p.run_id for p in plans for c in p.children}
    front = Front(platform, list(children) + [p.run_id for p in plans])
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
                except Exception as e:
                    errors.append(f"reconcile: {e}")

        def kill_loop() -> None:
            krng = random.Random(settings.seed + 1)
            while not stop.wait(krng.uniform(settings.kill_min, settings.kill_max)) and (
                not calm.is_set() or workers.kills < MIN_KILLS
            ):
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
        while settings.kills and workers.kills < MIN_KILLS and time.monotonic() < kills_by:
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
    finally:
        stop.set()
        front.stop()
        workers.stop()
        with contextlib.suppress(Exception):
            ledger.quiesce(timeout=5)
        ledger.close()
    seconds = time.monotonic() - began
    exported = work / "exported"
    exported.mkdir(exist_ok=True)
    export(platform.runtime.store, exported)
    server.close()
    logs = workers.output() + [json.dumps(r) for r in platform.logs]
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
            f"SIGKILLs of worker processes: {workers.kills}, "
            f"every {settings.kill_min:g}-{settings.kill_max:g} s"
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
    outcome = AwsOutcome(report, text, workers.kills, seconds, work, errors, failed_by_kills, orphaned)
    if not settings.keep and settings.work is None and outcome.ok:
        shutil.rmtree(work, ignore_errors=True)
    else:
        out(f"exported store, ledger and worker logs kept in {work}")
    return outcome


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2:])
    else:
        sys.exit(run_aws(AwsSettings()).ok and 0 or 1)
