"""Helpers for the tests at the runtime's own limits (issue 14): a loopback upstream that
answers as slowly as a test wants, a reader of a data folder beside a running
``lunaflow dev``, a process's resident memory, and the Lua that fills a state to its limit.

The servers themselves are ``tests.support.devserver``'s. Every wait here is bounded, and
``SlowUpstream.close`` releases every request it still holds.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from runtime.core.clock import SystemClock
from runtime.core.journal import ENDED, Entry, Status
from runtime.platform.runs import Runs
from runtime.store.base import RunRecord, SignalRecord
from runtime.store.sqlite import STORE_FILE, SQLiteStore
from tests.support.devserver import Servers

ENGINE_BUG = "lunaflow engine bug"


@contextmanager
def dev_servers(tmp_path: Path) -> Iterator[Servers]:
    """``Servers`` that kills whatever it started when the block ends."""
    servers = Servers(tmp_path)
    try:
        yield servers
    finally:
        servers.close()


class Folder:
    """The runs in a data folder, read in this process the way the console CLI reads them
    beside a running ``lunaflow dev`` (the store is opened on first use)."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self._runs: Runs | None = None

    def _open(self) -> Runs:
        if self._runs is None:
            self._runs = Runs(SQLiteStore(self.data / STORE_FILE), SystemClock())
        return self._runs

    def run(self, run_id: str) -> RunRecord | None:
        return self._open().store.get_run(run_id)

    def status(self, run_id: str) -> Status | None:
        run = self.run(run_id)
        return None if run is None else run.status

    def journal(self, run_id: str) -> list[Entry]:
        return self._open().store.journal(run_id)

    def signals(self, run_id: str) -> list[SignalRecord]:
        return self._open().store.signals(run_id)

    def signal(self, run_id: str, name: str, payload: Any = None) -> bool:
        """Signal the run from this process, as ``lunaflow signal`` does."""
        return self._open().signal(run_id, name, payload)

    def ended(self, run_id: str) -> RunRecord | None:
        """The run once it has ended or failed, else None."""
        run = self.run(run_id)
        return run if run is not None and (run.status in ENDED or run.status == Status.FAILED) else None

    def close(self) -> None:
        if self._runs is not None:
            self._runs.store.close()
            self._runs = None


def rss_kb(pid: int) -> int:
    """A process's resident memory in KiB (Linux)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for process {pid}")


class SlowUpstream:
    """A loopback HTTP server whose answers wait ``delay`` seconds (or until ``release``).

    ``hits`` counts requests by path. ``close`` releases every held request and stops it.
    """

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.hits: dict[str, int] = {}
        self.released = threading.Event()
        self._lock = threading.Lock()
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                if n:
                    self.rfile.read(n)
                with upstream._lock:
                    upstream.hits[self.path] = upstream.hits.get(self.path, 0) + 1
                upstream.released.wait(upstream.delay)
                body = b"slow answer"
                try:
                    self.send_response(200)
                    self.send_header("content-length", str(len(body)))
                    self.send_header("connection", "close")
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass
                self.close_connection = True

            do_GET = do_POST = _answer  # noqa: N815 - http.server's naming

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 64

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def total(self) -> int:
        with self._lock:
            return sum(self.hits.values())

    def close(self) -> None:
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@contextmanager
def slow_upstream(delay: float = 0.0) -> Iterator[SlowUpstream]:
    upstream = SlowUpstream(delay)
    try:
        yield upstream
    finally:
        upstream.close()


def poll(what: str, cond: Callable[[], Any], timeout: float, interval: float = 0.05) -> Any:
    """``cond()``'s first truthy value within ``timeout`` seconds, else None (the caller
    asserts, with what it knows)."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value or time.monotonic() >= deadline:
            return value or None
        time.sleep(interval)


# Lua that fills a Lua state close to its limit and keeps the hoard alive where every
# script of the state reaches it (string.HOARD: the string library table is shared by all
# code in a state). Chunks of `chunk` bytes, linked, until an allocation fails: what is
# left free is less than one chunk. With `spare`, a string of that size is allocated first
# and dropped at the end, so the next allocations (Lua collects garbage before it fails
# one) find at least that much: room for the engine's own bookkeeping, not for a big value.
FILL_LUA = r"""
local function grow_hoard(base)
  -- Each chunk is a fresh string made by concatenation, an allocation Lua retries after a
  -- full collection: when one finally fails, no garbage is left to free.
  local n = 0
  while true do n = n + 1; string.HOARD = { string.HOARD, base .. n } end
end
local function fill_memory(chunk, spare)
  local reserve = spare and (string.rep("r", spare) .. "!")
  pcall(grow_hoard, string.rep("x", chunk or 64 * 1024))
  reserve = nil
  return "filled"
end
"""
