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
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PROJECTS = ROOT / "tests" / "projects"
EXAMPLES = ROOT / "examples"

START_S = 30.0  # bound on a server printing its address (lupa start-up included)
REQUEST_S = 20.0  # bound on one HTTP request
EXIT_S = 20.0  # bound on a process exiting after a signal

SERVING = re.compile(r"lunaflow dev: serving .* on http://127\.0\.0\.1:(\d+) \(console: /_console\)")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


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
    """One ``python -m runtime.cli dev PROJECT --data DIR --port 0`` process."""

    def __init__(self, project: Path, data: Path, logs: Path, name: str) -> None:
        self.project = project
        self.data = data
        self.name = name
        self.out_path = logs / f"{name}.out"
        self.err_path = logs / f"{name}.err"
        self.started_at = time.time()
        self.killed_at: float | None = None
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "runtime.cli",
                    "dev",
                    str(project),
                    "--data",
                    str(data),
                    "--port",
                    "0",
                ],
                cwd=ROOT,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self.port = self._wait_for_port()

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


class Servers:
    """Starts ``lunaflow dev`` processes for one test and kills every leftover at the end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.started: list[DevServer] = []

    def start(self, project: Path, data: Path | None = None) -> DevServer:
        data = data if data is not None else self.tmp / "data"
        server = DevServer(project, data, self.tmp, f"server{len(self.started) + 1}")
        self.started.append(server)
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
