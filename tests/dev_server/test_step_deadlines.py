"""A step's timeout and the per-call budgets hold across every call (issue 14, points 4-5).

Through real ``lunaflow dev`` processes: runs are started by a route and watched in the data
folder. Outbound HTTP is reachable from a step only through an object (http is absent in run
code), so a slow upstream is reached as step body -> object method -> http.get.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from runtime.core.journal import Kind, Status
from runtime.store.base import RunRecord
from tests.support.devserver import DevServer, Servers
from tests.support.stress import Folder, SlowUpstream, poll

START_ROUTE = r"""
on "fetch" (function(request)
  if request.path == "/start" then
    workflows (request.query.wf):start(request.query.arg, { id = request.query.id })
    return { status_code = 200, body = "started" }
  end
  return { status_code = 200, body = "ok" }
end)
"""


def _start(srv: DevServer, wf: str, run_id: str, arg: str = "") -> float:
    t0 = time.monotonic()
    reply = srv.get(f"/start?wf={wf}&id={run_id}&arg={arg}", timeout=10)
    assert reply.status == 200, reply
    return t0


def _ended(folder: Folder, run_id: str, timeout: float) -> RunRecord:
    run = poll(f"run {run_id} to end", lambda: folder.ended(run_id), timeout)
    assert run is not None, f"run {run_id} is still {folder.status(run_id)} after {timeout} s"
    return run


def _attempt_took(folder: Folder, run_id: str) -> float:
    """Seconds from the last attempt's intent (journaled just before its body ran) to the
    entry that ended it: the span the step's timeout bounds, without the server's start of
    the run, its hand-off to a worker and this test's polls, which a loaded machine stretches."""
    journal = folder.journal(run_id)
    intents = [i for i, e in enumerate(journal) if e.kind == Kind.STEP_INTENT]
    assert intents and intents[-1] + 1 < len(journal), [(e.seq, e.kind) for e in journal]
    return journal[intents[-1] + 1].at - journal[intents[-1]].at


# --- point 4: nested calls share the outer deadline and budgets ------------------------------

NESTED = (
    START_ROUTE
    + r"""
object "Registrar" { ping = function(self) return "pong" end }
local Registrar = objects "Registrar"

workflow "ping-then-spin" (function(wf, input)
  return wf:step("spin", { timeout = "300ms" }, function()
    Registrar("desk"):ping()
    local n = 0
    while true do n = n + 1 end
  end)
end)

workflow "ping-forever-timeout" (function(wf, input)
  return wf:step("pings", { timeout = "500ms" }, function()
    while true do Registrar("desk"):ping() end
  end)
end)

workflow "ping-forever" (function(wf, input)
  return wf:step("pings", function()
    while true do Registrar("desk"):ping() end
  end)
end)
"""
)

TIGHT = 'name = "tight"\n[limits]\ninstructions = 50000\ncpu_seconds = 1\n'


def test_a_step_timeout_still_holds_after_an_object_call(
    make_project: Callable[..., Path], servers: Servers, folder: Folder
) -> None:
    """Point 4 (the deadline). A step with timeout = "300ms" calls an object, then loops:
    the run fails with `step 'spin' timed out after 300ms`, the attempt ending within 2 s of
    its intent. Before: the object call, treated as a new top-level call, cleared the
    deadline and the loop ran on to the 200M-instruction budget."""
    srv = servers.start(make_project({"main.lua": NESTED}), folder.data)
    _start(srv, "ping-then-spin", "spin1")
    run = _ended(folder, "spin1", 30)
    assert run.status == Status.FAILED and "step 'spin' timed out after 300ms" in (run.error or ""), run
    took = _attempt_took(folder, "spin1")
    assert took < 2, f"the 300ms timeout stopped the step only after {took:.1f} s"


def test_a_loop_of_object_calls_stops_at_the_step_timeout(
    make_project: Callable[..., Path], servers: Servers, folder: Folder
) -> None:
    """Point 4 (the deadline across calls). `while true do Registrar("desk"):ping() end` in a
    step with timeout = "500ms" fails with the timeout (or a budget it shares with the object
    calls). Before: every object call reset the deadline and the budgets: it never stopped."""
    srv = servers.start(make_project({"lunaflow.toml": TIGHT, "main.lua": NESTED}), folder.data)
    _start(srv, "ping-forever-timeout", "pf1")
    run = _ended(folder, "pf1", 5)
    assert run.status == Status.FAILED, run
    assert "step 'pings' timed out after 500ms" in (run.error or "") or "call stopped" in (run.error or ""), (
        run
    )


def test_a_loop_of_object_calls_stops_at_the_shared_budget(
    make_project: Callable[..., Path], servers: Servers, folder: Folder
) -> None:
    """Point 4 (the budgets, no timeout). The same loop without a timeout, under
    instructions = 50000 and cpu_seconds = 1: the run fails with `call stopped: ...`, the
    budget the body shares with the object calls it makes. Before: each object call started
    fresh budgets and the step never stopped."""
    srv = servers.start(make_project({"lunaflow.toml": TIGHT, "main.lua": NESTED}), folder.data)
    _start(srv, "ping-forever", "pf2")
    run = _ended(folder, "pf2", 5)
    assert run.status == Status.FAILED and "call stopped: it" in (run.error or ""), run


# --- point 5: a step's timeout bounds host calls -------------------------------------------

HOST_CALLS = (
    START_ROUTE
    + r"""
object "Fetcher" { get = function(self, url) return http.get(url).status end }
local Fetcher = objects "Fetcher"
local db = database "slow" {}

workflow "slow-http" (function(wf, url)
  return wf:step("call", { timeout = "1s" }, function() return Fetcher("x"):get(url) end)
end)

workflow "slow-query" (function(wf, input)
  return wf:step("query", { timeout = "100ms" }, function()
    return db:first("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 15000000) "
      .. "SELECT count(*) AS n FROM c").n
  end)
end)

workflow "slow-instruction" (function(wf, input)
  local s = string.rep("a", 64 * 1024 * 1024)  -- made in run code: the body is a few instructions
  return wf:step("upper", { timeout = "10ms" }, function() return #s:upper() end)
end)
"""
)


def test_http_from_a_step_is_cut_at_the_step_timeout(
    make_project: Callable[..., Path], servers: Servers, folder: Folder, upstream: SlowUpstream
) -> None:
    """Point 5 (HTTP). A step with timeout = "1s" calls an object whose method does
    http.get on an upstream that answers after 8 s: the run fails with `step 'call' timed
    out after 1000ms`, the attempt ending within 3 s (the HTTP call gets the step's remaining time). Before:
    the body waited the 8 s and the run completed with the answer."""
    upstream.delay = 8.0
    srv = servers.start(make_project({"main.lua": HOST_CALLS}), folder.data)
    _start(srv, "slow-http", "h1", upstream.url("/slow"))
    run = _ended(folder, "h1", 30)
    assert run.status == Status.FAILED and "step 'call' timed out after 1000ms" in (run.error or ""), run
    took = _attempt_took(folder, "h1")
    assert took < 3, f"the 1s timeout ended the step only after {took:.1f} s (the upstream answers at 8 s)"


def test_a_database_query_from_a_step_is_interrupted_at_the_step_timeout(
    make_project: Callable[..., Path], servers: Servers, folder: Folder
) -> None:
    """Point 5 (SQLite). A step with timeout = "100ms" runs a query of several seconds:
    the run fails with `step 'query' timed out after 100ms`, the attempt ending within 1 s (the query is
    interrupted). Before: the query ran to its end and the step was recorded as completed."""
    srv = servers.start(make_project({"main.lua": HOST_CALLS}), folder.data)
    _start(srv, "slow-query", "q1")
    run = _ended(folder, "q1", 30)
    assert run.status == Status.FAILED and "step 'query' timed out after 100ms" in (run.error or ""), run
    took = _attempt_took(folder, "q1")
    assert took < 1.0, f"the 100ms timeout ended the step only after {took:.1f} s"


def test_an_attempt_that_returns_past_its_deadline_has_timed_out(
    make_project: Callable[..., Path], servers: Servers, folder: Folder
) -> None:
    """Point 5 (returned past the deadline). A step with timeout = "10ms" whose body is a
    handful of instructions, one of them slow: upper() of a 64 MiB string made in run code
    (tens of ms in C; the body ends before the count hook reads the clock again). The
    attempt is recorded as `step 'upper' timed out after 10ms`. Before: the deadline was
    only read by the count hook, and the step was recorded as completed."""
    srv = servers.start(make_project({"main.lua": HOST_CALLS}), folder.data)
    _start(srv, "slow-instruction", "u1")
    run = _ended(folder, "u1", 10)
    assert run.status == Status.FAILED and "step 'upper' timed out after 10ms" in (run.error or ""), run
