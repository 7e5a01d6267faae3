"""Acceptance: ``queue "name"`` ``:send(body, { delay = "30s" })`` and ``on "queue" ("name", fn)``
(SPEC section 2: "an error retries the message, in bulk, up to the queue's attempts, then it
goes to a dead-letter store"), on the local backend, through LocalPlatform."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import ProjectLoadError
from runtime.testing import LocalPlatform

from . import bounded, error, project, value


@pytest.fixture
def p(tmp_path: Path) -> Iterator[LocalPlatform]:
    with LocalPlatform(project("svc_queues"), data_dir=tmp_path) as plat:
        yield plat


def send(p: LocalPlatform, queue: str, body: Any, **opts: Any) -> Any:
    return value(p, queue=queue, body=body, opts=opts or None)


def deliveries(p: LocalPlatform, queue: str) -> list[dict[str, Any]]:
    """What the queue's handler saw, in order (each handler logs its message)."""
    return [dict(entry["fields"]) for entry in p.logs if entry["message"] == queue]


def dead(p: LocalPlatform, queue: str | None = None) -> list[dict[str, Any]]:
    return p.services.queues.dead_letters(queue)


def test_a_message_sent_from_a_handler_is_delivered(p: LocalPlatform) -> None:
    """SPEC 2: `queue "name"` `:send(body)`; `on "queue" ("name", function(message) ...)`
    receives it as `{ id, body, attempts }`."""
    msg_id = send(p, "inbox", {"hello": "world", "n": 1})
    [got] = deliveries(p, "inbox")
    assert got["body"] == {"hello": "world", "n": 1}
    assert got["attempts"] == 1
    assert got["id"] == msg_id and isinstance(msg_id, str)
    assert got["at"] == int(p.now)
    assert dead(p) == []


def test_a_message_sent_from_a_step_is_delivered(p: LocalPlatform) -> None:
    run = p.start("sender", {"body": ["from", "a", "step"]}, id="sender")
    assert run.status == "completed", run.error
    [got] = deliveries(p, "inbox")
    assert got["body"] == ["from", "a", "step"]
    assert got["attempts"] == 1


def test_each_message_is_delivered_once_in_send_order(p: LocalPlatform) -> None:
    ids = [send(p, "inbox", {"n": n}) for n in range(5)]
    assert len(set(ids)) == 5
    p.advance("1h")
    assert [d["body"]["n"] for d in deliveries(p, "inbox")] == [0, 1, 2, 3, 4]
    assert [d["id"] for d in deliveries(p, "inbox")] == ids


def test_a_delayed_message_waits_for_its_delay(p: LocalPlatform) -> None:
    """SPEC 2: `:send(body, { delay = "30s" })`."""
    send(p, "inbox", "later", delay="30s")
    assert deliveries(p, "inbox") == []
    p.advance("29s")
    assert deliveries(p, "inbox") == []
    p.advance("1s")
    [got] = deliveries(p, "inbox")
    assert got["body"] == "later"


def test_a_delayed_message_survives_a_restart(p: LocalPlatform) -> None:
    send(p, "inbox", "durable", delay="1m")
    p.restart()
    p.advance("1m")
    assert [d["body"] for d in deliveries(p, "inbox")] == ["durable"]


def test_a_delayed_send_from_a_step_is_delayed_too(p: LocalPlatform) -> None:
    p.start("sender", {"body": "step-later", "opts": {"delay": "5m"}}, id="sender")
    assert deliveries(p, "inbox") == []
    p.advance("5m")
    assert [d["body"] for d in deliveries(p, "inbox")] == ["step-later"]


def test_a_delayed_message_is_delivered_at_its_due_time(p: LocalPlatform) -> None:
    """SPEC 5: `p.advance` "moves the fake clock, fires due timers in order" — a message due
    30s in is handled at +30s even when the clock is moved an hour at once."""
    sent_at = int(p.now)
    send(p, "inbox", "later", delay="30s")
    p.advance("1h")
    [got] = deliveries(p, "inbox")
    assert got["at"] == sent_at + 30


def test_the_delay_limit_is_15_minutes(p: LocalPlatform) -> None:
    """The local backend refuses what SQS refuses (a per-message delay of 0-900 s)."""
    e = error(p, queue="inbox", body=1, opts={"delay": "16m"})
    assert "queue 'inbox':send delay 16m is over the limit of 15m" in e
    e = error(p, queue="inbox", body=1, opts={"delay": "15m1s"})
    assert "over the limit of 15m" in e
    send(p, "inbox", "at the limit", delay="15m")
    p.advance("15m")
    assert [d["body"] for d in deliveries(p, "inbox")] == ["at the limit"]


def test_a_bad_delay_is_refused_with_the_duration_message(p: LocalPlatform) -> None:
    """SPEC 3: a bad duration is "refused with the bad value in the message"."""
    e = error(p, queue="inbox", body=1, opts={"delay": "soon"})
    assert "bad duration \"soon\" for the delay of queue 'inbox':send" in e
    p.advance("1h")
    assert deliveries(p, "inbox") == []


def test_a_failing_handler_is_retried_30s_apart_then_dead_lettered(p: LocalPlatform) -> None:
    """SPEC 2: "an error retries the message ... up to the queue's attempts, then it goes to
    a dead-letter store" — by default 3 attempts, 30 s apart."""
    sent_at = int(p.now)
    msg_id = send(p, "failing", {"n": 7})
    assert [d["attempts"] for d in deliveries(p, "failing")] == [1]
    p.advance("29s")
    assert [d["attempts"] for d in deliveries(p, "failing")] == [1]
    p.advance("1s")
    assert [d["attempts"] for d in deliveries(p, "failing")] == [1, 2]
    assert dead(p) == []
    p.advance("30s")
    got = deliveries(p, "failing")
    assert [d["attempts"] for d in got] == [1, 2, 3]
    assert [d["at"] - sent_at for d in got] == [0, 30, 60]
    assert {d["id"] for d in got} == {msg_id}
    assert dead(p) == [
        {"id": msg_id, "queue": "failing", "body": {"n": 7}, "attempts": 3, "error": "handler refused 7"}
    ]
    p.advance("1h")
    assert len(deliveries(p, "failing")) == 3  # a dead letter is not delivered again


def test_queue_attempts_and_retry_delay_come_from_lunaflow_toml(p: LocalPlatform) -> None:
    """`[queues.flaky] attempts = 5, retry_delay = "10s"` in lunaflow.toml."""
    msg_id = send(p, "flaky", {"name": "never"})
    for _ in range(4):
        p.advance("10s")
    got = deliveries(p, "flaky")
    assert [d["attempts"] for d in got] == [1, 2, 3, 4, 5]
    assert [d["at"] - got[0]["at"] for d in got] == [0, 10, 20, 30, 40]
    [letter] = dead(p, "flaky")
    assert letter["id"] == msg_id and letter["attempts"] == 5 and letter["error"] == "not yet"
    assert dead(p, "failing") == []


def test_a_retried_message_that_then_succeeds_is_not_dead_lettered(p: LocalPlatform) -> None:
    send(p, "flaky", {"succeed_on": 3})
    p.advance("10s")
    p.advance("10s")
    assert [d["attempts"] for d in deliveries(p, "flaky")] == [1, 2, 3]
    p.advance("1h")
    assert len(deliveries(p, "flaky")) == 3
    assert dead(p) == []


def test_one_advance_delivers_every_retry_that_falls_due(p: LocalPlatform) -> None:
    """SPEC 5: `p.advance` "moves the fake clock, fires due timers in order, runs until
    idle": every retry due inside the window happens."""
    send(p, "failing", {"n": 1})
    p.advance("10m")
    assert [d["attempts"] for d in deliveries(p, "failing")] == [1, 2, 3]
    assert len(dead(p, "failing")) == 1


def test_a_queue_handler_can_start_a_workflow(p: LocalPlatform) -> None:
    """Seed: "A queue handler can start a workflow when a message turns out to need one."""
    send(p, "handoff", {"id": "m-1"})
    run = p.get("care-m-1")
    assert run.workflow == "needs-care"
    assert run.status == "completed"
    assert run.result == {"cared": "m-1"}


def test_a_message_for_a_queue_without_a_handler_waits(p: LocalPlatform) -> None:
    """A message nobody handles stays queued (as on SQS), and moving the clock past it
    returns normally."""
    send(p, "unhandled", "kept")
    bounded(lambda: p.advance("1h"), 2.0)
    bounded(p.settle, 2.0)
    assert dead(p) == []
    assert p.services.queues.next_due(p.platform.worker) is None  # it holds up nothing...

    class HandlesEverything:
        def has_queue_handler(self, queue: str) -> bool:
            return True

    assert p.services.queues.next_due(HandlesEverything()) is not None  # ...and is still there


def test_a_message_nobody_handles_does_not_hold_up_other_queues(p: LocalPlatform) -> None:
    """A waiting message for a queue without a handler must not hide the due times of other
    queues' messages from `p.advance`."""
    send(p, "unhandled", "kept")
    send(p, "failing", {"n": 2})
    bounded(lambda: p.advance("10m"), 2.0)
    assert [d["attempts"] for d in deliveries(p, "failing")] == [1, 2, 3]
    assert len(dead(p, "failing")) == 1


def test_a_send_outside_a_step_is_refused_in_run_code(p: LocalPlatform) -> None:
    """SPEC 3: queue calls outside a step are "refused: ... is an effect and belongs inside
    wf:step"."""
    run = p.start("sender-outside", {"body": "nope"}, id="sender-outside")
    assert run.status == "completed", run.error
    assert run.result["ok"] is False
    assert run.result["error"].endswith("queue:send is an effect and belongs inside wf:step")
    p.advance("1h")
    assert deliveries(p, "inbox") == []


def test_a_queue_handler_declared_in_two_scripts_is_refused_naming_both() -> None:
    """SPEC 1: loading is refused when "two scripts declare the same workflow, object,
    queue handler or fetch handler"."""
    with pytest.raises(ProjectLoadError) as refused:
        LocalPlatform(project("svc_queues_dup"))
    message = str(refused.value)
    assert "the handler of queue 'inbox' is declared in both" in message
    assert "a.lua" in message and "b.lua" in message
