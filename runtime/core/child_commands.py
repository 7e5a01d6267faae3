"""The vocabulary of child runs (``wf:child``, ``c:result()``): the commands the code
yields and the decisions the replay core answers them with. The logic is in
``runtime.core.children``; these live apart so ``runtime.core.replay`` can name the
decisions without importing that logic."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ChildCmd:
    """``wf:child(workflow, input, { id = ..., timeout = ... })``: start a run as this run's
    child, or join the run that has the id."""

    workflow: str
    input: Any
    id: str | None  # None: derived from the parent's id and the command's position
    timeout: str | float | None = None  # the child run's own bound, as handle:start takes it


@dataclass(frozen=True)
class ChildResultCmd:
    """``c:result({ timeout = ... })``: wait for the child to end and answer its outcome."""

    child: str
    workflow: str
    timeout_ms: int | None


@dataclass(frozen=True)
class StartChild:
    """The journal has no start of this child yet: start (or join) the run now, then
    ``children.started`` it. Nothing is journaled before the run exists, and a crash
    between the two replays to here and joins the same id."""

    workflow: str
    id: str
    input: Any
    timeout: str | float | None


@dataclass(frozen=True)
class ReadChild:
    """The result wait needs the child's state: read it and hand it to ``children.seen``."""

    child: str
    workflow: str
    wait_seq: int  # the child.wait entry the read answers


@dataclass(frozen=True)
class ChildState:
    """A child's state as read from the store (None: no such run)."""

    status: str | None
    result: Any = None
    error: str | None = None
    parent_id: str | None = None


@dataclass(frozen=True)
class ChildRefused:
    """Starting the child was refused (its id is another workflow's, the parent is being
    cancelled): raised into the workflow at the call, nothing journaled."""

    message: str
