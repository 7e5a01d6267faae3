"""A queue message the queue function fails for a reason of its own is never swallowed
(issue 25): under ``AwsPlatform`` every failed delivery raised ``EngineBug: the AWS runtime
runs without its AWS services``, the batch response counted it as the handler's failure, and
the test saw only a retry that came six minutes late.

The platform's error here is SQS unreachable when the function hides a failed message for
its retry delay (``ChangeMessageVisibility``): a handler's own error is a retry, this is not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from runtime.testing import AwsPlatform, DeliveryFailed

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "seed_queues"


@pytest.fixture
def p(tmp_path: Path) -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT, data_dir=tmp_path / "data") as platform:
        yield platform


def unreachable(p: AwsPlatform, operation: str) -> None:
    def fail(**_: Any) -> None:
        raise EndpointConnectionError(endpoint_url=p.endpoint)

    p.clients.sqs.meta.events.register(f"before-call.sqs.{operation}", fail)


def send(p: AwsPlatform, queue: str) -> None:
    p.fetch("POST", "/", body=json.dumps({"queue": queue, "body": {"n": 1}}))


def test_a_platform_error_in_the_queue_function_fails_the_harness_call_loudly(p: AwsPlatform) -> None:
    unreachable(p, "ChangeMessageVisibility")
    failed = r"queue tuned message .*: delivering it failed: Could not connect"
    with pytest.raises(DeliveryFailed, match=failed):
        send(p, "tuned")


def test_a_handlers_own_error_is_a_retry_not_a_harness_failure(p: AwsPlatform) -> None:
    send(p, "tuned")
    p.advance("1m")
    assert [r["fields"]["attempts"] for r in p.logs if r.get("message") == "delivered"] == [1, 2, 3, 4, 5]


def test_strict_false_leaves_the_message_to_sqs_and_keeps_the_error_in_the_log(tmp_path: Path) -> None:
    with AwsPlatform(PROJECT, data_dir=tmp_path / "data", strict=False) as p:
        unreachable(p, "ChangeMessageVisibility")
        send(p, "tuned")
        errors = [r for r in p.logs if r.get("level") == "error"]
        assert len(errors) == 1 and "delivering it failed" in errors[0]["message"], errors
        assert errors[0]["traceback"] and errors[0]["queue"] == "tuned"


def test_a_deploy_that_changes_a_queues_settings_changes_its_redrive_and_delay(
    tmp_path: Path, p: AwsPlatform
) -> None:
    """The harness's user queues follow the project's settings (issue 25), so a deploy that
    changes them updates the queues, as `cdk deploy` does, instead of failing on the queue
    that exists."""
    import shutil

    changed = tmp_path / "changed"
    shutil.copytree(PROJECT, changed)
    toml = changed / "lunaflow.toml"
    toml.write_text(
        toml.read_text(encoding="utf-8").replace(
            'attempts = 5\nretry_delay = "10s"', 'attempts = 2\nretry_delay = "1m"'
        ),
        encoding="utf-8",
    )
    p.deploy(changed)
    start = p.now
    send(p, "tuned")
    p.advance("1h")
    delivered = [r["fields"] for r in p.logs if r.get("message") == "delivered"]
    assert [(f["attempts"], round(f["at"] - start)) for f in delivered] == [(1, 0), (2, 60)]
    url = p.config.queue_urls["tuned"]
    attributes = p.clients.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert int(json.loads(attributes["RedrivePolicy"])["maxReceiveCount"]) == 2
