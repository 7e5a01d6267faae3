"""A full Lua state fails the call, never the process (issue 14, points 1-3 and 13).

Through real ``lunaflow dev`` processes: a Lua panic is a SIGABRT of the whole process and
a memory error unwinding across Python frames freezes every thread, so only a process shows
either. A project with ``memory_mb = 16`` fills a Lua state close to its limit and keeps
the hoard alive; then something the host converts into Lua (a request, a signal payload, a
step's recorded values, a host function's result) needs more than what is left.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from runtime.core.journal import Status
from tests.support.devserver import DevServer, Servers
from tests.support.stress import FILL_LUA, Folder, poll, rss_kb

TOML = 'name = "mem"\n[limits]\nmemory_mb = 16\n'
LIMIT_ERROR = "ran out of memory (the Lua state's limit is 16 MiB)"


def _serving(srv: DevServer) -> None:
    assert srv.alive, f"lunaflow dev died with exit code {srv.proc.returncode}\n{srv.output_tail()}"
    assert srv.get("/ping", timeout=5).status == 200
    assert "PANIC" not in srv.output(), srv.output_tail()


HOARD_ROUTES = (
    FILL_LUA
    + r"""
on "fetch" (function(request)
  if request.path == "/hoard" then return { status_code = 200, body = fill_memory(64 * 1024) } end
  return { status_code = 200, body = "ok " .. #request.body }
end)
"""
)


def test_a_request_into_a_full_state_is_answered_and_the_server_lives(
    make_project: Callable[..., Path], servers: Servers
) -> None:
    """Points 1 and 3 (the request table). A handler hoards memory in string.HOARD and
    returns; the next request, with a 300 KB body, is converted into a pooled state. Every
    request gets an answer (200 from a rebuilt state, or a 500 whose log line names the
    16 MiB limit) and the process keeps serving. Before: SIGABRT (`PANIC: unprotected error
    in call to Lua API (not enough memory)`)."""
    srv = servers.start(make_project({"lunaflow.toml": TOML, "main.lua": HOARD_ROUTES}))
    for _ in range(3):  # the pool is LIFO: the hoarding state is the next one lent
        assert srv.get("/hoard", timeout=10).status == 200
        reply = srv.request("POST", "/big", "a" * 300_000, timeout=10)
        assert reply.status in (200, 500), reply
        if reply.status == 500:
            assert LIMIT_ERROR in srv.output(), srv.output_tail()
    _serving(srv)


PARKED_RUN = (
    FILL_LUA
    + r"""
workflow "hoarder" (function(wf, input)
  -- Small chunks: the state ends with less free than the signal's 90 KB, whatever the
  -- engine itself allocates around the call.
  fill_memory(8 * 1024)
  local got = wf:await("big")
  return #got
end)
on "fetch" (function(request)
  if request.path == "/start" then
    workflows "hoarder":start(nil, { id = "h1" })
    return { status_code = 200, body = "started" }
  end
  return { status_code = 200, body = "ok" }
end)
"""
)


def test_a_signal_into_a_parked_full_run_fails_the_run_not_the_process(
    make_project: Callable[..., Path], servers: Servers, tmp_path: Path
) -> None:
    """Points 1 and 3 (a wait's reply, then replay after a restart). A run fills its state
    in run code and awaits "big"; a 90 KB signal, sent from another process as the console
    CLI does, is converted into the full state as the await's reply. The server lives and
    keeps serving, a restarted server lives too (no crash loop), and the run is `failed`
    with the limit error naming 16 MiB. Before: SIGABRT, again at every restart."""
    project = make_project({"lunaflow.toml": TOML, "main.lua": PARKED_RUN})
    data = tmp_path / "data"
    folder = Folder(data)
    try:
        srv = servers.start(project, data)
        assert srv.get("/start").status == 200
        assert poll("the run to await", lambda: folder.status("h1") == Status.AWAITING, 15)
        folder.signal("h1", "big", "z" * 90_000)
        # The server polls the store for work written by other processes (every 0.25 s).
        run = poll("the run to end", lambda: not srv.alive or folder.ended("h1"), 10)
        assert srv.alive, (
            f"lunaflow dev died (exit {srv.proc.returncode}) converting the signal\n{srv.output_tail()}"
        )
        _serving(srv)
        srv.kill()
        again = servers.start(project, data)
        _serving(again)
        run = folder.run("h1")
        assert run is not None and run.status == Status.FAILED and LIMIT_ERROR in (run.error or ""), run
    finally:
        folder.close()


STEP_REPLY = (
    FILL_LUA
    + r"""
workflow "big-step" (function(wf, input)
  wf:step("small", function() return 1 end)
  fill_memory(32 * 1024, 16 * 1024)
  -- The first time, the body drops the hoard (Lua's emergency collection frees it) so its
  -- 90 KB result is recorded; on replay the body does not run and the recorded value is
  -- converted into the state run code has just filled.
  local text = wf:step("big", function()
    string.HOARD = nil
    -- Plain allocations (not string.rep's buffer, which fails without collecting first):
    -- the first that fails makes Lua collect the dropped hoard.
    local s = "s"
    while #s < 65536 do s = s .. s end
    return s .. string.sub(s, 1, 26 * 1024)
  end)
  wf:await("go")
  return #text
end)
on "fetch" (function(request)
  if request.path == "/start" then
    workflows "big-step":start(nil, { id = "s1" })
    return { status_code = 200, body = "started" }
  end
  return { status_code = 200, body = "ok" }
end)
"""
)


def test_a_step_result_replayed_into_a_full_state_fails_the_run_not_the_process(
    make_project: Callable[..., Path], servers: Servers, tmp_path: Path
) -> None:
    """Points 1 and 3 (a step's recorded values, on replay). Run code fills its state, then
    a recorded 90 KB step result is converted into it as the step's reply when the run
    replays on a restarted server. The server lives and the run is `failed` with the limit
    error. Before: the replaying server died of SIGABRT."""
    project = make_project({"lunaflow.toml": TOML, "main.lua": STEP_REPLY})
    data = tmp_path / "data"
    folder = Folder(data)
    try:
        srv = servers.start(project, data)
        srv.get("/start", timeout=10)
        assert poll("the run to await", lambda: folder.status("s1") == Status.AWAITING, 15)
        srv.kill()
        again = servers.start(project, data)
        folder.signal("s1", "go")
        poll("the run to end or the server to die", lambda: not again.alive or folder.ended("s1"), 15)
        assert again.alive, (
            f"lunaflow dev died replaying the run (exit {again.proc.returncode})\n{again.output_tail()}"
        )
        _serving(again)
        run = folder.run("s1")
        assert run is not None and run.status == Status.FAILED and LIMIT_ERROR in (run.error or ""), run
    finally:
        folder.close()


PARSE_ROUTE = (
    FILL_LUA
    + r"""
on "fetch" (function(request)
  if request.path == "/parse" then
    local text = request.body
    fill_memory(16 * 1024)
    local ok, v = pcall(json.parse, text)
    return { status_code = 200, body = ok and "parsed" or "refused" }
  end
  return { status_code = 200, body = "ok" }
end)
"""
)


def test_a_host_result_into_a_full_state_does_not_freeze_the_process(
    make_project: Callable[..., Path], servers: Servers
) -> None:
    """Points 2 and 3. A handler fills its state, then json.parse of a 90 KB body builds
    its result inside the host function, inside the Lua call. The request is answered within
    8 s (200, or a 500 naming the limit in the log) and the process keeps answering. Before:
    the memory error unwound across Python frames, the thread kept the GIL and the whole
    process froze."""
    srv = servers.start(make_project({"lunaflow.toml": TOML, "main.lua": PARSE_ROUTE}))
    body = "[" + ",".join(['{"a":1,"b":[1,2]}'] * 5000) + "]"
    reply = srv.request("POST", "/parse", body, timeout=8)
    assert reply.status in (200, 500), reply
    if reply.status == 500:
        assert LIMIT_ERROR in srv.output(), srv.output_tail()
    _serving(srv)


# --- point 13: logs -------------------------------------------------------------------------

LOG_ROUTE = r"""
on "fetch" (function(request)
  if request.path == "/log" then log.info(request.body, { size = #request.body }) end
  return { status_code = 200, body = "ok" }
end)
"""


def test_the_dev_server_does_not_keep_what_its_routes_log(
    make_project: Callable[..., Path], servers: Servers
) -> None:
    """Point 13 (lunaflow dev). A route logs its 1 MiB request body; over 120 such requests
    the server's resident memory grows by less than 64 MB (nothing reads a log history in
    dev, so none is kept; the printed line is cut). Before: Platform.logs kept 10,000
    records of any size, some 120 MB more here."""
    srv = servers.start(make_project({"main.lua": LOG_ROUTE}))
    body = "L" * (1024 * 1024 - 64)
    for _ in range(10):  # warm up every pooled state and the allocator's arenas
        assert srv.request("POST", "/log", body).status == 200
    before = rss_kb(srv.proc.pid)
    for _ in range(120):
        assert srv.request("POST", "/log", body).status == 200
    grown_mb = (rss_kb(srv.proc.pid) - before) / 1024
    assert grown_mb < 64, f"RSS grew by {grown_mb:.0f} MB over 120 logged 1 MiB bodies"
    assert len(srv.output()) < 10 * 1024 * 1024, "every logged megabyte was printed in full"
