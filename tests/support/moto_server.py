"""Helpers for the AWS lease, race and duplicate-delivery tests (moto).

``aws_world()`` builds the AWS side of one deployment under moto: the store's table, the
wake queue, a Scheduler group and an ``AwsConfig`` for a project. ``World.runtime()`` makes
an ``AwsRuntime`` (one Lambda container); ``Postman`` stands in for SQS and EventBridge
Scheduler delivering wakes to the worker handler, at the fake clock's time (moto never
fires schedules, and its SQS delays follow real time).

``moto_server()`` serves the same moto backends over HTTP from a thread, with one lock
around the WSGI app: moto's conditional writes are not atomic under concurrent requests
(FACTS.md), and the race tests are about lunaflow's conditions, not moto's.
"""

from __future__ import annotations

import json
import os
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3

from runtime.aws.config import AwsConfig
from runtime.aws.runtime import AwsRuntime, Clients
from runtime.core.clock import Clock, now_ms
from runtime.core.journal import Entry
from runtime.store.dynamodb import RUN_SK, run_pk, table_definition

REGION = "eu-west-1"
ACCOUNT = "123456789012"  # moto's default account
PROJECTS = Path(__file__).resolve().parents[1] / "projects"
FAKE_ENV = {
    "AWS_DEFAULT_REGION": REGION,
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    # Powertools outside Lambda: no X-Ray, no metric namespace warnings on stdout.
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_NAMESPACE": "lunaflow-tests",
}


@contextmanager
def fake_credentials() -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in FAKE_ENV}
    os.environ.update(FAKE_ENV)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# --- one deployment -----------------------------------------------------------------------


@dataclass
class World:
    """The AWS resources of one lunaflow deployment, under moto (in-process or a server)."""

    project: Path
    endpoint: str | None = None
    suffix: str = field(default_factory=lambda: uuid.uuid4().hex[:8])

    def __post_init__(self) -> None:
        self.table = f"lunaflow-{self.suffix}"
        self.group = f"lunaflow-{self.suffix}"
        admin = self.client("dynamodb")
        admin.create_table(**table_definition(self.table))
        sqs = self.client("sqs")
        self.queue_name = f"lunaflow-wake-{self.suffix}"
        self.queue_url = sqs.create_queue(QueueName=self.queue_name)["QueueUrl"]
        self.queue_arn = sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        self.bucket = f"lunaflow-{self.suffix}-values"
        self.client("s3").create_bucket(
            Bucket=self.bucket, CreateBucketConfiguration={"LocationConstraint": REGION}
        )
        scheduler = self.client("scheduler")
        existing = [g["Name"] for g in scheduler.list_schedule_groups()["ScheduleGroups"]]
        if self.group not in existing:  # a second create wipes the group's schedules (FACTS.md)
            scheduler.create_schedule_group(Name=self.group)
        self.config = AwsConfig(
            project=str(self.project),
            table=self.table,
            wake_queue_url=self.queue_url,
            wake_queue_arn=self.queue_arn,
            scheduler_group=self.group,
            scheduler_role_arn=f"arn:aws:iam::{ACCOUNT}:role/lunaflow-scheduler",
            values_bucket=self.bucket,
            secrets_prefix=f"lunaflow-{self.suffix}/",
        )

    def client(self, service: str) -> Any:
        return boto3.client(service, region_name=REGION, endpoint_url=self.endpoint)

    def clients(self) -> Clients:
        return Clients(
            dynamodb=self.client("dynamodb"),
            sqs=self.client("sqs"),
            scheduler=self.client("scheduler"),
            secretsmanager=self.client("secretsmanager"),
            s3=self.client("s3"),
        )

    def runtime(self, clock: Clock | None = None, owner: str | None = None) -> AwsRuntime:
        """A fresh Lambda container: its own clients, Lua state and coroutine cache."""
        return AwsRuntime(self.config, self.clients(), clock=clock, owner=owner)

    def run_item(self, run_id: str) -> dict[str, Any]:
        item = self.client("dynamodb").get_item(
            TableName=self.table, Key={"pk": {"S": run_pk(run_id)}, "sk": {"S": RUN_SK}}, ConsistentRead=True
        )
        return dict(item.get("Item") or {})

    def object_state(self, cls: str, key: str) -> Any:
        item = (
            self.client("dynamodb")
            .get_item(
                TableName=self.table, Key={"pk": {"S": f"OBJ#{cls}"}, "sk": {"S": key}}, ConsistentRead=True
            )
            .get("Item")
        )
        return None if item is None or "state" not in item else json.loads(item["state"]["S"])


@contextmanager
def aws_world(project: str | Path) -> Iterator[World]:
    """A deployment on in-process moto (``mock_aws``)."""
    from moto import mock_aws

    with fake_credentials(), mock_aws():
        yield World(Path(project))


# --- moto over HTTP, one request at a time --------------------------------------------------


class _Serialized:
    """A WSGI app that handles one request at a time: the response body is read inside the
    lock, so no two requests ever interleave inside moto."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with self.lock:
            result = self.app(environ, start_response)
            try:
                return [bytes(chunk) for chunk in result]
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()


@contextmanager
def moto_server() -> Iterator[str]:
    """``ThreadedMotoServer(port=0)`` with its app wrapped in one lock; yields the endpoint URL."""
    from moto.server import ThreadedMotoServer

    with fake_credentials():
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        wsgi = server._server  # werkzeug's server; its .app is moto's dispatcher
        assert wsgi is not None
        wsgi.app = _Serialized(wsgi.app)
        host, port = server.get_host_and_port()
        try:
            yield f"http://{host}:{port}"
        finally:
            server.stop()


# --- delivering wakes at the fake clock's time -------------------------------------------


@dataclass
class Delivery:
    message_id: str
    body: str
    at_ms: int = 0  # when SQS or Scheduler hands it over, on the fake clock

    @property
    def run_id(self) -> str:
        return str(json.loads(self.body)["run_id"])

    @property
    def due_ms(self) -> int | None:
        due = json.loads(self.body).get("due_ms")
        return None if due is None else int(due)


class FakeLambdaContext:
    function_name = "lunaflow-worker"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:lunaflow-worker"
    log_group_name = "/aws/lambda/lunaflow-worker"
    log_stream_name = "stream"

    def __init__(self) -> None:
        self.aws_request_id = str(uuid.uuid4())

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def sqs_event(world: World, deliveries: list[Delivery], receive_count: int = 1) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": d.message_id,
                "receiptHandle": f"rh-{uuid.uuid4().hex}",
                "body": d.body,
                "attributes": {
                    "ApproximateReceiveCount": str(receive_count),
                    "SentTimestamp": "1767225600000",
                    "SenderId": "AIDAEXAMPLE",
                    "ApproximateFirstReceiveTimestamp": "1767225600000",
                },
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": world.queue_arn,
                "awsRegion": REGION,
            }
            for d in deliveries
        ]
    }


class Postman:
    """SQS and Scheduler, driven by hand on the fake clock. ``collect(now)`` takes every wake
    message out of the queue (delayed ones too, through moto's backend) and the schedules
    due by ``now``; ``due(now)`` hands back those whose time has come: a timer message at its
    ``due_ms``, any other after its ``DelaySeconds`` counted from when it was collected."""

    _AT = re.compile(r"^at\((\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\)$")

    def __init__(self, world: World) -> None:
        self.world = world
        self.held: list[Delivery] = []
        self.sent: list[Delivery] = []  # everything collected, for assertions

    def collect(self, now: int) -> None:
        """Take every message out of the wake queue, and the schedules due by ``now``
        (later ones stay: the engine may still move or delete them)."""
        from moto.sqs.models import sqs_backends

        queue = sqs_backends[ACCOUNT][REGION].queues[self.world.queue_name]
        with queue._messages_lock:
            messages = list(queue._messages)
            queue._messages.clear()
        found = []
        for m in messages:
            delay_ms = max(0, int(m.delayed_until) - int(m.sent_timestamp or 0)) if m.delayed_until else 0
            due = json.loads(m.body).get("due_ms")
            found.append(Delivery(m.id, m.body, int(due) if due is not None else now + delay_ms))
        scheduler = self.world.client("scheduler")
        for summary in scheduler.list_schedules(GroupName=self.world.group)["Schedules"]:
            schedule = scheduler.get_schedule(Name=summary["Name"], GroupName=self.world.group)
            match = self._AT.match(schedule["ScheduleExpression"])
            assert match, schedule["ScheduleExpression"]
            fires_ms = int(datetime.fromisoformat(match.group(1)).replace(tzinfo=UTC).timestamp() * 1000)
            if fires_ms > now:
                continue
            # ActionAfterCompletion=DELETE: a one-time schedule goes once it fires.
            scheduler.delete_schedule(Name=summary["Name"], GroupName=self.world.group)
            body = schedule["Target"]["Input"]
            assert json.loads(body)["due_ms"] <= fires_ms
            found.append(Delivery(f"sched-{uuid.uuid4().hex[:12]}", body, fires_ms))
        self.held += found
        self.sent += found

    def due(self, now: int) -> list[Delivery]:
        self.collect(now)
        ready = [d for d in self.held if d.at_ms <= now]
        self.held = [d for d in self.held if d not in ready]
        return ready


def deliver(world: World, rt: AwsRuntime, deliveries: list[Delivery], receive_count: int = 1) -> Any:
    """Call the worker Lambda's handler with these SQS records, with ``rt`` as its container."""
    import functions._runtime
    from functions import worker

    functions._runtime._runtime = rt
    try:
        return worker.handler(sqs_event(world, deliveries, receive_count), FakeLambdaContext())
    finally:
        functions._runtime.reset()


def settle(world: World, rt: AwsRuntime, postman: Postman, clock: Clock, limit: int = 100) -> int:
    """Deliver due wakes one batch at a time until none is due; returns the batches delivered."""
    for n in range(limit):
        batch = postman.due(now_ms(clock))
        if not batch:
            return n
        result = deliver(world, rt, batch)
        assert result == {"batchItemFailures": []}, result
    raise AssertionError("wakes kept coming after 100 batches")


def journal_dicts(entries: list[Entry]) -> list[dict[str, Any]]:
    return [e.as_dict() for e in entries]
