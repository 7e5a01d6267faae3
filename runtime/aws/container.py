"""The Lambda container's ``AwsRuntime``: which one a handler in ``functions/`` serves with.

On Lambda there is one per container, built from the environment on first use
(``functions/_runtime.py``). The harness (``runtime.aws.harness``) plays Lambda in-process
and hands the handlers its own runtime for the length of one invocation with ``serving``;
a context variable keeps that to the calling thread, so invocations on other threads (the
torture driver's concurrent workers) each see their own container.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runtime.aws.runtime import AwsRuntime

_serving: ContextVar[AwsRuntime | None] = ContextVar("lunaflow_aws_container", default=None)


def serving_now() -> AwsRuntime | None:
    """The runtime an invocation on this thread was handed, if any."""
    return _serving.get()


@contextmanager
def serving(runtime: AwsRuntime) -> Iterator[None]:
    """Handlers called inside this block serve with ``runtime``."""
    token = _serving.set(runtime)
    try:
        yield
    finally:
        _serving.reset(token)
