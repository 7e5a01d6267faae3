"""Duplicates on AWS (moto), through the worker Lambda's handler: "A duplicate SQS delivery,
a duplicate start, a duplicate signal and a timer firing twice change nothing beyond the
first."

One scenario (tests/projects/race_dup, workflow "order") is played once with every wake
delivered once, then again with one kind of duplicate injected at every chance; the run's
record, its journal (entries, times included) and the effects ledger (how often each step
body ran, kept outside the journal) must be identical.

The deployment is ``AwsPlatform``'s, on its moto server, whose SQS runs on the fake clock
each request carries; the test hands the wakes to the worker itself (``Postman``), so it
can hand them over twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runtime.aws.contract import WORKER_TIMEOUT_S, Handler
from runtime.aws.events import sqs_event
from runtime.aws.runtime import AwsRuntime
from runtime.core.clock import FakeClock
from runtime.testing import AwsPlatform

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "race_dup"
RUN = "order-1"
WAKE_COUNTS = [
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesDelayed",
    "ApproximateNumberOfMessagesNotVisible",
]


@dataclass(frozen=True)
class Delivery:
    """A wake message as the worker is handed it (its ReceiveMessage form)."""

    message: dict[str, Any]

    @property
    def body(self) -> str:
        return str(self.message["Body"])

    @property
    def run_id(self) -> str:
        return str(json.loads(self.body)["run_id"])

    @property
    def due_ms(self) -> int | None:
        due = json.loads(self.body).get("due_ms")
        return None if due is None else int(due)


class Postman:
    """SQS and EventBridge Scheduler handing wakes over at the fake clock's time, driven by
    hand: ``due()`` fires the one-time schedules whose time has come into the wake queue (as
    Scheduler does) and takes every wake message visible now out of the queue (a delayed one
    shows once the clock reaches its delay: the moto server runs SQS on the clock the
    harness's requests carry)."""

    def __init__(self, p: AwsPlatform) -> None:
        self.p = p
        self.sent: list[Delivery] = []  # everything handed over, for assertions

    def due(self) -> list[Delivery]:
        self.p.fire_due_schedules()
        sqs, url = self.p.clients.sqs, self.p.config.wake_queue_url
        found: list[Delivery] = []
        while got := sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"], WaitTimeSeconds=0
        ).get("Messages", []):
            for m in got:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
            found += [Delivery(m) for m in got]
        self.sent += found
        return found

    def waiting(self) -> int:
        """Wake messages still in the queue: held back by a delay, or in flight."""
        sqs, url = self.p.clients.sqs, self.p.config.wake_queue_url
        counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=WAKE_COUNTS)["Attributes"]
        return sum(int(counts.get(name, 0)) for name in WAKE_COUNTS)


def deliver(p: AwsPlatform, rt: AwsRuntime, deliveries: list[Delivery], receive_count: int = 1) -> Any:
    """Call the worker Lambda's handler with these SQS records, with ``rt`` as its container."""
    messages = [
        {
            **d.message,
            "Attributes": {**d.message.get("Attributes", {}), "ApproximateReceiveCount": str(receive_count)},
        }
        for d in deliveries
    ]
    event = sqs_event(messages, p.config.wake_queue_arn, p.region)
    return p.invoke(Handler.WORKER, event, WORKER_TIMEOUT_S, rt)


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

    def __init__(self, p: AwsPlatform, clock: FakeClock, dup: str | None) -> None:
        self.p, self.clock, self.dup = p, clock, dup
        # Two worker containers: redeliveries go to the other one, so they also replay cold.
        self.workers = [self.container("worker-1"), self.container("worker-2")]
        self.front = self.container("front")  # starts and signals (the API side)
        self.postman = Postman(p)
        self.timer_copies: list[Delivery] = []
        self.delivered = 0

    def container(self, owner: str) -> AwsRuntime:
        """A Lambda container of the deployment: its own clients, Lua state and coroutine cache."""
        return AwsRuntime(self.p.config, self.p.new_clients(), clock=self.clock, owner=owner)

    def send(self, batch: list[Delivery], worker: int = 0, receive_count: int = 1) -> None:
        result = deliver(self.p, self.workers[worker], batch, receive_count)
        assert result == {"batchItemFailures": []}, result
        self.delivered += len(batch)

    def settle(self) -> None:
        for _ in range(50):
            batch = self.postman.due()
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
        state = self.p.runtime.aws_services.objects.state("Ledger", RUN) or {}
        return Outcome(
            run=run.__dict__,
            journal=[e.as_dict() for e in store.journal(RUN)],
            ledger=dict(state.get("runs", {})),
            signals=[(s.name, s.payload, s.state) for s in store.signals(RUN)],
            deliveries=self.delivered,
        )


def play(dup: str | None) -> Outcome:
    clock = FakeClock()
    with AwsPlatform(PROJECT, clock=clock) as p:
        return Player(p, clock, dup).play()


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
def player() -> Iterator[Player]:
    clock = FakeClock()
    with AwsPlatform(PROJECT, clock=clock) as p:
        yield Player(p, clock, None)


def test_a_duplicate_start_sends_a_new_wake_only_while_the_run_has_not_begun(player: Player) -> None:
    """A retried start prompts the run again only if the first prompt may have been lost
    (the run has not begun); once it has, a duplicate start sends nothing."""
    player.front.platform.start("order", {"qty": 2}, id=RUN)
    player.front.platform.start("order", {"qty": 2}, id=RUN)
    first = player.postman.due()
    assert [d.run_id for d in first] == [RUN, RUN]
    player.send(first)
    assert player.front.store.get_run(RUN).status == "sleeping"  # type: ignore[union-attr]
    player.front.platform.start("order", {"qty": 2}, id=RUN)
    assert player.postman.due() == []


def test_duplicate_deliveries_after_the_end_die_out(player: Player) -> None:
    """Duplicates of a finished run's wake are dropped: none of them sends another wake."""
    outcome = player.play()
    assert outcome.run["status"] == "completed"
    last = player.postman.sent[-1]
    player.send([last], worker=0, receive_count=2)
    player.send([last], worker=1, receive_count=3)
    assert [d.body for d in player.postman.due()] == []
    assert player.postman.waiting() == 0
