"""Advancing one run: the I/O side of replay.

``Executor.advance(run_id)`` reads the run's journal and signals, drives the workflow
coroutine, asks ``runtime.core.replay`` what each command means, saves what the core
recorded, runs step bodies, and parks. Saving is grouped: a step's result is written
together with the next step's intent (or the park), so a step costs one commit. That is
safe because run code performs no effects outside step bodies: a crash before the write
only repeats the last body, with the same step id.

``Executor.check(run)`` is the same loop in replay-only mode (``lunaflow check``, as
Temporal's replayer is its worker): it answers from the journal alone and stops at the
first command the journal does not answer, so it writes nothing and runs no effect.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from runtime.core import children, flow, values
from runtime.core.bounds import GENERATIONS_KEPT
from runtime.core.child_commands import ChildCmd, ChildResultCmd, ReadChild, StartChild
from runtime.core.clock import Clock, now_ms
from runtime.core.flow import Admit, CollectCmd, GateCmd, Gather
from runtime.core.journal import (
    ENDED,
    Entry,
    Kind,
    Status,
    StepValues,
    cleanup_state,
    current_generation,
    kept_from,
    run_deadline,
)
from runtime.core.replay import (
    Complete,
    ContinueAsNew,
    ContinueCmd,
    Decision,
    Diverged,
    EndCancelled,
    EnterCleanup,
    Execute,
    Fail,
    NeedValue,
    OnCancelCmd,
    Park,
    Refused,
    Replay,
    Resume,
    SetCmd,
    StepCmd,
    Throttle,
    VersionCmd,
    WaitCmd,
)
from runtime.engine import children as child_runs
from runtime.engine.code import Code, Command, Issued, Raised, Returned
from runtime.engine.observe import Observer, Quiet
from runtime.engine.wake import Wakes
from runtime.errors import InvalidInput, JournalConflict, LunaflowError
from runtime.store.base import RunRecord, RunUpdate, Store, TimerSet

log = logging.getLogger("lunaflow.executor")

MAX_CHECKED_COMMANDS = 1_000_000  # commands one replay-only check answers before giving up
# What an eager activation does itself: record a value, read a child, park, end. Anything
# else (a child's start, a gate, a rate, a cancel's cleanup, a step body unless its timeout
# fits: ``Executor._promoted``) is a worker's.
EAGER_DECISIONS = (NeedValue, ReadChild, Park, Complete, Fail, Diverged)
# A step an eager activation runs must fit with this to spare: the lease's and the intent's
# writes come between the check and the attempt's start, and an attempt the activation's
# end cuts short is recorded as nothing and run again by a worker.
EAGER_HEADROOM_MS = 250


@dataclass
class Session:
    """A run's coroutine and replay state, kept between activations while it is parked."""

    run: RunRecord
    code: Code
    lua: Any
    replay: Replay
    saved_len: int
    status: Status = Status.RUNNING  # as last read or saved
    step_fn: Any = None
    deadline_ms: int | None = None  # the start's timeout falls then (run.started's deadline_at)
    # The run was cancelled and runs its cancel handler (deadline_ms: its budget's end).
    cleaning: bool = False
    # The session passed the workflow's gate or collection (runtime.core.flow): its end
    # gives slots or a collection back. A session starts at the top of the function, where
    # the prelude gates and collects, so False means the workflow has neither.
    flow: bool = False


@dataclass(frozen=True)
class Verdict:
    """What replaying a run's journal on the current code found (``lunaflow check``)."""

    run_id: str
    workflow: str
    status: Status
    diverges: bool
    message: str
    newer: bool = False  # written by a newer lunaflow: not replayed here, left to that code


@dataclass(frozen=True)
class ActivationDeadline:
    """How long an activation may run, where a platform bounds it (a Lambda invocation).
    Times are ``time.monotonic()`` values.

    ``at`` is when the activation stops starting new work, saves and wakes the run for a
    fresh activation. ``steps_until`` is the latest a step attempt may run to (the end,
    less the time to save its outcome): a step with a timeout starts only if its timeout
    fits, else the run continues in a fresh activation, and a timeout over
    ``longest_step_ms`` could never fit and fails the run; any other attempt still running
    then is stopped, recorded as nothing, and re-run in a fresh activation (``advance``)."""

    at: float
    steps_until: float
    longest_step_ms: int | None = None
    # An eager activation (a start's or a signal's, run in the request that made it, with no
    # lease): it writes only a park or an end reached without effects between, else hands
    # the run off untouched (``Executor.handed_off``) for a worker to advance as usual.
    eager: bool = False
    # Where an eager activation may run a step body: takes the run's lease and marks the
    # run running in the same write, True when taken.
    # A step whose timeout fits before ``steps_until`` then runs right there, and the
    # activation goes on as a leased one (``Executor._promoted``); a step with no timeout,
    # or one that does not fit, could hold the request longer than it may wait: handed off.
    take_lease: Callable[[], bool] | None = None
    # An eager activation that took the lease: it runs only steps whose timeout fits; at any
    # other step it saves what it recorded and wakes the run for a worker.
    leased_here: bool = False

    def step_ms(self) -> int:
        """The time a step starting now may have."""
        return max(0, int((self.steps_until - time.monotonic()) * 1000))


@dataclass(frozen=True)
class _Stopped:
    """Replay-only mode reached what the journal does not answer."""

    at: Decision | Raised | Issued


class Executor:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        cache_size: int = 256,
        wakes: Wakes | None = None,
        observer: Observer | None = None,
        redact: Callable[[str], str] | None = None,
        cancel: Callable[[str], object] | None = None,
        start: child_runs.StartFn | None = None,
    ) -> None:
        self.store = store
        # Starts a run (wf:child's children): the platform's start, with its checks.
        self.start = start
        # Cancels a run and the runs it started: a run that times out cancels its children.
        self.cancel = cancel
        # Error text leaves here for the journal and the logs: secrets handed out become markers.
        self.redact: Callable[[str], str] = redact or (lambda text: text)
        self.clock = clock
        self.wakes = wakes or Wakes(store)
        self.observer: Observer = observer or Quiet()
        self.cache_size = cache_size
        self._cache: OrderedDict[str, Session] = OrderedDict()
        self._active: Session | None = None
        # The run whose code is executing, and its step while a body runs: host calls made
        # from Lua read them (parents of started runs, secret pins, log tags).
        self.current_run: str | None = None
        self.current_step: str | None = None
        # Whether the last advance wrote a park or an end (which also drops a lease).
        self.parked_or_ended = False
        # Whether the last (eager) advance left the run untouched for a worker.
        self.handed_off = False
        self._resumed: list[tuple[Session, Resume]] = []  # an eager activation's, reported once saved

    def _orphan(self, run: RunRecord) -> bool:
        """Cancel a run, before its first step, whose parent is cancelled. The start that
        made it checks the parent after its write (``Runs.start``); a process that died in
        between leaves the check to here, so no run of a cancelled parent ever executes."""
        if run.parent_id is None:
            return False
        parent = self.store.get_run(run.parent_id)
        if parent is None or parent.status != Status.CANCELLED:
            return False
        entry = Entry(run.journal_len + 1, Kind.CANCELLED, None, {}, self.clock.now())
        try:
            self.store.append(run.id, run.journal_len, [entry], update=RunUpdate(Status.CANCELLED, None))
        except JournalConflict:
            return False  # another writer moved it; the normal path sorts out what it is now
        self.parked_or_ended = True
        self.observer.cancelled(run.id, run.workflow)
        return True

    def replaying(self, run_id: str | None) -> bool:
        """Whether the run's code is re-running through recorded history right now."""
        s = self._active
        return s is not None and s.run.id == run_id and s.replay.replaying

    def forget(self, run_id: str | None = None) -> None:
        """Drop cached coroutines (one run's, or all after a deploy or restart)."""
        if run_id is None:
            self._cache.clear()
        else:
            self._cache.pop(run_id, None)

    @contextmanager
    def _running(self, run_id: str, step: str | None = None) -> Iterator[None]:
        outer = self.current_run, self.current_step
        self.current_run, self.current_step = run_id, step
        try:
            yield
        finally:
            self.current_run, self.current_step = outer

    # --- live runs ---------------------------------------------------------------------

    def advance(
        self, run_id: str, code: Code, *, deadline: ActivationDeadline | None = None
    ) -> Status | None:
        """Advance the run until it parks or ends; returns its status then (None: no such run).

        ``deadline`` bounds the activation where a platform does (a Lambda invocation): no
        new work starts once ``deadline.at`` has passed, and the run is woken so a fresh
        activation continues it. A step with a ``timeout`` starts only if the timeout fits
        before ``deadline.steps_until``; every other attempt is stopped there, in Lua and in
        the host calls it makes (``runtime.services.deadline``). An attempt stopped so is
        recorded as nothing, as if the process had ended: the run is woken and the next
        activation re-runs it with the same step id, journaled as a ``step.rerun``; after 3
        starts it fails as interrupted and retries apply."""
        session = self._cache.pop(run_id, None)
        self.parked_or_ended = False
        self.handed_off = False
        self._resumed = []
        # A cached session reads only what was appended after it (normally nothing).
        snap = self.store.load(run_id, after=None if session is None else session.saved_len)
        if session is not None and snap is not None and snap.run.created_at != session.run.created_at:
            # A later run of the id (the cached one was deleted at its expiry): read it whole.
            session = None
            snap = self.store.load(run_id)
        if snap is None or snap.run.status in ENDED or snap.run.status == Status.FAILED:
            self.forget(run_id)
            return None if snap is None else snap.run.status
        run, signals, now = snap.run, snap.signals, now_ms(self.clock)
        if session is None and run.journal_len == 1 and self._orphan(run):
            return Status.CANCELLED
        decision: Decision | None = None
        if (
            session is not None
            and session.code is code
            and not snap.journal
            and session.saved_len == run.journal_len
        ):
            session.replay.refresh(now, signals)
            session.status = run.status
            decision = session.replay.redecide()
        else:
            if run.workflow not in code.workflows:
                error = _undeclared(run)
                update = child_runs.waking_parent(run, RunUpdate(Status.FAILED, None, error=error))
                self.store.append(run_id, run.journal_len, [], update=update, timer=TimerSet(None))
                self.wakes.timer(run_id, None)
                child_runs.prompt_parent(self.wakes, update)
                self.observer.ended(run_id, run.workflow, Status.FAILED, error=error)
                return Status.FAILED
            journal = snap.journal if session is None else self.store.journal(run_id)
            session = self._session(run, code, journal, now, signals)
            request = cleanup_state(current_generation(session.replay.entries))[1]
            if request is not None:
                # Cancelled: the cleanup's budget bounds the run now, not its start's timeout.
                session.cleaning = True
                due = request.data.get("due_at")
                session.deadline_ms = None if due is None else int(due)
        if session.deadline_ms is not None and now >= session.deadline_ms:
            if deadline is not None and deadline.eager:
                return self._hand_off(session)
            if session.cleaning:
                return self._cleanup_cut(session)
            return self._timed_out(session)
        self.observer.activation(run_id, run.workflow)
        self._active = session
        try:
            status = self._drive(session, decision, deadline, live=True)
            assert isinstance(status, Status)
            return status
        except JournalConflict:
            # Another writer (a cancel, another worker) moved the journal: our view is stale.
            log.info("run %s: journal moved under this worker; replaying afresh", run_id)
            self.forget(run_id)
            fresh = self.store.get_run(run_id)
            if fresh is not None and fresh.status not in ENDED and fresh.status != Status.FAILED:
                self.wakes.wake(run_id)
            return None if fresh is None else fresh.status
        finally:
            self._active = None
            self.observer.activation_ended(run_id, run.workflow)

    def _session(self, run: RunRecord, code: Code, journal: list[Entry], now: int, signals: Any) -> Session:
        """A fresh coroutine over the journal's current generation, with its input."""
        replay = Replay(run.id, journal, now, signals)
        lua = code.new_run(run.id, run.workflow, replay.start.data.get("input", run.input))
        session = Session(run, code, lua, replay, saved_len=replay.length, status=run.status)
        session.deadline_ms = run_deadline(current_generation(replay.entries))
        return session

    def _continue(self, s: Session, cont: ContinueAsNew) -> Session:
        """Close the generation (its ``run.continued`` saved with the park's timer cleared, in
        an append of its own so a generation starts a DynamoDB chunk), drop the entries of the
        generations older than ``GENERATIONS_KEPT``, then start the function again from the
        top with the new input, same run id. Pending signals stay pending: the new
        generation's waits consume them."""
        pending = s.replay.take_unsaved()
        if len(pending) > 1:  # the old generation's last entries first: the new one starts a chunk
            self.store.append(s.run.id, s.saved_len, pending[:-1])
            s.saved_len += len(pending) - 1
        self.store.append(
            s.run.id, s.saved_len, pending[-1:], update=RunUpdate(Status.RUNNING, None), timer=TimerSet(None)
        )
        s.saved_len += 1
        s.status = Status.RUNNING
        self.wakes.timer(s.run.id, None)
        self.observer.continued(s.run.id, s.run.workflow, cont.generation)
        entries = s.replay.entries
        cut = kept_from(entries, GENERATIONS_KEPT)
        if cut is not None:
            try:
                self.store.drop_entries(s.run.id, cut)
            except Exception:  # only storage: the next generation's start tries again
                log.warning(
                    "dropping run %s's generations before entry %d failed", s.run.id, cut, exc_info=True
                )
            entries = [e for e in entries if e.seq == 1 or e.seq >= cut]
        fresh = self._session(s.run, s.code, entries, now_ms(self.clock), s.replay.signals)
        fresh.status = Status.RUNNING
        self._active = fresh
        return fresh

    # --- replay only -------------------------------------------------------------------

    def check(self, run: RunRecord, code: Code) -> Verdict:
        """Replay the run's journal on ``code``, running nothing the journal does not answer.
        Reads only: no signals and time zero, so a wait the journal has not resolved stops
        the replay where the journal ends."""

        def verdict(diverges: bool, message: str) -> Verdict:
            return Verdict(run.id, run.workflow, run.status, diverges, message)

        if run.workflow not in code.workflows:
            return verdict(True, f"workflow '{run.workflow}' is no longer declared in this project")
        replay = Replay(run.id, self.store.journal(run.id), 0, ())
        lua = code.new_run(run.id, run.workflow, replay.start.data.get("input", run.input))
        session = Session(run, code, lua, replay, replay.length)
        self._active = session
        try:
            stopped = self._drive(session, None, None, live=False)
        finally:
            self._active = None
        assert isinstance(stopped, _Stopped)
        at = stopped.at
        if isinstance(at, Raised):
            return verdict(False, f"the code raises on replay: {at.message}")
        if isinstance(at, Issued):
            if at.command is None:
                return verdict(False, f"the code makes a refused call on replay: {at.refusal}")
            return verdict(False, "replay did not settle; the run may loop without end")
        if isinstance(at, Diverged):
            return verdict(True, at.error)
        if isinstance(at, Fail):
            return verdict(False, at.error)
        if isinstance(at, Execute):
            return verdict(False, f"replays cleanly; would run step '{at.name}' next")
        if isinstance(at, Park):
            return verdict(False, f"replays cleanly; parked at {at.current}")
        if isinstance(at, NeedValue):
            return verdict(False, f"replays cleanly; would record {at.call}() next")
        if isinstance(at, EnterCleanup):
            return verdict(False, "replays cleanly; would run its cancel handler next")
        if isinstance(at, EndCancelled):
            if at.replayed:
                return verdict(False, "replays cleanly to the end of its cleanup (cancelled)")
            return verdict(False, "replays cleanly; its cleanup would end next")
        if isinstance(at, StartChild):
            return verdict(False, f"replays cleanly; would start child '{at.id}' next")
        if isinstance(at, ContinueAsNew):
            return verdict(False, f"replays cleanly; would continue as new (generation {at.generation}) next")
        if isinstance(at, ReadChild):
            return verdict(False, f"replays cleanly; parked at child '{at.child}'")
        return verdict(False, "replays cleanly to its return")

    # --- the one loop ------------------------------------------------------------------

    def _drive(
        self, s: Session, decision: Decision | None, deadline: ActivationDeadline | None, *, live: bool
    ) -> Status | _Stopped:
        """Drive the coroutine, answering its commands from the journal. Live, act on what
        the journal does not answer (save, run the step, park) and go on until the run parks
        or ends; replay only, stop there."""
        code, replay = s.code, s.replay
        reply: Any = None
        commands = 0
        while True:
            if decision is None:
                if live and deadline is not None and time.monotonic() >= deadline.at:
                    return self._hand_off(s) if deadline.eager else self._out_of_time(s, None)
                with self._running(s.run.id):
                    out = code.drive(s.lua, reply)
                if isinstance(out, Returned) and out.oversize is not None:
                    too_large = values.too_large(f"the result of run '{s.run.id}'", out.oversize)
                    if not live:
                        return _Stopped(Raised(too_large))
                    decision = Fail(too_large)
                elif isinstance(out, Returned):
                    decision = self._complete(s, out.result) if live else replay.complete(out.result)
                elif isinstance(out, Raised):
                    if not live:
                        return _Stopped(out)
                    if s.replay.cleanup is not None:
                        decision = self._cleanup_failed(s, self.redact(out.message))
                        continue
                    return self._raised(s, out)
                elif out.command is None:
                    if not live:
                        return _Stopped(out)
                    reply = code.refusal(out.refusal or "")  # the code sees an error
                    continue
                else:
                    commands += 1
                    if not live and commands > MAX_CHECKED_COMMANDS:
                        return _Stopped(out)
                    decision = self._decide(s, out)
            if isinstance(decision, Resume):
                if live and deadline is not None and deadline.eager:
                    self._resumed.append((s, decision))  # reported if the activation saves
                elif live:
                    self._note_signal(s, decision)
                reply = code.reply(decision.value)
                decision = None
                continue
            if isinstance(decision, Admit | Gather) and not live:
                reply = code.reply(None)  # a replay-only check passes every gate
                decision = None
                continue
            if isinstance(decision, Refused):
                reply = code.refusal(decision.message)  # nothing recorded; the code sees an error
                decision = None
                continue
            if isinstance(decision, EnterCleanup):
                # Leave the workflow function where the cancel found it; the handler runs
                # in its place, its commands answered from the entries after the cancel.
                replay.enter_cleanup()
                if not code.begin_cleanup(s.lua):
                    decision = replay.end_cancelled(
                        "failed",
                        f"run '{s.run.id}' was cancelled to clean up, but the code it runs on registers "
                        "no on_cancel handler there; it ended cancelled without its cleanup",
                        forced=True,
                    )
                    if not live:
                        return _Stopped(decision)
                    continue
                reply = None
                decision = None
                continue
            if isinstance(decision, ContinueAsNew):
                if not live:
                    return _Stopped(decision)
                if deadline is not None and deadline.eager:
                    return self._hand_off(s)
                s = self._continue(s, decision)
                replay = s.replay
                reply = None
                decision = None
                continue
            if not live:
                return _Stopped(decision)
            if deadline is not None and deadline.eager and not isinstance(decision, EAGER_DECISIONS):
                promoted = self._promoted(s, decision, deadline)
                if promoted is None:
                    return self._hand_off(s)
                deadline = promoted
                s.status = Status.RUNNING  # marked so by the lease's write (``take_lease``)
            outcome = self._act(s, decision, deadline)
            if isinstance(outcome, Status):
                return outcome
            decision = outcome

    @staticmethod
    def _promoted(s: Session, decision: Decision, deadline: ActivationDeadline) -> ActivationDeadline | None:
        """The deadline an eager activation goes on under once it holds the lease, to run a
        step whose timeout fits its time; None to hand the run off (any other work, a step
        with no timeout or one too long, a cleanup's, or a lease not to be had)."""
        if deadline.take_lease is None or s.cleaning or not isinstance(decision, Execute):
            return None
        if not _fits_here(decision, deadline):
            return None
        if not deadline.take_lease():
            return None
        return replace(deadline, eager=False, take_lease=None, leased_here=True)

    def _hand_off(self, s: Session) -> Status:
        """An eager activation reached work that is not its to do (a step body, a child's
        start, a gate, its time's end): it writes nothing and leaves the run, its wake-up
        still recorded, to a worker; what it replayed is dropped with its session."""
        self.forget(s.run.id)
        self.handed_off = True
        self._resumed = []
        return s.status

    def _out_of_time(self, s: Session, withdrawn: Execute | None) -> Status:
        """Save what is recorded and wake the run for a fresh activation. The coroutine waits
        for a reply mid-command, which a cached session could not hand it later, so the next
        activation replays to here. A step attempt about to start (``withdrawn``) is taken
        back: its intent is not saved, so no attempt is spent on a body that never ran."""
        entries = _withdrawn(s.replay.take_unsaved(), withdrawn)
        # Its wake-up in the same write, and its timer gone: a timer's wake leased it at the
        # timer (left due, the crash backstop), which the reconciler would otherwise fire
        # between this activation and the next.
        update = RunUpdate(Status.RUNNING, s.replay.current, woken=True)
        self.store.append(s.run.id, s.saved_len, entries, update=update, timer=TimerSet(None))
        s.saved_len += len(entries)
        self.wakes.prompt(s.run.id)
        return Status.RUNNING

    def _never_fits(self, s: Session, ex: Execute, longest_ms: int) -> Status:
        """A step whose timeout no activation can give fails the run (resumable after a
        deploy that lowers it); the attempt about to start is taken back."""
        entries = _withdrawn(s.replay.take_unsaved(), ex)
        error = _too_long(ex, longest_ms)
        update = child_runs.waking_parent(s.run, RunUpdate(Status.FAILED, s.replay.current, error=error))
        self.store.append(s.run.id, s.saved_len, entries, update=update, timer=TimerSet(None))
        child_runs.prompt_parent(self.wakes, update)
        s.saved_len += len(entries)
        self.wakes.timer(s.run.id, None)
        self.observer.ended(s.run.id, s.run.workflow, Status.FAILED, error=error)
        return Status.FAILED

    def _act(self, s: Session, decision: Decision, deadline: ActivationDeadline | None) -> Decision | Status:
        """Do what the core decided the journal does not answer: the next decision, or the
        status the run parked or ended in."""
        replay = s.replay
        if isinstance(decision, NeedValue):
            return replay.record_value(decision.call, _fresh_value(decision.call, self.clock))
        if isinstance(decision, Admit):
            return self._admit(s, decision.gate)
        if isinstance(decision, Gather):
            return self._gather(s, decision)
        if isinstance(decision, Throttle):
            return replay.throttled(self.store.reserve_rate(decision.rate, now_ms(self.clock)))
        if isinstance(decision, StartChild):
            return child_runs.start_child(self.start, replay, s.run.id, decision)
        if isinstance(decision, ReadChild):
            return child_runs.read_child(self.store, replay, decision)
        if isinstance(decision, Execute):
            if deadline is not None and deadline.leased_here and not _fits_here(decision, deadline):
                return self._out_of_time(s, decision)  # it could hold the request: a worker's
            if deadline is not None and decision.timeout_ms is not None:
                if deadline.longest_step_ms is not None and decision.timeout_ms > deadline.longest_step_ms:
                    return self._never_fits(s, decision, deadline.longest_step_ms)
                if decision.timeout_ms > deadline.step_ms():
                    return self._out_of_time(s, decision)
            # Already running: the current step is progress a backend may skip writing.
            progress = s.status == Status.RUNNING
            self._save(s, RunUpdate(Status.RUNNING, replay.current, progress_only=progress))
            return self._run_step(s, decision, deadline)
        if isinstance(decision, Park):
            due = decision.due_ms
            if s.deadline_ms is not None and (due is None or due > s.deadline_ms):
                due = s.deadline_ms  # the run's own bound falls first: wake it then
            self._save_timed(s, RunUpdate(decision.status, decision.current), due)
            self._remember(s)
            return decision.status
        if isinstance(decision, Fail | Diverged) and replay.cleanup is not None:
            return self._cleanup_failed(s, decision.error)
        if isinstance(decision, EndCancelled):
            return self._end_cancelled(s, decision)
        if isinstance(decision, Fail | Diverged):
            failed = RunUpdate(
                Status.FAILED, replay.current, error=decision.error, at=now_ms(self.clock) / 1000
            )
            self._save_timed(s, failed, None)
            self.observer.ended(s.run.id, s.run.workflow, Status.FAILED, error=decision.error)
            return Status.FAILED
        if isinstance(decision, Complete):
            done = RunUpdate(Status.COMPLETED, None, result=decision.result, workflow=s.run.workflow)
            self._save_timed(s, done, None)
            self.observer.ended(s.run.id, s.run.workflow, Status.COMPLETED)
            return Status.COMPLETED
        raise AssertionError(decision)

    def _admit(self, s: Session, gate: GateCmd) -> Decision:
        """A run's gate (runtime.core.flow): its start's rate, then a slot of each key. A run
        that must wait parks holding nothing: a timer for its rate, or a place in line that a
        freed slot wakes."""
        s.flow = True
        now = now_ms(self.clock)
        replay = s.replay
        if gate.rate is not None and replay.generation == 1 and not replay.replaying:
            reserved = replay.marked(Kind.RUN_THROTTLED)
            go_at = self.store.reserve_rate(gate.rate, now) if reserved is None else int(reserved.data["at"])
            if go_at > now:
                if reserved is None:
                    replay.mark(Kind.RUN_THROTTLED, {"at": go_at, "rate": gate.rate.key})
                replay.park_on(lambda: Admit(gate))
                return Park(Status.SLEEPING, go_at, f"the start rate of {gate.rate.key}")
        if gate.slots:
            # Ranked by its start, not by when its first activation reached the gate: runs started
            # together may reach it in any order on several workers.
            started_ms = round(s.run.created_at * 1000) or now
            admission = self.store.admit(s.run.id, gate.slots, flow.rank(started_ms, gate.priority))
            if not admission.admitted:
                replay.park_on(lambda: Admit(gate))
                key = admission.key or gate.slots[0].key
                return Park(Status.AWAITING, None, f"a slot of {key}")
        return Resume(None)

    def _gather(self, s: Session, gather: Gather) -> Decision:
        """A run of a workflow with debounce or batch waits, parked, until its collection
        closes; then the inputs it collected are journaled (``run.collected``) and handed to
        its function."""
        s.flow = True
        replay = s.replay
        if replay.replaying:
            return Resume({})  # started before the workflow collected: its input stands
        spec = s.code.collects.get(s.run.workflow)
        got = None if spec is None else self.store.close_collection(s.run.id, spec, now_ms(self.clock))
        if isinstance(got, int):
            replay.park_on(lambda: gather)
            return Park(Status.SLEEPING, got, f"collecting starts ({spec.kind if spec else ''})")
        first = replay.start.data.get("input")
        events = [first] if got is None else got  # a start with an id collects itself alone
        handed = events if spec is None else spec.handed(events)
        replay.mark(Kind.RUN_COLLECTED, {"input": handed, "events": len(events)})
        return Resume({"collected": True, "input": handed})

    def _cleanup_failed(self, s: Session, error: str) -> Decision:
        """A cleanup that raised, or whose step failed for good, ends the run cancelled all
        the same: a cancel always ends the run; the error says what the cleanup left undone."""
        return s.replay.end_cancelled(
            "failed",
            f"run '{s.run.id}' was cancelled and its cleanup failed: {error}; it ended cancelled "
            "without the rest of its cleanup — undo what is left by hand",
            forced=True,
        )

    def _end_cancelled(self, s: Session, end: EndCancelled) -> Status:
        """Save the end of a cleanup; then the cancel's cascade reaches the runs this run
        started (the cancel's intent, kept while the cleanup ran, makes that durable)."""
        self._save_timed(s, RunUpdate(Status.CANCELLED, None, error=end.error), None)
        self.forget(s.run.id)
        self.observer.cancelled(s.run.id, s.run.workflow)
        self._cascade(s.run.id)
        return Status.CANCELLED

    def _cascade(self, run_id: str) -> None:
        if self.cancel is None:
            return
        with contextlib.suppress(LunaflowError):  # AlreadyCancelled: its cascade is finished
            self.cancel(run_id)

    def _cleanup_cut(self, s: Session) -> Status:
        """The cleanup's time budget ran out: the run ends cancelled with it cut short."""
        self.forget(s.run.id)
        error = (
            f"run '{s.run.id}' was cancelled and its cleanup was cut short: it ran past its budget "
            "(wf:on_cancel's timeout); give the handler a longer timeout or fewer steps"
        )
        data = {"cleanup": "cut short", "error": error}
        entry = Entry(s.saved_len + 1, Kind.CANCELLED, None, data, now_ms(self.clock) / 1000)
        try:
            update = child_runs.waking_parent(s.run, RunUpdate(Status.CANCELLED, None, error=error))
            self.store.append(s.run.id, s.saved_len, [entry], update=update, timer=TimerSet(None))
        except JournalConflict:
            self.wakes.wake(s.run.id)
            return Status.RUNNING
        child_runs.prompt_parent(self.wakes, update)
        self.parked_or_ended = True
        self.wakes.timer(s.run.id, None)
        self.observer.cancelled(s.run.id, s.run.workflow)
        self._cascade(s.run.id)
        return Status.CANCELLED

    def _timed_out(self, s: Session) -> Status:
        """The run passed its start's timeout: it ends failed (resume continues it with no
        bound), and the runs it started are cancelled."""
        self.forget(s.run.id)
        after = str(s.replay.start.data.get("timeout"))
        error = (
            f"run '{s.run.id}' timed out after {after}; its start set that bound — resume it to go on "
            "with no bound, or start it with a longer timeout"
        )
        at = now_ms(self.clock) / 1000
        entry = Entry(s.saved_len + 1, Kind.TIMED_OUT, None, {"after": after}, at)
        children = self.store.children(s.run.id) if self.cancel is not None else []
        for child in children:
            # Recorded before the run ends, so a process that dies between the end and the
            # cascade leaves intents that recovery (or the reconciler) finishes: no live child
            # outlives its timed-out parent.
            self.store.begin_cancel(child, at)
        try:
            update = child_runs.waking_parent(
                s.run, RunUpdate(Status.FAILED, s.run.current_step, error=error)
            )
            self.store.append(s.run.id, s.saved_len, [entry], update=update, timer=TimerSet(None))
            child_runs.prompt_parent(self.wakes, update)
        except JournalConflict:
            self.wakes.wake(s.run.id)
            return Status.RUNNING
        self.parked_or_ended = True
        self.wakes.timer(s.run.id, None)
        self.observer.ended(s.run.id, s.run.workflow, Status.FAILED, error=error)
        if self.cancel is not None:
            for child in children:
                with contextlib.suppress(LunaflowError):  # it has ended already
                    self.cancel(child)
                self.store.end_cancel(child)  # a child that had ended keeps no intent either
        return Status.FAILED

    def _raised(self, s: Session, out: Raised) -> Status:
        message = self.redact(out.message)
        traceback = None if out.traceback is None else self.redact(out.traceback)
        if traceback:
            # The observer is told too; a terminal that prints its events skips this record.
            log.warning("run %s failed: %s\n%s", s.run.id, message, traceback, extra={"observed": True})
        # Like every other way a run stops, the failure clears its timer (and its schedule):
        # a failed run woken later would only cost an invocation.
        failed = RunUpdate(Status.FAILED, s.replay.current, error=message, at=now_ms(self.clock) / 1000)
        self._save_timed(s, failed, None)
        self.observer.ended(s.run.id, s.run.workflow, Status.FAILED, error=message, traceback=traceback)
        return Status.FAILED

    def _complete(self, s: Session, result: Any) -> Decision:
        try:
            values.check_size(values.compact(result), f"the result of run '{s.run.id}'")
        except InvalidInput as e:
            return Fail(str(e))
        return s.replay.complete(result)

    def _decide(self, s: Session, issued: Issued) -> Decision:
        assert issued.command is not None
        if isinstance(issued.command, StepCmd):
            s.step_fn = issued.fn
        return decide(s.replay, issued.command)

    def _run_step(self, s: Session, ex: Execute, deadline: ActivationDeadline | None) -> Decision | Status:
        self.observer.step_started(s.run.id, s.run.workflow, ex.name, ex.attempt)
        with self._running(s.run.id, ex.name):
            outcome = s.code.run_body(
                s.lua,
                s.step_fn,
                name=ex.name,
                step_id=ex.step_id,
                now_s=ex.started_at,
                timeout_ms=ex.timeout_ms,
                cap=None if deadline is None else deadline.steps_until,
            )
        if outcome.interrupted:
            # Out of time mid-body, as if the process had ended there: nothing is recorded,
            # and the next activation runs the attempt again (replay journals the re-run).
            log.info("run %s: step '%s' stopped at the end of its activation's time", s.run.id, ex.name)
            self.forget(s.run.id)
            self.wakes.wake(s.run.id)
            return Status.RUNNING
        s.replay.refresh(now_ms(self.clock), s.replay.signals)
        error = None if outcome.ok else self.redact(outcome.error or "error")
        self.observer.step(
            s.run.id, s.run.workflow, ex.name, ex.attempt, outcome.ok, step_id=ex.step_id, error=error
        )
        if error is None:
            return s.replay.step_succeeded(StepValues(tuple(outcome.values or ())))
        # The draw spreads the wait of a step with jitter; the due time is journaled.
        decision = s.replay.step_failed(
            error, retryable=outcome.retryable, draw=random.random(), slow_ms=outcome.retry_after_ms
        )
        if isinstance(decision, Park | Execute):
            due = decision.due_ms if isinstance(decision, Park) else None
            self.observer.retry(
                s.run.id,
                s.run.workflow,
                ex.name,
                attempt=ex.attempt + 1,
                retry_at=self.clock.now() if due is None else due / 1000,
            )
        return decision

    def _note_signal(self, s: Session, decision: Resume, *, saved: bool = False) -> None:
        """Report signal-to-resume latency when this activation consumed a signal (an eager
        one's once the consumption is saved: ``saved``)."""
        value = decision.value
        if not (isinstance(value, dict) and value.get("by") == "signal" and (saved or s.replay.unsaved)):
            return
        arrived = next((sig.at for sig in s.replay.signals if sig.id == value.get("signal_id")), None)
        if arrived is not None:
            self.observer.signal_resumed(s.run.id, s.run.workflow, max(0.0, self.clock.now() - arrived))

    def _save(self, s: Session, update: RunUpdate | None, timer: TimerSet | None = None) -> None:
        entries = s.replay.take_unsaved()
        update = child_runs.waking_parent(s.run, update)
        if update is not None and (update.status in ENDED or update.status == Status.FAILED):
            update = replace(update, flow=s.flow)
        self.store.append(s.run.id, s.saved_len, entries, update=update, timer=timer)
        child_runs.prompt_parent(self.wakes, update)
        for session, resumed in self._resumed:
            self._note_signal(session, resumed, saved=True)
        self._resumed = []
        s.saved_len += len(entries)
        if update is not None:
            s.status = update.status
            if update.status != Status.RUNNING:
                self.parked_or_ended = True

    def _save_timed(self, s: Session, update: RunUpdate, due: int | None) -> None:
        """Save a park until ``due`` or an end (``due`` None): the waker arms the timer's
        transport before the write, which records its note, and finishes after it."""
        plan = self.wakes.arm(s.run.id, due)
        self._save(s, update, plan.timer)
        self.wakes.timer(s.run.id, due, plan)

    def _remember(self, s: Session) -> None:
        self._cache[s.run.id] = s
        self._cache.move_to_end(s.run.id)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)


def decide(replay: Replay, cmd: Command) -> Decision:
    """The core's decision for one command the code issued."""
    if isinstance(cmd, StepCmd):
        return replay.step(cmd)
    if isinstance(cmd, WaitCmd):
        return replay.wait(cmd)
    if isinstance(cmd, VersionCmd):
        return replay.version(cmd)
    if isinstance(cmd, OnCancelCmd):
        return replay.on_cancel(cmd)
    if isinstance(cmd, SetCmd):
        return replay.set(cmd)
    if isinstance(cmd, ChildCmd):
        return children.child(replay, cmd)
    if isinstance(cmd, ChildResultCmd):
        return children.result(replay, cmd)
    if isinstance(cmd, ContinueCmd):
        return replay.continue_as_new(cmd)
    if isinstance(cmd, GateCmd):
        return Admit(cmd)
    if isinstance(cmd, CollectCmd):
        collected = replay.marked(Kind.RUN_COLLECTED)
        if collected is not None:
            return Resume({"collected": True, "input": collected.data.get("input")})
        return Gather(cmd)
    return replay.value(cmd)


def _withdrawn(entries: list[Entry], ex: Execute | None) -> list[Entry]:
    """``entries`` without the start of ``ex``'s attempt (its intent, or the re-run of an
    interrupted one), when it is the last and unsaved: a start that never ran its body is
    not counted against the attempt."""
    last = entries[-1] if entries else None
    if ex is None or last is None or last.name != ex.name:
        return entries
    if last.kind == Kind.STEP_INTENT and last.data.get("step_id") == ex.step_id:
        return entries[:-1]
    if last.kind == Kind.STEP_RERUN and last.data.get("attempt") == ex.attempt:
        return entries[:-1]
    return entries


def _too_long(ex: Execute, longest_ms: int) -> str:
    return (
        f"step '{ex.name}' has timeout {ex.timeout_ms}ms, more than the {longest_ms}ms a step may run "
        "here (one Lambda invocation, less the time to replay and save); lower the timeout or split "
        "the step, deploy, then resume the run"
    )


def _undeclared(run: RunRecord) -> str:
    return (
        f"run '{run.id}' is of workflow '{run.workflow}', which the current code does not "
        "declare; deploy code that declares it, then resume the run"
    )


def _fresh_value(call: str, clock: Clock) -> Any:
    if call == "os.time":
        return int(clock.now())
    if call == "os.clock":
        return time.process_time()
    if call == "math.random":
        return random.random()
    if call == "uuid.v4":
        return str(uuid.uuid4())
    raise AssertionError(call)


def _fits_here(decision: Execute, deadline: ActivationDeadline) -> bool:
    """Whether an eager activation may run the step: its timeout, and the headroom for the
    writes before it, fit in the time its steps have."""
    return decision.timeout_ms is not None and decision.timeout_ms + EAGER_HEADROOM_MS <= deadline.step_ms()
