"""One slow thing must not stop everything else in ``lunaflow dev`` (issue 14, points 7-8).

Slow upstreams are a loopback server the test runs, released when the test ends.
"""

from __future__ import annotations

import logging
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import pytest

from runtime.core.journal import Status
from runtime.dev.server import DevServer as InProcessServer
from tests.support.devserver import DevServer, Reply, Servers
from tests.support.stress import Folder, SlowUpstream, poll

# --- point 7: a slow query does not block other queries on the database ---------------------

SLOW_DB = r"""
local db = database "main" {}

workflow "long-query" (function(wf, input)
  return wf:step("query", function()
    return db:first("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 30000000) "
      .. "SELECT count(*) AS n FROM c").n
  end)
end)

on "fetch" (function(request)
  if request.path == "/start" then
    workflows "long-query":start(nil, { id = "q1" })
    return { status_code = 200, body = "started" }
  end
  if request.path == "/read" then
    return { status_code = 200, body = tostring(db:first("SELECT 1 AS one").one) }
  end
  if request.path == "/write" then
    return { status_code = 200, body = tostring(db:exec("CREATE TABLE IF NOT EXISTS t (x INTEGER)").changes) }
  end
  return { status_code = 200, body = "ok" }
end)
"""


def test_a_route_reading_a_database_does_not_wait_behind_a_long_query_in_a_run(
    make_project: Callable[..., Path], servers: Servers, folder: Folder
) -> None:
    """Point 7. A run's step runs a query of several seconds on database "main"; meanwhile
    a route reads one row of it, and answers within 3 s, the query's six not over (a reader
    has its own connection),
    and a write is not refused. Before: one connection behind one lock, so the route
    waited for the long query to end."""
    srv = servers.start(make_project({"main.lua": SLOW_DB}), folder.data)
    assert srv.get("/read").body == "1"
    srv.get("/start")
    assert poll("the step to run", lambda: folder.status("q1") == Status.RUNNING, 10, interval=0.02)
    time.sleep(0.3)  # the query is under way
    t0 = time.monotonic()
    reply = srv.get("/read", timeout=15)
    elapsed = time.monotonic() - t0
    assert reply.status == 200 and reply.body == "1", reply
    assert folder.status("q1") == Status.RUNNING, "the long query ended before the read: nothing was shown"
    assert elapsed < 3.0, f"a one-row read waited {elapsed:.1f} s behind the run's long query"
    assert srv.get("/write", timeout=15).status == 200


# --- point 8: requests, runs and timers do not share one unbounded pool ---------------------

POOL = r"""
workflow "nap" (function(wf, input)
  wf:sleep("1s")
  return "rested"
end)

on "fetch" (function(request)
  if request.path == "/start" then
    workflows "nap":start(nil, { id = request.query.id })
    return { status_code = 200, body = "started" }
  end
  if request.path == "/slow" then
    return { status_code = 200, body = http.get(request.query.url).body }
  end
  return { status_code = 200, body = "pong" }
end)
"""

HOLDERS = 12  # requests held by the slow upstream at once: more than the request states


def _hold(get: Callable[[str], Reply | None], upstream: SlowUpstream, n: int) -> ThreadPoolExecutor:
    pool = ThreadPoolExecutor(max_workers=n)
    url = quote(upstream.url("/hold"), safe="")
    for _ in range(n):
        pool.submit(get, f"/slow?url={url}")
    assert poll("requests at the upstream", lambda: upstream.total() >= 2, 10)
    time.sleep(0.2)
    return pool


def test_a_run_sleep_keeps_its_time_while_requests_wait_on_a_slow_upstream(
    make_project: Callable[..., Path], servers: Servers, folder: Folder, upstream: SlowUpstream
) -> None:
    """Point 8 (runs and timers keep their own capacity). A run sleeps 1 s while 12 requests
    wait on an upstream that holds them for 20 s; the run completes within 10 s of its
    start (a loaded machine's share of it). Before: requests, run workers and the
    dispatcher borrowed from one pool of four Lua states with no timeout, and the run
    stayed asleep until the upstream let go."""
    upstream.delay = 20.0
    srv: DevServer = servers.start(make_project({"main.lua": POOL}), folder.data)
    t0 = time.monotonic()
    srv.get("/start?id=n1")
    pool = _hold(lambda path: srv.try_request("GET", path, timeout=25), upstream, HOLDERS)
    try:
        done = poll(
            "the run to complete", lambda: folder.status("n1") == Status.COMPLETED, t0 + 10 - time.monotonic()
        )
        assert done, (
            f"a 1 s wf:sleep is still {folder.status('n1')} {time.monotonic() - t0:.1f} s after its start, "
            f"while {HOLDERS} requests wait on a slow upstream"
        )
    finally:
        upstream.released.set()
        pool.shutdown(wait=False, cancel_futures=True)


def test_a_request_that_cannot_get_a_lua_state_in_time_gets_a_503(
    make_project: Callable[..., Path],
    tmp_path: Path,
    upstream: SlowUpstream,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Point 8 (a bounded wait for a state). With 2 Lua states for requests and a 0.5 s
    wait, 12 requests wait on an upstream that holds them; a plain request then gets, within
    3 s, a 503 with a body that says why and a retry-after, and a warning is logged. Before:
    a request waited without bound for a pooled Lua state."""
    upstream.delay = 20.0
    server = InProcessServer(
        make_project({"main.lua": POOL}), data=tmp_path / "data", port=0, request_states=2, request_wait_s=0.5
    )
    server.start()
    base = "http://{}:{}".format(*server.address)

    def get(path: str) -> Reply | None:
        try:
            with urllib.request.urlopen(base + path, timeout=25) as resp:
                return Reply(resp.status, dict(resp.headers), resp.read().decode())
        except urllib.error.HTTPError as e:
            with e:
                return Reply(e.code, {k.lower(): v for k, v in e.headers.items()}, e.read().decode())
        except OSError:
            return None

    pool = None
    try:
        with caplog.at_level(logging.WARNING, logger="lunaflow.dev"):
            pool = _hold(get, upstream, HOLDERS)
            t0 = time.monotonic()
            reply = get("/ping")
            elapsed = time.monotonic() - t0
        assert reply is not None and reply.status == 503, reply
        assert elapsed < 3, f"the 503 came after {elapsed:.1f} s"
        assert "Lua states" in reply.body and reply.headers.get("retry-after"), reply
        assert any("503" in r.getMessage() and "/ping" in r.getMessage() for r in caplog.records), caplog.text
    finally:
        upstream.released.set()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        server.stop()


# --- resources: requests do not keep what their threads opened ------------------------------

KV_AND_DB = r"""
local cache = kv "c"
local db = database "d" {}
on "fetch" (function(request)
  cache:put("k", #request.path)
  return { status_code = 200, body = tostring(db:first("SELECT 1 AS one").one) }
end)
"""


def test_requests_using_kv_and_a_database_do_not_pile_up_open_files(
    make_project: Callable[..., Path], servers: Servers, folder: Folder
) -> None:
    """lunaflow dev serves each request on a thread of its own: 300 requests that use kv and
    a database leave the server with about the open files it had after the first ones (a
    connection per request thread was kept until the server stopped, so some 600 files more
    here, and a busy server ran out of them)."""
    srv = servers.start(make_project({"main.lua": KV_AND_DB}), folder.data)
    for _ in range(20):
        assert srv.get("/").body == "1"
    before = len(os.listdir(f"/proc/{srv.proc.pid}/fd"))
    for _ in range(300):
        assert srv.get("/").body == "1"
    after = len(os.listdir(f"/proc/{srv.proc.pid}/fd"))
    assert after - before < 30, f"{after - before} more open files after 300 requests"
