"""One Lua 5.4 state with the safe environment of SPEC section 6.

The Lua half (``lua/prelude.lua``) builds the environment user code runs in and the
``engine`` table this module drives. Python reaches user code only through that table;
user code reaches Python only through ``host.call(name, ...)``, which dispatches to the
functions registered here and always answers ``(true, value)`` or ``(false, message)``.

The memory limit holds only while Lua code runs. Whenever Python holds the state (lupa's
glue included: pushing arguments, referencing a table handed to Python, ``table_from``),
it is lifted, because an allocation that failed there would be outside any protected
call: a Lua panic (the process aborts) or a jump across Python frames (the thread keeps
the GIL and the process freezes). The prelude arms the limit when an engine entry starts
and lifts it before anything goes back to Python; ``call_host`` lifts it around each host
call. A value converted while lifted may leave the state over its limit: the next
allocation in Lua then fails there, protected, as the call's memory error. After each
entry a state left within a sixteenth of its limit, after a full collection, is tainted
and rebuilt before its next call (``Platform.fresh``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from importlib.resources import files
from typing import Any

import lupa.lua54 as lua54

from runtime.core import values
from runtime.errors import LunaflowError

log = logging.getLogger("lunaflow.sandbox")

DEFAULT_MEMORY_BYTES = 256 * 1024 * 1024
DEFAULT_INSTRUCTIONS = 200_000_000
# CPU time one call may use. Instructions bound loops; this bounds the rest: instructions
# and library calls that cost milliseconds each on values of many megabytes.
DEFAULT_CPU_SECONDS = 30.0

HostFn = Callable[..., Any]
# A state left with less than this share of its limit free after a call (and a full
# collection) is rebuilt: a hoard kept in a shared table, or a memory error swallowed.
HEADROOM_SHARE = 16
LuaMemoryError = lua54.LuaMemoryError
LuaError = lua54.LuaError


def _no_attributes(obj: object, name: object, is_setting: bool) -> object:
    # Lua never holds a Python object, but if one ever leaked, its attributes stay shut.
    raise AttributeError("Python attributes are not reachable from Lua")


def _lua_source(name: str) -> str:
    return files("runtime.engine").joinpath(f"lua/{name}").read_text(encoding="utf-8")


_PRELUDE = _lua_source("prelude.lua")
# Lua ports of the C library functions whose loops the count hook cannot reach.
_PATTERNS = _lua_source("patterns.lua")
_GUARDS = _lua_source("guards.lua")


class Sandbox:
    """A Lua state, its engine table and the host functions user code may call."""

    def __init__(
        self,
        *,
        max_memory: int = DEFAULT_MEMORY_BYTES,
        instructions: int = DEFAULT_INSTRUCTIONS,
        cpu_seconds: float = DEFAULT_CPU_SECONDS,
    ) -> None:
        self.instructions = instructions
        self.max_memory = max_memory
        self.cpu_seconds = cpu_seconds
        # Set after a call ran out of memory: the state may hold garbage a user kept alive.
        self.tainted = False
        self.lua = lua54.LuaRuntime(
            max_memory=max_memory,
            register_eval=False,
            register_builtins=False,
            unpack_returned_tuples=True,
            attribute_filter=_no_attributes,
        )
        self._lift()  # armed only while Lua runs (the module's docstring says why)
        self._host_fns: dict[str, HostFn] = {}
        host = self.lua.table_from(
            {
                "call": self._dispatch,
                # Take nothing and return nothing: calling them allocates nothing in Lua.
                "arm": self._arm,
                "lift": self._lift,
                "monotonic": time.monotonic,
                # This thread's CPU: other threads' work (a second worker) is not this call's.
                "cpu_time": time.thread_time,
                "cpu_limit": float(cpu_seconds),
                # A value whose JSON in Lua is longer stays there (the prelude's host.crossing).
                "surely_over": values.SURELY_OVER_IN_LUA,
            }
        )
        # The `python` table lupa installs is removed before any user code exists.
        g = self.lua.globals()
        g.python = None
        raw, entries = self.lua.execute(_PRELUDE, host, _PATTERNS, _GUARDS)
        self.engine = Engine(self, raw, entries)

    def _arm(self) -> None:
        self.lua.set_max_memory(self.max_memory)

    def _lift(self) -> None:
        self.lua.set_max_memory(0)

    def over_limit(self) -> bool:
        """Whether what the host converted into the state (a request, a reply, a value) left
        it over its limit, garbage collected: the call it was for must not start."""
        if self.lua.get_memory_used() <= self.max_memory:
            return False
        self.lua.gccollect()
        return bool(self.lua.get_memory_used() > self.max_memory)

    def after_entry(self) -> None:
        """With the limit lifted after an engine entry: taint a state left near its limit."""
        room = self.max_memory // HEADROOM_SHARE
        if self.lua.get_memory_used() > self.max_memory - room:
            self.lua.gccollect()  # no user finalizers: setmetatable refuses __gc
            if self.lua.get_memory_used() > self.max_memory - room:
                self.tainted = True

    def explain(self, message: str) -> str:
        """Turn Lua's bare memory error into one that names the limit and the fix."""
        if message == "not enough memory":
            self.tainted = True
            return (
                f"call stopped: it ran out of memory (the Lua state's limit is "
                f"{self.max_memory // 2**20} MiB); look for a table that grows without end, "
                "or raise limits.memory_mb in lunaflow.toml"
            )
        return message

    def register(self, name: str, fn: HostFn) -> None:
        self._host_fns[name] = fn

    def to_lua(self, value: values.JSONValue) -> Any:
        return values.to_lua(self.lua.table_from, value)

    def pack(self, out: Sequence[Any]) -> Any:
        """Values as a Lua table ``{n = #out, ...}``, for ``table.unpack(t, 1, t.n)``: every
        value handed back, nils included (a step's values, a host function's results)."""
        table: dict[int | str, Any] = {i + 1: self.to_lua(v) for i, v in enumerate(out) if v is not None}
        table["n"] = len(out)
        return self.lua.table_from(table)

    def _dispatch(self, name: str, *args: Any) -> tuple[bool, Any] | tuple[bool, Any, Any]:
        fn = self._host_fns.get(name)
        if fn is None:
            return False, f"lunaflow engine bug: no host function '{name}'"
        try:
            result = fn(*args)
        except LunaflowError as e:
            return False, str(e)
        except Exception as e:  # a host bug must not take the platform down
            log.exception("host function %s failed", name)
            return False, f"lunaflow engine bug in {name}: {type(e).__name__}: {e}"
        if isinstance(result, tuple):
            return (True, *result)
        return True, result


class Engine:
    """The prelude's engine table as the host calls it.

    Each function runs through its entry in the prelude, which arms the memory limit,
    catches whatever the function raises and lifts the limit before returning, so lupa
    converts results and errors with no limit in force. A function that raised comes back
    as ``LuaMemoryError`` (the state ran out) or ``LuaError`` (an engine bug); callers word
    the first with ``Sandbox.explain``. ``encode`` is handed to other Lua code, never
    called from Python, so it is the raw function.
    """

    def __init__(self, sandbox: Sandbox, raw: Any, entries: Any) -> None:
        # Bound now: entries are called from inside Lua callbacks (an object called from a
        # step body), where lupa misreads table fields.
        self._calls: dict[str, Callable[..., Any]] = {
            str(name): self._entry(sandbox, entry) for name, entry in entries.items()
        }
        self.encode = raw.encode

    @staticmethod
    def _entry(sandbox: Sandbox, entry: Any) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            # The arguments were converted with the limit lifted; checked now, before any Lua
            # runs, so a call whose input does not fit fails the same way whatever it does.
            if sandbox.over_limit():
                sandbox.tainted = True
                raise LuaMemoryError("not enough memory")
            try:
                out = entry(*args)
            finally:
                sandbox._lift()  # also when lupa raised before the entry could lift it
            sandbox.after_entry()
            out = out if isinstance(out, tuple) else (out,)
            if not out[0]:
                message = str(out[1])
                if message == "not enough memory":
                    raise LuaMemoryError(message)
                raise LuaError(message)
            rest = out[1:]
            if len(rest) == 1:
                return rest[0]
            return rest if rest else None

        return call

    def __getattr__(self, name: str) -> Callable[..., Any]:
        try:
            return self._calls[name]
        except KeyError:
            raise AttributeError(f"the engine has no function '{name}'") from None
