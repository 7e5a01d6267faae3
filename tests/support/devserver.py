"""Shared helpers for the ``lunaflow dev`` end-to-end tests: a real server process on
loopback, spoken to over real HTTP with urllib.

Every wait here is bounded: a server that does not come up, a request that does not
answer or a process that does not exit fails the test instead of hanging CI. ``Servers``
kills whatever it started when the test ends (the fixtures call ``close`` in their
finalizers).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.cli import Done, cli

ROOT = Path(__file__).resolve().parents[2]
PROJECTS = ROOT / "tests" / "projects"
EXAMPLES = ROOT / "examples"

START_S = 30.0  # bound on a server printing its address (lupa start-up included)
REQUEST_S = 20.0  # bound on one HTTP request
EXIT_S = 20.0  # bound on a process exiting after a signal

SERVING = re.compile(r"lunaflow dev: serving .* on http://127\.0\.0\.1:(\d+) \(console: /_console\)")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]  # lower-case names
    body: str

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except json.JSONDecodeError as e:
            raise AssertionError(f"response body is not JSON ({e}): {self.body[:500]!r}") from e


class DevServer:
    """One ``python -m runtime.cli dev PROJECT --data DIR --port 0 [EXTRA...]`` process.
    With ``wait=False`` it does not wait for the address (a start meant to be refused)."""

    def __init__(
        self,
        project: Path,
        data: Path,
        logs: Path,
        name: str,
        extra: Sequence[str] = (),
        *,
        wait: bool = True,
        env: Mapping[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:
        self.project = project
        self.data = data
        self.name = name
        self.out_path = logs / f"{name}.out"
        self.err_path = logs / f"{name}.err"
        self.started_at = time.time()
        self.killed_at: float | None = None
        argv = [sys.executable, "-m", "runtime.cli", "dev", str(project), "--data", str(data), "--port", "0"]
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [*argv, *extra],
                cwd=ROOT,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
                preexec_fn=preexec_fn,  # e.g. a lower file limit (resource.setrlimit)
            )
        self.port = self._wait_for_port() if wait else 0

    # --- process -----------------------------------------------------------------------

    def _wait_for_port(self) -> int:
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            m = SERVING.search(self.stdout())
            if m:
                return int(m.group(1))
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"lunaflow dev ({self.name}) exited with {self.proc.returncode} before serving;\n"
                    f"{self.output_tail()}"
                )
            time.sleep(0.02)
        self.kill()
        raise AssertionError(
            f"lunaflow dev ({self.name}) printed no address in {START_S}s;\n{self.output_tail()}"
        )

    def stdout(self) -> str:
        return self.out_path.read_text(encoding="utf-8", errors="replace") if self.out_path.exists() else ""

    def stderr(self) -> str:
        return self.err_path.read_text(encoding="utf-8", errors="replace") if self.err_path.exists() else ""

    def output(self) -> str:
        return self.stdout() + self.stderr()

    def output_tail(self, n: int = 4000) -> str:
        return f"--- stdout ---\n{self.stdout()[-n:]}\n--- stderr ---\n{self.stderr()[-n:]}"

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_exit(self, timeout: float) -> int | None:
        """The exit code, or None if the process still runs after ``timeout`` seconds."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def mark(self) -> tuple[int, int]:
        """Where each stream ends now: what ``lines_since`` reads from."""
        return len(self.stdout()), len(self.stderr())

    def output_since(self, mark: tuple[int, int]) -> str:
        return self.stdout()[mark[0] :] + self.stderr()[mark[1] :]

    def lines_since(self, mark: tuple[int, int]) -> list[str]:
        """Non-blank lines printed after ``mark`` (stdout's, then stderr's)."""
        return [line for line in self.output_since(mark).splitlines() if line.strip()]

    def kill(self) -> None:
        """SIGKILL: no clean-up runs in the server, as in a crash."""
        if self.proc.poll() is None:
            self.killed_at = time.time()
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=EXIT_S)

    def stop(self, sig: int) -> int:
        """Send ``sig`` and wait (bounded) for the exit code."""
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=EXIT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"lunaflow dev ({self.name}) did not exit within {EXIT_S}s of signal {sig};\n"
                f"{self.output_tail()}"
            ) from None

    # --- HTTP --------------------------------------------------------------------------

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def request(
        self,
        method: str,
        path: str,
        body: str | bytes | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = REQUEST_S,
    ) -> Reply:
        data = body.encode("utf-8") if isinstance(body, str) else body
        if data is None and method in ("POST", "PUT", "PATCH"):
            data = b""
        req = urllib.request.Request(self.url(path), data=data, method=method, headers=dict(headers or {}))
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return Reply(
                    resp.status,
                    {k.lower(): v for k, v in resp.headers.items()},
                    resp.read().decode("utf-8", errors="replace"),
                )
        except urllib.error.HTTPError as e:
            with e:
                return Reply(
                    e.code,
                    {k.lower(): v for k, v in e.headers.items()},
                    e.read().decode("utf-8", errors="replace"),
                )
        except (OSError, http.client.HTTPException) as e:  # refused, reset, cut short
            raise AssertionError(
                f"{method} {path} to lunaflow dev ({self.name}) failed: {e!r}\n{self.output_tail()}"
            ) from e

    def try_request(self, method: str, path: str, body: str | bytes | None = None, **kw: Any) -> Reply | None:
        """Like ``request``, but None when the connection fails (the server was killed)."""
        try:
            return self.request(method, path, body, **kw)
        except AssertionError as e:
            if isinstance(e.__cause__, (OSError, http.client.HTTPException)):
                return None
            raise

    def get(self, path: str, **kw: Any) -> Reply:
        return self.request("GET", path, **kw)

    def post_json(self, path: str, value: Any, **kw: Any) -> Reply:
        return self.request(
            "POST", path, json.dumps(value), headers={"content-type": "application/json"}, **kw
        )

    def send(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
        *,
        host: str | None = None,
    ) -> Reply:
        """One request with every header under the caller's control, ``Host`` included."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_S)
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            conn.putheader("Host", host if host is not None else f"127.0.0.1:{self.port}")
            for name, value in (headers or {}).items():
                conn.putheader(name, value)
            if body or method == "POST":
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body or None)
            resp = conn.getresponse()
            return Reply(
                resp.status,
                {k.lower(): v for k, v in resp.getheaders()},
                resp.read().decode("utf-8", "replace"),
            )
        finally:
            conn.close()

    def raw(self, data: bytes, *, timeout: float = 5.0) -> bytes:
        """Raw bytes on a fresh connection; see ``raw_exchange``."""
        return raw_exchange(self.port, data, timeout=timeout)

    # --- the CLI on this server's data folder ------------------------------------------

    def cli(self, *args: str, **kw: Any) -> Done:
        return cli(*args, "-p", str(self.project), "--data", str(self.data), **kw)

    def run(self, run_id: str) -> dict[str, Any]:
        """The run as ``lunaflow show --json`` gives it."""
        done = self.cli("show", run_id, "--json")
        assert done.code == 0, str(done)
        run: dict[str, Any] = json.loads(done.out)["run"]
        return run

    def wait_status(self, run_id: str, statuses: set[str], timeout: float = 15.0) -> dict[str, Any]:
        found: dict[str, Any] = wait_for(
            f"run {run_id} in {sorted(statuses)}",
            lambda: (r := self.run(run_id))["status"] in statuses and r,
            timeout,
            interval=0.2,
        )
        return found


class Servers:
    """Starts ``lunaflow dev`` processes for one test and kills every leftover at the end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.started: list[DevServer] = []

    def start(
        self,
        project: Path,
        data: Path | None = None,
        extra: Sequence[str] = (),
        *,
        wait: bool = True,
        env: Mapping[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
    ) -> DevServer:
        data = data if data is not None else self.tmp / "data"
        name = f"server{len(self.started) + 1}"
        # Registered before it is waited for, so a server that fails to come up is killed too.
        server = DevServer(project, data, self.tmp, name, extra, wait=False, env=env, preexec_fn=preexec_fn)
        self.started.append(server)
        if wait:
            server.port = server._wait_for_port()
        return server

    def output(self) -> str:
        return "\n".join(f"===== {s.name}\n{s.output()}" for s in self.started)

    def close(self) -> None:
        for server in self.started:
            if server.proc.poll() is None:
                server.proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):  # a zombie we cannot help
                    server.proc.wait(timeout=EXIT_S)


def wait_for(what: str, cond: Callable[[], Any], timeout: float, interval: float = 0.05) -> Any:
    """Poll ``cond`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = cond()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


# --- projects on disk --------------------------------------------------------------------


def write_project(root: Path, files: Mapping[str, str]) -> Path:
    """A throwaway project: ``files`` maps relative paths to their text."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def copy_project(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".lunaflow"))
    return dst


def edit(path: Path, text: str) -> None:
    """Rewrite a file so that a watcher comparing modification times sees the change even
    on a file system with one-second times: the time is pushed forward explicitly."""
    before = path.stat().st_mtime if path.exists() else None
    path.write_text(text, encoding="utf-8")
    if before is not None:
        later = max(time.time(), before + 2)
        os.utime(path, (later, later))


# --- raw HTTP ------------------------------------------------------------------------------


def raw_exchange(port: int, data: bytes, *, timeout: float = 5.0, overall: float = 10.0) -> bytes:
    """Send ``data`` on a fresh connection and read until the server closes it or, once it
    has answered, stays silent for ``timeout`` seconds (``overall`` bounds the whole exchange,
    and the wait for the answer's first byte: a loaded machine may take seconds to start it,
    while a kept-alive connection's silence after the answer is how its end is seen)."""
    got = b""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        deadline = time.monotonic() + overall
        while time.monotonic() < deadline:
            s.settimeout(timeout if got else max(0.1, deadline - time.monotonic()))
            try:
                chunk = s.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not chunk:
                break
            got += chunk
    return got


def parse_response(raw: bytes) -> tuple[int, dict[str, str], bytes, bytes]:
    """The first HTTP/1.x response in ``raw``: its status, headers (lower-case names), body
    (by content-length, else to the end) and whatever bytes follow it."""
    head, sep, rest = raw.partition(b"\r\n\r\n")
    if not sep:
        raise AssertionError(f"no complete HTTP response in {raw[:300]!r}")
    lines = head.decode("latin-1").split("\r\n")
    m = re.match(r"HTTP/1\.[01] (\d{3})", lines[0])
    if not m:
        raise AssertionError(f"not an HTTP response: {raw[:300]!r}")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        n = int(headers["content-length"])
        return int(m.group(1)), headers, rest[:n], rest[n:]
    return int(m.group(1)), headers, rest, b""
