"""Duplicates on AWS (moto), through the worker Lambda's handler: "A duplicate SQS delivery,
a duplicate start, a duplicate signal and a timer firing twice change nothing beyond the
first."

One scenario (tests/projects/race_dup, workflow "order") is played once with every wake
delivered once, then again with one kind of duplicate injected at every chance; the run's
record, its journal (entries, times included) and the effects ledger (how often each step
body ran, kept outside the journal) must be identical.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from runtime.core.clock import FakeClock, now_ms
from tests.support.moto_server import PROJECTS, Delivery, Postman, World, aws_world, deliver, journal_dicts

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

PROJECT = PROJECTS / "race_dup"
RUN = "order-1"


@dataclass
class Outcome:
    run: dict[str, Any]
    journal: list[dict[str, Any]]
    ledger: dict[str, int]
    signals: list[tuple[str, Any, str]]  # name, payload, state
    deliveries: int


class Player:
    """Plays the scenario; ``dup`` names the duplicate to inject ("sqs", "start", "signal",
    "timer") or is None for the single-delivery baseline."""

    def __init__(self, world: World, dup: str | None) -> None:
        self.world, self.dup = world, dup
        self.clock = FakeClock()
        # Two worker containers: redeliveries go to the other one, so they also replay cold.
        self.workers = [
            world.runtime(self.clock, owner="worker-1"),
            world.runtime(self.clock, owner="worker-2"),
        ]
        self.front = world.runtime(self.clock, owner="front")  # starts and signals (the API side)
        self.postman = Postman(world)
        self.timer_copies: list[Delivery] = []
        self.delivered = 0

    def send(self, batch: list[Delivery], worker: int = 0, receive_count: int = 1) -> None:
        result = deliver(self.world, self.workers[worker], batch, receive_count)
        assert result == {"batchItemFailures": []}, result
        self.delivered += len(batch)

    def settle(self) -> None:
        for _ in range(50):
            batch = self.postman.due(now_ms(self.clock))
            if not batch:
                return
            timers = [d for d in batch if d.due_ms is not None]
            if self.dup == "sqs":
                # At-least-once: the same records twice in one batch, then again later to
                # the other container, as a message whose visibility timed out.
                self.send(batch + batch)
                self.send(batch, worker=1, receive_count=2)
            elif self.dup == "timer" and timers:
                # A timer that fires twice: twice at its time, and once more later on.
                self.send(batch + timers)
                self.timer_copies += timers
            else:
                self.send(batch)
        raise AssertionError("wakes kept coming")

    def start(self) -> None:
        self.front.platform.start("order", {"qty": 2}, id=RUN)
        if self.dup == "start":
            again = self.front.platform.start("order", {"qty": 99}, id=RUN)  # a retried start
            assert again.id == RUN and again.input == {"qty": 2}

    def signal(self) -> None:
        assert self.front.platform.signal(RUN, "paid", {"by": "ada"}) is True
        if self.dup == "signal":
            assert self.front.platform.signal(RUN, "paid", {"by": "ada"}) is True  # a double click

    def late_duplicates(self) -> None:
        """Duplicates that arrive after the run moved on."""
        if self.dup == "start":
            again = self.front.platform.start("order", {"qty": 99}, id=RUN)
            assert again.input == {"qty": 2}
        if self.dup == "timer" and self.timer_copies:
            copies, self.timer_copies = self.timer_copies, []
            self.send(copies, worker=1, receive_count=2)
        if self.dup == "signal":
            self.front.platform.signal(RUN, "paid", {"by": "ada"})

    def play(self) -> Outcome:
        self.start()
        self.settle()  # reserve; sleeping 1h (a Scheduler entry)
        self.late_duplicates()
        self.clock.advance(3600)
        self.settle()  # the 1h timer: awaiting "paid"
        self.late_duplicates()
        self.settle()
        self.signal()
        self.settle()  # ship; sleeping 5m (an SQS delayed wake)
        self.late_duplicates()
        self.settle()
        self.clock.advance(300)
        self.settle()  # the 5m timer: close, completed
        self.late_duplicates()
        self.clock.advance(3600)  # past the await's timeout, still on SQS: it finds the run ended
        self.settle()
        self.late_duplicates()
        self.settle()
        store = self.front.store
        run = store.get_run(RUN)
        assert run is not None
        state = self.world.object_state("Ledger", RUN) or {}
        return Outcome(
            run=run.__dict__,
            journal=journal_dicts(store.journal(RUN)),
            ledger=dict(state.get("runs", {})),
            signals=[(s.name, s.payload, s.state) for s in store.signals(RUN)],
            deliveries=self.delivered,
        )


def play(dup: str | None) -> Outcome:
    with aws_world(PROJECT) as world:
        return Player(world, dup).play()


@pytest.fixture(scope="module")
def baseline() -> Outcome:
    outcome = play(None)
    assert outcome.run["status"] == "completed"
    assert outcome.run["result"] == {"qty": 2, "by": "ada", "closed": 1_767_225_600 + 3600 + 300}
    assert outcome.ledger == {f"{RUN}/{s}/1/1": 1 for s in ("reserve", "ship", "close")}
    assert outcome.signals == [("paid", {"by": "ada"}, "consumed")]
    return outcome


def same_as_baseline(outcome: Outcome, baseline: Outcome) -> None:
    assert outcome.run == baseline.run
    assert outcome.journal == baseline.journal
    assert outcome.ledger == baseline.ledger


def test_a_duplicate_sqs_delivery_changes_nothing(baseline: Outcome) -> None:
    """A duplicate SQS delivery changes nothing beyond the first."""
    outcome = play("sqs")
    assert outcome.deliveries >= 3 * baseline.deliveries
    same_as_baseline(outcome, baseline)
    assert outcome.signals == baseline.signals


def test_a_duplicate_start_joins_the_run_and_changes_nothing(baseline: Outcome) -> None:
    """A duplicate start changes nothing beyond the first: "a retried start joins the run
    instead of making a second one"."""
    outcome = play("start")
    same_as_baseline(outcome, baseline)
    assert outcome.signals == baseline.signals


def test_a_duplicate_signal_is_set_aside_and_changes_nothing(baseline: Outcome) -> None:
    """A duplicate signal changes nothing beyond the first: "Duplicate signals are safe. An
    unconsumed extra is set aside rather than breaking replay"."""
    outcome = play("signal")
    same_as_baseline(outcome, baseline)
    states = [state for _, _, state in outcome.signals]
    assert states[0] == "consumed"
    assert states[1:] and set(states[1:]) == {"set_aside"}


def test_a_timer_firing_twice_changes_nothing(baseline: Outcome) -> None:
    """A timer firing twice changes nothing beyond the first."""
    outcome = play("timer")
    assert outcome.deliveries > baseline.deliveries
    same_as_baseline(outcome, baseline)
    assert outcome.signals == baseline.signals


@pytest.fixture
def world() -> Iterator[World]:
    with aws_world(PROJECT) as w:
        yield w


def test_a_duplicate_start_sends_a_new_wake_only_while_the_run_has_not_begun(world: World) -> None:
    """A retried start prompts the run again only if the first prompt may have been lost
    (the run has not begun); once it has, a duplicate start sends nothing."""
    player = Player(world, None)
    player.front.platform.start("order", {"qty": 2}, id=RUN)
    player.front.platform.start("order", {"qty": 2}, id=RUN)
    first = player.postman.due(now_ms(player.clock))
    assert [d.run_id for d in first] == [RUN, RUN]
    player.send(first)
    assert player.front.store.get_run(RUN).status == "sleeping"  # type: ignore[union-attr]
    player.front.platform.start("order", {"qty": 2}, id=RUN)
    assert player.postman.due(now_ms(player.clock)) == []


def test_duplicate_deliveries_after_the_end_die_out(world: World) -> None:
    """Duplicates of a finished run's wake are dropped: none of them sends another wake."""
    player = Player(world, None)
    outcome = player.play()
    assert outcome.run["status"] == "completed"
    last = player.postman.sent[-1]
    player.send([last], worker=0, receive_count=2)
    player.send([last], worker=1, receive_count=3)
    player.postman.collect(now_ms(player.clock))
    assert [d.body for d in player.postman.held] == []
