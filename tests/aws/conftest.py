"""moto fixtures for the AWS runtime's handlers.

``aws`` builds, inside ``mock_aws``: the store's table (``table_definition``), the wake
queue, the Scheduler group, one user queue (``orders``) with its dead-letter queue, and the
``LUNAFLOW_*`` environment ``AwsConfig.from_env`` reads. ``make_runtime(project)`` builds the
container's ``AwsRuntime`` from that environment with a fake clock and injects it where the
handlers find it (``functions._runtime._runtime``). ``objects_table`` is a bare table named
``objects`` for the object-state tests.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

import functions._runtime as container
from runtime.aws.config import AwsConfig
from runtime.aws.observe import PowertoolsObserver
from runtime.aws.runtime import AwsRuntime, Clients
from runtime.core.clock import FakeClock
from runtime.store.dynamodb import table_definition
from tests.support.aws_events import BUCKET, GROUP, ROLE_ARN, TABLE, USER_QUEUES, WAKE_QUEUE, FakeRdsData
from tests.support.aws_world import REGION, AwsWorld


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[AwsWorld]:
    for name, value in {
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SECURITY_TOKEN": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "POWERTOOLS_TRACE_DISABLED": "1",
        "POWERTOOLS_METRICS_NAMESPACE": "lunaflow",
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_LAMBDA_FUNCTION_NAME"):
        monkeypatch.delenv(name, raising=False)
    with mock_aws():
        db = boto3.client("dynamodb", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        scheduler = boto3.client("scheduler", region_name=REGION)
        sm = boto3.client("secretsmanager", region_name=REGION)
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
        db.create_table(**table_definition(TABLE))

        def make_queue(name: str, **attributes: str) -> tuple[str, str]:
            url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
            arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
                "QueueArn"
            ]
            return url, arn

        wake_url, wake_arn = make_queue(WAKE_QUEUE, VisibilityTimeout="30")
        user_queues = {}
        for name, physical in USER_QUEUES.items():
            _, dlq_arn = make_queue(physical + "-dlq")
            url, arn = make_queue(
                physical,
                VisibilityTimeout="30",
                RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "3"}),
            )
            user_queues[name] = (physical, url, arn)
        # A second create of an existing group would wipe its schedules in moto: check first.
        groups = {g["Name"] for g in scheduler.list_schedule_groups().get("ScheduleGroups", [])}
        if GROUP not in groups:
            scheduler.create_schedule_group(Name=GROUP)
        env = {
            "LUNAFLOW_TABLE": TABLE,
            "LUNAFLOW_WAKE_QUEUE_URL": wake_url,
            "LUNAFLOW_WAKE_QUEUE_ARN": wake_arn,
            "LUNAFLOW_SCHEDULER_GROUP": GROUP,
            "LUNAFLOW_SCHEDULER_ROLE_ARN": ROLE_ARN,
            "LUNAFLOW_QUEUE_URLS": json.dumps({name: q[1] for name, q in user_queues.items()}),
            "LUNAFLOW_SECRETS_PREFIX": "lunaflow/test/",
            "LUNAFLOW_VALUES_BUCKET": BUCKET,
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        yield AwsWorld(
            dynamodb=db,
            sqs=sqs,
            scheduler=scheduler,
            secretsmanager=sm,
            table=TABLE,
            wake_queue=WAKE_QUEUE,
            wake_url=wake_url,
            wake_arn=wake_arn,
            group=GROUP,
            role_arn=ROLE_ARN,
            user_queues=user_queues,
            env=env,
        )
    container.reset()


@pytest.fixture
def make_runtime(aws: AwsWorld, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., AwsRuntime]]:
    """make_runtime(project, rds=None, clock=None): the container's runtime, built from the
    environment (LUNAFLOW_PROJECT set to the project) and injected for the handlers."""

    def make(
        project: Path | str, *, rds: FakeRdsData | None = None, clock: FakeClock | None = None
    ) -> AwsRuntime:
        monkeypatch.setenv("LUNAFLOW_PROJECT", str(project))
        if rds is not None:
            monkeypatch.setenv("LUNAFLOW_DATABASE_ARN", rds.resource_arn)
            monkeypatch.setenv("LUNAFLOW_DATABASE_SECRET_ARN", rds.secret_arn)
        clients = Clients(
            dynamodb=aws.dynamodb,
            sqs=aws.sqs,
            scheduler=aws.scheduler,
            secretsmanager=aws.secretsmanager,
            s3=boto3.client("s3", region_name=REGION),
            rds_data=rds,
        )
        rt = AwsRuntime(
            AwsConfig.from_env(),
            clients,
            clock=clock or FakeClock(),
            observer=PowertoolsObserver(container.logger, container.metrics),
        )
        # A Lambda keeps no history of the scripts' log lines (nothing reads one there);
        # these tests read them.
        rt.platform.logs.keep = True
        container._runtime = rt
        return rt

    yield make
    container.reset()


@pytest.fixture
def objects_table() -> Iterator[Any]:
    """A DynamoDB client (in-process moto) with one store table, ``objects``."""
    with mock_aws():
        db = boto3.client("dynamodb", region_name=REGION)
        db.create_table(**table_definition("objects"))
        yield db
