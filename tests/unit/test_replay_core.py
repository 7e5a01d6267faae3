"""The replay core is a pure state machine: fed journals, it decides. No Lua, no store."""

from __future__ import annotations

import pytest

from runtime.core.journal import Entry, Kind, Signal, Status, StepValues
from runtime.core.replay import (
    Complete,
    Diverged,
    Execute,
    Fail,
    NeedValue,
    Park,
    Replay,
    Resume,
    StepCmd,
    ValueCmd,
    WaitCmd,
)
from runtime.errors import EngineBug

T0 = 1_000_000


def started() -> Entry:
    return Entry(1, Kind.STARTED, "wf", {"format": 1, "input": None}, T0 / 1000)


def journal(*entries: tuple[str, str | None, dict]) -> list[Entry]:
    out = [started()]
    for kind, name, data in entries:
        out.append(Entry(len(out) + 1, kind, name, data, T0 / 1000))
    return out


def step(name: str = "charge", retries: int = 1, backoff_ms: int = 2000) -> StepCmd:
    return StepCmd(name, retries, backoff_ms, None)


def test_a_new_step_records_an_intent_and_executes_attempt_one() -> None:
    r = Replay("r1", journal(), T0)
    d = r.step(step())
    assert d == Execute("charge", "r1/charge/1/1", 1, None, T0 / 1000)
    [intent] = r.take_unsaved()
    assert (intent.seq, intent.kind, intent.data["step_id"]) == (2, Kind.STEP_INTENT, "r1/charge/1/1")


def test_a_recorded_step_returns_its_result_without_executing() -> None:
    j = journal(
        (Kind.STEP_INTENT, "charge", {"pass": 1, "attempt": 1, "step_id": "r1/charge/1/1"}),
        (Kind.STEP_RESULT, "charge", {"n": 1, "values": [7]}),
    )
    r = Replay("r1", j, T0)
    assert r.step(step()) == Resume(StepValues((7,)))
    assert r.take_unsaved() == []


INTENT_1 = (Kind.STEP_INTENT, "charge", {"pass": 1, "attempt": 1, "step_id": "r1/charge/1/1"})


def test_an_intent_without_outcome_reruns_the_same_attempt_with_the_same_step_id() -> None:
    """The re-run is journaled (the attempt's second start) before the body runs again."""
    r = Replay("r1", journal(INTENT_1), T0)
    d = r.step(step())
    assert isinstance(d, Execute) and d.step_id == "r1/charge/1/1"
    [rerun] = r.take_unsaved()
    assert (rerun.seq, rerun.kind, rerun.name, rerun.data) == (
        3,
        Kind.STEP_RERUN,
        "charge",
        {"attempt": 1, "start": 2},
    )


def test_a_rerun_that_returns_records_its_outcome_after_the_reruns() -> None:
    j = journal(INTENT_1, (Kind.STEP_RERUN, "charge", {"attempt": 1, "start": 2}))
    r = Replay("r1", j, T0)
    d = r.step(step())
    assert isinstance(d, Execute) and d.step_id == "r1/charge/1/1"
    assert r.step_succeeded(StepValues((1,))) == Resume(StepValues((1,)))
    assert [e.kind for e in r.take_unsaved()] == [Kind.STEP_RERUN, Kind.STEP_RESULT]
    # Replayed later, reruns and all, the step answers from the journal.
    replayed = Replay("r1", [*j, *r.entries[len(j) :]], T0)
    assert replayed.step(step()) == Resume(StepValues((1,)))


def test_an_attempt_started_three_times_without_outcome_fails_as_interrupted() -> None:
    """Issue 14 point 6: after 3 starts that ended the process, the attempt is recorded as
    failed, and retries and backoff apply: here a retry is left, so the run parks for it."""
    j = journal(
        INTENT_1,
        (Kind.STEP_RERUN, "charge", {"attempt": 1, "start": 2}),
        (Kind.STEP_RERUN, "charge", {"attempt": 1, "start": 3}),
    )
    r = Replay("r1", j, T0)
    assert r.step(step(retries=2, backoff_ms=1000)) == Park(Status.SLEEPING, T0 + 1000, "step 'charge'")
    [failed] = r.take_unsaved()
    assert failed.kind == Kind.STEP_FAILED and failed.data == {
        "attempt": 1,
        "error": "step 'charge' attempt 1 was interrupted 3 times: the process running it ended",
        "final": False,
        "retry_at": T0 + 1000,
    }
    r.refresh(T0 + 1000, ())
    d = r.redecide()
    assert isinstance(d, Execute) and d.step_id == "r1/charge/1/2"


def test_the_last_attempt_interrupted_three_times_fails_the_run() -> None:
    j = journal(
        INTENT_1,
        (Kind.STEP_RERUN, "charge", {"attempt": 1, "start": 2}),
        (Kind.STEP_RERUN, "charge", {"attempt": 1, "start": 3}),
    )
    assert Replay("r1", j, T0).step(step()) == Fail(
        "step 'charge' failed after 1 attempts: step 'charge' attempt 1 was interrupted 3 times: "
        "the process running it ended"
    )


def test_a_failure_with_attempts_left_parks_until_the_backoff_is_due() -> None:
    r = Replay("r1", journal(), T0)
    r.step(step(retries=3, backoff_ms=5000))
    d = r.step_failed("boom")
    assert d == Park(Status.SLEEPING, T0 + 5000, "step 'charge'")
    r.refresh(T0 + 5000, ())
    d2 = r.redecide()
    assert isinstance(d2, Execute) and d2.step_id == "r1/charge/1/2"
    r.step_failed("boom")
    assert r.redecide() == Park(Status.SLEEPING, T0 + 5000 + 10000, "step 'charge'")


def test_the_last_failure_fails_the_run_naming_attempts_and_error() -> None:
    r = Replay("r1", journal(), T0)
    r.step(step(retries=1))
    assert r.step_failed("boom") == Fail("step 'charge' failed after 1 attempts: boom")


def test_resume_grants_fresh_attempts_and_a_new_step_id() -> None:
    j = journal(
        (Kind.STEP_INTENT, "charge", {"pass": 1, "attempt": 1, "step_id": "r1/charge/1/1"}),
        (Kind.STEP_FAILED, "charge", {"attempt": 1, "error": "x", "final": True, "final_error": "e"}),
        (Kind.RESUMED, None, {}),
    )
    r = Replay("r1", j, T0)
    d = r.step(step(retries=2))
    assert isinstance(d, Execute) and d.step_id == "r1/charge/1/2"
    # The fresh budget: one failure leaves one attempt.
    assert isinstance(r.step_failed("x"), Park)


def test_a_failed_run_without_resume_replays_to_its_failure() -> None:
    j = journal(
        (Kind.STEP_INTENT, "charge", {"pass": 1, "attempt": 1, "step_id": "r1/charge/1/1"}),
        (Kind.STEP_FAILED, "charge", {"attempt": 1, "error": "x", "final": True, "final_error": "e"}),
    )
    assert Replay("r1", j, T0).step(step()) == Fail("e")


def test_pass_counts_each_time_a_step_name_is_reached() -> None:
    r = Replay("r1", journal(), T0)
    ids = []
    for _ in range(3):
        d = r.step(step("x"))
        assert isinstance(d, Execute)
        ids.append(d.step_id)
        r.step_succeeded(StepValues(()))
    assert ids == ["r1/x/1/1", "r1/x/2/1", "r1/x/3/1"]


def test_a_different_step_name_is_a_divergence() -> None:
    j = journal((Kind.STEP_INTENT, "settle", {"pass": 1, "attempt": 1, "step_id": "r1/settle/1/1"}))
    d = Replay("r1", j, T0).step(step("other"))
    assert d == Diverged("step 'settle'", "reached step 'other'")
    assert d.error == "journal divergence: expected step 'settle', code reached step 'other'"


def test_a_sleep_where_an_await_was_recorded_is_a_divergence() -> None:
    j = journal((Kind.WAIT, "await", {"names": ["paid"], "timeout_ms": None, "due_at": None}))
    d = Replay("r1", j, T0).wait(WaitCmd("sleep", (), 1000))
    assert isinstance(d, Diverged)
    assert d.error == "journal divergence: expected await 'paid', code reached sleep"


def test_returning_early_is_a_divergence() -> None:
    j = journal((Kind.VALUE, "os.time", {"value": 5}))
    d = Replay("r1", j, T0).complete(None)
    assert isinstance(d, Diverged)
    assert d.error == "journal divergence: expected os.time(), code returned"


def test_await_consumes_the_earliest_buffered_signal_of_its_name() -> None:
    sigs = [Signal(1, "other", 0, 0), Signal(2, "paid", "first", 0), Signal(3, "paid", "second", 0)]
    r = Replay("r1", journal(), T0, sigs)
    d = r.wait(WaitCmd("await", ("paid",), None))
    assert isinstance(d, Resume) and d.value["payload"] == "first" and d.value["signal_id"] == 2


def test_race_takes_the_earliest_arrival_among_its_names() -> None:
    sigs = [Signal(4, "cancelled", "c", 0), Signal(5, "paid", "p", 0)]
    d = Replay("r1", journal(), T0, sigs).wait(WaitCmd("race", ("paid", "cancelled"), None))
    assert isinstance(d, Resume) and d.value["signal"] == "cancelled"


def test_an_await_parks_until_its_timeout_then_resolves_to_a_timeout() -> None:
    r = Replay("r1", journal(), T0)
    assert r.wait(WaitCmd("await", ("paid",), 1000)) == Park(Status.AWAITING, T0 + 1000, "await 'paid'")
    r.refresh(T0 + 999, ())
    assert isinstance(r.redecide(), Park)
    r.refresh(T0 + 1000, ())
    assert r.redecide() == Resume({"by": "timeout"})


def test_a_signal_consumed_in_the_journal_is_not_offered_again() -> None:
    j = journal(
        (Kind.WAIT, "await", {"names": ["paid"], "timeout_ms": None, "due_at": None}),
        (Kind.WAIT_DONE, "await", {"by": "signal", "signal": "paid", "payload": 1, "signal_id": 9}),
    )
    r = Replay("r1", j, T0, [Signal(9, "paid", 1, 0)])
    assert isinstance(r.wait(WaitCmd("await", ("paid",), None)), Resume)
    assert isinstance(r.wait(WaitCmd("await", ("paid",), None)), Park)


def test_values_are_recorded_once_and_replayed() -> None:
    r = Replay("r1", journal(), T0)
    assert r.value(ValueCmd("os.time")) == NeedValue("os.time")
    assert r.record_value("os.time", 42) == Resume(42)
    again = Replay("r1", r.entries, T0 + 10_000)
    assert again.value(ValueCmd("os.time")) == Resume(42)


def test_completion_records_the_result() -> None:
    r = Replay("r1", journal(), T0)
    assert r.complete({"ok": True}) == Complete({"ok": True})
    assert r.take_unsaved()[0].kind == Kind.COMPLETED


def test_markers_are_skipped_when_matching() -> None:
    j = journal((Kind.RESUMED, None, {}), (Kind.VALUE, "os.time", {"value": 1}))
    assert Replay("r1", j, T0).value(ValueCmd("os.time")) == Resume(1)


def test_a_journal_without_its_header_is_an_engine_bug() -> None:
    with pytest.raises(EngineBug):
        Replay("r1", [], T0)
