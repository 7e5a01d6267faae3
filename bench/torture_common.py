"""What both crash tortures share: the dev server's (bench/torture.py) and the AWS path's
(bench/torture_aws.py). Neither imports the other; both import this.

- the project they run (tests/projects/torture) and the run statuses that end a run;
- the effects ledger (``Ledger``): the SQLite file outside lunaflow and the loopback HTTP
  server every step body posts its step id to, each row tagged with its generation (the
  AWS mode's worker processes name theirs in the ``GEN_HEADER`` header);
- the plans (``make_plans``): which runs the driver starts, with which input, which signals
  it sends them (some twice, some once the run waits) and the result each must end with,
  written to the ledger for bench/torture_check.py (``record_plans``);
- the driving both do alike: client threads taking the plans at a bounded rate
  (``drive_all``), the runs' states polled for the waits (``RunStates``), and a plan's
  signals sent and acknowledged in the ledger (``send_signals``).
"""

from __future__ import annotations

import itertools
import json
import queue
import random
import select
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.torture_check import open_ledger

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ROOT / "tests" / "projects" / "torture"

GEN_HEADER = "x-lunaflow-gen"  # the AWS mode's worker processes send their generation
ENDED_OR_FAILED = ("completed", "failed", "cancelled")

State = tuple[str, str | None]  # a run's status and current step
StatePredicate = Callable[[State | None], bool]


# --- the effects ledger ----------------------------------------------------------------


class Ledger:
    """The SQLite file outside lunaflow and the loopback HTTP server step bodies post to."""

    def __init__(self, path: Path, effect_ms: float = 0.0) -> None:
        self.path = path
        self.effect_ms = effect_ms
        self.rng = random.Random(2)
        self.db = open_ledger(path)
        self.lock = threading.Lock()
        self.gen = 0
        self.answers_lost = 0  # effects done whose poster died before reading the answer
        self._inflight = 0
        self._inflight_lock = threading.Lock()
        self.on_kill: Callable[[int], None] | None = None  # a body asked to end its server
        self._ended: dict[int, threading.Event] = {}
        ledger = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                # The generation: the header's (AWS mode: each worker process names its own), else
                # the dev server's of the moment (the requests of a dead one are all handled
                # before it moves).
                gen = int(self.headers.get(GEN_HEADER) or ledger.gen)
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                if self.path not in ("/effect", "/effect/kill") or not body or len(body) != length:
                    self._answer(400, "want POST /effect with the step id as the body")
                    return
                ledger.effect(body.decode("utf-8"), gen)
                if self.path == "/effect/kill" and ledger.on_kill is not None:
                    # The body asks to be killed: no answer until its server is dead.
                    ledger.on_kill(gen)
                    ledger.ended(gen).wait(timeout=60)
                if ledger.effect_ms:  # the effect is done; its answer takes a while, as over a network
                    time.sleep(ledger.rng.uniform(0, 2 * ledger.effect_ms) / 1000)
                self._answer(200, "ok")

            def _answer(self, status: int, text: str) -> None:
                payload = text.encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "text/plain")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the dev server was killed while it waited for the answer
                    ledger.answers_lost += 1

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256

            def process_request(self, request: Any, client_address: Any) -> None:
                with ledger._inflight_lock:
                    ledger._inflight += 1
                try:
                    super().process_request(request, client_address)
                except BaseException:
                    ledger._done()
                    raise

            def handle_error(self, request: Any, client_address: Any) -> None:
                if not isinstance(sys.exc_info()[1], OSError):  # a dead client is expected here
                    super().handle_error(request, client_address)

            def process_request_thread(self, request: Any, client_address: Any) -> None:
                try:
                    super().process_request_thread(request, client_address)
                finally:
                    ledger._done()

        self.server = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="ledger", daemon=True)
        self.thread.start()

    def _done(self) -> None:
        with self._inflight_lock:
            self._inflight -= 1

    def ended(self, gen: int) -> threading.Event:
        """Set once generation ``gen``'s servers are dead."""
        with self._inflight_lock:
            return self._ended.setdefault(gen, threading.Event())

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def write(self, sql: str, args: tuple[Any, ...]) -> None:
        with self.lock:
            self.db.execute(sql, args)

    def effect(self, step_id: str, gen: int) -> None:
        self.write("INSERT INTO effects (step_id, gen, at) VALUES (?,?,?)", (step_id, gen, time.time()))

    def quiesce(self, timeout: float = 30.0) -> None:
        """Return once no request is being handled or waiting to be accepted (three looks
        in a row): after a SIGKILL, every effect the dead process posted is in."""
        deadline = time.monotonic() + timeout
        quiet = 0
        while quiet < 3:
            pending, _, _ = select.select([self.server.socket], [], [], 0)
            with self._inflight_lock:
                busy = self._inflight
            quiet = 0 if (busy or pending) else quiet + 1
            if time.monotonic() > deadline:
                raise RuntimeError("the ledger did not go quiet")
            time.sleep(0.01)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        with self.lock:
            self.db.close()


# --- what the driver plans ------------------------------------------------------------------


@dataclass
class Sig:
    name: str
    value: int
    nonce: str
    copies: int
    wait: str | None  # send once the run waits here (its current step); None: at once


@dataclass
class Plan:
    run_id: str
    workflow: str
    input: dict[str, Any]
    expected: Any
    signals: list[Sig] = field(default_factory=list)
    children: list[tuple[str, str, Any]] = field(default_factory=list)  # (id, workflow, expected)


BASE_MIX = {"chain": 40, "waits": 35, "parent": 25}
LIMITS_MIX = {"hungry": 3, "slowcalls": 3, "doomed": 1}


def make_plans(
    n: int,
    rng: random.Random,
    ledger_url: str,
    dup: float,
    mix: dict[str, int] | None = None,
    slow_url: str = "",
) -> list[Plan]:
    mix = mix or BASE_MIX
    plans = []
    nonces = 0
    expected: dict[str, Any]

    def sig(name: str, wait: str | None) -> Sig:
        nonlocal nonces
        nonces += 1
        copies = 2 if rng.random() < dup else 1
        return Sig(name, rng.randint(1, 100), f"s{nonces}", copies, wait)

    def timing(wait: str) -> str | None:
        return wait if rng.random() < 0.5 else None

    for i in range(1, n + 1):
        kind = rng.choices(list(mix), weights=list(mix.values()))[0]
        run_id = f"{kind}-{i:04d}"
        k = rng.randint(1, 9)
        if kind in LIMITS_MIX:
            # Each fails in its first attempt only (out of memory, timed out in a host call,
            # its process killed three times), so the result is the input's.
            inp = {"ledger": ledger_url, "k": k, "slow": slow_url}
            expected = {
                "hungry": {"eaten": k},
                "slowcalls": {"status": 200, "n": k},
                "doomed": {"survived": True, "k": k},
            }[kind]
            plans.append(Plan(run_id, kind, inp, expected))
        elif kind == "chain":
            steps, fails = rng.randint(2, 5), rng.choice([0, 0, 1, 2])
            nap = rng.choice(["100ms", "250ms", "400ms"])
            total = k * steps * (steps + 1) // 2
            expected = {"total": total, "flaky": fails + 1, "ticks": 2, "last": total + fails + 1 + 2}
            inp = {"ledger": ledger_url, "n": steps, "k": k, "fails": fails, "nap": nap}
            plans.append(Plan(run_id, "chain", inp, expected))
        elif kind == "waits":
            go = sig("go", timing("await 'go'"))
            first_name = rng.choice(["left", "right"])
            second_name = "right" if first_name == "left" else "left"
            first = sig(first_name, timing("race ('left', 'right')"))
            second = sig(second_name, timing(f"await '{second_name}'"))
            x = sig("x", timing("all 'x'"))
            y = sig("y", timing("all 'y'"))
            if rng.random() < 0.5:
                xy = [x, y]
            else:
                y.wait = None  # sent before x, so it cannot wait for its own turn
                xy = [y, x]
            expected = {
                "go": go.value,
                "winner": first_name,
                "first": first.value,
                "second": second.value,
                "x": x.value,
                "y": y.value,
                "timed_out": True,
                "sum": k + go.value + first.value + second.value + x.value + y.value,
            }
            inp = {"ledger": ledger_url, "k": k}
            plans.append(Plan(run_id, "waits", inp, expected, [go, first, second, *xy]))
        else:
            s = 6 * k
            expected = {"child": f"{run_id}-c", "v": s, "doubled": 2 * s}
            inp = {"ledger": ledger_url, "k": k}
            plans.append(Plan(run_id, "parent", inp, expected, children=[(f"{run_id}-c", "child", {"s": s})]))
    return plans


def record_plans(ledger: Ledger, plans: list[Plan]) -> None:
    """Every planned run, children included, with its expected result: what the checker
    compares the store with."""
    for p in plans:
        ledger.write("INSERT INTO plans VALUES (?,?,?)", (p.run_id, p.workflow, json.dumps(p.expected)))
        for child_id, wf, expected in p.children:
            ledger.write("INSERT INTO plans VALUES (?,?,?)", (child_id, wf, json.dumps(expected)))


# --- watching the runs ------------------------------------------------------------------------


def has_ended(st: State | None) -> bool:
    """The run has ended, one way or another."""
    return st is not None and st[0] in ENDED_OR_FAILED


def at_wait(wait: str) -> StatePredicate:
    """The run waits at ``wait`` (its current step), or can no longer reach it."""

    def reached(st: State | None) -> bool:
        return st is not None and (st == ("awaiting", wait) or st[0] in ENDED_OR_FAILED)

    return reached


class RunStates:
    """Every run's status and current step, read again every ``interval_s`` by a thread of
    its own (from ``_read``, which a subclass provides), for the driver to wait on."""

    interval_s = 0.1

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.states: dict[str, State] = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="watch", daemon=True)
        self.thread.start()

    def _read(self) -> dict[str, State] | None:
        """Every run's state, or None when they cannot be read this time."""
        raise NotImplementedError

    def _close(self) -> None:
        """Let go of what ``_read`` holds (called on the watching thread, at its end)."""

    def _loop(self) -> None:
        try:
            while not self.stopping.is_set():
                states = self._read()
                if states is not None:
                    with self.cond:
                        self.states = states
                        self.cond.notify_all()
                self.stopping.wait(self.interval_s)
        finally:
            self._close()

    def wait(self, run_id: str, pred: StatePredicate, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: pred(self.states.get(run_id)), timeout=timeout)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=10)


# --- driving ----------------------------------------------------------------------------------


def send_signals(
    plan: Plan,
    ledger: Ledger,
    states: RunStates,
    wait_s: float,
    post: Callable[[str, Any], Any],
    count: Callable[[str], None],
) -> None:
    """Send the plan's signals in order, each once the run waits for it when the plan says
    so (within ``wait_s``), each of its copies through ``post(path, value)``; the ledger
    records each signal and each copy's acknowledgement (was the run live)."""
    for s in plan.signals:
        if s.wait is not None:
            reached = states.wait(plan.run_id, at_wait(s.wait), wait_s)
            count("signals sent after the run waited" if reached else "waits not reached in time")
        ledger.write("INSERT INTO logical_signals VALUES (?,?,?,?)", (s.nonce, plan.run_id, s.name, s.copies))
        for copy in range(s.copies):
            payload = {"v": s.value, "n": s.nonce, "c": copy + 1}
            answer = post(
                "/t/signal",
                {"workflow": plan.workflow, "id": plan.run_id, "name": s.name, "payload": payload},
            )
            ledger.write(
                "INSERT INTO acks (nonce, live, at) VALUES (?,?,?)",
                (s.nonce, 1 if answer.get("live") else 0, time.time()),
            )
            count("signal copies acknowledged")


def drive_all(
    plans: list[Plan],
    clients: int,
    rate: float,
    drive: Callable[[Plan], None],
    failed: Callable[[str], None],
) -> None:
    """``clients`` threads take the plans in turn and ``drive`` each, the n-th no sooner than
    n / ``rate`` seconds from now (so the load spans the kills); a plan whose driving raised
    is reported to ``failed`` (``run id: error``) and the others go on. Returns once every
    plan is driven."""
    todo: queue.Queue[Plan] = queue.Queue()
    for p in plans:
        todo.put(p)
    slots = itertools.count()
    slot_lock = threading.Lock()
    first = time.monotonic()

    def pace() -> None:
        with slot_lock:
            slot = next(slots)
        delay = first + slot / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def client() -> None:
        while True:
            try:
                plan = todo.get_nowait()
            except queue.Empty:
                return
            pace()
            try:
                drive(plan)
            except Exception as e:  # the checker will count the run; keep driving the others
                failed(f"{plan.run_id}: {e}")

    threads = [threading.Thread(target=client, name=f"client-{i}", daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
