"""Acceptance: the seed's "Waiting" section (sleep, await, race, all; parked runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.core.journal import Kind
from runtime.testing import LocalPlatform
from tests.semantics.conftest import local_only

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "spec_waiting"


@pytest.fixture
def p(harness: Any, tmp_path: Path):
    with harness(PROJECT, data_dir=tmp_path) as plat:
        yield plat


def wait_dones(p: LocalPlatform, run_id: str) -> list:
    return [e for e in p.journal(run_id) if e.kind == Kind.WAIT_DONE]


# --- sleep ------------------------------------------------------------------------------


def test_sleep_returns_nothing(p: LocalPlatform) -> None:
    """Seed: "`sleep` | nothing; resumes after the duration"."""
    p.start("sleeper", {"d": "1h"}, id="s1")
    p.advance("1h")
    run = p.get("s1")
    assert run.status == "completed"
    assert run.result == {"n": 0}


@pytest.mark.parametrize(
    "duration, ms",
    [
        ("1h", 3_600_000),
        ("1h30m", 5_400_000),
        (90, 90_000),
        pytest.param(
            "100ms",
            100,
            marks=local_only(
                "SQS delays are whole seconds: on AWS a 100ms sleep resumes after 1s, never "
                "before (tests/aws/test_timers.py)"
            ),
        ),
        ("7d", 7 * 86_400_000),
    ],
)
def test_sleep_resumes_after_the_duration_not_before(p: LocalPlatform, duration, ms: int) -> None:
    """Seed: "`sleep` | nothing; resumes after the duration" — advanced in pieces, the run
    stays asleep until the whole duration has passed, to the millisecond."""
    p.start("sleeper", {"d": duration}, id="s1")
    assert p.get("s1").status == "sleeping"
    left = ms - 1
    pieces = [left // 2, left - left // 2]
    for piece in pieces:
        p.advance(piece / 1000)
        assert p.get("s1").status == "sleeping"
    p.advance("1ms")
    assert p.get("s1").status == "completed"


def asleep_until(p: LocalPlatform, run_id: str, ms: int, status: str = "sleeping") -> None:
    """The run stays parked until ``ms`` after now, to the millisecond, then completes."""
    p.advance(f"{ms - 1}ms")
    assert p.get(run_id).status == status, f"woke before {ms}ms"
    p.advance("1ms")
    assert p.get(run_id).status == "completed", f"did not wake at {ms}ms"


# Clock readings reached by small advances, as a test's earlier steps leave them: the fake
# clock sums float seconds, so after these it reads a few ulps off its millisecond.
CLOCKS = {"on the second": [], "1ms x3": ["1ms"] * 3, "100ms x7": ["100ms"] * 7}


@pytest.mark.parametrize("clock", sorted(CLOCKS))
@pytest.mark.parametrize("duration", ["1s", "8s", "15m"])
def test_whole_second_sleeps_wake_on_time_whatever_the_clock_reads(
    p: LocalPlatform, clock: str, duration: str
) -> None:
    """Issue 25: timers at whole seconds fire on time on both harnesses, whatever fraction of
    a second the clock shows (on AWS an SQS delay computed in float seconds was rounded up a
    second: 8 s became 8.000000238, then 9)."""
    for piece in CLOCKS[clock]:
        p.advance(piece)
    p.start("sleeper", {"d": duration}, id="s1")
    asleep_until(p, "s1", _ms(duration))


@pytest.mark.parametrize("duration", ["15m1s", "1h", "3d"])
def test_sleeps_past_fifteen_minutes_wake_on_the_second(p: LocalPlatform, duration: str) -> None:
    """Past SQS's 15-minute delay the AWS path parks on a Scheduler entry, whose `at()` is
    whole seconds: from a clock on the second, the run wakes at its time, to the millisecond."""
    p.start("sleeper", {"d": duration}, id="s1")
    asleep_until(p, "s1", _ms(duration))


@pytest.mark.parametrize("clock", sorted(CLOCKS))
def test_whole_second_wait_timeouts_fire_on_time(p: LocalPlatform, clock: str) -> None:
    for piece in CLOCKS[clock]:
        p.advance(piece)
    p.start("awaiter", {"timeout": "8s"}, id="a1")
    asleep_until(p, "a1", 8000, status="awaiting")
    assert p.get("a1").result == {"timed_out": True, "n": 1}
    p.start("gatherer", {"timeout": "8s"}, id="g1")
    p.advance("8s")
    assert p.get("g1").status == "awaiting"  # the first entry timed out; the second waits 8 s more
    asleep_until(p, "g1", 8000, status="awaiting")


def _ms(duration: str) -> int:
    from runtime.core.durations import parse_ms

    return parse_ms(duration, "test")


def test_sleep_is_journaled_as_a_timer_wait(p: LocalPlatform) -> None:
    """Seed: "Each step, signal and timer is journaled before it takes effect"."""
    p.start("sleeper", {"d": "2h"}, id="s1")
    waits = [e for e in p.journal("s1") if e.kind == Kind.WAIT]
    assert [w.name for w in waits] == ["sleep"]
    assert wait_dones(p, "s1") == []
    p.advance("2h")
    [done] = wait_dones(p, "s1")
    assert done.name == "sleep" and done.data["by"] == "timer"


# --- await ------------------------------------------------------------------------------


def test_await_returns_the_signal_payload(p: LocalPlatform) -> None:
    """Seed: "`await` | the signal payload, or nil on timeout"."""
    p.start("awaiter", {}, id="a1")
    assert p.get("a1").status == "awaiting"
    assert p.signal("a1", "approved", {"by": "ada", "n": 3}) is True
    run = p.get("a1")
    assert run.status == "completed"
    assert run.result == {"got": {"by": "ada", "n": 3}, "timed_out": False, "n": 1}


def test_await_returns_nil_on_timeout_and_not_before(p: LocalPlatform) -> None:
    """Seed: "`await` | the signal payload, or nil on timeout"."""
    p.start("awaiter", {"timeout": "48h"}, id="a1")
    p.advance("47h")
    p.advance("59m")
    p.advance("59s")
    p.advance("999ms")
    assert p.get("a1").status == "awaiting"
    p.advance("1ms")
    run = p.get("a1")
    assert run.status == "completed"
    assert run.result["timed_out"] is True
    assert "got" not in run.result


def test_await_ignores_signals_of_other_names(p: LocalPlatform) -> None:
    """SPEC 3: "Each wait consumes the earliest unconsumed signal of its name"."""
    p.start("awaiter", {}, id="a1")
    p.signal("a1", "rejected", {"by": "bob"})
    assert p.get("a1").status == "awaiting"
    p.signal("a1", "approved", {"by": "ada"})
    assert p.get("a1").result["got"] == {"by": "ada"}


# --- race -------------------------------------------------------------------------------


def test_race_returns_payload_and_the_name_that_arrived(p: LocalPlatform) -> None:
    """Seed: "`race` | the payload and the name that arrived first"."""
    p.start("racer", {}, id="r1")
    assert p.get("r1").status == "awaiting"
    p.signal("r1", "cancelled", {"reason": "changed mind"})
    run = p.get("r1")
    assert run.status == "completed"
    assert run.result["which"] == "cancelled"
    assert run.result["payload"] == {"reason": "changed mind"}


@pytest.mark.parametrize("first, second", [("paid", "cancelled"), ("cancelled", "paid")])
def test_race_winner_is_the_earliest_arrival_not_the_first_listed(
    p: LocalPlatform, first: str, second: str
) -> None:
    """Seed: "`race` | the payload and the name that arrived first" — both signals are
    buffered before the race; the earlier arrival wins whatever the argument order."""
    p.start("racer", {"nap": "1h"}, id="r1")
    p.signal("r1", first, {"from": first})
    p.signal("r1", second, {"from": second})
    p.advance("1h")
    run = p.get("r1")
    assert run.result["which"] == first
    assert run.result["payload"] == {"from": first}


@pytest.mark.parametrize("first, loser", [("paid", "cancelled"), ("cancelled", "paid")])
def test_race_losers_keep_their_signals_consumable(p: LocalPlatform, first: str, loser: str) -> None:
    """Seed: "the others keep their signals consumable" — a later await of the loser gets
    the signal the race did not consume."""
    p.start("racer", {"nap": "1h", "then_await": loser}, id="r1")
    p.signal("r1", first, {"from": first})
    p.signal("r1", loser, {"from": loser})
    p.advance("1h")
    run = p.get("r1")
    assert run.status == "completed"
    assert run.result["which"] == first
    assert run.result["later"] == {"from": loser}
    # One consumption per wait: the race took one signal, the await the other.
    consumed = [e.data.get("signal") for e in wait_dones(p, "r1") if e.data.get("by") == "signal"]
    assert consumed == [first, loser]


def test_race_on_timeout_returns_nil_nil(p: LocalPlatform) -> None:
    """SPEC 3: "wf:race(...) -- payload, name  (nil, nil on timeout)"."""
    p.start("racer", {}, id="r1")
    p.advance("71h59m59s")
    assert p.get("r1").status == "awaiting"
    p.advance("1s")
    run = p.get("r1")
    assert run.status == "completed"
    assert run.result["payload_nil"] is True
    assert run.result["which_nil"] is True


# --- all --------------------------------------------------------------------------------


def test_all_returns_payloads_in_argument_order(p: LocalPlatform) -> None:
    """Seed: "`all` | payloads in argument order" — signals sent in the other order."""
    p.start("gatherer", {}, id="g1")
    p.signal("g1", "received", {"what": "received"})
    assert p.get("g1").status == "awaiting"
    p.signal("g1", "shipped", {"what": "shipped"})
    run = p.get("g1")
    assert run.status == "completed"
    assert run.result["shipped"] == {"what": "shipped"}
    assert run.result["received"] == {"what": "received"}
    assert run.result["n"] == 2


def test_all_timed_out_entry_is_nil(p: LocalPlatform) -> None:
    """Seed: "a timed-out entry is nil"."""
    p.start("gatherer", {"timeout": "1h"}, id="g1")
    p.signal("g1", "received", {"what": "received"})
    p.advance("59m")
    assert p.get("g1").status == "awaiting"
    p.advance("1m")
    run = p.get("g1")
    assert run.status == "completed"
    assert run.result["shipped_nil"] is True
    assert run.result["received"] == {"what": "received"}
    assert run.result["n"] == 2


def test_all_timeout_is_per_entry_waited_in_order(p: LocalPlatform) -> None:
    """Seed: "The timeout is per entry, waited in order" — entry 2 gets a full fresh
    timeout from the moment entry 1 resolves (6h + 10h = 16h), not a shared 10h."""
    p.start("gatherer", {"timeout": "10h"}, id="g1")
    p.advance("6h")
    p.signal("g1", "shipped", {"what": "shipped"})
    assert p.get("g1").status == "awaiting"
    p.advance("9h59m59s")  # 15h59m59s after start: past a shared 10h deadline
    assert p.get("g1").status == "awaiting"
    p.advance("1s")  # 16h: 10h after entry 1 resolved
    run = p.get("g1")
    assert run.status == "completed"
    assert run.result["shipped"] == {"what": "shipped"}
    assert run.result["received_nil"] is True


def test_all_each_entry_times_out_in_turn(p: LocalPlatform) -> None:
    """Seed: "The timeout is per entry, waited in order" — two timeouts back to back take
    twice the timeout."""
    p.start("gatherer", {"timeout": "3h"}, id="g1")
    p.advance("3h")
    assert p.get("g1").status == "awaiting"
    p.advance("2h59m")
    assert p.get("g1").status == "awaiting"
    p.advance("1m")
    run = p.get("g1")
    assert run.status == "completed"
    assert run.result["shipped_nil"] is True and run.result["received_nil"] is True
    assert [e.data["by"] for e in wait_dones(p, "g1")] == ["timeout", "timeout"]


# --- a parked run holds no resources ----------------------------------------------------


def test_parked_statuses_are_sleeping_then_awaiting(p: LocalPlatform) -> None:
    """Seed diagram: "running --> sleeping: wf:sleep", "running --> awaiting: wf:await,
    race, all"."""
    p.start("parker", {}, id="k1")
    assert p.get("k1").status == "sleeping"
    p.advance("1h")
    assert p.get("k1").status == "awaiting"
    p.signal("k1", "approved", {"ok": True})
    assert p.get("k1").status == "awaiting"
    p.signal("k1", "paid", {"by": "ada"})
    run = p.get("k1")
    assert run.status == "completed"
    assert run.result == {"s": "stepped", "approved": {"ok": True}, "payload": {"by": "ada"}, "which": "paid"}


def test_parked_run_survives_restart_and_resumes_on_timer_and_signals(harness: Any, tmp_path: Path) -> None:
    """Seed: "A parked run holds no resources. It is journal rows and a timer." — after
    every restart the parked run keeps its status and wakes on its timer and signals."""
    with harness(PROJECT, data_dir=tmp_path) as p:
        p.start("parker", {}, id="k1")
        before = p.journal("k1")
        p.restart()
        assert p.get("k1").status == "sleeping"
        assert p.journal("k1") == before
        p.advance("59m")
        assert p.get("k1").status == "sleeping"
        p.advance("1m")
        assert p.get("k1").status == "awaiting"
        p.restart()
        assert p.get("k1").status == "awaiting"
        p.signal("k1", "approved", {"ok": True})
        p.restart()
        assert p.get("k1").status == "awaiting"
        p.signal("k1", "cancelled", {"why": "no"})
        run = p.get("k1")
        assert run.status == "completed"
        assert run.result == {
            "s": "stepped",
            "approved": {"ok": True},
            "payload": {"why": "no"},
            "which": "cancelled",
        }
        # The step ran once: replay returned its recorded result.
        intents = [e for e in p.journal("k1") if e.kind == Kind.STEP_INTENT]
        assert len(intents) == 1


def test_parked_run_timeout_fires_after_restart(harness: Any, tmp_path: Path) -> None:
    """Seed: "A parked run holds no resources. It is journal rows and a timer." — the
    timeout timer outlives the process that set it."""
    with harness(PROJECT, data_dir=tmp_path) as p:
        p.start("awaiter", {"timeout": "48h"}, id="a1")
        p.restart()
        p.advance("47h")
        assert p.get("a1").status == "awaiting"
        p.restart()
        p.advance("1h")
        assert p.get("a1").status == "completed"
        assert p.get("a1").result["timed_out"] is True


def test_parked_runs_resume_with_no_lua_state_kept(harness: Any, tmp_path: Path) -> None:
    """SPEC 3: "No Lua state is kept for it beyond a bounded cache" — with the cache at
    zero every wake replays from the journal, and the run still completes correctly."""
    with harness(PROJECT, data_dir=tmp_path, cache_size=0) as p:
        p.start("parker", {}, id="k1")
        p.start("gatherer", {"timeout": "10h"}, id="g1")
        p.advance("1h")
        p.signal("k1", "approved", {"ok": 1})
        p.signal("g1", "shipped", {"n": 1})
        p.signal("k1", "paid", {"by": "ada"})
        p.signal("g1", "received", {"n": 2})
        assert p.get("k1").result == {
            "s": "stepped",
            "approved": {"ok": 1},
            "payload": {"by": "ada"},
            "which": "paid",
        }
        assert p.get("g1").result["shipped"] == {"n": 1}
        assert p.get("g1").result["received"] == {"n": 2}
        assert len([e for e in p.journal("k1") if e.kind == Kind.STEP_INTENT]) == 1
