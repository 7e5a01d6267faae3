"""A worker: one Lua state with a project's code loaded, and the executor that drives runs
on it. A worker serves one thread at a time; ``lunaflow dev`` keeps a pool of them, a
Lambda container and the test harness one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.core.clock import Clock
from runtime.engine.code import Code
from runtime.engine.executor import Executor
from runtime.engine.host import LogSink, RunApi, host_functions, lua_log
from runtime.engine.observe import Observer
from runtime.engine.project import ProjectSource
from runtime.engine.redact import Redactor
from runtime.engine.sandbox import LuaMemoryError
from runtime.engine.wake import Wakes
from runtime.services.base import Declaration, ServiceError, Services
from runtime.store.base import Store


@dataclass(frozen=True)
class WorkerSetup:
    """What every worker of a platform is built with."""

    store: Store
    clock: Clock
    wakes: Wakes
    observer: Observer
    api: RunApi
    services: Services | None
    logs: LogSink
    cache_size: int = 256
    redactor: Redactor = field(default_factory=Redactor)  # the secrets handed out, kept out of text


class Worker:
    def __init__(self, source: ProjectSource, setup: WorkerSetup) -> None:
        self.source = source
        self.executor = Executor(
            setup.store,
            setup.clock,
            cache_size=setup.cache_size,
            wakes=setup.wakes,
            observer=setup.observer,
            redact=setup.redactor.text,
            cancel=setup.api.cancel,
            start=setup.api.start,
        )
        self.redact = setup.redactor.text
        # Loading runs the scripts, whose declarations already call host functions; what
        # they declare for services is kept here until the platform accepts the code.
        self.declarations: list[Declaration] = []
        self.code = Code(
            source, host_functions(setup.api, setup.services, setup.logs, self, redactor=setup.redactor)
        )

    @property
    def project_root(self) -> Path:
        return self.source.root

    @property
    def current_run(self) -> str | None:
        return self.executor.current_run

    def replaying(self) -> bool:
        """Whether the executing run's code is re-running through recorded history."""
        return self.executor.replaying(self.executor.current_run)

    # --- what services call back: object methods and queue handlers -------------------

    def call_object(
        self, cls: str, key: str, method: str, state: Any, args: list[Any]
    ) -> tuple[list[Any], Any]:
        code = self.code
        try:
            ok, *out = code.call_object(
                cls,
                key,
                method,
                code.sandbox.to_lua(state),
                code.sandbox.pack(args),
                code.source.limits.instructions,
            )
        except LuaMemoryError:
            ok, out = False, ["not enough memory"]
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
        error = self.redact(str(out))
        lua_log.warning(
            "queue %s message %s failed: %s\n%s", queue, message.get("id"), error, self.redact(tb or "")
        )
        return error
