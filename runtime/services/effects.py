"""Effects made from inside an object method, for a store that runs the call optimistically.

On AWS an object call first runs its method on the state it read, taking no lock
(``runtime.aws.services.DynamoObjects``): a method that only reads and writes ``self.state``
is then one read and at most one conditional write, and a conflict runs it again. A method
that reaches outside (HTTP, a kv write, a database, a queue, another object, a run's start,
signal, cancel or resume) must not run twice, so the host asks the call's guard at each
such host call (``before_effect``): the guard takes the key's lock there, on condition the
state is still the one read, or stops the attempt. Log lines said during an attempt are
held until the guard knows the attempt counts.

With no guard on the stack (the local backend, a handler, a step body) both are no-ops."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol


class Guard(Protocol):
    def before_effect(self) -> None:
        """The method is about to make an effect: allow it (lock taken) or raise."""

    def hold(self, say: Callable[[], None]) -> bool:
        """Keep a log line until the attempt is known to count; False when it may be said now."""


_stack = threading.local()


def _guards() -> list[Guard]:
    guards: list[Guard] | None = getattr(_stack, "guards", None)
    if guards is None:
        guards = _stack.guards = []
    return guards


@contextmanager
def guarded(guard: Guard) -> Iterator[None]:
    """Run an object method under ``guard`` (calls nest: the innermost guard is asked)."""
    guards = _guards()
    guards.append(guard)
    try:
        yield
    finally:
        guards.pop()


def inside_a_call() -> bool:
    """Whether an object method runs under a guard on this thread."""
    return bool(_guards())


def before_effect() -> None:
    guards = _guards()
    if guards:
        guards[-1].before_effect()


def say(line: Callable[[], None]) -> None:
    """Say a log line now, or hold it for the running attempt."""
    guards = _guards()
    if not guards or not guards[-1].hold(line):
        line()
