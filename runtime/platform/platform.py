"""The platform: the run API (start, get, signal, cancel, resume), the worker loop, and
the host functions Lua calls. ``lunaflow dev``, the Lambda handlers and the test harness
all stand on this one class; they differ in store, clock and how they schedule work.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runtime.core import values
from runtime.core.clock import Clock, now_ms
from runtime.core.ids import check_run_id
from runtime.engine.code import Code
from runtime.engine.executor import Executor
from runtime.engine.observe import Observer
from runtime.engine.project import ProjectSource
from runtime.engine.wake import Waker
from runtime.errors import (
    EngineBug,
    InvalidInput,
    ServiceUnavailable,
    UnknownWorkflow,
)
from runtime.platform import fetch
from runtime.platform.fetch import Failure, Response
from runtime.platform.runs import Runs
from runtime.services import builtins
from runtime.services.base import ServiceError, Services
from runtime.store.base import RunRecord, Store

log = logging.getLogger("lunaflow")
lua_log = logging.getLogger("lunaflow.lua")

# A stand-in for a service the platform does not provide: (name, method, args) -> values.
ServiceFn = Callable[[str, str, list[Any]], list[Any]]
# A stand-in for object classes: (class, key, method, args) -> values.
ObjectFn = Callable[[str, str, str, list[Any]], list[Any]]

MAX_WORK_ITEMS = 1_000_000


class NotStubbed(Exception):
    """Raised by an ``objects=`` stand-in for a call it leaves to the real object."""


def _refuse_constant(name: str) -> Any:
    raise InvalidInput(f"json.parse: {name} is not JSON; numbers must be finite")


class Worker:
    """One Lua state with the project loaded, and the executor that drives runs on it.

    A worker is used by one thread at a time; ``lunaflow dev`` keeps a pool of them.
    """

    def __init__(self, platform: Platform, source: ProjectSource, cache_size: int) -> None:
        self.executor = Executor(
            platform.store,
            platform.clock,
            cache_size=cache_size,
            waker=platform.waker,
            observer=platform.observer,
        )
        self.code_source: ProjectSource | None = source  # known before Code exists: loading declares
        self.code = Code(source, platform.host_functions(self))

    @property
    def current_run(self) -> str | None:
        return self.executor.current_run

    def call_object(
        self, cls: str, key: str, method: str, state: Any, args: list[Any]
    ) -> tuple[list[Any], Any]:
        code = self.code
        ok, *out = code.call_object(
            cls,
            key,
            method,
            code.sandbox.to_lua(state),
            self.lua_values(args),
            code.source.limits.instructions,
        )
        if not ok:
            raise ServiceError(code.sandbox.explain(str(out[0])))
        results, state = out
        return json.loads(results), json.loads(state)

    def has_queue_handler(self, queue: str) -> bool:
        return bool(self.code.engine.has_handler("queue", queue))

    def call_queue_handler(self, queue: str, message: dict[str, Any]) -> str | None:
        ok, out, tb = self.code.call_handler("queue", queue, message)
        if ok:
            return None
        lua_log.warning("queue %s message %s failed: %s\n%s", queue, message.get("id"), out, tb or "")
        return str(out)

    def lua_values(self, out: list[Any]) -> Any:
        """A Lua table ``{n = #out, ...}`` of values for ``table.unpack(t, 1, t.n)``."""
        sandbox = self.code.sandbox
        table: dict[int | str, Any] = {i + 1: sandbox.to_lua(v) for i, v in enumerate(out) if v is not None}
        table["n"] = len(out)
        return sandbox.lua.table_from(table)


class Platform(Runs):
    def __init__(
        self,
        project: str | Path,
        store: Store,
        clock: Clock,
        *,
        services: Services | None = None,
        standins: dict[str, ServiceFn] | None = None,
        objects: ObjectFn | None = None,
        cache_size: int = 256,
        read_only: bool = False,
        waker: Waker | None = None,
        observer: Observer | None = None,
    ) -> None:
        super().__init__(store, clock, waker, observer)
        # lunaflow check replays with the project's code but must write nothing.
        self.read_only = read_only
        self.services = services
        self.standins = dict(standins or {})
        self.objects = objects
        # Tests may answer outbound HTTP themselves: (request spec, body) -> response table.
        self.http_stub: Callable[[dict[str, Any], bytes | None], dict[str, Any]] | None = None
        self.logs: deque[dict[str, Any]] = deque(maxlen=10_000)
        self.cache_size = cache_size
        self.source = ProjectSource.read(project)
        self.worker = Worker(self, self.source, cache_size)

    # --- code --------------------------------------------------------------------------

    @property
    def code(self) -> Code:
        return self.worker.code

    def new_worker(self) -> Worker:
        return Worker(self, self.source, self.cache_size)

    def deploy(self, project: str | Path) -> None:
        """Load new code; in-flight runs replay on it at their next wake."""
        source = ProjectSource.read(project)
        worker = Worker(self, source, self.cache_size)  # raises first if the project is refused
        self.source, self.worker = source, worker

    def fresh(self, worker: Worker) -> Worker:
        """The worker itself, or a new one if its Lua state ran out of memory or its code
        is older than the platform's."""
        if worker.code.tainted or worker.code.source is not self.source:
            return self.new_worker()
        return worker

    # --- runs --------------------------------------------------------------------------

    def start(
        self,
        workflow: str,
        input_value: Any = None,
        *,
        id: str | None = None,
        parent_id: str | None = None,
        changes: tuple[str, ...] | None = None,
    ) -> RunRecord:
        if workflow not in self.worker.code.workflows:
            raise UnknownWorkflow(workflow)
        known = self.source.changes if changes is None else changes
        return super().start(workflow, input_value, id=id, parent_id=parent_id, changes=known)

    # --- work --------------------------------------------------------------------------

    def recover(self) -> None:
        """After a crash: runs left ``running`` were mid-activation; advance them again."""
        for run_id in self.store.running_runs():
            self.store.wake(run_id)

    def run_until_idle(self) -> int:
        """Fire due timers and advance every woken run until nothing is left. Returns the
        number of activations."""
        done = 0
        while True:
            self.store.fire_due_timers(now_ms(self.clock))
            work = self.store.wakeups()
            if not work:
                delivered = 0 if self.services is None else self.services.run_due(self.worker)
                if not delivered:
                    return done
                done += delivered
                continue
            for run_id, token in work:
                self.worker = self.fresh(self.worker)
                self.worker.executor.advance(run_id, self.worker.code)
                self.store.clear_wakeup(run_id, token)
                done += 1
                if done > MAX_WORK_ITEMS:
                    raise EngineBug("the worker loop did not settle after a million activations")

    def fetch(self, request: dict[str, Any]) -> tuple[Response, Failure | None]:
        self.worker = self.fresh(self.worker)
        return fetch.handle(self.worker.code, request)

    # --- host functions: what Lua may ask of the platform -------------------------------

    def host_functions(self, worker: Worker) -> dict[str, Callable[..., Any]]:
        """The functions one worker's Lua state may call; ``worker`` tells which run is
        executing there (for parents, secret pins and log tags)."""

        def lua(value: Any) -> Any:
            return worker.code.sandbox.to_lua(value)

        def start(workflow: str, input_json: str, run_id: Any) -> str:
            if run_id is not None and not isinstance(run_id, str):
                check_run_id(run_id)
            return self.start(workflow, json.loads(input_json), id=run_id, parent_id=worker.current_run).id

        def json_parse(text: str) -> Any:
            try:
                value = json.loads(text, parse_constant=_refuse_constant)
            except json.JSONDecodeError as e:
                raise InvalidInput(f"json.parse: the text is not valid JSON ({e})") from e
            except RecursionError as e:
                raise InvalidInput(
                    "json.parse: the text is nested too deeply; keep it under 100 levels"
                ) from e
            return lua(values.check_lua_value(value, "json.parse"))

        def log_line(level: str, message: str, fields: str, mode: str | None = None) -> None:
            # A line the workflow function says while replaying was said when the run first
            # passed there: it is kept for inspection, marked, and not written out again.
            replayed = mode == "run" and worker.executor.replaying(worker.current_run)
            fields_value = json.loads(fields)
            record = {"level": level, "message": message, "fields": fields_value, "run": worker.current_run}
            if replayed:
                record["replayed"] = True
            self.logs.append(record)
            if not replayed:
                py_level = {"warn": logging.WARNING, "error": logging.ERROR}.get(level, logging.INFO)
                lua_log.log(py_level, "%s %s", message, fields if fields != "null" else "")

        def service(kind: str, name: str, method: str, args_json: str) -> Any:
            args = json.loads(args_json)
            standin = self.standins.get(kind)
            if standin is not None:
                return worker.lua_values(list(standin(name, method, args)))
            return worker.lua_values(self._services(f"{kind} '{name}'").call(kind, name, method, args))

        def object_call(cls: str, key: str, method: str, args_json: str) -> Any:
            args = json.loads(args_json)
            if self.objects is not None:
                try:
                    return worker.lua_values(list(self.objects(cls, key, method, args)))
                except NotStubbed:
                    pass  # this call goes to the real object
            services = self._services(f"object {cls}('{key}')")
            return worker.lua_values(services.call_object(worker, cls, key, method, args))

        def declare(kind: str, name: str, opts: str) -> None:
            if self.services is not None and kind not in self.standins:
                self.services.declare(kind, name, json.loads(opts), worker_root())

        def worker_root() -> Path:
            return self.source.root if worker.code_source is None else worker.code_source.root

        def http(spec: str, body: str | None) -> Any:
            if self.http_stub is not None:
                return lua(self.http_stub(json.loads(spec), None if body is None else bytes.fromhex(body)))
            return builtins.http_request(spec, body, lua)

        def pair(a: Any, b: Any) -> tuple[Any, Any]:
            return a, b

        return {
            "now": lambda: int(self.clock.now()),
            "json_parse": json_parse,
            "log": log_line,
            "declare": declare,
            "http_request": http,
            **builtins.crypto_functions(),
            **builtins.jwt_functions(lua, pair, self.clock.now),
            "service": service,
            "object_call": object_call,
            "secret": lambda name: self.secret(name, worker.current_run),
            "run_check_id": check_run_id,
            "run_start": start,
            "run_status": lambda wf, rid: self.get(rid, wf).status,
            "run_result": lambda wf, rid: worker.lua_values([self.get(rid, wf).result]),
            "run_signal": lambda wf, rid, name, body: self.signal(rid, name, json.loads(body), workflow=wf),
            "run_cancel": lambda wf, rid: self.cancel(rid, workflow=wf),
            "run_resume": lambda wf, rid: self.resume(rid, workflow=wf),
        }

    def _services(self, what: str) -> Services:
        if self.services is None:
            raise ServiceUnavailable(f"{what} has no backend on this platform; start it with local services")
        return self.services

    def secret(self, name: str, run_id: str | None) -> str:
        """The secret's latest value, or for a run the version it first resolved."""
        latest = self.store.secret(name)
        if latest is None:
            raise InvalidInput(
                f"secret '{name}' is not set; set it with `lunaflow secret set {name} VALUE` "
                "(or p.set_secret in tests)"
            )
        if run_id is None:
            return latest[1]
        if self.read_only:
            pinned_version = self.store.pinned_secret(run_id, name)
            found = latest if pinned_version is None else self.store.secret(name, pinned_version)
            return (found or latest)[1]
        version = self.store.pin_secret(run_id, name, latest[0])
        pinned = self.store.secret(name, version)
        if pinned is None:
            raise EngineBug(f"run '{run_id}' is pinned to missing version {version} of secret '{name}'")
        return pinned[1]

    def close(self) -> None:
        self.store.close()
        if self.services is not None:
            self.services.close()
