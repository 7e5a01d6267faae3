"""The I/O side of child runs (``wf:child``, ``c:result()``): what the executor does for
the two decisions the replay core cannot make alone (``runtime.core.children``).

Starting a child is ``Platform.start`` with this run as parent: an id that exists joins
(``RunIdTaken`` when another workflow holds it), and only then is ``child.started``
recorded, saved with the next commit. A crash before that commit replays to the same
command and the same id, and joins the run it already started: one child, whatever dies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from runtime.core import children
from runtime.core.child_commands import ChildRefused, ChildState, ReadChild, StartChild
from runtime.core.journal import Status
from runtime.core.replay import Decision, Replay, Resume
from runtime.engine.wake import Wakes
from runtime.errors import EngineBug, InvalidInput, InvalidTransition, RunIdTaken, UnknownWorkflow
from runtime.store.base import RunRecord, RunUpdate, Store

StartFn = Callable[..., RunRecord]

# The ends a waiting parent is told of: its c:result() answers them.
TERMINAL = frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELLED})


def start_child(start: StartFn | None, replay: Replay, parent: str, d: StartChild) -> Decision:
    """Start (or join) the child, then record it; a refused start is raised into the code."""
    if start is None:
        raise EngineBug(f"run '{parent}' started a child on an executor that cannot start runs")
    if d.id == parent:
        return Resume(
            ChildRefused(
                f"wf:child: run '{parent}' named itself as its child; a run cannot wait for its own "
                "end — give the child another id, or leave id out for one derived from this run's"
            )
        )
    try:
        record = start(d.workflow, d.input, id=d.id, parent_id=parent, timeout=d.timeout)
    except (RunIdTaken, UnknownWorkflow, InvalidInput, InvalidTransition) as e:
        return Resume(ChildRefused(f"wf:child: {e}"))
    return children.started(replay, d, joined=record.parent_id != parent)


def read_child(store: Store, replay: Replay, d: ReadChild) -> Decision:
    """The child's state, read now, handed to the core (which answers or parks)."""
    run = store.child_state(d.child)
    state = (
        ChildState(None) if run is None else ChildState(str(run.status), run.result, run.error, run.parent_id)
    )
    return children.seen(replay, d, state)


def waking_parent(run: RunRecord, update: RunUpdate | None) -> RunUpdate | None:
    """``update`` (a ``RunUpdate``), waking the run's parent in the same write when it ends
    the run: a parent parked in ``c:result()`` is woken by this write and no other."""
    if update is not None and run.parent_id is not None and update.status in TERMINAL:
        return replace(update, wake=run.parent_id)
    return update


def prompt_parent(wakes: Wakes, update: RunUpdate | None) -> None:
    """The write that ended a child recorded its parent's wake-up: prompt a worker for it
    (on AWS an SQS message; a lost one is healed by the reconciler, as for a signal)."""
    if update is not None and update.wake is not None:
        wakes.prompt(update.wake)
