"""``LocalPlatform``: the whole platform in-process, on a fake clock (SPEC section 5).

Every call that changes something runs due work until idle before it returns. The clock
moves only with ``advance``; step timeouts use real elapsed time.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

from runtime.core.clock import FakeClock, now_ms
from runtime.core.durations import parse_ms
from runtime.core.journal import Entry
from runtime.dev.golden import write_golden
from runtime.dev.standins import HttpFn, ObjectFn, ServiceFn, StandinServices
from runtime.errors import InvalidInput
from runtime.platform.fetch import Response, make_request
from runtime.platform.platform import Platform
from runtime.services.local import LocalServices
from runtime.services.queues import QueueSettings
from runtime.store.base import RunRecord
from runtime.store.sqlite import STORE_FILE, SQLiteStore


class LocalPlatform:
    def __init__(
        self,
        project: str | Path,
        data_dir: str | Path | None = None,
        *,
        services: dict[str, ServiceFn] | None = None,
        objects: ObjectFn | None = None,
        http: HttpFn | None = None,
        synchronous: str = "FULL",
        cache_size: int = 256,
    ) -> None:
        self._own_dir = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="lunaflow-")) if data_dir is None else Path(data_dir)
        self.project = Path(project)
        self._clock = FakeClock()
        self._services = services
        self._objects = objects
        self._http = http
        self._synchronous = synchronous
        self._cache_size = cache_size
        self.platform = self._open(self.project)

    def _queue_settings(self, name: str) -> QueueSettings:
        return self.platform.source.queue_settings(name)

    def _open(self, project: Path) -> Platform:
        store = SQLiteStore(self.data_dir / STORE_FILE, synchronous=self._synchronous, clock=self._clock)
        self.services = LocalServices(self.data_dir, self._clock.now, self._queue_settings)
        services = StandinServices(
            self.services,
            services=self._services,
            objects=self._objects,
            http=self._http,
        )
        platform = Platform(
            project, store, self._clock, services=services, cache_size=self._cache_size, keep_logs=True
        )
        platform.recover()
        platform.run_until_idle()
        return platform

    def __enter__(self) -> LocalPlatform:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self.platform.close()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    # --- runs --------------------------------------------------------------------------

    def start(self, workflow: str, input: Any = None, id: str | None = None) -> RunRecord:
        run = self.platform.start(workflow, input, id=id)
        self.settle()
        return self.get(run.id)

    def get(self, run_id: str) -> RunRecord:
        return self.platform.get(run_id)

    def journal(self, run_id: str) -> list[Entry]:
        return self.platform.journal(run_id)

    def runs(self, status: str | None = None, workflow: str | None = None) -> list[RunRecord]:
        return self.platform.runs(status=status, workflow=workflow)

    def signal(self, run_id: str, name: str, payload: Any = None) -> bool:
        live = self.platform.signal(run_id, name, payload)
        self.settle()
        return live

    def cancel(self, run_id: str) -> None:
        self.platform.cancel(run_id)
        self.settle()

    def resume(self, run_id: str) -> None:
        self.platform.resume(run_id)
        self.settle()

    def fetch(
        self,
        method: str,
        path: str,
        body: str | None = None,
        headers: dict[str, str] | None = None,
        query: dict[str, str] | None = None,
    ) -> Response:
        response, failure = self.platform.fetch(make_request(method, path, body, headers, query))
        self.settle()
        if failure is not None:
            self.platform.logs.append(
                {
                    "level": "error",
                    "message": failure.message,
                    "traceback": failure.traceback,
                    "request_id": failure.request_id,
                    "run": None,
                }
            )
        return response

    # --- time and code -----------------------------------------------------------------

    @property
    def now(self) -> float:
        return self._clock.now()

    def advance(self, duration: str | float) -> None:
        """Move the clock, firing due timers in order of their due times."""
        target = now_ms(self._clock) + parse_ms(duration, "advance")
        self.settle()
        while (due := self._next_due()) is not None and due <= target:
            self._clock.advance(max(0, due - now_ms(self._clock)) / 1000)
            self.settle()
        self._clock.advance(max(0, target - now_ms(self._clock)) / 1000)
        self.settle()

    def _next_due(self) -> int | None:
        """The earliest timer or queued message, in epoch milliseconds."""
        dues = [self.platform.store.next_due()]
        services = self.platform.services
        queued = services.next_due(self.platform.worker) if services is not None else None
        if queued is not None:
            dues.append(int(round(queued * 1000)))
        # What is due by now has been handled by settle(), or cannot be (a message for a
        # queue with no handler), so only later times move the clock.
        now = now_ms(self._clock)
        found = [d for d in dues if d is not None and d > now]
        return min(found) if found else None

    def settle(self) -> None:
        self.platform.run_until_idle()

    def deploy(self, project: str | Path) -> None:
        self.platform.deploy(project)  # refused projects raise here and change nothing
        self.project = Path(project)
        self.settle()

    def restart(self) -> None:
        """Drop all in-memory state and reopen the same data, as after a crash."""
        self.platform.close()
        self.platform = self._open(self.project)

    def record(self, run_id: str, name: str | None = None) -> Path:
        """Write the run's journal as a golden of the project (``tests/golden/``), as
        ``lunaflow record`` does; ``lunaflow test`` and ``lunaflow check`` replay it."""
        return write_golden(self.project, self.get(run_id), self.journal(run_id), name=name)

    def set_secret(self, name: str, value: str) -> int:
        if not isinstance(value, str):
            raise InvalidInput(f"secret '{name}' must be a string value (got {type(value).__name__})")
        return self.platform.store.add_secret(name, value)

    @property
    def logs(self) -> list[dict[str, Any]]:
        return list(self.platform.logs)
