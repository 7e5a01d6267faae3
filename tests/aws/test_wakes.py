"""Issue 15.4: failed wakes are healed.

On main, taking a run's lease removed its wake-up before any work was done, so an
activation that failed (throttling, a bug) left a pending signal no reconcile ever found;
only SQS's redelivery remained, then the dead-letter queue, then nothing. The wake-up now
stays until the activation that served it is done, the reconciler finds it, and each
failed wake record is counted in the ``WakeFailures`` metric (an alarm watches it:
tests/infra/test_wake_path.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from runtime.testing import AwsPlatform, WakeFailed

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_limits"


@pytest.fixture
def p() -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT, objects=lambda *a: ["through"], strict=False) as platform:
        yield platform


def throttle_once(p: AwsPlatform, operation: str) -> list[str]:
    """The next ``operation`` on the table fails as DynamoDB fails a throttled request."""
    thrown: list[str] = []

    def throttle(**_: Any) -> None:
        if not thrown:
            thrown.append(operation)
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, operation
            )

    p.clients.dynamodb.meta.events.register(f"before-call.dynamodb.{operation}", throttle)
    return thrown


def test_a_signal_whose_activation_failed_is_consumed_after_a_reconcile(
    p: AwsPlatform, capsys: pytest.CaptureFixture[str]
) -> None:
    p.start("approval", {}, id="f1")
    assert p.get("f1").status == "awaiting"
    assert p.platform.signal("f1", "go", {"by": "ada"}) is True
    thrown = throttle_once(p, "Query")  # the activation's read of the run
    p.settle()
    assert thrown == ["Query"]
    # The wake failed (SQS keeps it for 90 minutes) after its lease marked the run running.
    assert p.get("f1").status == "running"
    assert [e.kind for e in p.journal("f1")][-1] == "wait"  # the signal not consumed yet
    printed = capsys.readouterr().out
    p.advance("2m")  # the reconcile rule's run after the wake-up is a minute old
    run = p.get("f1")
    assert run.status == "completed"
    assert run.result == {"got": {"by": "ada"}}
    assert "WakeFailures" in printed  # counted, in the metrics the alarm reads


def test_a_started_run_whose_first_activation_failed_is_advanced_after_a_reconcile(p: AwsPlatform) -> None:
    p.platform.start("approval", {}, id="f2")
    thrown = throttle_once(p, "Query")
    p.settle()
    assert thrown == ["Query"] and p.get("f2").status == "running"
    p.advance("2m")
    assert p.get("f2").status == "awaiting"


def test_the_strict_harness_raises_the_failed_wake_with_its_error() -> None:
    with AwsPlatform(PROJECT, objects=lambda *a: ["through"]) as strict:
        strict.platform.start("approval", {}, id="f3")
        throttle_once(strict, "Query")
        with pytest.raises(WakeFailed, match=r"run\(s\) 'f3': advancing run 'f3' failed: .*Rate exceeded"):
            strict.settle()


class _Queue:
    """SQS's SendMessage, recording the run each wake names."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send_message(self, **request: Any) -> None:
        self.sent.append(json.loads(request["MessageBody"])["run_id"])


def test_an_inner_holding_block_gives_the_outer_one_back() -> None:
    """Found by a review: leaving an inner ``holding`` block cleared the outer one, so the
    outer block's later prompts went out at once."""
    from runtime.aws.wake import AwsWaker

    sqs = _Queue()
    waker = AwsWaker(sqs, None, None, queue_url="q", queue_arn="a", group="g", role_arn="r", ledger=None)  # type: ignore[arg-type]
    with waker.holding() as outer:
        with waker.holding() as inner:
            waker.prompt("a")
        waker.prompt("b")
    assert (inner, outer, sqs.sent) == (["a"], ["b"], [])
