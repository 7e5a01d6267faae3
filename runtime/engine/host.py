"""The host ABI: the Python functions a Lua state may call (``host.call(name, ...)``).

Lua's run handles, secrets, services, logs and the stateless helpers all come through
here. The functions are bound per worker, so they know which run is executing in that Lua
state; what they need of the platform above is the narrow ``RunApi``. One lupa quirk shapes
them: Python called from Lua inside a coroutine must not read Lua table fields (lupa 2.8
reads the coroutine's stack), so arguments arrive as JSON text or plain values and answers
go back as values the sandbox converts.
"""

from __future__ import annotations

import binascii
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from runtime.core import values
from runtime.core.clock import Clock
from runtime.core.ids import check_run_id
from runtime.engine.code import Code
from runtime.engine.redact import Redactor
from runtime.engine.schedules import parse_schedule
from runtime.errors import InvalidInput, ServiceUnavailable
from runtime.services import builtins, effects
from runtime.services.base import Declaration, Services
from runtime.store.base import RunRecord

lua_log = logging.getLogger("lunaflow.lua")

HostFn = Callable[..., Any]
LogSink = Callable[[dict[str, Any]], None]

# Service calls that only read: an object method making them may run again (the others are
# effects: runtime/services/effects.py). A database query is not one of them: SQL may write.
READS = {("kv", "get"), ("kv", "list")}

MAX_LOG_CHARS = 16 * 1024  # of a log line's message, and of its fields as JSON; the rest is cut


def clip(text: str, limit: int = MAX_LOG_CHARS) -> str:
    """``text`` cut to at most ``limit`` characters, saying how much was cut (a text it has
    cut already comes back as it is)."""
    if len(text) <= limit:
        return text
    kept = limit - 48  # room for the note
    return f"{text[:kept]}... ({len(text) - kept} more characters cut)"


class RunApi(Protocol):
    """What Lua's run handles and ``secret`` reach in the platform."""

    clock: Clock

    def start(
        self,
        workflow: str,
        input_value: Any = None,
        *,
        id: str | None = None,
        parent_id: str | None = None,
        changes: tuple[str, ...] | None = None,
        timeout: str | float | None = None,
        signal: str | None = None,
        payload: Any = None,
    ) -> RunRecord: ...

    def get(self, run_id: str, workflow: str | None = None) -> RunRecord: ...

    def values(self, run_id: str, workflow: str | None = None) -> dict[str, Any]: ...
    def generations(self, run_id: str, workflow: str | None = None) -> dict[str, Any]: ...

    def signal(self, run_id: str, name: str, payload: Any = None, *, workflow: str | None = None) -> bool: ...

    def cancel(self, run_id: str, *, workflow: str | None = None) -> object: ...

    def resume(self, run_id: str, *, workflow: str | None = None) -> None: ...

    def secret(self, name: str, run_id: str | None) -> str:
        """The secret's latest value, or for a run the version it first resolved."""


class Executing(Protocol):
    """The worker the functions are bound to: its code, and the run executing in it."""

    code: Code
    declarations: list[Declaration]  # what the code's top level declared while it loaded

    @property
    def project_root(self) -> Path: ...

    @property
    def current_run(self) -> str | None: ...

    def replaying(self) -> bool: ...

    def call_object(
        self, cls: str, key: str, method: str, state: Any, args: list[Any]
    ) -> tuple[list[Any], Any]: ...


def _refuse_constant(name: str) -> Any:
    raise InvalidInput(f"json.parse: {name} is not JSON; numbers must be finite")


def _parse_int(text: str) -> int:
    # A Lua integer has 64 bits, at most 19 digits; longer ones would only be refused later,
    # and Python refuses to convert over 4,300 digits at all.
    digits = len(text.lstrip("-"))
    if digits > 19:
        raise InvalidInput(
            f"json.parse: the number {text[:24]}... has {digits} digits, more than a Lua integer holds "
            "(64 bits); send big numbers as strings"
        )
    return int(text)


def host_functions(
    api: RunApi,
    services: Services | None,
    logs: LogSink,
    worker: Executing,
    *,
    redactor: Redactor | None = None,
) -> dict[str, HostFn]:
    """The functions one worker's Lua state may call."""
    redactor = redactor or Redactor()

    def lua(value: Any) -> Any:
        return worker.code.sandbox.to_lua(value)

    def pack(out: list[Any]) -> Any:
        return worker.code.sandbox.pack(out)

    def need(what: str) -> Services:
        if services is None:
            raise ServiceUnavailable(f"{what} has no backend on this platform; start it with local services")
        return services

    def start(
        workflow: str,
        input_json: str,
        run_id: Any,
        timeout: Any = None,
        signal: str | None = None,
        payload_json: str | None = None,
    ) -> str:
        if run_id is not None and not isinstance(run_id, str):
            check_run_id(run_id)
        return api.start(
            workflow,
            json.loads(input_json),
            id=run_id,
            parent_id=worker.current_run,
            timeout=timeout,
            signal=signal,  # signal-with-start: the run and its signal in one write
            payload=None if payload_json is None else json.loads(payload_json),
        ).id

    def json_parse(text: str) -> Any:
        try:
            value = json.loads(text, parse_constant=_refuse_constant, parse_int=_parse_int)
        except json.JSONDecodeError as e:
            raise InvalidInput(f"json.parse: the text is not valid JSON ({e})") from e
        except RecursionError as e:
            raise InvalidInput("json.parse: the text is nested too deeply; keep it under 100 levels") from e
        return lua(values.check_lua_value(value, "json.parse"))

    def log_line(level: str, message: str, fields: str, mode: str | None = None) -> None:
        # A line the workflow function says while replaying was said when the run first
        # passed there: it is kept for inspection, marked, and not written out again.
        replayed = mode == "run" and worker.replaying()
        message = redactor.text(clip(message))
        kept = json.loads(fields) if len(fields) <= MAX_LOG_CHARS else {"cut": f"{len(fields)} characters"}
        said = redactor.value(kept)
        record = {"level": level, "message": message, "fields": said, "run": worker.current_run}
        if replayed:
            record["replayed"] = True

        def line() -> None:
            logs(record)
            if not replayed:
                py_level = {"warn": logging.WARNING, "error": logging.ERROR}.get(level, logging.INFO)
                shown = "" if said is None else json.dumps(said, ensure_ascii=False, separators=(",", ":"))
                lua_log.log(py_level, "%s %s", message, clip(shown), extra={"run": record["run"]})

        effects.say(line)  # an object method's optimistic attempt holds it until it counts

    def service(kind: str, name: str, method: str, args_json: str) -> Any:
        if (kind, method) not in READS:
            effects.before_effect()  # see ``effect`` below
        return pack(need(f"{kind} '{name}'").call(kind, name, method, json.loads(args_json)))

    def object_call(cls: str, key: str, method: str, args_json: str) -> Any:
        backend = need(f"object {cls}('{key}')")
        return pack(backend.call_object(worker, cls, key, method, json.loads(args_json)))

    def declare(kind: str, name: str, opts: str, where: str | None = None) -> None:
        # Kept, not applied: migrations run once the platform accepts the code (Platform).
        # A schedule is checked now, so a bad one refuses the load at its line.
        if kind == "schedule":
            parse_schedule(name, json.loads(opts))
        worker.declarations.append(Declaration(kind, name, json.loads(opts), where or ""))

    def http(spec: str, body_hex: str | None) -> Any:
        data = None if body_hex is None else binascii.unhexlify(body_hex)
        outbound = builtins.http_request if services is None else services.http
        return lua(outbound(json.loads(spec), data))

    def pair(a: Any, b: Any) -> tuple[Any, Any]:
        return a, b

    def secret(name: str) -> str:
        value = api.secret(name, worker.current_run)
        redactor.add(name, value)  # handed to Lua: kept out of every text written from now on
        return value

    def value_too_large(what: str, size: int) -> None:
        # Lua measured it (``host.crossing`` in the prelude): its text stays there.
        raise InvalidInput(values.too_large(what, int(size)))

    def effect(fn: HostFn) -> HostFn:
        # Inside an object method, what reaches outside may not run twice: the method's call
        # takes its key's lock first (runtime/services/effects.py).
        def guarded(*args: Any) -> Any:
            effects.before_effect()
            return fn(*args)

        return guarded

    return {
        "now": lambda: int(api.clock.now()),
        "json_parse": json_parse,
        "log": log_line,
        "declare": declare,
        "http_request": effect(http),
        **builtins.crypto_functions(),
        **builtins.jwt_functions(lua, pair, api.clock.now),
        "service": service,
        "object_call": effect(object_call),
        "secret": secret,
        "run_check_id": check_run_id,
        "run_start": effect(start),
        "run_status": lambda wf, rid: api.get(rid, wf).status.value,
        "run_result": lambda wf, rid: pack([api.get(rid, wf).result]),
        "run_value": lambda wf, rid, key: pack([api.values(rid, wf).get(key)]),
        "run_values": lambda wf, rid: lua(api.values(rid, wf)),
        "run_generations": lambda wf, rid: pack([api.generations(rid, wf)]),
        "value_too_large": value_too_large,
        "run_signal": effect(
            lambda wf, rid, name, body: api.signal(rid, name, json.loads(body), workflow=wf)
        ),
        # Lua's cancel returns nothing
        "run_cancel": effect(lambda wf, rid: api.cancel(rid, workflow=wf) and None),
        "run_resume": effect(lambda wf, rid: api.resume(rid, workflow=wf)),
    }
