"""``AwsPlatform`` (issue 15.8, SPEC section 5): the LocalPlatform interface on the AWS path.

What makes it the AWS path and not a copy of the local one: the resources come from the
definitions the CDK stack uses, the Lambda handlers are called (by the names the stack
configures) with API Gateway v2 and SQS batch events, SQS delays, visibility timeouts and
Scheduler's one-time schedules follow the fake clock, and the reconcile rule runs once a
minute of it. The seed-semantics tests run on both harnesses (tests/semantics/conftest.py);
these pin the machinery.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from runtime.aws.contract import MAX_RECEIVES, USER_QUEUE_VISIBILITY_S, WAKE_VISIBILITY_S, Handler
from runtime.errors import LunaflowError
from runtime.services.queues import QueueSettings
from runtime.store.dynamodb import INDEXES, PROJECTIONS, TTL_ATTRIBUTE, table_definition
from runtime.testing import AwsPlatform

PROJECTS = Path(__file__).resolve().parents[1] / "projects"
LIMITS = PROJECTS / "aws_limits"
QUEUE = PROJECTS / "aws_queue"


def test_resources_are_made_from_the_definitions_the_stack_uses() -> None:
    with AwsPlatform(QUEUE) as p:
        table = p.clients.dynamodb.describe_table(TableName=p.config.table)["Table"]
        wanted = table_definition(p.config.table)
        assert table["KeySchema"] == wanted["KeySchema"]
        indexes = {i["IndexName"]: i for i in table["GlobalSecondaryIndexes"]}
        assert set(indexes) == set(INDEXES)
        for name, index in indexes.items():
            assert sorted(index["Projection"].get("NonKeyAttributes", [])) == sorted(PROJECTIONS[name])
        ttl = p.clients.dynamodb.describe_time_to_live(TableName=p.config.table)["TimeToLiveDescription"]
        assert ttl["AttributeName"] == TTL_ATTRIBUTE
        # The wake queue redrives after MAX_RECEIVES; a user queue after its attempts (the
        # default 3 here), as the stack sets them (issue 25: it was MAX_RECEIVES too).
        for url, visibility, receives in [(p.config.wake_queue_url, WAKE_VISIBILITY_S, MAX_RECEIVES)] + [
            (u, USER_QUEUE_VISIBILITY_S, QueueSettings().attempts) for u in p.config.queue_urls.values()
        ]:
            attributes = p.clients.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])[
                "Attributes"
            ]
            assert int(attributes["VisibilityTimeout"]) == visibility
            assert int(json.loads(attributes["RedrivePolicy"])["maxReceiveCount"]) == receives
        assert set(p.config.queue_urls) == {"orders"}
        groups = [g["Name"] for g in p.clients.scheduler.list_schedule_groups()["ScheduleGroups"]]
        assert p.config.scheduler_group in groups
        p.client("s3").head_bucket(Bucket=p.config.values_bucket)


def test_a_harness_without_a_data_folder_removes_its_resources_when_closed() -> None:
    p = AwsPlatform(LIMITS, objects=lambda *a: ["x"])
    p.start("approval", {}, id="gone")
    table, clients = p.config.table, p.clients
    p.close()
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        clients.dynamodb.describe_table(TableName=table)


def test_a_harness_opened_again_on_its_data_folder_reaches_the_same_runs(tmp_path: Path) -> None:
    with AwsPlatform(LIMITS, data_dir=tmp_path, objects=lambda *a: ["x"]) as first:
        first.start("approval", {}, id="kept")
    with AwsPlatform(LIMITS, data_dir=tmp_path, objects=lambda *a: ["x"]) as again:
        assert again.get("kept").status == "awaiting"
        assert again.signal("kept", "go", 1) is True
        assert again.get("kept").result == {"got": 1}


def test_requests_and_wakes_reach_the_handlers_by_the_names_the_stack_configures() -> None:
    seen: list[list[Handler]] = []

    def gate(*_: Any) -> list[Any]:
        seen.append(list(p.invoking))
        return ["x"]

    with AwsPlatform(LIMITS, objects=gate) as p:
        assert p.fetch("POST", "/hold/h1").status_code == 202
        assert seen == [[Handler.RUNNER]]  # the request handed the step off to the runner
        assert p.fetch("GET", "/nowhere").status_code == 404


def test_a_failed_queue_message_comes_back_after_its_retry_delay_on_the_fake_clock() -> None:
    """SQS's retry, played by the harness: a message the queue handler fails is not deleted;
    the queue function hides it for the queue's retry delay (the default 30 s, not the
    queue's visibility timeout: issue 25), and it is delivered again once that has passed
    on the fake clock, with the receive count as its attempt."""
    with AwsPlatform(QUEUE) as p:
        assert p.fetch("POST", "/send", body=json.dumps({"order": 7, "until_attempt": 2})).status_code == 202
        first = [r["fields"] for r in p.logs if r["message"] == "order"]
        assert [f["attempts"] for f in first] == [1]
        p.advance("29999ms")
        assert len([r for r in p.logs if r["message"] == "order"]) == 1
        p.advance("1ms")  # visible again at the retry delay
        assert [r["fields"]["attempts"] for r in p.logs if r["message"] == "order"] == [1, 2]


def test_schedules_fire_from_their_target_input_in_the_order_of_their_times() -> None:
    order: list[str] = []

    def gate(cls: str, key: str, *_: Any) -> list[Any]:
        order.append(key)
        return ["x"]

    with AwsPlatform(LIMITS, objects=gate) as p:
        p.start("nap", {"sleep": "2h"}, id="late")
        p.start("nap", {"sleep": "1h"}, id="early")
        assert len(p.clients.scheduler.list_schedules(GroupName=p.config.scheduler_group)["Schedules"]) == 2
        p.advance("3h")
        assert order == ["early", "late"]


def test_restart_drops_the_container_and_keeps_the_data() -> None:
    with AwsPlatform(LIMITS, objects=lambda *a: ["x"]) as p:
        p.start("approval", {}, id="r1")
        before = p.runtime
        p.restart()
        assert p.runtime is not before
        assert p.signal("r1", "go", 2) is True
        assert p.get("r1").result == {"got": 2}


def test_an_endpoint_that_is_not_a_lunaflow_moto_server_is_refused() -> None:
    with pytest.raises(LunaflowError, match="is not a lunaflow moto server"):
        AwsPlatform(LIMITS, endpoint_url="http://127.0.0.1:9")
