"""``LocalPlatform``: the whole platform in-process on SQLite, on a fake clock (SPEC section 5).

Every call that changes something runs due work until idle before it returns. The clock
moves only with ``advance``; step timeouts use real elapsed time. The run API and the clock
are ``runtime.platform.harness.Harness``, shared with ``AwsPlatform``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from runtime.core.clock import now_ms
from runtime.dev.golden import write_golden
from runtime.engine.schedules import Schedule
from runtime.platform.fetch import Response, make_request
from runtime.platform.harness import Harness, check_workers, earliest_after, own_folder
from runtime.platform.platform import Platform
from runtime.platform.schedules import LocalSchedules, PauseFile, fire_tick
from runtime.platform.standins import HttpFn, ObjectFn, ServiceFn, StandinServices
from runtime.platform.versions import PinFile, SnapshotFolder
from runtime.services import pgserver
from runtime.services.local import LocalServices
from runtime.services.queues import QueueSettings
from runtime.store.sqlite import STORE_FILE, SQLiteStore


class LocalPlatform(Harness):
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
        workers: int = 1,
    ) -> None:
        """``workers``: how many woken runs advance at once, each on a Lua state of its own
        (1: one after another, in the order they were woken)."""
        super().__init__()
        self.workers = check_workers(workers)
        self._own_dir = data_dir is None
        self.data_dir = own_folder("lunaflow-") if data_dir is None else Path(data_dir)
        if self._own_dir:
            pgserver.scratch(self.data_dir)  # its databases go with it: no cluster of its own
        self.project = Path(project)
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
        platform.keep_versions(PinFile(self.data_dir), SnapshotFolder(self.data_dir))
        platform.recover()
        platform.run_until_idle(self.workers)
        return platform

    def close(self) -> None:
        self.platform.close()
        if self._own_dir:
            pgserver.discard(self.data_dir)
            shutil.rmtree(self.data_dir, ignore_errors=True)

    # --- requests ----------------------------------------------------------------------

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

    def _next_due(self, until_ms: int) -> int | None:
        """The earliest timer or queued message, in epoch milliseconds."""
        dues = [self.platform.store.next_due()]
        services = self.platform.services
        queued = services.next_due(self.platform.worker) if services is not None else None
        if queued is not None:
            dues.append(int(round(queued * 1000)))
        return earliest_after(now_ms(self._clock), dues)

    def settle(self) -> None:
        self.platform.run_until_idle(self.workers)

    def _fire(self, schedule: Schedule, tick_ms: int, *, now: bool = False) -> None:
        if now or schedule.name not in PauseFile(self.data_dir).paused():
            fire_tick(self.platform, schedule, tick_ms, trigger=now)

    @property
    def schedule_control(self) -> LocalSchedules:
        return LocalSchedules(self.data_dir, self.platform)

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
