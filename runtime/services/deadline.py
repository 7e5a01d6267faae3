"""The deadline of the step attempt running on this thread, which host calls respect.

A step's ``timeout`` bounds the attempt's wall time, host calls included, and the Lua
count hook sees only time spent in Lua. So ``runtime.engine.code.Code.run_body`` sets the
attempt's deadline here, for its thread, around the body; an object called from the body
runs on the same thread and sees it too. What waits outside Lua reads it: ``http.request``
gets at most the time left, in total (``runtime.services.builtins``), a database
statement is interrupted once it passes (``sqlite_progress``), an object call stops waiting
for its key's lock, and on AWS a kv, queue or Data API request the body makes is waited
for no longer and not sent again (``within``, ``refuse_late``; inside an object call it runs
whole, while the key is locked). Outside an attempt (a fetch or queue handler) there is none.

A host call cut here raises ``ServiceError`` with the attempt's message (``step 'x' timed
out after Nms``); the prelude's ``call_host`` then ends the body with it, so user code's
``pcall`` cannot swallow the timeout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from runtime.services import effects
from runtime.services.base import ServiceError


@dataclass(frozen=True)
class Deadline:
    at: float  # time.monotonic()
    message: str  # what a call cut at the deadline fails with

    def left(self) -> float:
        return self.at - time.monotonic()

    def passed(self) -> bool:
        return time.monotonic() >= self.at

    def expired(self) -> ServiceError:
        return ServiceError(self.message)


_local = threading.local()
T = TypeVar("T")


@contextmanager
def attempt(deadline: Deadline | None) -> Iterator[None]:
    """Make ``deadline`` this thread's for the block (``None``: no deadline)."""
    outer = getattr(_local, "deadline", None)
    _local.deadline = deadline
    try:
        yield
    finally:
        _local.deadline = outer


def current() -> Deadline | None:
    """This thread's deadline, if it runs a step attempt that has one."""
    found: Deadline | None = getattr(_local, "deadline", None)
    return found


def within(call: Callable[[], T]) -> T:
    """``call``'s answer, waited for at most until this thread's attempt deadline, past
    which the attempt fails with its message; nothing is sent once it has passed. For a
    request nothing can cut (an AWS API call: boto3 takes no per-call timeout, and the Data
    API lets a statement wait 45 s on a lock), which goes on in a thread of its own and may
    still take effect, as an HTTP request cut at its timeout may still be served. Outside
    an attempt the call runs as is."""
    limit = current()
    if limit is None or effects.inside_a_call():
        # Inside an object call the request runs whole: the key's lock must outlast every
        # effect the method makes, so none may land after the call gave up.
        return call()
    if limit.passed():
        raise limit.expired()
    answer: list[T] = []
    failure: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        _local.given_up_at = limit  # read by refuse_late: no retry after the deadline
        try:
            answer.append(call())
        except BaseException as e:  # handed to the caller's thread
            failure.append(e)
        finally:
            done.set()

    threading.Thread(target=run, name="lunaflow-bounded-call", daemon=True).start()
    if not done.wait(max(0.0, limit.left())):
        raise limit.expired()
    if failure:
        raise failure[0]
    return answer[0]


def refuse_late(**_: Any) -> None:
    """A botocore ``before-send`` handler for the clients ``within`` calls through: a request
    of a call given up on is not sent again once the deadline has passed (botocore retries
    a failed request several times, which could land long after the attempt failed)."""
    limit: Deadline | None = getattr(_local, "given_up_at", None)
    if limit is not None and limit.passed():
        raise limit.expired()


def sqlite_progress() -> int:
    """For ``sqlite3.Connection.set_progress_handler``: non-zero interrupts the statement
    running on this thread once its attempt's deadline has passed."""
    found = current()
    return 1 if found is not None and found.passed() else 0


# Between two calls of the progress handler: about 0.1 ms of SQLite's virtual machine.
SQLITE_PROGRESS_STEPS = 10_000
