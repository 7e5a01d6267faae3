"""The replay core: journal + the code's next command -> a decision. No I/O, no clock.

The workflow function runs as a Lua coroutine that yields commands. For each one the
engine asks this core what to do: hand back the recorded outcome, record and execute,
or park. Time and signals come in as inputs (``now_ms``, ``signals``); entries to record
go out through ``take_unsaved()``. The same core serves live runs, cold replays and
``lunaflow check``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime.core import published
from runtime.core.bounds import MAX_JOURNAL_ENTRIES, MAX_PUBLISHED_KEYS
from runtime.core.child_commands import ReadChild, StartChild
from runtime.core.flow import Admit, Gather, Rate
from runtime.core.ids import generation_owner, step_id
from runtime.core.journal import (
    MARKERS,
    Entry,
    Kind,
    Signal,
    Status,
    StepValues,
    describe,
    describe_wait,
    generation_start,
)
from runtime.errors import EngineBug

# --- commands the code yields -----------------------------------------------------------


@dataclass(frozen=True)
class StepCmd:
    name: str
    retries: int
    backoff_ms: int
    timeout_ms: int | None
    catch: bool = False  # the final failure is raised into the workflow (``StepFailure``)
    max_backoff_ms: int | None = None  # caps the doubling
    jitter: float = 0.0  # 0..1: the share of each wait drawn away at random (journaled)
    rate: Rate | None = None  # each attempt first reserves a start of this bucket (journaled)


@dataclass(frozen=True)
class WaitCmd:
    op: str  # sleep | await | race | all
    names: tuple[str, ...]
    timeout_ms: int | None
    # wf:all's bound on the whole wait: ``within_ms`` from its first entry, which journals
    # when that falls (``bound_at``); the later entries carry it on as ``bound_at``.
    within_ms: int | None = None
    bound_at: int | None = None


@dataclass(frozen=True)
class ValueCmd:
    call: str  # os.time | os.clock | math.random | uuid.v4


@dataclass(frozen=True)
class VersionCmd:
    change: str  # the change id passed to wf:version


@dataclass(frozen=True)
class SetCmd:
    """``wf:set(key, value)``: publish a value (checked by the code: runtime.core.published)."""

    key: str
    value: Any


@dataclass(frozen=True)
class ContinueCmd:
    """``wf:continue_as_new(state)``: close this generation, start again with ``input``."""

    input: Any


@dataclass(frozen=True)
class OnCancelCmd:
    """``wf:on_cancel(fn)``: the run's cleanup is registered here, with its time budget."""

    timeout_ms: int


@dataclass(frozen=True)
class StepFailure:
    """A step's final failure raised into the workflow (``catch = true``): the reply that
    makes ``wf:step`` raise a Lua error value instead of returning. ``step.raised``'s data."""

    step: str
    attempts: int
    message: str  # the last attempt's error
    error: str  # the run's error had it not been caught: ``step 'x' failed after N attempts: ...``
    retryable: bool = True

    def as_data(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "attempts": self.attempts,
            "message": self.message,
            "error": self.error,
            "retryable": self.retryable,
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> StepFailure:
        return cls(
            str(data["step"]),
            int(data["attempts"]),
            str(data["message"]),
            str(data["error"]),
            bool(data.get("retryable", True)),
        )


# --- decisions the core returns ---------------------------------------------------------


@dataclass(frozen=True)
class Resume:
    """Send this outcome back into the coroutine: a step's ``StepValues`` (or the
    ``StepFailure`` it raises), a wait's outcome (the ``wait.done`` data), or a journaled
    value."""

    value: StepValues | StepFailure | Any


@dataclass(frozen=True)
class Execute:
    """Run the step body now (after saving what the core recorded)."""

    name: str
    step_id: str
    attempt: int
    timeout_ms: int | None
    started_at: float


@dataclass(frozen=True)
class Throttle:
    """Reserve the next start of ``rate`` for the step's attempt (the executor asks the
    store), then hand the time to ``Replay.throttled``."""

    rate: Rate


@dataclass(frozen=True)
class Park:
    """Stop here until a signal or ``due_ms``; the coroutine stays suspended."""

    status: Status
    due_ms: int | None
    current: str


@dataclass(frozen=True)
class Fail:
    error: str


@dataclass(frozen=True)
class Diverged:
    """The code reached a different command than the journal recorded at this point: the
    run fails (``lunaflow check`` reports it), and resume after a fixing deploy replays."""

    expected: str
    reached: str

    @property
    def error(self) -> str:
        return f"journal divergence: expected {self.expected}, code {self.reached}"


@dataclass(frozen=True)
class Refused:
    """The command is refused, nothing recorded: the code gets ``message`` as a Lua error."""

    message: str


@dataclass(frozen=True)
class NeedValue:
    """The journal has no value for this call yet: produce one and ``record_value`` it."""

    call: str


@dataclass(frozen=True)
class Complete:
    result: Any


@dataclass(frozen=True)
class ContinueAsNew:
    """The generation closed (``run.continued`` recorded, or found when replaying an
    earlier one): the function starts again from the top with ``input``, same run id."""

    input: Any
    generation: int


@dataclass(frozen=True)
class EnterCleanup:
    """The run was cancelled here (``run.cancel_requested``) and registered a cancel handler:
    leave the workflow function and run the handler (``Replay.enter_cleanup``)."""


@dataclass(frozen=True)
class EndCancelled:
    """The cleanup is over: the run ends cancelled. ``outcome`` is done, failed or cut short
    (its ``error`` says why); ``replayed`` when the journal already held the end."""

    outcome: str
    error: str | None = None
    replayed: bool = False


# StartChild and ReadChild: a child run to start, a child's state to read (runtime.core.children)
Decision = (
    Resume
    | Execute
    | Park
    | Fail
    | Diverged
    | NeedValue
    | Complete
    | StartChild
    | ReadChild
    | EnterCleanup
    | EndCancelled
    | Refused
    | ContinueAsNew
    | Throttle
    | Admit
    | Gather
)

# A cleanup's budget: its default time (wf:on_cancel's timeout) and the step attempts it may
# start (re-runs included). Past either the run ends cancelled with the cleanup cut short.
DEFAULT_CLEANUP_MS = 3_600_000
MAX_CLEANUP_STEPS = 100


def final_error(name: str, attempts: int, error: str, retryable: bool = True) -> str:
    """The error of a step's final failure: the run's error, or the raised value's text."""
    if retryable:
        return f"step '{name}' failed after {attempts} attempts: {error}"
    return (
        f"step '{name}' failed after {attempts} attempts, not retried (its error said retry = false): {error}"
    )


def backoff_ms(cmd: StepCmd, failures: int, draw: float = 0.0) -> int:
    """The wait after the ``failures``-th failure: ``backoff`` doubled per failure after the
    first, at most ``max_backoff``, less up to ``jitter`` of it as ``draw`` (0..1) says."""
    wait: int = cmd.backoff_ms * 2 ** (failures - 1)
    if cmd.max_backoff_ms is not None:
        wait = min(wait, cmd.max_backoff_ms)
    return wait - int(wait * cmd.jitter * draw)


# Starts of one attempt (its intent, then each re-run) that may end with the process: after
# this many the attempt is recorded as failed, and retries and backoff apply as for any failure.
MAX_STARTS = 3


@dataclass
class _StepInFlight:
    cmd: StepCmd
    pass_: int
    attempt: int  # the attempt being run or last recorded
    used: int  # attempts recorded against the current budget (reset by resume)
    intent: Entry | None = None  # the current attempt's intent
    starts: int = 0  # times the current attempt's body was started (intent and re-runs)


@dataclass
class Replay:
    run_id: str
    journal: Sequence[Entry]
    now_ms: int
    signals: Sequence[Signal] = ()
    max_entries: int = MAX_JOURNAL_ENTRIES
    entries: list[Entry] = field(init=False)
    pos: int = field(init=False)
    passes: Counter[str] = field(init=False, default_factory=Counter)
    unsaved: list[Entry] = field(init=False, default_factory=list)
    consumed: set[int] = field(init=False, default_factory=set)
    current: str | None = field(init=False, default=None)
    child_calls: int = field(init=False, default=0)  # wf:child commands so far (runtime.core.children)
    _step: _StepInFlight | None = field(init=False, default=None)
    _parked: Callable[[], Decision] | None = field(init=False, default=None)
    # The cancel whose cleanup runs now (``run.cancel_requested``), once replay passed it, and
    # the step starts the cleanup has made (its budget counts them).
    cleanup: Entry | None = field(init=False, default=None)
    cleanup_starts: int = field(init=False, default=0)
    published: set[str] = field(init=False, default_factory=set)  # keys wf:set has journaled

    # The index of the current generation's first entry (run.started or run.continued):
    # replay matches from there; earlier generations' entries are kept only for inspection.
    base: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.entries = list(self.journal)
        self.base = generation_start(self.entries)
        if not self.entries or self.entries[self.base].kind not in (Kind.STARTED, Kind.CONTINUED):
            raise EngineBug(f"journal of run '{self.run_id}' does not begin with run.started")
        self.pos = self.base + 1
        for e in self.entries:
            if e.kind == Kind.WAIT_DONE and e.data.get("signal_id") is not None:
                self.consumed.add(int(e.data["signal_id"]))
            elif e.kind == Kind.VALUE_SET and e.name is not None:
                self.published.add(e.name)

    # --- inputs between activations --------------------------------------------------

    def refresh(self, now_ms: int, signals: Sequence[Signal]) -> None:
        self.now_ms = now_ms
        self.signals = signals

    def marked(self, kind: Kind) -> Entry | None:
        """The current generation's last marker of ``kind`` (a gate's reserved start)."""
        return next((e for e in reversed(self.entries[self.base :]) if e.kind == kind), None)

    def mark(self, kind: Kind, data: dict[str, Any]) -> None:
        """Record a marker at the journal's end (only while nothing is left to replay)."""
        if self.replaying:
            raise EngineBug(f"run '{self.run_id}' would mark {kind} in the middle of its replay")
        self._record(kind, None, data)

    def park_on(self, decide: Callable[[], Decision]) -> None:
        """Park on a command the core does not decide (a gate): a wake re-asks ``decide``."""
        self._parked = decide

    def take_unsaved(self) -> list[Entry]:
        out, self.unsaved = self.unsaved, []
        return out

    @property
    def length(self) -> int:
        """Journal length including entries not saved yet (the last seq: earlier generations
        may have been dropped)."""
        return self.entries[-1].seq if self.entries else 0

    @property
    def replaying(self) -> bool:
        return self._peek() is not None

    def redecide(self) -> Decision:
        """Re-decide the command the coroutine is parked on, with fresh inputs."""
        if self._parked is None:
            raise EngineBug(f"run '{self.run_id}' was woken but is not parked")
        return self._parked()

    # --- commands --------------------------------------------------------------------

    @property
    def start(self) -> Entry:
        """The current generation's first entry: its input, changes and deadline."""
        return self.entries[self.base]

    @property
    def generation(self) -> int:
        return int(self.start.data.get("generation", 1))

    @property
    def owner(self) -> str:
        """What this generation's effects are named after (step ids, derived child ids)."""
        return generation_owner(self.run_id, self.generation)

    def _full(self, needed: int) -> Fail | None:
        # The bound is per generation: wf:continue_as_new starts the count again.
        if len(self.entries) - self.base + needed <= self.max_entries:
            return None
        return Fail(
            f"run '{self.run_id}' reached the limit of {self.max_entries} journal entries in generation "
            f"{self.generation}; a run this long should hand its state on with "
            "return wf:continue_as_new(state), which keeps the run id and starts a fresh journal"
        )

    def continue_as_new(self, cmd: ContinueCmd) -> Decision:
        """``wf:continue_as_new``: record ``run.continued`` (what a fresh generation needs of
        run.started, with the new input); on replay of a closed generation, find it."""
        self._parked = None
        head = self._peek()
        if self._cancel_here(head):
            return EnterCleanup()
        if self.cleanup is not None:
            return Fail(
                f"run '{self.run_id}' called wf:continue_as_new in its cancel handler; a cancelled run "
                "ends cancelled — return from the handler instead"
            )
        if head is not None:
            if head.kind != Kind.CONTINUED:
                return Diverged(describe(head), "reached wf:continue_as_new")
            return ContinueAsNew(head.data.get("input"), int(head.data.get("generation", 2)))
        first = self.start.data
        data: dict[str, Any] = {
            k: first[k] for k in ("format", "changes", "timeout", "deadline_at") if k in first
        }
        data["generation"] = self.generation + 1
        data["input"] = cmd.input
        self._record(Kind.CONTINUED, None, data)
        self.current = None
        return ContinueAsNew(cmd.input, self.generation + 1)

    def step(self, cmd: StepCmd) -> Decision:
        self._parked = None
        self.passes[cmd.name] += 1
        head = self._peek()
        if self._cancel_here(head):
            return EnterCleanup()
        if head is not None and not (
            head.kind in (Kind.STEP_INTENT, Kind.STEP_THROTTLED) and head.name == cmd.name
        ):
            return Diverged(describe(head), f"reached step '{cmd.name}'")
        flight = _StepInFlight(cmd, self.passes[cmd.name], attempt=0, used=0)
        self._step = flight
        self.current = f"step '{cmd.name}'"
        last_failure: Entry | None = None
        expect_intent = True
        retry_now = False  # an operator cut the current backoff short (step.retry_now)
        grant: int | None = None  # the start the step's rate reserved for the next attempt
        while (e := self._at(self.pos)) is not None:
            if self._cancel_here(e):
                # Cancelled while the step ran or waited out its backoff: the attempt is
                # dropped (a running body's result is never recorded) and the cleanup runs.
                self._step = None
                return EnterCleanup()
            if expect_intent and e.kind == Kind.STEP_INTENT and e.name == cmd.name:
                flight.attempt = int(e.data["attempt"])
                flight.used += 1
                flight.intent, flight.starts = e, 1
                last_failure, expect_intent, retry_now, grant = None, False, False, None
                self._count_start()
            elif not expect_intent and e.kind == Kind.STEP_RERUN and e.name == cmd.name:
                flight.starts += 1
                self._count_start()
            elif not expect_intent and e.kind == Kind.STEP_RESULT and e.name == cmd.name:
                self.pos += 1
                self._step = None
                return Resume(StepValues.from_data(e.data))
            elif not expect_intent and e.kind == Kind.STEP_FAILED and e.name == cmd.name:
                last_failure, expect_intent = e, not e.data["final"]
                if e.data.get("slowed"):
                    flight.used -= 1  # "slow down" spends no attempt
            elif expect_intent and e.kind == Kind.STEP_THROTTLED and e.name == cmd.name:
                grant = int(e.data["at"])
            elif last_failure is not None and last_failure.data["final"] and e.kind == Kind.RESUMED:
                # Resume grants the step a fresh budget; the attempt count goes on so the
                # next attempt's step id is new. (A raised failure that ended the run is
                # followed by its step.raised first; resume then reads the same.)
                flight.used = 0
                last_failure, expect_intent = None, True
            elif last_failure is not None and last_failure.data["final"] and e.kind == Kind.STEP_RAISED:
                if not cmd.catch:
                    return Diverged(
                        f"step '{cmd.name}' raising its failure (catch = true)",
                        f"reached step '{cmd.name}' without catch",
                    )
                after = self._at(self.pos + 1)
                if after is not None and after.kind == Kind.RESUMED:
                    # The raise ended the run (uncaught) and the run was resumed: fresh attempts.
                    self.pos += 1
                    continue
                self.pos += 1
                self._step = None
                return Resume(StepFailure.from_data(e.data))
            elif (
                last_failure is not None
                and not last_failure.data["final"]
                and e.kind == Kind.STEP_RETRY_NOW
                and e.name == cmd.name
            ):
                retry_now = True
            elif e.kind in (Kind.TIMED_OUT, Kind.RESUMED):
                # The run timed out here (and was resumed): the step goes on where it stood.
                pass
            else:
                # No engine writes anything between a step's intent and its outcome but re-runs.
                raise EngineBug(
                    f"run '{self.run_id}' journal entry {e.seq} ({e.kind}) interrupts step '{cmd.name}'"
                )
            self.pos += 1
        if expect_intent and last_failure is None:
            return self._full(3) or self._attempt(grant)
        if last_failure is None:
            # An intent with no outcome: the process stopped while the body ran. Run the
            # same attempt again; its step id is unchanged so the effect can be recognised.
            # Each start is journaled (journals of engines before step.rerun count as one
            # start), so an attempt that ends its process every time fails in the end.
            if flight.starts >= MAX_STARTS:
                return self.step_failed(
                    f"step '{cmd.name}' attempt {flight.attempt} was interrupted {flight.starts} times: "
                    "the process running it ended"
                )
            full = self._full(2) or self._over_budget()
            if full is not None:
                return full
            flight.starts += 1
            self._count_start()
            self._record(Kind.STEP_RERUN, cmd.name, {"attempt": flight.attempt, "start": flight.starts})
            return self._execute()
        if last_failure.data["final"]:
            if cmd.catch:
                # The final failure was recorded but its raise was not (a journal written
                # before catch was added, or an engine that stopped between the two).
                return self._raise(last_failure)
            return Fail(str(last_failure.data["final_error"]))
        return self._retry_when_due(0 if retry_now else int(last_failure.data["retry_at"]), grant)

    def step_succeeded(self, result: StepValues) -> Resume:
        """Record the body's values and hand them back."""
        flight = self._flight()
        self._record(Kind.STEP_RESULT, flight.cmd.name, result.as_data())
        self._step = None
        return Resume(result)

    def throttled(self, go_at: int) -> Decision:
        """Journal the start the step's rate reserved; the attempt begins then."""
        flight = self._flight()
        self._record(Kind.STEP_THROTTLED, flight.cmd.name, {"at": go_at})
        return self._attempt(go_at)

    def step_failed(
        self, error: str, *, retryable: bool = True, draw: float = 0.0, slow_ms: int | None = None
    ) -> Decision:
        """Record an attempt's failure. ``retryable`` false (the body raised
        ``{ retry = false }``) ends the attempts now. ``draw`` (0 <= draw < 1, drawn by the
        caller: the core has no randomness) spreads the wait when the step has ``jitter``;
        the due time it gives is journaled, so replay never draws again."""
        flight = self._flight()
        cmd = flight.cmd
        if slow_ms is not None and retryable:
            # The body said "slow down" (retry_after): wait, and the attempt is not spent.
            flight.used -= 1
            retry_at = self.now_ms + slow_ms
            slowed = {
                "attempt": flight.attempt,
                "error": error,
                "final": False,
                "slowed": True,
                "retry_at": retry_at,
            }
            self._record(Kind.STEP_FAILED, cmd.name, slowed)
            return self._retry_when_due(retry_at)
        final = not retryable or flight.used >= cmd.retries
        data: dict[str, Any] = {"attempt": flight.attempt, "error": error, "final": final}
        if not retryable:
            data["retryable"] = False
        if final:
            data["final_error"] = final_error(cmd.name, flight.used, error, retryable)
            entry = self._record(Kind.STEP_FAILED, cmd.name, data)
            if cmd.catch:
                return self._raise(entry)
            return Fail(data["final_error"])
        retry_at = self.now_ms + backoff_ms(cmd, flight.used, draw)
        data["retry_at"] = retry_at
        self._record(Kind.STEP_FAILED, cmd.name, data)
        return self._retry_when_due(retry_at)

    def _raise(self, failure: Entry) -> Resume:
        """Record and hand back the raise of a final failure (``catch = true``)."""
        flight = self._flight()
        raised = StepFailure(
            flight.cmd.name,
            flight.used,
            str(failure.data["error"]),
            str(failure.data["final_error"]),
            bool(failure.data.get("retryable", True)),
        )
        self._record(Kind.STEP_RAISED, flight.cmd.name, raised.as_data())
        self._step = None
        return Resume(raised)

    def wait(self, cmd: WaitCmd) -> Decision:
        self._parked = None
        self._step = None
        wanted = describe_wait(cmd.op, list(cmd.names))
        self.current = wanted
        head = self._peek()
        if self._cancel_here(head):
            return EnterCleanup()
        if head is None:
            full = self._full(2)
            if full is not None:
                return full
            due = None if cmd.timeout_ms is None else self.now_ms + cmd.timeout_ms
            bound = cmd.bound_at
            if bound is None and cmd.within_ms is not None:
                bound = self.now_ms + cmd.within_ms
            if bound is not None:
                due = bound if due is None else min(due, bound)
            data: dict[str, Any] = {"names": list(cmd.names), "timeout_ms": cmd.timeout_ms, "due_at": due}
            if bound is not None:
                data["bound_at"] = bound
            wait_entry = self._record(Kind.WAIT, cmd.op, data)
        else:
            if not (
                head.kind == Kind.WAIT and head.name == cmd.op and list(head.data["names"]) == list(cmd.names)
            ):
                return Diverged(describe(head), f"reached {wanted}")
            wait_entry = head
            self.pos += 1
            done = self._peek()
            if self._cancel_here(done):
                return EnterCleanup()  # cancelled while it waited: the wait never resolves
            if done is not None:
                if done.kind != Kind.WAIT_DONE:
                    raise EngineBug(f"run '{self.run_id}' wait at {head.seq} is followed by {done.kind}")
                self.pos += 1
                return Resume(_bounded(done.data, head))
        return self._resolve(wait_entry)

    def value(self, cmd: ValueCmd) -> Decision:
        self._parked = None
        head = self._peek()
        if self._cancel_here(head):
            return EnterCleanup()
        if head is None:
            return self._full(1) or NeedValue(cmd.call)
        if head.kind != Kind.VALUE or head.name != cmd.call:
            return Diverged(describe(head), f"reached {cmd.call}()")
        self.pos += 1
        return Resume(head.data["value"])

    def version(self, cmd: VersionCmd) -> Resume:
        """``wf:version(change)``: true when the code that started this run already knew the
        change (its id is in ``run.started``'s ``changes``), false for runs started before it
        was deployed. Fixed for the run's whole life, so replay never diverges on it and runs
        started before a change finish on the old path while new runs take the new one."""
        started = self.start.data.get("changes") or []
        return Resume(cmd.change in started)

    def set(self, cmd: SetCmd) -> Decision:
        """``wf:set``: journaled where the code publishes (``value.set``); replay checks the
        key and the value, so code that publishes something else diverges like any other.
        A key beyond the run's ``MAX_PUBLISHED_KEYS`` is refused into the code."""
        self._parked = None
        head = self._peek()
        if self._cancel_here(head):
            return EnterCleanup()
        reached = f"reached wf:set('{cmd.key}', {json.dumps(cmd.value, ensure_ascii=False)})"
        if head is None:
            if cmd.key not in self.published and len(self.published) >= MAX_PUBLISHED_KEYS:
                return Refused(published.too_many_keys(self.run_id, cmd.key))
            full = self._full(1)
            if full is not None:
                return full
            self._record(Kind.VALUE_SET, cmd.key, {"value": cmd.value})
            self.published.add(cmd.key)
            return Resume(None)
        if (
            head.kind != Kind.VALUE_SET
            or head.name != cmd.key
            or not published.same(head.data["value"], cmd.value)
        ):
            return Diverged(describe(head), reached)
        self.pos += 1
        return Resume(None)

    def on_cancel(self, cmd: OnCancelCmd) -> Decision:
        """``wf:on_cancel``: journaled where the code registers it (``cancel.handler``, with
        its budget), which is how the cancel, that needs no code, knows to wake the run."""
        self._parked = None
        head = self._peek()
        if self._cancel_here(head):
            return EnterCleanup()
        if head is None:
            full = self._full(1)
            if full is not None:
                return full
            self._record(Kind.CANCEL_HANDLER, None, {"timeout_ms": cmd.timeout_ms})
            return Resume(None)
        if head.kind != Kind.CANCEL_HANDLER:
            return Diverged(describe(head), "reached wf:on_cancel")
        self.pos += 1
        return Resume(None)

    def enter_cleanup(self) -> None:
        """Pass the cancel (``EnterCleanup``): what the code yields from now on is the
        handler's, answered from the entries after the cancel."""
        entry = self._peek()
        if entry is None or entry.kind != Kind.CANCEL_REQUESTED:
            raise EngineBug(f"run '{self.run_id}' would clean up with no cancel at this point")
        self.pos += 1
        self.cleanup, self._step, self._parked = entry, None, None
        self.current = "cleanup"

    def end_cancelled(self, outcome: str, error: str | None = None, *, forced: bool = False) -> Decision:
        """The cleanup is over (``outcome`` done, failed or cut short): the run ends
        ``cancelled``. ``forced`` records the end after whatever the journal holds (a cleanup
        that failed or diverged ends cancelled all the same)."""
        head = None if forced else self._peek()
        if head is not None and head.kind == Kind.CANCELLED:
            self.pos += 1
            self.current = None
            return EndCancelled(str(head.data.get("cleanup", outcome)), head.data.get("error"), replayed=True)
        if head is not None:
            return Diverged(describe(head), "ended its cleanup")
        data: dict[str, Any] = {"cleanup": outcome}
        if error is not None:
            data["error"] = error
        self._record(Kind.CANCELLED, None, data)
        self.current = None
        return EndCancelled(outcome, error)

    def record_value(self, call: str, value: Any) -> Resume:
        self._record(Kind.VALUE, call, {"value": value})
        return Resume(value)

    def complete(self, result: Any) -> Decision:
        if self.cleanup is not None:
            return self.end_cancelled("done")  # the handler returned
        head = self._peek()
        if self._cancel_here(head):
            return EnterCleanup()
        if head is not None and head.kind == Kind.COMPLETED:
            # Replaying a completed run (lunaflow check, golden journals): nothing to record.
            self.pos += 1
            self.current = None
            return Complete(head.data["result"])
        if head is not None:
            return Diverged(describe(head), "returned")
        self._record(Kind.COMPLETED, None, {"result": result})
        self.current = None
        return Complete(result)

    # --- internals -------------------------------------------------------------------

    def _cancel_here(self, e: Entry | None) -> bool:
        """Whether ``e`` is the cancel that starts the cleanup (a run cleans up once)."""
        return e is not None and e.kind == Kind.CANCEL_REQUESTED and self.cleanup is None

    def _count_start(self) -> None:
        if self.cleanup is not None:
            self.cleanup_starts += 1

    def _over_budget(self) -> Decision | None:
        """The cleanup's end once it has started ``MAX_CLEANUP_STEPS`` step attempts."""
        if self.cleanup is None or self.cleanup_starts < MAX_CLEANUP_STEPS:
            return None
        return self.end_cancelled(
            "cut short",
            f"run '{self.run_id}' was cancelled and its cleanup was cut short: it started "
            f"{MAX_CLEANUP_STEPS} step attempts, the most a cleanup may; keep the on_cancel "
            "handler to a few steps",
            forced=True,
        )

    def _at(self, index: int) -> Entry | None:
        return self.entries[index] if index < len(self.entries) else None

    def _peek(self) -> Entry | None:
        while (e := self._at(self.pos)) is not None and e.kind in MARKERS:
            self.pos += 1
        return e

    def _flight(self) -> _StepInFlight:
        if self._step is None:
            raise EngineBug(f"run '{self.run_id}' reported a step outcome with no step in flight")
        return self._step

    def _record(self, kind: Kind, name: str | None, data: dict[str, Any]) -> Entry:
        seq = self.entries[-1].seq + 1 if self.entries else 1  # earlier generations may be dropped
        entry = Entry(seq, kind, name, data, self.now_ms / 1000)
        self.entries.append(entry)
        self.unsaved.append(entry)
        self.pos = len(self.entries)
        return entry

    def _new_attempt(self) -> Decision:
        over = self._over_budget()
        if over is not None:
            return over
        self._count_start()
        flight = self._flight()
        flight.attempt += 1
        flight.used += 1
        sid = step_id(self.owner, flight.cmd.name, flight.pass_, flight.attempt)
        flight.intent = self._record(
            Kind.STEP_INTENT,
            flight.cmd.name,
            {"pass": flight.pass_, "attempt": flight.attempt, "step_id": sid},
        )
        flight.starts = 1
        return self._execute()

    def _execute(self) -> Execute:
        flight = self._flight()
        intent = flight.intent
        if intent is None or intent.kind != Kind.STEP_INTENT:
            raise EngineBug(f"run '{self.run_id}' would run step '{flight.cmd.name}' without an intent")
        return Execute(
            flight.cmd.name, intent.data["step_id"], flight.attempt, flight.cmd.timeout_ms, intent.at
        )

    def _retry_when_due(self, retry_at: int, grant: int | None = None) -> Decision:
        if self.now_ms >= retry_at:
            return self._attempt(grant)
        self._parked = lambda: self._retry_when_due(retry_at, grant)
        return Park(Status.SLEEPING, retry_at, self.current or "")

    def _attempt(self, grant: int | None) -> Decision:
        """The next attempt, once the step's rate (if any) has a start for it: reserve one
        (``Throttle``), or wait until the one reserved (``grant``)."""
        rate = self._flight().cmd.rate
        if rate is None:
            return self._new_attempt()
        if grant is None:
            self._parked = None
            return Throttle(rate)
        if self.now_ms >= grant:
            return self._new_attempt()
        self._parked = lambda: self._attempt(grant)
        return Park(Status.SLEEPING, grant, f"{self.current or ''} (rate {rate.key})")

    def _resolve(self, wait: Entry) -> Decision:
        names = list(wait.data["names"])
        due = wait.data["due_at"]
        if wait.name != "sleep":
            for sig in sorted(self.signals, key=lambda s: s.id):
                if sig.name in names and sig.id not in self.consumed:
                    self.consumed.add(sig.id)
                    done = {"by": "signal", "signal": sig.name, "payload": sig.payload, "signal_id": sig.id}
                    self._record(Kind.WAIT_DONE, wait.name, done)
                    return Resume(_bounded(done, wait))
        if due is not None and self.now_ms >= due:
            by = "timer" if wait.name == "sleep" else "timeout"
            self._record(Kind.WAIT_DONE, wait.name, {"by": by})
            return Resume(_bounded({"by": by}, wait))
        self._parked = lambda: self._resolve(wait)
        status = Status.SLEEPING if wait.name == "sleep" else Status.AWAITING
        return Park(status, due, self.current or "")


def _bounded(outcome: dict[str, Any], wait: Entry) -> dict[str, Any]:
    """A wait's outcome as the code gets it: with the bound of the whole ``wf:all``, which
    its next entry carries on (in the ``wait`` entry, not in the ``wait.done``)."""
    bound = wait.data.get("bound_at")
    return outcome if bound is None else {**outcome, "bound_at": bound}
