"""A loaded project: one sandbox with the project's scripts run, ready to drive runs.

``Code`` is what a deploy replaces. It translates between the Lua engine table and the
Python types of ``runtime.core.replay``: commands come out as ``StepCmd``/``WaitCmd``/
``ValueCmd``, replies go in as Lua tables.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runtime.core import flow, published, values
from runtime.core.child_commands import ChildCmd, ChildRefused, ChildResultCmd
from runtime.core.durations import parse_ms
from runtime.core.flow import Collect, CollectCmd, GateCmd, Rate, SlotWant, parse_rate
from runtime.core.ids import check_run_id
from runtime.core.journal import StepValues
from runtime.core.replay import (
    DEFAULT_CLEANUP_MS,
    ContinueCmd,
    OnCancelCmd,
    SetCmd,
    StepCmd,
    StepFailure,
    ValueCmd,
    VersionCmd,
    WaitCmd,
)
from runtime.engine.project import QUEUE_NAMED, Declaration, ProjectSource, load
from runtime.engine.sandbox import LuaMemoryError, Sandbox
from runtime.errors import InvalidInput, ProjectLoadError
from runtime.services import deadline
from runtime.services.deadline import Deadline

Command = (
    StepCmd
    | WaitCmd
    | ValueCmd
    | VersionCmd
    | SetCmd
    | OnCancelCmd
    | ChildCmd
    | ChildResultCmd
    | ContinueCmd
    | GateCmd
    | CollectCmd
)


@dataclass(frozen=True)
class Returned:
    result: Any
    oversize: int | None = None  # the JSON's size, when too large to bring into Python


@dataclass(frozen=True)
class Raised:
    message: str
    traceback: str | None = None


@dataclass(frozen=True)
class Issued:
    command: Command | None  # None when the command itself was malformed
    fn: Any = None  # the step body, a Lua function
    refusal: str | None = None  # why the command was refused


DriveOutcome = Returned | Raised | Issued


@dataclass(frozen=True)
class BodyOutcome:
    ok: bool
    values: list[Any] | None = None
    error: str | None = None
    # False when the body raised an error table with retry = false: no attempt follows.
    retryable: bool = True
    # The body raised an error table with retry_after: wait that long, no attempt spent.
    retry_after_ms: int | None = None
    # Stopped at the caller's deadline, not by anything of the attempt's own: nothing is
    # recorded, and the run continues later (the attempt re-runs, counted as interrupted).
    interrupted: bool = False


class Code:
    def __init__(self, source: ProjectSource, host_functions: dict[str, Callable[..., Any]]) -> None:
        self.source = source
        self.sandbox = Sandbox(
            max_memory=source.limits.memory_bytes,
            instructions=source.limits.instructions,
            cpu_seconds=source.limits.cpu_seconds,
        )
        for name, fn in host_functions.items():
            self.sandbox.register(name, fn)
        self.engine = self.sandbox.engine
        # Bound now: it is called from inside Lua callbacks, where lupa misreads table fields.
        self.call_object = self.engine.call_object
        self.declarations: list[Declaration] = load(source, self.sandbox)
        self.workflows = {d.name for d in self.declarations if d.kind == "workflow"}
        _settings_name_queues(source, {d.name for d in self.declarations if d.kind == "queue"})
        # The timeout a start of each workflow gets unless it names its own (checked now).
        self.timeouts: dict[str, str | float] = {}
        for name in sorted(self.workflows):
            timeout = self.engine.workflow_timeout(name)
            if timeout is not None:
                try:
                    parse_ms(timeout, f"the timeout of workflow '{name}'")
                except InvalidInput as e:
                    raise ProjectLoadError(str(e)) from e
                self.timeouts[name] = timeout
        # A workflow's debounce or batch (checked now): how starts without an id are collected.
        self.collects: dict[str, Collect] = {}
        for name in sorted(self.workflows):
            raw = self.engine.workflow_collect(name)
            if raw is not None:
                try:
                    self.collects[name] = _collect(name, raw)
                except InvalidInput as e:
                    raise ProjectLoadError(str(e)) from e

    @property
    def tainted(self) -> bool:
        return self.sandbox.tainted

    def _explain(self, message: str) -> str:
        return self.sandbox.explain(message)

    # --- runs --------------------------------------------------------------------------

    def new_run(self, run_id: str, workflow: str, input_value: Any) -> Any:
        return self.engine.new_run(run_id, workflow, self.sandbox.to_lua(input_value))

    def drive(self, session: Any, reply: Any) -> DriveOutcome:
        try:
            out = self.engine.drive(
                session, reply, self.source.limits.instructions, values.SURELY_OVER_IN_LUA
            )
        except LuaMemoryError:
            return Raised(self._explain("not enough memory"))
        kind = out[0]
        if kind == "step":
            return self._step(*out[1:])
        if kind == "command":
            return self._command(out[1])
        if kind == "returned":
            return Returned(values.loads_bounded(out[1], "the workflow's result"))
        if kind == "oversize":
            return Returned(None, oversize=int(out[1]))
        return Raised(self._explain(str(out[1])), out[2] if len(out) > 2 else None)

    @staticmethod
    def _step(
        name: Any,
        retries: Any,
        backoff: Any,
        timeout: Any,
        fn: Any,
        catch: Any = None,
        max_backoff: Any = None,
        jitter: Any = None,
        rate_limit: Any = None,
        rate_key: Any = None,
    ) -> Issued:
        name = str(name)
        try:
            if retries is None:
                retries = 1
            if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
                raise InvalidInput(
                    f"step '{name}': retries must be a whole number of total attempts, 1 or more "
                    f"(got {retries!r}); write retries = 3 for three attempts in all"
                )
            backoff_ms = 2000 if backoff is None else parse_ms(backoff, f"the backoff of step '{name}'")
            timeout_ms = None if timeout is None else parse_ms(timeout, f"the timeout of step '{name}'")
            cmd = StepCmd(
                name,
                max(retries, 1),
                backoff_ms,
                timeout_ms,
                catch=_catch(name, catch),
                max_backoff_ms=(
                    None
                    if max_backoff is None
                    else parse_ms(max_backoff, f"the max_backoff of step '{name}'")
                ),
                jitter=_jitter(name, jitter),
                rate=_step_rate(name, rate_limit, rate_key),
            )
        except InvalidInput as e:
            return Issued(None, refusal=str(e))
        return Issued(cmd, fn=fn)

    def _command(self, cmd: Any) -> Issued:
        op = cmd.op
        try:
            if op == "gate":
                return Issued(_gate(cmd))
            if op == "collect":
                return Issued(CollectCmd())
            if op == "wait":
                wait_kind = str(cmd.kind)
                names = tuple(str(n) for n in cmd.names.values())
                timeout: int | None
                if wait_kind == "sleep":
                    if cmd.timeout is None:
                        raise InvalidInput('wf:sleep needs a duration, e.g. wf:sleep("24h")')
                    timeout = parse_ms(cmd.timeout, "wf:sleep")
                else:
                    timeout = (
                        None
                        if cmd.timeout is None
                        else parse_ms(cmd.timeout, f"the timeout of wf:{wait_kind}")
                    )
                within = None if cmd.within is None else parse_ms(cmd.within, f"the within of wf:{wait_kind}")
                bound = None if cmd.bound is None else int(cmd.bound)
                return Issued(WaitCmd(wait_kind, names, timeout, within_ms=within, bound_at=bound))
            if op == "value":
                return Issued(ValueCmd(str(cmd.call)))
            if op == "version":
                return Issued(VersionCmd(str(cmd.change)))
            if op == "set":
                key = published.check_key(cmd.key if isinstance(cmd.key, str) else None)
                return Issued(SetCmd(key, published.check_value(key, json.loads(str(cmd.value)))))
            if op == "on_cancel":
                budget = (
                    DEFAULT_CLEANUP_MS
                    if cmd.timeout is None
                    else parse_ms(cmd.timeout, "the timeout of wf:on_cancel")
                )
                return Issued(OnCancelCmd(budget))
            if op in ("child", "child_result"):
                return Issued(self._child_command(cmd))
            if op == "continue":
                # Checked before anything is journaled: the size bound of any run input.
                what = "the input of wf:continue_as_new"
                values.check_size(str(cmd.input), what)
                return Issued(ContinueCmd(values.loads_bounded(str(cmd.input), what)))
        except InvalidInput as e:
            return Issued(None, refusal=str(e))
        return Issued(None, refusal=f"unknown engine command {op!r}")

    def begin_cleanup(self, session: Any) -> bool:
        """Swap the run's coroutine for its cancel handler's (``wf:on_cancel``); False when
        the code registered none on this path."""
        return bool(self.engine.begin_cleanup(session))

    def _child_command(self, cmd: Any) -> ChildCmd | ChildResultCmd:
        """wf:child and c:result(), checked before anything is journaled."""
        workflow = str(cmd.workflow)
        if cmd.op == "child_result":
            timeout = cmd.timeout
            what = f"the timeout of c:result() for child '{cmd.child}'"
            return ChildResultCmd(
                str(cmd.child), workflow, None if timeout is None else parse_ms(timeout, what)
            )
        if workflow not in self.workflows:
            known = ", ".join(f"'{w}'" for w in sorted(self.workflows))
            raise InvalidInput(
                f"wf:child: workflow '{workflow}' is not declared in this project; a child is a run of "
                f"a workflow the project declares ({known}) — check the name, or declare it with "
                f'workflow "{workflow}" (function(wf, input) ... end)'
            )
        try:
            child_id = None if cmd.id is None else check_run_id(cmd.id)
        except InvalidInput as e:
            raise InvalidInput(
                f"wf:child('{workflow}'): {e}, at most 200 bytes and no control characters; name the "
                "child with such an id, or leave id out for one derived from this run's id"
            ) from e
        values.check_size(str(cmd.input), f"the input of child workflow '{workflow}'")
        if cmd.timeout is not None:  # the child's bound: refused here, not at the start
            parse_ms(cmd.timeout, f"the timeout of child '{child_id or workflow}'")
        data = values.loads_bounded(str(cmd.input), f"the input of child workflow '{workflow}'")
        return ChildCmd(workflow, data, child_id, cmd.timeout)

    def reply(self, value: Any) -> Any:
        """The Lua table handed back into the coroutine for a decision's outcome."""
        if isinstance(value, ChildRefused):  # wf:child raises it at the call
            return self.refusal(value.message)
        if isinstance(value, StepValues):
            return self.sandbox.pack(value.values)
        if isinstance(value, StepFailure):  # wf:step raises it (catch = true)
            return self.sandbox.lua.table_from({"raise": self.sandbox.to_lua(value.as_data())})
        if isinstance(value, dict):  # a wait's outcome
            return self.sandbox.lua.table_from(
                {k: self.sandbox.to_lua(v) for k, v in value.items() if v is not None}
            )
        return self.sandbox.lua.table_from({"value": value})

    def refusal(self, message: str) -> Any:
        return self.sandbox.lua.table_from({"error": message})

    def run_body(
        self,
        session: Any,
        fn: Any,
        *,
        name: str,
        step_id: str,
        now_s: float,
        timeout_ms: int | None,
        cap: float | None = None,
    ) -> BodyOutcome:
        """Run one attempt's body. Its deadline, the step's ``timeout`` from now, holds for
        the Lua code (the count hook, after every host call) and for the host calls it makes
        (``runtime.services.deadline``): past it the attempt fails with ``step 'name' timed out
        after Nms``, also when the body returns late. ``cap`` (``time.monotonic()``) is the
        caller's own deadline (a Lambda invocation's end); an attempt it stops comes back
        ``interrupted``."""
        digest = hashlib.sha256(step_id.encode("utf-8")).digest()
        limit = None
        if timeout_ms is not None:
            at = time.monotonic() + timeout_ms / 1000
            limit = Deadline(at, f"step '{name}' timed out after {timeout_ms}ms")
        capped = False
        if cap is not None and (limit is None or cap < limit.at):
            limit = Deadline(cap, f"step '{name}' was stopped: the activation running it is out of time")
            capped = True
        try:
            with deadline.attempt(limit):
                got = self.engine.run_body(
                    session,
                    fn,
                    name,
                    step_id,
                    int(now_s),
                    int.from_bytes(digest[:7], "big"),
                    int.from_bytes(digest[7:14], "big"),
                    None if limit is None else limit.message,
                    self.source.limits.instructions,
                    None if limit is None else limit.at,
                    values.MAX_VALUE_BYTES,
                )
                # Lua drops trailing nils.
                ok, out, no_retry, retry_after, oversize = (*got, None, None, None, None)[:5]
        except LuaMemoryError:
            ok, out, no_retry, retry_after, oversize = False, "not enough memory", False, None, None
        if limit is not None and limit.passed():
            if not capped:
                # Timed out however the body ended: killed, or back late from a C call or a
                # host call made between two readings of the clock.
                return BodyOutcome(False, error=limit.message)
            if not ok:
                return BodyOutcome(False, error=limit.message, interrupted=True)
        what = f"the result of step '{name}'"
        if oversize is not None:  # measured in Lua, where the values were encoded
            return BodyOutcome(False, error=values.too_large(what, int(oversize)))
        if not ok:
            slow = None
            if retry_after is not None and not no_retry:
                try:
                    slow = parse_ms(retry_after, f"the retry_after of step '{name}'")
                except InvalidInput:
                    slow = None  # not a duration: the failure counts as any other
            return BodyOutcome(
                False, error=self._explain(str(out)), retryable=not no_retry, retry_after_ms=slow
            )
        encoded = str(out)
        try:
            returned = values.loads_bounded(encoded, what)
            # The values come as one JSON array: its brackets and commas are not the values'
            # (a 256 KiB value was refused as 2 bytes over), so the bound is on what is inside.
            if isinstance(returned, list):
                values.check_size(encoded[1:-1], what, framing=max(len(returned) - 1, 0))
            else:
                values.check_size(encoded, what)
        except InvalidInput as e:
            return BodyOutcome(False, error=str(e))
        return BodyOutcome(True, values=returned)

    # --- handlers ----------------------------------------------------------------------

    def has_fetch(self) -> bool:
        return bool(self.engine.has_handler("fetch", None))

    def call_fetch(self, request: dict[str, Any]) -> tuple[bool, Any, str | None]:
        """Returns ``(ok, response or error message, traceback)``."""
        return self.call_handler("fetch", None, request)

    def call_handler(self, kind: str, name: str | None, arg: Any) -> tuple[bool, Any, str | None]:
        try:
            out = self.engine.call_handler(
                kind, name, self.sandbox.to_lua(arg), self.source.limits.instructions
            )
        except LuaMemoryError:
            return False, self._explain("not enough memory"), None
        if not out.ok:
            return False, self._explain(str(out.error)), out.traceback
        return True, values.loads_bounded(out.json, "the handler's response"), None


def _settings_name_queues(source: ProjectSource, declared: set[str]) -> None:
    """A ``[queues.<name>]`` table for a queue no script declares would set nothing (a
    misspelt name left the queue it meant on the defaults)."""
    declared = declared | {m for text in source.texts for m in QUEUE_NAMED.findall(text)}
    for name in sorted(set(source.queues) - declared):
        near = difflib.get_close_matches(name, sorted(declared), n=1)
        hint = f"did you mean [queues.{near[0]}]? " if near else ""
        raise ProjectLoadError(
            f"lunaflow.toml in {source.root}: [queues.{name}] sets a queue no script declares "
            f"(declared: {', '.join(sorted(declared)) or 'none'}), so it would change nothing; "
            f"{hint}correct the name, declare the queue, or remove the table"
        )


def _catch(name: str, value: Any) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    raise InvalidInput(
        f"step '{name}': catch must be true or false (got {_shown(value)}); catch = true raises the "
        "step's final failure into the workflow as an error pcall can catch — write catch = true"
    )


def _jitter(name: str, value: Any) -> float:
    if value is None or value is False:
        return 0.0
    if value is True:
        return 1.0
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1:
        return float(value)
    raise InvalidInput(
        f"step '{name}': jitter must be a share of each wait from 0 to 1, or true for 1 (got "
        f"{_shown(value)}); jitter = 0.5 draws each wait between half and all of the backoff"
    )


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, float | int):
        return repr(value)
    return f"a {type(value).__name__} value" if not hasattr(value, "values") else "a table"


def _step_rate(name: str, limit: Any, key: Any) -> Rate | None:
    """A step's ``rate``: its bucket is ``key``, shared by every step naming it, or the
    step's own name."""
    if limit is None:
        return None
    count, period = parse_rate(limit, f"the rate of step '{name}'")
    bucket = f"step:{name}" if key is None else str(key)
    return Rate(bucket, count, period)


def _gate(cmd: Any) -> GateCmd:
    """A run's gate (runtime.core.flow): the slots its limits name, its rate and priority."""
    workflow = str(cmd.workflow)
    slots: list[SlotWant] = []
    for lim in (cmd.slots or {}).values():
        scope = str(lim.scope)
        limit = flow.check_limit(lim.limit, f"the concurrency of workflow '{workflow}'")
        if lim.keyed:
            key = flow.check_key(lim.key, workflow)
            slots.append(SlotWant(f"{scope}/{key}", limit, f"{scope}/*"))
        else:
            slots.append(SlotWant(scope, limit, scope))
    rate = None
    if cmd.rate is not None:
        count, period = parse_rate(cmd.rate.limit, f"the rate of workflow '{workflow}'")
        bucket = workflow if cmd.rate.key is None else f"{workflow}/{flow.check_key(cmd.rate.key, workflow)}"
        rate = Rate(bucket, count, period)
    priority = 0 if cmd.priority is None else flow.check_priority(cmd.priority, workflow)
    return GateCmd(workflow, tuple(slots), rate, priority)


def _collect(workflow: str, raw: Any) -> Collect:
    """``debounce = { window, key, max_wait, keep }`` or ``batch = { size, window, key }``."""
    kind = str(raw.kind)
    what = f"the {kind} of workflow '{workflow}'"
    window = parse_ms(raw.window, f"the window of {what}")
    if window <= 0:
        raise InvalidInput(f'{what}: its window must be longer than 0, e.g. window = "5s"')
    key = None if raw.key is None else str(raw.key)
    if kind == "batch":
        size = raw.size
        if (
            isinstance(size, bool)
            or not isinstance(size, int | float)
            or size != int(size)
            or not (1 <= size <= flow.MAX_COLLECTED)
        ):
            raise InvalidInput(
                f"{what}: size must be a whole number of starts from 1 to {flow.MAX_COLLECTED} (got {size!r})"
            )
        return Collect("batch", window, key, size=int(size), keep_all=True)
    max_wait = None if raw.max_wait is None else parse_ms(raw.max_wait, f"the max_wait of {what}")
    keep = "last" if raw.keep is None else str(raw.keep)
    if keep not in ("last", "all"):
        raise InvalidInput(
            f'{what}: keep is "last" (the run gets the last input) or "all" (the list of them)'
        )
    return Collect("debounce", window, key, max_wait_ms=max_wait, keep_all=keep == "all")
