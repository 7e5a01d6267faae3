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
from runtime.store.base import RunRecord, RunUpdate, Store, TimerSet

log = logging.getLogger("lunaflow")
lua_log = logging.getLogger("lunaflow.lua")

# A stand-in for a service the platform does not provide: (name, method, args) -> values.
ServiceFn = Callable[[str, str, list[Any]], list[Any]]
# A stand-in for object classes: (class, key, method, args) -> values.
ObjectFn = Callable[[str, str, str, list[Any]], list[Any]]

MAX_WORK_ITEMS = 1_000_000


class Platform:
    def __init__(
        self,
        project: str | Path,
        store: Store,
        clock: Clock,
        *,
        services: dict[str, ServiceFn] | None = None,
        objects: ObjectFn | None = None,
        cache_size: int = 256,
    ) -> None:
        self.store = store
        self.clock = clock
        self.services = dict(services or {})
        self.objects = objects
        self.logs: list[dict[str, Any]] = []
        self.executor = Executor(store, clock, cache_size=cache_size)
        self.source = ProjectSource.read(project)
        self.code = self._load(self.source)

    # --- code --------------------------------------------------------------------------

    def _load(self, source: ProjectSource) -> Code:
        return Code(source, self._host_functions())

    def deploy(self, project: str | Path) -> None:
        """Load new code; in-flight runs replay on it at their next wake."""
        source = ProjectSource.read(project)
        code = self._load(source)  # raises before anything changes if the project is refused
        self.source, self.code = source, code
        self.executor.forget()

    def _code(self) -> Code:
        if self.code.tainted:
            self.executor.forget()
            self.code = self._load(self.source)
        return self.code

    # --- runs --------------------------------------------------------------------------

    def start(
        self, workflow: str, input_value: Any = None, *, id: str | None = None, parent_id: str | None = None
    ) -> RunRecord:
        if workflow not in self.code.workflows:
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
        self.executor.forget(run_id)
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
                return done
            for run_id, token in work:
                self.executor.advance(run_id, self._code())
                self.store.clear_wakeup(run_id, token)
                done += 1
                if done > MAX_WORK_ITEMS:
                    raise EngineBug("the worker loop did not settle after a million activations")

    def fetch(self, request: dict[str, Any]) -> tuple[bool, Any, str | None]:
        return self._code().call_fetch(request)

    # --- host functions: what Lua may ask of the platform -------------------------------

    def _host_functions(self) -> dict[str, Callable[..., Any]]:
        return {
            "now": lambda: int(self.clock.now()),
            "json_parse": self._json_parse,
            "log": self._log,
            "declare": lambda kind, name, opts: None,
            "service": self._service,
            "object_call": self._object_call,
            "secret": self._secret,
            "run_check_id": check_run_id,
            "run_start": self._lua_start,
            "run_status": lambda wf, rid: self.get(rid, wf).status,
            "run_result": lambda wf, rid: self.code.sandbox.lua.table_from(
                {1: self.code.sandbox.to_lua(self.get(rid, wf).result)}
            ),
            "run_signal": lambda wf, rid, name, payload: self.signal(
                rid, name, json.loads(payload), workflow=wf
            ),
            "run_cancel": lambda wf, rid: self.cancel(rid, workflow=wf),
            "run_resume": lambda wf, rid: self.resume(rid, workflow=wf),
        }

    def _lua_start(self, workflow: str, input_json: str, run_id: Any) -> str:
        if run_id is not None and not isinstance(run_id, str):
            check_run_id(run_id)
        run = self.start(workflow, json.loads(input_json), id=run_id, parent_id=self.executor.current_run)
        return run.id

    def _json_parse(self, text: str) -> Any:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise InvalidInput(f"json.parse: the text is not valid JSON ({e})") from e
        return self.code.sandbox.to_lua(value)

    def _log(self, level: str, message: str, fields: str) -> None:
        record = {
            "level": level,
            "message": message,
            "fields": json.loads(fields),
            "run": self.executor.current_run,
        }
        self.logs.append(record)
        lua_log.log(
            logging.WARNING if level == "warn" else getattr(logging, level.upper(), logging.INFO),
            "%s %s",
            message,
            fields if fields != "null" else "",
        )

    def _lua_values(self, out: list[Any]) -> Any:
        table: dict[int | str, Any] = {
            i + 1: self.code.sandbox.to_lua(v) for i, v in enumerate(out) if v is not None
        }
        table["n"] = len(out)
        return self.code.sandbox.lua.table_from(table)

    def _service(self, kind: str, name: str, method: str, args_json: str) -> Any:
        fn = self.services.get(kind)
        if fn is None:
            raise ServiceUnavailable(
                f"{kind} '{name}' has no backend on this platform yet; lunaflow's local {kind} "
                "service arrives with `lunaflow dev` — in tests, pass a stand-in with services="
            )
        return self._lua_values(list(fn(name, method, json.loads(args_json))))

    def _object_call(self, cls: str, key: str, method: str, args_json: str) -> Any:
        if self.objects is None:
            raise ServiceUnavailable(
                f"object {cls}('{key}'):{method} has no backend on this platform yet; local objects "
                "arrive with `lunaflow dev` — in tests, pass a stand-in with objects="
            )
        return self._lua_values(list(self.objects(cls, key, method, json.loads(args_json))))

    def _secret(self, name: str) -> str:
        latest = self.store.secret(name)
        if latest is None:
            raise InvalidInput(
                f"secret '{name}' is not set; set it with `lunaflow secret set {name} VALUE` "
                "(or p.set_secret in tests)"
            )
        run_id = self.executor.current_run
        if run_id is None:
            return latest[1]
        version = self.store.pin_secret(run_id, name, latest[0])
        pinned = self.store.secret(name, version)
        if pinned is None:
            raise EngineBug(f"run '{run_id}' is pinned to missing version {version} of secret '{name}'")
        return pinned[1]

    def close(self) -> None:
        self.executor.forget()
        self.store.close()


def ended(status: str) -> bool:
    return status in ENDED
