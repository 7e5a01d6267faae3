"""Acceptance tests for the local services of SPEC section 2 (database, kv, objects,
secrets, queues, http, crypto, Jwt, json, uuid, log), through LocalPlatform.

Shared helpers live here so each test file stays about one service: the project folders,
a JSON call into a project's fetch handler, copies of projects to change on disk, and a
real loopback HTTP server.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from runtime.testing import AwsPlatform, LocalPlatform

PROJECTS = Path(__file__).resolve().parents[1] / "projects"


def project(name: str) -> Path:
    """The folder of a committed test project, e.g. project("svc_kv")."""
    return PROJECTS / name


def copy_project(name: str, dest: Path) -> Path:
    """A copy of a committed project that a test may change on disk."""
    shutil.copytree(project(name), dest)
    return dest


def call(p: LocalPlatform | AwsPlatform, **request: Any) -> Any:
    """POST ``request`` as JSON to the project's fetch handler and decode the JSON reply.

    The svc_* projects answer ``{ ok = true, value = ... }`` or ``{ ok = false, error = "..." }``.
    """
    resp = p.fetch("POST", "/", body=json.dumps(request))
    assert resp.status_code == 200, (resp.status_code, resp.body, p.logs[-1:] if p.logs else None)
    return json.loads(resp.body)


def value(p: LocalPlatform | AwsPlatform, **request: Any) -> Any:
    """``call`` that must succeed; returns the value."""
    out = call(p, **request)
    assert out["ok"] is True, out
    return out.get("value")


def error(p: LocalPlatform | AwsPlatform, **request: Any) -> str:
    """``call`` that must fail in Lua; returns the error message."""
    out = call(p, **request)
    assert out["ok"] is False, out
    assert isinstance(out["error"], str)
    return str(out["error"])


def bounded(fn: Callable[[], Any], seconds: float = 10.0) -> Any:
    """Run ``fn`` in a daemon thread and fail the test if it does not return in time, so an
    engine that loops forever fails the test instead of hanging the suite."""
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:  # re-raised in the test's thread
            out["error"] = e

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"the call did not return within {seconds}s"
    if "error" in out:
        raise out["error"]
    return out.get("value")


# --- a real HTTP server on the loopback interface -----------------------------------------


@dataclass
class Seen:
    """One request the loopback server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Loopback:
    url: str
    requests: list[Seen] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        seen = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        self.server.loopback.requests.append(seen)
        if self.path.startswith("/slow"):
            self.server.release.wait(2.0)
        if self.path.startswith("/missing"):
            self._reply(404, b"not here", {"Content-Type": "text/plain"})
            return
        if self.path.startswith("/bytes"):
            self._reply(200, bytes(range(256)), {"Content-Type": "application/octet-stream"})
            return
        echo = {
            "method": self.command,
            "path": self.path,
            "body": body.decode("utf-8", "replace"),
            "body_hex": body.hex(),
            "x_token": self.headers.get("X-Token"),
        }
        headers = {"Content-Type": "application/json", "X-Custom-Header": "Yes"}
        self._reply(200, json.dumps(echo, sort_keys=True).encode(), headers)

    def _reply(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        try:
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            pass

    do_GET = do_POST = do_PUT = do_DELETE = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    loopback: Loopback
    release: threading.Event


@contextmanager
def loopback_server() -> Iterator[Loopback]:
    """A real HTTP server on 127.0.0.1 (a free port), served from a thread.

    ``/slow`` answers only after two seconds (for timeouts), ``/missing`` answers 404,
    ``/bytes`` answers the 256 byte values, and everything else echoes the method, path,
    body (as text and hex) and X-Token header as JSON with an ``X-Custom-Header: Yes``
    response header.
    """
    server = _Server(("127.0.0.1", 0), _Handler)
    server.loopback = Loopback(f"http://127.0.0.1:{server.server_address[1]}")
    server.release = threading.Event()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield server.loopback
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
