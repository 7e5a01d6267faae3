"""The platform: the run API (start, get, signal, cancel, resume), the worker loop, and
the host functions Lua calls. ``lunaflow dev``, the Lambda handlers and the test harness
all stand on this one class; they differ in store, clock and how they schedule work.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runtime import values
from runtime.clock import Clock, now_ms
from runtime.code import Code
from runtime.errors import (
    EngineBug,
    InvalidInput,
    InvalidTransition,
    JournalConflict,
    NoSuchRun,
    RunIdTaken,
    ServiceUnavailable,
    UnknownWorkflow,
)
from runtime.executor import Executor
from runtime.ids import check_run_id
from runtime.journal import CANCELLABLE, ENDED, FORMAT_VERSION, RESUMABLE, Entry, Kind, Status
from runtime.project import ProjectSource
from runtime.services import builtins
from runtime.services.base import ServiceError, Services
from runtime.store.base import RunRecord, RunUpdate, Store, TimerSet

log = logging.getLogger("lunaflow")
lua_log = logging.getLogger("lunaflow.lua")

# A stand-in for a service the platform does not provide: (name, method, args) -> values.
ServiceFn = Callable[[str, str, list[Any]], list[Any]]
# A stand-in for object classes: (class, key, method, args) -> values.
ObjectFn = Callable[[str, str, str, list[Any]], list[Any]]

MAX_WORK_ITEMS = 1_000_000


class Worker:
    """One Lua state with the project loaded, and the executor that drives runs on it.

    A worker is used by one thread at a time; ``lunaflow dev`` keeps a pool of them.
    """

    def __init__(self, platform: Platform, source: ProjectSource, cache_size: int) -> None:
        self.executor = Executor(platform.store, platform.clock, cache_size=cache_size)
        self.code_source: ProjectSource | None = source  # known before Code exists: loading declares
        self.code = Code(source, platform.host_functions(self))

    @property
    def current_run(self) -> str | None:
        return self.executor.current_run

    def call_object(
        self, cls: str, key: str, method: str, state: Any, args: list[Any]
    ) -> tuple[list[Any], Any]:
        code = self.code
        out = code.engine.call_object(
            cls,
            key,
            method,
            code.sandbox.to_lua(state),
            self.lua_values(args),
            code.source.limits.instructions,
        )
        if not out.ok:
            raise ServiceError(code.sandbox.explain(str(out.error)))
        return json.loads(out.json), json.loads(out.state)

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


class Platform:
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
    ) -> None:
        self.store = store
        self.clock = clock
        self.services = services
        self.standins = dict(standins or {})
        self.objects = objects
        self.logs: list[dict[str, Any]] = []
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
        self, workflow: str, input_value: Any = None, *, id: str | None = None, parent_id: str | None = None
    ) -> RunRecord:
        if workflow not in self.worker.code.workflows:
            raise UnknownWorkflow(workflow)
        run_id = str(uuid.uuid4()) if id is None else check_run_id(id)
        encoded = values.encode(input_value, f"the input of run '{run_id}'")
        input_value = values.decode(encoded)
        at = self.clock.now()
        record = RunRecord(
            id=run_id,
            workflow=workflow,
            status=Status.RUNNING,
            input=input_value,
            parent_id=parent_id,
            created_at=at,
            updated_at=at,
        )
        started = Entry(1, Kind.STARTED, workflow, {"format": FORMAT_VERSION, "input": input_value}, at)
        existing, created = self.store.create_run(record, started)
        if not created and existing.workflow != workflow:
            raise RunIdTaken(run_id, existing.workflow, workflow)
        return existing

    def get(self, run_id: str, workflow: str | None = None) -> RunRecord:
        run = self.store.get_run(run_id)
        if run is None or (workflow is not None and run.workflow != workflow):
            raise NoSuchRun(run_id, workflow)
        return run

    def journal(self, run_id: str) -> list[Entry]:
        self.get(run_id)
        return self.store.journal(run_id)

    def signal(self, run_id: str, name: str, payload: Any = None, *, workflow: str | None = None) -> bool:
        run_id = check_run_id(run_id)
        if not isinstance(name, str) or not name:
            raise InvalidInput(f'a signal name must be a non-empty string (got {name!r}), e.g. "paid"')
        self.get(run_id, workflow)
        encoded = values.encode(payload, f"the payload of signal '{name}' for run '{run_id}'")
        _, live = self.store.add_signal(run_id, name, values.decode(encoded), self.clock.now())
        return live

    def cancel(self, run_id: str, *, workflow: str | None = None) -> None:
        run = self.get(run_id, workflow)
        if run.status not in CANCELLABLE:
            raise InvalidTransition(
                f"run '{run_id}' is {run.status}, so it cannot be cancelled; cancel applies to runs "
                "that have not ended (running, sleeping, awaiting, failed)"
            )
        self._cancel_tree(run_id)

    def _cancel_tree(self, run_id: str) -> None:
        for _ in range(100):
            run = self.store.get_run(run_id)
            if run is None or run.status not in CANCELLABLE:
                break
            entry = Entry(run.journal_len + 1, Kind.CANCELLED, None, {}, self.clock.now())
            try:
                self.store.append(run_id, run.journal_len, [entry], update=RunUpdate(Status.CANCELLED, None))
                break
            except JournalConflict:
                continue
        for child in self.store.children(run_id):
            self._cancel_tree(child)

    def resume(self, run_id: str, *, workflow: str | None = None) -> None:
        run = self.get(run_id, workflow)
        if run.status not in RESUMABLE:
            raise InvalidTransition(
                f"run '{run_id}' is {run.status}, so it cannot be resumed; resume applies to failed runs only"
            )
        entry = Entry(run.journal_len + 1, Kind.RESUMED, None, {}, self.clock.now())
        self.store.append(
            run_id,
            run.journal_len,
            [entry],
            update=RunUpdate(Status.RUNNING, run.current_step),
            timer=TimerSet(None),
        )
        self.store.wake(run_id)

    def runs(self, *, status: str | None = None, workflow: str | None = None) -> list[RunRecord]:
        return self.store.list_runs(status=status, workflow=workflow)

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

    def fetch(self, request: dict[str, Any]) -> tuple[bool, Any, str | None]:
        self.worker = self.fresh(self.worker)
        return self.worker.code.call_fetch(request)

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
                return lua(json.loads(text))
            except json.JSONDecodeError as e:
                raise InvalidInput(f"json.parse: the text is not valid JSON ({e})") from e

        def log_line(level: str, message: str, fields: str) -> None:
            fields_value = json.loads(fields)
            self.logs.append(
                {"level": level, "message": message, "fields": fields_value, "run": worker.current_run}
            )
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
                return worker.lua_values(list(self.objects(cls, key, method, args)))
            services = self._services(f"object {cls}('{key}')")
            return worker.lua_values(services.call_object(worker, cls, key, method, args))

        def declare(kind: str, name: str, opts: str) -> None:
            if self.services is not None and kind not in self.standins:
                self.services.declare(kind, name, json.loads(opts), worker_root())

        def worker_root() -> Path:
            return self.source.root if worker.code_source is None else worker.code_source.root

        def http(spec: str, body: str | None) -> Any:
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
            **builtins.jwt_functions(lua, pair),
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
        version = self.store.pin_secret(run_id, name, latest[0])
        pinned = self.store.secret(name, version)
        if pinned is None:
            raise EngineBug(f"run '{run_id}' is pinned to missing version {version} of secret '{name}'")
        return pinned[1]

    def close(self) -> None:
        self.store.close()
        if self.services is not None:
            self.services.close()


def ended(status: str) -> bool:
    return status in ENDED
