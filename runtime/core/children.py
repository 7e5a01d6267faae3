"""Child runs in the replay core: ``wf:child`` and ``c:result()`` as journaled commands.

``child.started`` records that the child run exists (started or joined) at this point of
the parent's code; ``child.wait`` that ``c:result()`` began waiting (with its due time),
``child.done`` how it was answered. Replay answers both from the journal without reading
the child. A live wait reads the child's state (``ReadChild``, like ``NeedValue``: the core
does no I/O) and parks the parent ``awaiting`` until the child ends; the child's terminal
write records a wake-up for its parent in the same write (``RunUpdate.wake``), so the wait
is woken exactly when there is something new to read, with no polling.
"""

from __future__ import annotations

from typing import Any

from runtime.core.bounds import MAX_CHILDREN_PER_RUN
from runtime.core.child_commands import (
    ChildCmd,
    ChildRefused,
    ChildResultCmd,
    ChildState,
    ReadChild,
    StartChild,
)
from runtime.core.ids import child_run_id
from runtime.core.journal import Entry, Kind, Status, describe
from runtime.core.replay import Decision, Diverged, EnterCleanup, Park, Replay, Resume
from runtime.errors import EngineBug

# How a child's status answers c:result() (a failed run is resumable, but its parent has
# been told: the first end the parent sees is the one it keeps).
ENDINGS = {"completed": "completed", "failed": "failed", "cancelled": "cancelled"}
# A joined run that is not this run's child wakes its own parent, not this one: the wait
# reads it again this often (the one case that polls).
FOREIGN_RECHECK_MS = 60_000


def too_many_children(run_id: str) -> str:
    return (
        f"wf:child: run '{run_id}' already called wf:child {MAX_CHILDREN_PER_RUN} times, the most a run "
        "may; start the rest from a child that starts them (a tree of runs), or continue as new"
    )


def describe_child(child: str) -> str:
    return f"child '{child}'"


def child(replay: Replay, cmd: ChildCmd) -> Decision:
    """``wf:child``: the recorded start, or the start to make."""
    replay._parked = None
    replay._step = None
    replay.child_calls += 1
    child_id = cmd.id if cmd.id is not None else child_run_id(replay.owner, replay.child_calls)
    head = replay._peek()
    if replay._cancel_here(head):
        return EnterCleanup()  # cancelled here: the run's cancel handler runs instead
    if replay.child_calls > MAX_CHILDREN_PER_RUN:
        # Counted over calls, not entries, so a replay refuses the same call.
        return Resume(ChildRefused(too_many_children(replay.run_id)))
    if head is None:
        return replay._full(2) or StartChild(cmd.workflow, child_id, cmd.input, cmd.timeout)
    if not (
        head.kind == Kind.CHILD_STARTED
        and head.name == cmd.workflow
        and head.data.get("child") in _recorded_ids(replay, cmd, child_id)
    ):
        return Diverged(describe(head), f"reached child '{child_id}' of workflow '{cmd.workflow}'")
    replay.pos += 1
    return Resume(_handle(head))


def _recorded_ids(replay: Replay, cmd: ChildCmd, child_id: str) -> tuple[str, ...]:
    """The ids a recorded start of this call may name. Before derived ids named the
    generation, a later generation derived them from the bare run id (and joined generation
    1's ended child); a journal written then replays as written rather than diverging, so
    such a run keeps the child it recorded and only its calls not yet recorded get ids of
    their own generation."""
    if cmd.id is not None or replay.generation == 1:
        return (child_id,)
    return (child_id, child_run_id(replay.run_id, replay.child_calls))


def started(replay: Replay, cmd: StartChild, *, joined: bool) -> Resume:
    """Record the child's start once the run exists (``joined``: it was not this run's)."""
    data: dict[str, Any] = {"child": cmd.id}
    if joined:
        data["joined"] = True
    return Resume(_handle(replay._record(Kind.CHILD_STARTED, cmd.workflow, data)))


def result(replay: Replay, cmd: ChildResultCmd) -> Decision:
    """``c:result()``: the recorded outcome, or a read of the child."""
    replay._parked = None
    replay._step = None
    replay.current = describe_child(cmd.child)
    head = replay._peek()
    if replay._cancel_here(head):
        return EnterCleanup()
    if head is None:
        full = replay._full(2)
        if full is not None:
            return full
        due = None if cmd.timeout_ms is None else replay.now_ms + cmd.timeout_ms
        data = {"child": cmd.child, "timeout_ms": cmd.timeout_ms, "due_at": due}
        wait = replay._record(Kind.CHILD_WAIT, cmd.workflow, data)
    else:
        if not (head.kind == Kind.CHILD_WAIT and head.data.get("child") == cmd.child):
            return Diverged(describe(head), f"reached the result of child '{cmd.child}'")
        wait = head
        replay.pos += 1
        done = replay._peek()
        if replay._cancel_here(done):
            return EnterCleanup()  # cancelled while it waited on its child
        if done is not None:
            if done.kind != Kind.CHILD_DONE:
                raise EngineBug(f"run '{replay.run_id}' child wait at {wait.seq} is followed by {done.kind}")
            replay.pos += 1
            return Resume(dict(done.data))
    return _read(replay, wait)


def seen(replay: Replay, wait_for: ReadChild, state: ChildState) -> Decision:
    """The child's state as read: answer the wait if it ended (or timed out), else park."""
    wait = replay.entries[wait_for.wait_seq - 1]
    if wait.kind != Kind.CHILD_WAIT or wait.data.get("child") != wait_for.child:
        raise EngineBug(f"run '{replay.run_id}' read child '{wait_for.child}' with no wait for it open")
    by = ENDINGS.get(state.status or "")
    if state.status is None:
        by = "failed"
        state = ChildState("failed", error=f"run '{wait_for.child}' does not exist")
    if by is not None:
        done: dict[str, Any] = {"child": wait_for.child, "by": by}
        if by == "completed":
            done["result"] = state.result
        else:
            done["message"] = state.error or f"run '{wait_for.child}' was {by}"
        replay._record(Kind.CHILD_DONE, wait.name, done)
        return Resume(done)
    due = wait.data.get("due_at")
    if due is not None and replay.now_ms >= due:
        done = {"child": wait_for.child, "by": "timeout"}
        replay._record(Kind.CHILD_DONE, wait.name, done)
        return Resume(done)
    if _foreign(replay, wait_for.child, state):
        recheck = replay.now_ms + FOREIGN_RECHECK_MS
        due = recheck if due is None else min(int(due), recheck)
    replay._parked = lambda: _read(replay, wait)
    return Park(Status.AWAITING, None if due is None else int(due), replay.current or "")


def _read(replay: Replay, wait: Entry) -> ReadChild:
    replay._parked = lambda: _read(replay, wait)
    return ReadChild(str(wait.data["child"]), str(wait.name), wait.seq)


def _foreign(replay: Replay, child_id: str, state: ChildState) -> bool:
    """The child's end wakes its own parent; a joined run of another parent (or none) does
    not wake this one."""
    return state.parent_id != replay.run_id


def _handle(entry: Entry) -> dict[str, Any]:
    return {"child": entry.data["child"], "workflow": entry.name}
