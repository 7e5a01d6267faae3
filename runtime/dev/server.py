"""``lunaflow dev``: the project on a real HTTP server on loopback, with its runs, timers
and queues, all state in a data folder (SPEC section 5).

Threads: the HTTP server (a thread per connection, at most ``MAX_CONNECTIONS``; the
overflow is answered 503 at once, and a connection that sends no whole request head within
``HEADER_TIMEOUT_S`` is closed, so connections that never speak cannot use up the
process's files and threads), a dispatcher that turns due timers and
wake-ups into work (it runs no Lua), a few run workers and a queue deliverer. Each run
worker and the deliverer has a ``Worker`` (a Lua state) of its own; requests borrow one
from a pool of their own, made as needed up to ``REQUEST_STATES``, and a request that
cannot get one within ``REQUEST_WAIT_S`` is answered 503. So requests stuck on a slow
upstream never hold back runs, timers or queues, and each Lua state serves one thread at
a time. A run is advanced by one thread at a time (an in-process claim); across processes
the store's conditional appends decide.
Killed at any instant, the next start finds everything in the data folder: wake-ups,
runs left ``running``, timers (those due while it was down fire at once).

It reloads the project when its files change (runtime/dev/reload.py), prints what runs do
through an ``Observer`` (runtime/dev/terminal.py) — cancels made by other processes on
the data folder too, found by the dispatcher — and keeps its HTTP strict
(runtime/dev/http.py): loopback ``Host`` names only, bodies framed exactly, and console
actions only with this process's token from the console's own origin.
"""

from __future__ import annotations

import contextlib
import errno
import io
import logging
import os
import queue
import secrets
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from runtime.console import page as console_page
from runtime.core.clock import SystemClock, now_ms
from runtime.dev.http import HostAllowlist, Refusal, check_fields, cross_site, read_body
from runtime.dev.reload import Reloader
from runtime.dev.terminal import duration
from runtime.dev.ticks import TickLoop
from runtime.engine.observe import Observer
from runtime.engine.project import ProjectSource
from runtime.engine.worker import Worker
from runtime.platform.fetch import (
    MAX_BODY_BYTES,
    Response,
    error_response,
    make_request,
    request_target,
)
from runtime.platform.platform import LeaseTerms, Platform
from runtime.platform.schedules import LocalSchedules, PauseFile
from runtime.platform.versions import PinFile, SnapshotFolder
from runtime.platform.why import STUCK_AFTER_S
from runtime.services.local import LocalServices, earlier_sqlite_databases, earlier_sqlite_notice
from runtime.store.sqlite import STORE_FILE, SQLiteStore

log = logging.getLogger("lunaflow.dev")

POLL_S = 0.25  # how often the dispatcher looks for work written by other processes (the CLI)
# A cancel intent this old, still not ended, is taken for a cascade whose process died (a
# SIGKILLed `lunaflow cancel`); the server looks for one this often and finishes it.
STALE_CANCEL_S = 30.0
CANCEL_CHECK_S = 5.0
STUCK_CHECK_S = 30.0  # how often lunaflow dev looks for runs woken and not taken
LEASE_MS = 60 * 60 * 1000  # a run's lease; a live owner (heartbeat) keeps it as long as it needs
DRAIN_LIMIT = 64 * 1024 * 1024  # an oversized body up to this is read and dropped before the 413
DRAIN_SECONDS = 5.0
REQUEST_STATES = 8  # Lua states serving requests, made as needed
# Run workers: runs advanced at once (a Lua state each), so a map's branches overlap.
RUN_WORKERS = 4
REQUEST_WAIT_S = 5.0  # how long a request waits for one before it is answered 503
# Connections served at once (a thread and a file each). The overflow is answered 503 and
# closed at once, so connections that never speak cannot use up the process's files (256
# by default on macOS) and leave the server answering no one.
MAX_CONNECTIONS = 64
HEADER_TIMEOUT_S = 10.0  # a request head (or a kept-alive connection's next one) arrives within this
IDLE_TIMEOUT_S = 30.0  # a read of a body that makes no progress for this long ends the connection
OVERFLOW_WARN_S = 10.0  # at most one warning per this many seconds about refused connections
CANCELS_POLL_S = 1.0  # how often the dispatcher looks for cancels made by other processes
# How far before the newest start seen a look for other processes' starts reads (``_Starts``):
# a start's time is read before its write commits, a few milliseconds on a busy machine.
STARTS_LOOKBACK_S = 5.0
STARTS_PAGE = 1000


def data_folder(project: str | Path, data: str | Path | None) -> Path:
    return Path(data) if data is not None else Path(project) / ".lunaflow"


class ServeError(Exception):
    """``lunaflow dev`` cannot serve as asked (the port is taken, the address is wrong)."""


class NotAProject(ServeError):
    """The folder named as the project does not exist or holds no scripts."""


def check_project(project: str | Path) -> Path:
    """The project folder, if it is one: it exists and holds ``.lua`` scripts. Checked
    before anything is written, so a mistyped name creates nothing."""
    root = Path(project)
    if not root.is_dir():
        what = "is not a folder" if root.exists() else "does not exist"
        raise NotAProject(
            f"project folder {project} {what}; name a folder of .lua scripts (lunaflow new NAME makes one)"
        )
    if not any(root.glob("*.lua")):
        raise NotAProject(
            f"project folder {project} holds no .lua scripts at its top level, so there is nothing to serve; "
            "name the project's folder (lunaflow new NAME makes one)"
        )
    return root


def _bind_error(e: OSError, host: str, port: int) -> ServeError:
    if e.errno == errno.EADDRINUSE:
        return ServeError(
            f"port {port} on {host} is in use (another lunaflow dev?); stop that process or pick another "
            f"port with --port {port + 1 if port else 8788}"
        )
    if e.errno == errno.EACCES:
        return ServeError(
            f"port {port} on {host} needs privileges this user lacks; pick a port above 1023 with --port"
        )
    return ServeError(f"cannot listen on {host}:{port} ({e.strerror or e}); check --host and --port")


class PoolBusy(Exception):
    """Every worker of the pool stayed lent for as long as the borrower would wait."""


class WorkerPool:
    """Workers (Lua states) lent to one thread at a time, made as needed up to ``size``."""

    def __init__(self, platform: Platform, size: int, first: Worker | None = None) -> None:
        self.platform = platform
        self.size = size
        self._free: queue.LifoQueue[Worker] = queue.LifoQueue()
        self._made = 0
        self._lock = threading.Lock()
        if first is not None:
            self._free.put(first)
            self._made = 1

    @contextlib.contextmanager
    def borrow(self, timeout: float | None = None) -> Iterator[Worker]:
        """A worker for the block; ``PoolBusy`` when none is free within ``timeout`` s."""
        worker = self._take(timeout)
        try:
            worker = self.platform.fresh(worker)
            yield worker
        finally:
            self._free.put(worker)

    def _take(self, timeout: float | None) -> Worker:
        try:
            return self._free.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            make = self._made < self.size
            if make:
                self._made += 1
        if make:
            try:
                return self.platform.new_worker()
            except BaseException:
                with self._lock:
                    self._made -= 1
                raise
        try:
            return self._free.get(timeout=timeout)
        except queue.Empty:
            raise PoolBusy from None


class DevServer:
    def __init__(
        self,
        project: str | Path,
        *,
        data: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 8787,
        workers: int = RUN_WORKERS,
        observer: Observer | None = None,
        say: Callable[[str], None] | None = None,
        reload: bool = True,
        allow_hosts: Sequence[str] = (),
        request_states: int = REQUEST_STATES,
        request_wait_s: float = REQUEST_WAIT_S,
        tick_fault: str | None = None,
        stuck_after_s: float = STUCK_AFTER_S,
    ) -> None:
        self.project = check_project(project)
        self.data_dir = data_folder(project, data)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.say = say or (lambda text: print(f"lunaflow dev: {text}", flush=True))
        clock = SystemClock()
        source = ProjectSource.read(project)
        self.store = SQLiteStore(self.data_dir / STORE_FILE)
        self.services = LocalServices(self.data_dir, clock.now, source.queue_settings)
        self.platform = Platform(project, self.store, clock, services=self.services, observer=observer)
        self.platform.keep_versions(PinFile(self.data_dir), SnapshotFolder(self.data_dir))
        # Requests have a pool of their own; each run worker and the queue deliverer a worker.
        self.requests = WorkerPool(self.platform, request_states, first=self.platform.worker)
        self.request_wait_s = request_wait_s
        self.workers = workers
        self.stuck_after_s = stuck_after_s
        self._stuck: set[str] = set()  # runs warned of as stuck, until they move
        self._run_workers = [self.platform.new_worker() for _ in range(workers)]
        self._queue_worker = self.platform.new_worker()
        self._queues_due = threading.Event()
        self._work: queue.Queue[tuple[str, int] | None] = queue.Queue()
        self._claimed: set[str] = set()
        self._claim_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.ticks = TickLoop(
            self.platform, self._stop, self.poke, self.say, PauseFile(self.data_dir), tick_fault
        )
        self.observer = observer
        self._cancels = _Cancels(self.store) if observer is not None else None
        self._starts = _Starts(self.store) if observer is not None else None
        self.owner = f"dev-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.lease = LeaseTerms(self.owner, LEASE_MS)
        # Console actions carry this; a page of another process (or none) cannot act.
        self.token = secrets.token_urlsafe(32)
        self.console = console_page.LocalConsole(
            self.platform,
            token=self.token,
            poke=self.poke,
            schedules=LocalSchedules(self.data_dir, self.platform),
        )
        self.hosts = HostAllowlist(host, allow_hosts)
        self.reloader = (
            Reloader(self.platform, self.project, self.say, skip=self.data_dir) if reload else None
        )
        try:
            self.httpd = _Server((host, port), _Handler, self)
        except OSError as e:
            self.platform.close()
            raise _bind_error(e, host, port) from None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.httpd.server_address[:2]
        return str(host), int(port)

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        self.store.heartbeat(self.owner, now_ms(self.platform.clock))
        self.platform.recover()
        specs: list[tuple[str, Callable[..., None], tuple[Any, ...]]] = [
            ("dispatcher", self._dispatch_loop, ()),
            ("queues", self._queue_loop, (self._queue_worker,)),
            ("cancels", self._cancel_loop, ()),
            ("stuck", self._stuck_loop, ()),
            ("ticks", self.ticks.run, ()),
        ]
        specs += [(f"worker-{i}", self._work_loop, (w,)) for i, w in enumerate(self._run_workers)]
        specs.append(("http", self.httpd.serve_forever, ()))
        for name, target, args in specs:
            thread = threading.Thread(target=target, args=args, name=f"lunaflow-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        if self.reloader is not None:
            self.reloader.start()
        self.poke()

    def poke(self) -> None:
        """New work may exist (a request started or signalled a run, or sent a message)."""
        self._wake.set()
        self._queues_due.set()

    def stop(self) -> None:
        self._stop.set()
        self.poke()
        if self.reloader is not None:
            self.reloader.stop()
        self.httpd.shutdown()
        for _ in range(self.workers):
            self._work.put(None)
        for thread in self._threads:
            thread.join(timeout=10)
        self.httpd.server_close()
        self.platform.close()

    def serve_until_signalled(self) -> None:
        stopped = threading.Event()

        def on_signal(signum: int, frame: object) -> None:
            stopped.set()

        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        self.start()
        host, port = self.address
        shown = f"[{host}]" if ":" in host else host
        self.say(f"serving {self.project} on http://{shown}:{port} (console: /_console)")
        self.say(f"state in {self.data_dir}")
        earlier = earlier_sqlite_databases(self.data_dir)
        if earlier:
            self.say(earlier_sqlite_notice(earlier))
        if self.reloader is not None:
            self.say(
                "reloads when the project's scripts, migrations or lunaflow.toml change (--no-reload: off)"
            )
        stopped.wait()
        self.say("stopping")
        self.stop()

    # --- work --------------------------------------------------------------------------

    def _dispatch_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.store.heartbeat(self.owner, now_ms(self.platform.clock))
                self.store.fire_due_timers(now_ms(self.platform.clock))
                self._report_starts()  # before the wakes: a run's start line before its steps'
                for run_id, token in self.store.wakeups():
                    with self._claim_lock:
                        if run_id in self._claimed:
                            continue
                        self._claimed.add(run_id)
                    self._work.put((run_id, token))
                self._report_cancels()
            except Exception:  # the loop must outlive any one bad iteration
                log.exception("dispatcher iteration failed")
            self._wake.wait(timeout=self._next_wait())
            self._wake.clear()

    def _report_starts(self) -> None:
        """Starts made by another process reach the observer too; a terminal prints each
        run's start once, whoever made it."""
        if self.observer is None or self._starts is None:
            return
        for run_id, workflow in self._starts.new():
            self.observer.started(run_id, workflow)

    def _report_cancels(self) -> None:
        """Cancels made by another process (``lunaflow cancel``, a second server) reach the
        observer too; a terminal prints each run's cancel once, whoever made it."""
        if self.observer is None or self._cancels is None:
            return
        for run_id, workflow in self._cancels.new():
            self.observer.cancelled(run_id, workflow)

    def _cancel_loop(self) -> None:
        """Finish cascades that another process began and died in (start-up's ``recover``
        finishes this server's own), and delete ended runs past their retention; in a thread
        of its own, as a big cascade takes a while."""
        while not self._stop.wait(timeout=CANCEL_CHECK_S):
            try:
                self.platform.finish_cancels(before=time.time() - STALE_CANCEL_S)
            except Exception:  # the loop must outlive any one bad iteration
                log.exception("finishing a cancel's cascade failed; it is tried again")
            try:
                self.platform.expire_runs()
            except Exception:  # the loop must outlive any one bad iteration
                log.exception("deleting expired runs failed; it is tried again")

    def _stuck_loop(self) -> None:
        """Warn of runs woken longer ago than ``stuck_after_s`` that no worker has taken
        (every worker busy with long steps, or an activation that keeps failing): once per
        run, until it moves."""
        while not self._stop.wait(timeout=min(STUCK_CHECK_S, self.stuck_after_s)):
            try:
                self.warn_stuck()
            except Exception:  # the loop must outlive any one bad iteration
                log.exception("looking for stuck runs failed; it is tried again")

    def warn_stuck(self) -> list[str]:
        """Runs woken longer ago than the setting and not being advanced (a live lease is a
        long step at work, not a stuck run)."""
        stuck = []
        for run_id in self.store.wakeups_older_than(time.time() - self.stuck_after_s):
            run = self.store.get_run(run_id)
            moving = None if run is None else self.platform.why(run, stuck_after_s=self.stuck_after_s)
            if moving is None or not moving.stuck:
                continue
            stuck.append(run_id)
            if run_id in self._stuck:
                continue
            said = moving.text
            log.warning(
                "run %s has not moved for over %s although it should have: %s (lunaflow show %s)",
                run_id,
                duration(self.stuck_after_s),
                said,
                run_id,
            )
        self._stuck = set(stuck)
        return stuck

    def _next_wait(self) -> float:
        waits = [POLL_S]
        due = self.store.next_due()
        if due is not None:
            waits.append(due / 1000 - time.time())
        return max(0.0, min(waits))

    def _queue_loop(self, worker: Worker) -> None:
        """Deliver due queue messages, on a Lua state of this thread's own: a slow handler
        holds back other messages, never timers or runs."""
        while not self._stop.is_set():
            wait = POLL_S
            try:
                worker = self.platform.fresh(worker)
                self.services.run_due(worker)
                queued = self.services.next_due(worker)
                if queued is not None:
                    wait = max(0.0, min(wait, queued - time.time()))
            except Exception:  # the loop must outlive any one bad delivery
                log.exception("delivering queue messages failed")
            self._queues_due.wait(timeout=wait)
            self._queues_due.clear()

    def _work_loop(self, worker: Worker) -> None:
        while True:
            item = self._work.get()
            if item is None:
                return
            run_id, token = item
            try:
                # Busy: another process on this data folder is advancing it; its wake-up stays.
                worker = self.platform.fresh(worker)
                self.platform.advance(run_id, worker=worker, lease=self.lease, token=token)
            except Exception:
                log.exception("advancing run %s failed; it stays woken and will be retried", run_id)
                time.sleep(0.5)
            finally:
                with self._claim_lock:
                    self._claimed.discard(run_id)
                self._wake.set()

    # --- requests ----------------------------------------------------------------------

    def handle_fetch(self, request: dict[str, Any]) -> Response:
        try:
            with self.requests.borrow(timeout=self.request_wait_s) as worker:
                response, failure = self.platform.fetch(request, worker)
        except PoolBusy:
            return self._busy(request)
        self.poke()
        if failure is not None:
            log.error(
                "request %s %s failed (request id %s): %s\n%s",
                request["method"],
                request["path"],
                failure.request_id,
                failure.message,
                failure.traceback or "",
            )
        return response

    def _busy(self, request: dict[str, Any]) -> Response:
        states, wait = self.requests.size, self.request_wait_s
        log.warning(
            "request %s %s answered 503: all %d Lua states that serve requests stayed busy for %s",
            request["method"],
            request["path"],
            states,
            duration(wait),
        )
        return Response(
            503,
            {"content-type": "text/plain; charset=utf-8", "retry-after": "1"},
            f"lunaflow dev is busy: all {states} Lua states that serve requests stayed in use for "
            f"{duration(wait)} (handlers waiting on slow calls?); try again shortly\n",
        )

    def handle_console(
        self, method: str, path: str, form: dict[str, str], *, refused: str | None = None
    ) -> Response:
        """A console page or action; ``refused`` says why a state-changing request looked
        cross-site (then it is refused whatever it carries)."""
        return self.console.handle(method, path, form, cross_site=refused)


class _Starts:
    """Runs another process started (``lunaflow start``, a second server) since the last
    look, so their start is printed as this server's own runs' is: read from the newest
    start seen at the server's start on, by the store's index of starts.

    A run's start time is its process's clock read before its write commits, so a run
    committed after another may carry an earlier time (two processes starting runs at once):
    each look reads from ``STARTS_LOOKBACK_S`` before the newest start seen, and the ids seen
    in that window are remembered, so such a run is printed once, late, not missed."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store
        self._newest = store.newest_created()
        self._seen: dict[str, float] = {}
        self._read()  # what is there already is no new start

    def _read(self) -> list[tuple[str, str, float]]:
        found: list[tuple[str, str, float]] = []
        cursor = (self._newest - STARTS_LOOKBACK_S, "")
        while True:
            page = self.store.created_after(cursor, limit=STARTS_PAGE)
            found += [row for row in page if row[0] not in self._seen]
            self._seen.update((rid, at) for rid, _, at in page)
            if len(page) < STARTS_PAGE:
                break
            cursor = (page[-1][2], page[-1][0])
        if self._seen:
            self._newest = max(self._newest, *self._seen.values())
        floor = self._newest - STARTS_LOOKBACK_S
        self._seen = {rid: at for rid, at in self._seen.items() if at >= floor}
        return found

    def new(self) -> list[tuple[str, str]]:
        return [(rid, workflow) for rid, workflow, _ in self._read()]


class _Cancels:
    """Runs found cancelled since the last look. The count of cancelled runs is polled (an
    index range); only when it changes are their ids read and compared with those known."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store
        self._known = {run_id for run_id, _ in store.ids_with_status("cancelled")}
        self._count = len(self._known)
        self._looked = time.monotonic()

    def new(self) -> list[tuple[str, str]]:
        if time.monotonic() - self._looked < CANCELS_POLL_S:
            return []
        self._looked = time.monotonic()
        count = self.store.status_count("cancelled")
        if count == self._count:
            return []
        found = self.store.ids_with_status("cancelled")
        self._count = len(found)
        fresh = [(run_id, workflow) for run_id, workflow in found if run_id not in self._known]
        self._known = {run_id for run_id, _ in found}
        return fresh


class _Server(ThreadingHTTPServer):
    """A thread per connection, at most ``MAX_CONNECTIONS`` of them."""

    daemon_threads = True
    request_queue_size = 128  # the listen backlog; the default 5 resets bursts of connections

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], dev: DevServer
    ) -> None:
        self.dev = dev
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._warned_at = -OVERFLOW_WARN_S
        super().__init__(address, handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        try:
            return super().get_request()
        except OSError as e:
            if e.errno in (errno.EMFILE, errno.ENFILE):
                # Out of files: the listening socket stays readable, so without a pause
                # the accept loop would spin until a connection ends.
                time.sleep(0.05)
            raise

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._overflow(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread started: its slot is free again
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _overflow(self, sock: socket.socket) -> None:
        """Answer 503 on the accepting thread without waiting on the client: the answer
        fits the socket's buffer, and what the client sent so far is read and dropped so
        the close does not reset the answer away."""
        now = time.monotonic()
        if now - self._warned_at >= OVERFLOW_WARN_S:
            self._warned_at = now
            log.warning(
                "a connection was answered 503: %d connections are open, the most lunaflow dev serves "
                "at once (idle ones close after %s)",
                MAX_CONNECTIONS,
                duration(HEADER_TIMEOUT_S),
            )
        body = (
            f"lunaflow dev is serving {MAX_CONNECTIONS} connections, the most it serves at once; "
            f"connections that send no request close after {duration(HEADER_TIMEOUT_S)} — try again shortly\n"
        ).encode()
        head = (
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
            f"retry-after: 1\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
        ).encode()
        try:
            sock.setblocking(False)
            sock.send(head + body)
            sock.shutdown(socket.SHUT_WR)
            with contextlib.suppress(BlockingIOError):
                while sock.recv(65536):
                    pass
        except OSError:
            pass
        finally:
            sock.close()


class _HeadDeadline(socket.SocketIO):
    """A connection's reads, bounded by a deadline while a request head is being read: a
    per-read timeout alone lets a client that sends a byte now and then hold its thread."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock, "rb")
        self.deadline: float | None = None

    def readinto(self, b: Any) -> int | None:
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no complete request head within {duration(HEADER_TIMEOUT_S)}")
            self._sock.settimeout(min(left, IDLE_TIMEOUT_S))  # type: ignore[attr-defined]
        return super().readinto(b)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, a kept-alive client's delayed
    # ACK holds the body back ~40 ms.
    disable_nagle_algorithm = True
    timeout = IDLE_TIMEOUT_S

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the plain reader setup made (a reference on the socket)
        self._reads = _HeadDeadline(self.connection)
        self.rfile = io.BufferedReader(self._reads)

    def handle_one_request(self) -> None:
        self._reads.deadline = time.monotonic() + HEADER_TIMEOUT_S
        super().handle_one_request()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def _handle(self) -> None:
        # The head is in; the body's reads are bounded per read, as a drain sets them.
        self._reads.deadline = None
        self.connection.settimeout(IDLE_TIMEOUT_S)
        dev = self.server.dev
        try:
            check_fields(self.headers)
        except Refusal as refusal:
            self._refuse(refusal)
            return
        host = self.headers.get("host")
        if not dev.hosts.allows(host):
            self._refuse(dev.hosts.refusal(host))
            return
        try:
            raw = read_body(self.rfile, self.headers, MAX_BODY_BYTES, DRAIN_LIMIT)
        except Refusal as refusal:
            if refusal.drain:
                self._drain(refusal.drain)
            self._refuse(refusal)
            return
        try:
            body = raw.decode("utf-8")
        except UnicodeDecodeError:
            self._send(Response(400, {"content-type": "text/plain"}, "request body is not valid UTF-8"))
            return
        try:
            if self.path == "/_console" or self.path.startswith(("/_console/", "/_console?")):
                form = (
                    dict(make_request(self.command, "/?" + body)["query"]) if self.command == "POST" else {}
                )
                refused = cross_site(self.headers, host) if self.command != "GET" else None
                response = dev.handle_console(self.command, self.path, form, refused=refused)
            else:
                headers = {k: v for k, v in self.headers.items()}
                response = dev.handle_fetch(
                    make_request(self.command, request_target(self.requestline, self.path), body, headers)
                )
        except Exception:
            error, request_id = error_response("")
            log.exception("request %s %s failed (request id %s)", self.command, self.path, request_id)
            response = error
        self._send(response)

    def _refuse(self, refusal: Refusal) -> None:
        self._send(Response(refusal.status, {"content-type": "text/plain"}, refusal.message), close=True)

    def _drain(self, length: int) -> None:
        """Read and drop an oversized body (within bounds), so a client that writes its whole
        request before reading gets the 413 instead of a broken pipe."""
        left = min(length, DRAIN_LIMIT)
        self.connection.settimeout(DRAIN_SECONDS)
        try:
            while left > 0:
                chunk = self.rfile.read(min(left, 1 << 16))
                if not chunk:
                    break
                left -= len(chunk)
        except OSError:
            pass

    def _send(self, response: Response, close: bool = False) -> None:
        payload = response.body.encode("utf-8")
        try:
            phrase = HTTPStatus(response.status_code).phrase
        except ValueError:
            phrase = ""
        self.send_response(response.status_code, phrase)
        headers = dict(response.headers)
        headers.setdefault("content-type", "text/plain; charset=utf-8")
        for name, value in headers.items():
            if name not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        self.send_header("content-length", str(len(payload)))
        if close:
            self.send_header("connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _handle
