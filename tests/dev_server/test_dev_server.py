"""``lunaflow dev`` as a real process over real HTTP on loopback (SPEC section 5).

The acceptance test drives a copy of examples/auction made at import (the example with the race
timeout cut to a few seconds) through 50 sales while the server is killed with SIGKILL
three times and restarted on the same data folder; at the end every sale has the outcome
its requests asked for, no paid sale is lost and no sale is charged twice.

Every wait is bounded (see tests/support/devserver.py); the fixture kills leftover processes.
"""

from __future__ import annotations

import atexit
import http.server
import json
import re
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from runtime.core.journal import Kind
from runtime.store.sqlite import STORE_FILE, SQLiteStore
from tests.support import databases
from tests.support.devserver import PROJECTS, DevServer, Reply, Servers, wait_for

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "auction"
_COPIES = Path(tempfile.mkdtemp(prefix="lunaflow-e2e-auction-"))
atexit.register(shutil.rmtree, _COPIES, True)


def _auction_with_timeout(timeout: str) -> Path:
    """The example as it is, with only its 72h race timeout shortened for a test's clock."""
    target = _COPIES / f"auction-{timeout}"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns(".lunaflow", "tests"))
    sale = target / "sale.lua"
    text = sale.read_text(encoding="utf-8")
    assert text.count('{ timeout = "72h" }') == 1, "the example's race timeout moved"
    sale.write_text(text.replace('{ timeout = "72h" }', f'{{ timeout = "{timeout}" }}'), encoding="utf-8")
    return target


AUCTION = _auction_with_timeout("8s")
AUCTION_2S = _auction_with_timeout("2s")
# The fifty-sales test opens, pays and cancels 50 sales across two kills before the first
# race may time out: on a machine running the suite in parallel that set-up took 7.5 s, and
# 20.6 s with a load average of 8 on its 2 cores.
AUCTION_SLOW_RACE = _auction_with_timeout("30s")
SLOW = PROJECTS / "e2e_slow"

SLOW_RACE_TIMEOUT_S = 30.0  # that of the AUCTION_SLOW_RACE copy
SETTLE_S = 30.0  # bound on every sale reaching its outcome after the last restart


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    s = Servers(tmp_path)
    try:
        yield s
    finally:
        s.close()


def _race_timeout(project: Path) -> float:
    m = re.search(
        r'wf:race\(\{ "paid", "cancelled" \}, \{ timeout = "(\d+)s" \}\)', (project / "sale.lua").read_text()
    )
    assert m, f"{project}/sale.lua no longer has the race this test was written for"
    return float(m.group(1))


def _sale(server: DevServer, sale_id: str) -> dict[str, Any]:
    r = server.get(f"/api/sale/{quote(sale_id)}")
    assert r.status == 200, (sale_id, r)
    value: dict[str, Any] = r.json()
    return value


def _ended(server: DevServer, sale_id: str) -> dict[str, Any] | None:
    """The sale once its run has ended, read again after that: the route reads the sales
    row before the run's status, so one reply can pair an old row with a new status."""
    if _sale(server, sale_id)["run"]["status"] not in ("completed", "cancelled", "failed"):
        return None
    return _sale(server, sale_id)


def _ledger(server: DevServer) -> dict[str, dict[str, Any]]:
    r = server.get("/api/payments")
    assert r.status == 200, r
    value = r.json()
    if value == []:  # an empty Lua table encodes as an array
        return {}
    assert isinstance(value, dict), value
    return value


def _parallel(calls: list[Any], threads: int = 8) -> list[Reply]:
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(lambda call: call(), calls))


def _store(data: Path) -> SQLiteStore:
    return SQLiteStore(data / STORE_FILE)


def test_fifty_sales_reach_their_outcomes_across_three_sigkills(servers: Servers, tmp_path: Path) -> None:
    """SPEC 5: "Killed at any instant and started again, it resumes every run; timers that
    fell due while it was down fire at start." Seed: "Each step, signal and timer is
    journaled before it takes effect"; "a retried start joins the run instead of making a
    second one"; "Duplicate signals are safe ... buttons get clicked twice"; wf.step_id
    "stays the same, so the repeat is recognised" across a crash."""
    assert _race_timeout(AUCTION_SLOW_RACE) == SLOW_RACE_TIMEOUT_S
    data = tmp_path / "data"
    ids = [f"lot-{i:02d}" for i in range(50)]
    price = {sale_id: 10 + i for i, sale_id in enumerate(ids)}
    plan = {sale_id: ("pay", "double", "cancel", "timeout")[i % 4] for i, sale_id in enumerate(ids)}
    doubles = [s for s in ids if plan[s] == "double"]
    clicked_together = doubles[: len(doubles) // 2]  # both clicks at once, before crash 1
    clicked_across = doubles[len(doubles) // 2 :]  # second click after crash 1
    kills: list[float] = []
    t0 = time.monotonic()

    # Server 1: open every sale, then pay; kill it right after the burst.
    s1 = servers.start(AUCTION_SLOW_RACE, data)
    opened = _parallel(
        [
            (lambda s=s: s1.post_json("/api/sale", {"id": s, "winner": f"w{s}", "price": price[s]}))
            for s in ids
        ]
    )
    assert [r.status for r in opened] == [201] * 50, [r for r in opened if r.status != 201][:3]
    assert {r.json()["run"] for r in opened} == {f"sale-{s}" for s in ids}
    pays = []
    for s in ids:
        if plan[s] in ("pay", "double"):
            pays.append(lambda s=s: s1.post_json("/api/sale/pay", {"id": s, "user": f"w{s}"}))
        if s in clicked_together:
            pays.append(lambda s=s: s1.post_json("/api/sale/pay", {"id": s, "user": f"w{s}"}))
    paid_replies = _parallel(pays, threads=12)
    assert {r.status for r in paid_replies} == {202}, [r for r in paid_replies if r.status != 202][:3]
    s1.kill()
    kills.append(time.time())

    # Server 2: cancel some sales and click Pay a second time on others; killed in the middle
    # of that burst. A request cut off by the kill is sent again to the next server, as a
    # client would (both are safe to repeat: a start joins, an extra signal is set aside).
    s2 = servers.start(AUCTION_SLOW_RACE, data)
    burst: list[tuple[str, dict[str, str]]] = [
        ("/api/sale/cancel", {"id": s, "user": "clerk"}) for s in ids if plan[s] == "cancel"
    ] + [("/api/sale/pay", {"id": s, "user": f"w{s}"}) for s in clicked_across]
    replies: dict[int, Reply | None] = {}
    with ThreadPoolExecutor(4) as pool:
        futures = {
            pool.submit(s2.try_request, "POST", path, json.dumps(body)): i
            for i, (path, body) in enumerate(burst)
        }
        for n, future in enumerate(as_completed(futures)):
            replies[futures[future]] = future.result()
            if n == len(burst) // 2:
                s2.kill()
                kills.append(time.time())
    cut_off = [i for i, r in replies.items() if r is None]

    # Server 3: the cut-off requests again; killed just as the unpaid sales' timers fire.
    s3 = servers.start(AUCTION_SLOW_RACE, data)
    for i in cut_off:
        path, body = burst[i]
        replies[i] = s3.post_json(path, body)
    for i, (path, body) in enumerate(burst):
        r = replies[i]
        assert r is not None
        if path.endswith("/pay"):
            assert (r.status, r.json()) == (202, {"sale": body["id"], "run": f"pay-{body['id']}"})
        elif i in cut_off:  # the first try may have landed before the kill
            assert (r.status, r.json()["delivered"]) in ((202, True), (409, False)), r
        else:
            assert (r.status, r.json()) == (202, {"sale": body["id"], "delivered": True}), r
    timeouts = [s for s in ids if plan[s] == "timeout"]
    assert time.monotonic() - t0 < SLOW_RACE_TIMEOUT_S - 1, "the set-up was too slow for the race timeout"
    wait_for(
        "the first unpaid sale's timer to fire",
        lambda: any(_ended(s3, s) for s in timeouts),
        timeout=SLOW_RACE_TIMEOUT_S + 10,
        interval=0.02,
    )
    s3.kill()
    kills.append(time.time())

    # Server 4: finishes everything.
    s4 = servers.start(AUCTION_SLOW_RACE, data)
    for s in ids:
        try:
            wait_for(f"sale {s} to end", lambda s=s: _ended(s4, s), timeout=SETTLE_S)
        except AssertionError as e:  # say where it stands, for a failure seen once in CI
            raise AssertionError(f"{e}\n{_sale(s4, s)}\n{servers.output()[-6000:]}") from None
    ledger = _ledger(s4)
    assert s4.stop(signal.SIGTERM) == 0, servers.output()[-4000:]

    # A fifth start on the same folder reads the same outcomes.
    expected = {"pay": "settled", "double": "settled", "cancel": "void", "timeout": "void"}
    s5 = servers.start(AUCTION_SLOW_RACE, data)
    for s in ids:
        sale = _sale(s5, s)
        assert sale["run"] == {
            "id": f"sale-{s}",
            "status": "completed",
            "result": {"outcome": expected[plan[s]]},
        }, (s, plan[s], sale)
        assert sale["sale"] == {"id": s, "winner": f"w{s}", "price": price[s], "state": expected[plan[s]]}
    assert _ledger(s5) == ledger
    assert s5.stop(signal.SIGTERM) == 0

    # The sales table itself, read from the data folder.
    table = dict(databases.rows(data, "sales", "SELECT id, state FROM sales"))
    assert table == {s: expected[plan[s]] for s in ids}

    # Payments: one charge per paid sale, none for the others, keyed by the charge's step id.
    paid = {s for s in ids if plan[s] in ("pay", "double")}
    by_sale: dict[str, list[str]] = {}
    for key, receipt in ledger.items():
        assert receipt["key"] == key
        run_id, step, pass_, attempt = key.split("/")
        assert run_id.startswith("pay-") and step == "charge" and pass_ == "1", key
        sale_id = run_id[len("pay-") :]
        assert receipt["amount"] == price[sale_id]
        by_sale.setdefault(sale_id, []).append(key)
    assert set(by_sale) == paid
    assert {s: len(keys) for s, keys in by_sale.items()} == {s: 1 for s in paid}, "a sale was charged twice"

    store = _store(data)
    try:
        # Each pay run completed once, with the receipt its charge step recorded.
        for s in paid:
            run = store.get_run(f"pay-{s}")
            assert run is not None and run.status == "completed", (s, run)
            assert run.result["receipt"] == ledger[by_sale[s][0]]["id"]
        for s in ids:
            if s not in paid:
                assert store.get_run(f"pay-{s}") is None
        # A charge is repeated only when a kill fell between its intent and its result.
        repeated = 0
        for s in paid:
            key = by_sale[s][0]
            receipt = ledger[key]
            if receipt["repeats"] == 0:
                continue
            repeated += receipt["repeats"]
            journal = store.journal(f"pay-{s}")
            intent = next(e for e in journal if e.kind == Kind.STEP_INTENT and e.name == "charge")
            result = next(e for e in journal if e.kind == Kind.STEP_RESULT and e.name == "charge")
            assert intent.data["step_id"] == key
            assert any(intent.at <= k <= result.at for k in kills), (
                f"charge {key} was repeated {receipt['repeats']} time(s) with no kill between its "
                f"intent ({intent.at}) and its result ({result.at}); kills at {kills}"
            )
        assert repeated <= len(kills)
        # No paid signal was lost: each paid sale consumed exactly one 'paid' signal.
        for s in paid:
            journal = store.journal(f"sale-{s}")
            done = [e for e in journal if e.kind == Kind.WAIT_DONE]
            assert len(done) == 1 and done[0].data.get("signal") == "paid", (s, [e.as_dict() for e in done])
    finally:
        store.close()
    # A bound against a run left hanging, not a speed target: its timers alone take 30 s,
    # and under a load of 8 on 2 cores the whole took 45-47 s.
    assert time.monotonic() - t0 < 90, "the fifty sales took longer than a minute and a half"


def test_timer_that_fell_due_while_the_server_was_down_fires_at_start(
    servers: Servers, tmp_path: Path
) -> None:
    """SPEC 5: "Killed at any instant and started again, it resumes every run; timers that
    fell due while it was down fire at start." """
    timeout = _race_timeout(AUCTION_2S)
    assert timeout <= 3
    data = tmp_path / "data"
    s1 = servers.start(AUCTION_2S, data)
    assert s1.post_json("/api/sale", {"id": "late", "winner": "ada", "price": 25}).status == 201
    wait_for("the sale to await payment", lambda: _sale(s1, "late")["run"]["status"] == "awaiting", 10)
    s1.kill()
    time.sleep(timeout + 1.0)  # the timer falls due while nothing is running

    s2 = servers.start(AUCTION_2S, data)
    restarted = time.monotonic()
    sale = wait_for("the overdue timer to void the sale", lambda: _ended(s2, "late"), timeout=30)
    took = time.monotonic() - restarted
    assert sale["run"] == {"id": "sale-late", "status": "completed", "result": {"outcome": "void"}}
    assert sale["sale"]["state"] == "void"
    # The fault this catches is an overdue timer that never fires; the bound leaves a loaded
    # machine its start-up and the void step.
    assert took < 10, f"the overdue timer fired {took:.2f}s after start"


def test_concurrent_requests_from_threads_all_succeed(servers: Servers, tmp_path: Path) -> None:
    """SPEC 5: `lunaflow dev` "serves the project's fetch routes, runs runs": many requests
    at once each get their own answer, and every run they start goes on."""
    server = servers.start(AUCTION, tmp_path / "data")
    ids = [f"c-{i}" for i in range(40)]
    opened = _parallel(
        [(lambda s=s: server.post_json("/api/sale", {"id": s, "winner": "ada", "price": 7})) for s in ids],
        threads=20,
    )
    assert [(r.status, r.json()) for r in opened] == [(201, {"sale": s, "run": f"sale-{s}"}) for s in ids]
    paid = _parallel(
        [(lambda s=s: server.post_json("/api/sale/pay", {"id": s, "user": "ada"})) for s in ids],
        threads=20,
    )
    assert [(r.status, r.json()) for r in paid] == [(202, {"sale": s, "run": f"pay-{s}"}) for s in ids]
    for s in ids:
        sale = wait_for(f"sale {s} to end", lambda s=s: _ended(server, s), timeout=SETTLE_S)
        assert sale["run"]["result"] == {"outcome": "settled"}
    reads = _parallel([(lambda s=s: server.get(f"/api/sale/{s}")) for s in ids], threads=20)
    assert [r.json()["sale"]["state"] for r in reads] == ["settled"] * len(ids)


class _SlowUpstream(http.server.ThreadingHTTPServer):
    daemon_threads = True


def _slow_handler(delay: float) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            time.sleep(delay)
            body = b"late"
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def test_several_requests_progress_at_once(servers: Servers, tmp_path: Path) -> None:
    """devserver: "several requests and runs progress at once": three requests whose
    handler each waits 1 s on an upstream finish together, not one after another."""
    delay = 1.0
    upstream = _SlowUpstream(("127.0.0.1", 0), _slow_handler(delay))
    thread = threading.Thread(target=upstream.serve_forever, daemon=True)
    thread.start()
    try:
        server = servers.start(SLOW, tmp_path / "data")
        url = quote(f"http://127.0.0.1:{upstream.server_address[1]}/wait", safe="")
        # Warm every path, and the three request states the timed requests use (the pool
        # builds a state when none is free: that is not what this test times).
        warm = _parallel(
            [(lambda i=i: server.get(f"/slow?tag=warm{i}&upstream={url}")) for i in range(3)], threads=3
        )
        assert [r.status for r in warm] == [200, 200, 200], warm
        started = time.monotonic()
        replies = _parallel(
            [(lambda i=i: server.get(f"/slow?tag=t{i}&upstream={url}")) for i in range(3)], threads=3
        )
        took = time.monotonic() - started
    finally:
        upstream.shutdown()
        upstream.server_close()
    assert [(r.status, r.json()["tag"], r.json()["upstream"]) for r in replies] == [
        (200, f"t{i}", 200) for i in range(3)
    ]
    assert took < 2 * delay, f"3 requests of {delay}s each took {took:.2f}s: they were served one at a time"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_sigint_and_sigterm_stop_the_server_cleanly(servers: Servers, tmp_path: Path, sig: int) -> None:
    """`lunaflow dev` stops on Ctrl-C or a TERM signal: exit code 0, "stopping" printed,
    and the data folder serves the next start (SPEC 5: "State lives in SQLite under DIR")."""
    data = tmp_path / "data"
    s1 = servers.start(AUCTION, data)
    assert s1.post_json("/api/sale", {"id": "done", "winner": "ada", "price": 30}).status == 201
    assert s1.post_json("/api/sale/pay", {"id": "done", "user": "ada"}).status == 202
    wait_for("the paid sale to settle", lambda: _ended(s1, "done"), timeout=SETTLE_S)
    assert s1.post_json("/api/sale", {"id": "open", "winner": "bo", "price": 40}).status == 201
    wait_for("the open sale to await payment", lambda: _sale(s1, "open")["run"]["status"] == "awaiting", 10)
    ledger = _ledger(s1)

    assert s1.stop(sig) == 0, s1.output_tail()
    assert "lunaflow dev: stopping" in s1.stdout()
    assert "Traceback" not in s1.output(), s1.output_tail()

    s2 = servers.start(AUCTION, data)
    done = _sale(s2, "done")
    assert done["run"] == {"id": "sale-done", "status": "completed", "result": {"outcome": "settled"}}
    assert done["sale"]["state"] == "settled"
    assert _sale(s2, "open")["run"]["status"] == "awaiting"
    assert _ledger(s2) == ledger and len(ledger) == 1
    assert s2.post_json("/api/sale/pay", {"id": "open", "user": "bo"}).status == 202
    sale = wait_for("the open sale to settle", lambda: _ended(s2, "open"), timeout=SETTLE_S)
    assert sale["sale"]["state"] == "settled"
    assert len(_ledger(s2)) == 2
    assert s2.stop(signal.SIGTERM) == 0


def test_dev_output_names_the_address_and_the_data_folder(servers: Servers, tmp_path: Path) -> None:
    """SPEC 5: "State lives in SQLite under DIR": the server says where it serves and where
    its state lives, and the store is there."""
    data = tmp_path / "state"
    server = servers.start(AUCTION, data)
    assert f"on http://127.0.0.1:{server.port} (console: /_console)" in server.stdout()
    # Printed just after the address line the start-up waits for: a loaded machine may show
    # the one before the other reaches the pipe.
    wait_for("the data folder line", lambda: f"lunaflow dev: state in {data}" in server.stdout(), timeout=10)
    assert (data / STORE_FILE).exists()
    assert json.loads(server.get("/api/payments").body) in ({}, [])
