"""The memory the stack gives the functions, from the project's Lua state bound.

A Lambda function that runs out of memory is killed mid-invocation: its wakes are retried
and a step it was running counts an interrupted start (three fail the attempt), where a Lua
state at its bound fails only the call, with the error that says to raise
``limits.memory_mb``. So a function must hold one state at the project's bound beside the
process itself. Measured by ``bench/lambda_memory.py`` (CPython, lupa, boto3 and Powertools
imported, the runtime built, then a state filled to its bound): about 87 MiB before the
state; a state at its bound takes more than its bound in the process, since lupa counts the
bytes Lua asks for and malloc rounds each block up: 2 % more for 1,000-byte strings, 24 % for
short strings, 32 % for a chain of one-element tables. ``STATE_SHARE`` allows half again.
``RUNTIME_MB`` rounds the process up for what Lambda adds (its runtime client; X-Ray's SDK
when tracing is on); ``VALUES_MB`` is room for what Python holds beside the state (a request
body, an HTTP response, a loaded journal).

Never less than ``FLOOR_MB``: the worker keeps up to ``LUNAFLOW_WAKE_THREADS`` states at
once (``docs/operations.md``), what they hold in practice is not measured here, and a
function sized for one state at its bound could not hold two at half of it. No import of
CDK: the benches read this too.
"""

from __future__ import annotations

import math
from fractions import Fraction

RUNTIME_MB = 128
STATE_SHARE = Fraction(3, 2)  # a state's bound -> what it may take in the process
VALUES_MB = 128
FLOOR_MB = 1024  # what every function had before the size followed the bound
LAMBDA_MAX_MB = 10_240  # Lambda's largest function
STEP_MB = 64  # sizes are whole multiples of this, as CloudFormation's examples use
MiB = 2**20


def function_memory_mb(lua_bytes: int) -> int:
    """The memory of a function whose Lua states are bounded at ``lua_bytes``."""
    need = RUNTIME_MB + math.ceil(Fraction(lua_bytes, MiB) * STATE_SHARE) + VALUES_MB
    return max(FLOOR_MB, math.ceil(need / STEP_MB) * STEP_MB)


def largest_bound_mb() -> int:
    """The largest ``limits.memory_mb`` whose functions Lambda can size."""
    bound = math.floor((LAMBDA_MAX_MB - RUNTIME_MB - VALUES_MB) / STATE_SHARE)
    while function_memory_mb(bound * MiB) > LAMBDA_MAX_MB:
        bound -= 1
    return bound


def too_large(root: object, lua_bytes: int) -> str | None:
    """The refusal for a bound Lambda's largest function cannot hold, or None."""
    if function_memory_mb(lua_bytes) <= LAMBDA_MAX_MB:
        return None
    bound = math.ceil(lua_bytes / MiB)
    return (
        f"lunaflow.toml in {root}: limits.memory_mb is {bound}, and a Lambda function holding a "
        f"Lua state at that bound ({float(STATE_SHARE):g} times it, with what malloc adds) beside "
        f"its runtime ({RUNTIME_MB} MB) and the values it converts ({VALUES_MB} MB) would need "
        f"{function_memory_mb(lua_bytes)} MB, over Lambda's largest, {LAMBDA_MAX_MB} MB; lower "
        f"limits.memory_mb to at most {largest_bound_mb()}"
    )


__all__ = [
    "FLOOR_MB",
    "LAMBDA_MAX_MB",
    "RUNTIME_MB",
    "STATE_SHARE",
    "function_memory_mb",
    "largest_bound_mb",
    "too_large",
]
