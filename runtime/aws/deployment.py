"""A deployment's AWS resources, made from the definitions the CDK stack uses, for the
harness (``runtime.aws.harness``) and tests on moto: the store's table
(``table_definition`` and its TTL attribute), the wake queue and its dead-letter queue, one
queue (and dead-letter queue) per user queue the project names, redriven after the queue's
``attempts`` as the stack does, and the Scheduler group, with the queue settings of
``runtime.aws.contract``. Making them again is harmless: what
exists is kept (a second ``CreateScheduleGroup`` would wipe the group's schedules in moto,
so the group is looked up first).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from runtime.aws.config import AwsConfig
from runtime.aws.contract import (
    MAX_RECEIVES,
    SCHEDULE_PREFIX,
    WAKE_VISIBILITY_S,
    schedule_name,
    tick_input,
    user_queue_visibility_s,
)
from runtime.engine.schedules import Schedule
from runtime.services.queues import QueueSettings
from runtime.store.dynamodb import TTL_ATTRIBUTE, table_definition
from runtime.store.items import error_code

ACCOUNT = "123456789012"  # moto's account


@dataclass(frozen=True)
class Names:
    """The physical names of one deployment's resources, from a short unique suffix."""

    suffix: str

    @property
    def table(self) -> str:
        return f"lunaflow-{self.suffix}"

    @property
    def wake_queue(self) -> str:
        return f"lunaflow-{self.suffix}-wake"

    @property
    def runner_events(self) -> str:
        """The queue standing for Lambda's event queue of the runner (``runtime.aws.runner_events``)."""
        return f"lunaflow-{self.suffix}-runner-events"

    @property
    def group(self) -> str:
        return f"lunaflow-{self.suffix}-timers"

    @property
    def bucket(self) -> str:
        return f"lunaflow-{self.suffix}-values"

    @property
    def role_arn(self) -> str:
        return f"arn:aws:iam::{ACCOUNT}:role/lunaflow-{self.suffix}-scheduler"

    @property
    def secrets_prefix(self) -> str:
        return f"lunaflow-{self.suffix}/"

    def user_queue(self, name: str) -> str:
        safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in name)
        return f"lunaflow-{self.suffix}-q-{safe}"[:80]


def _queue(sqs: Any, name: str, attributes: dict[str, str]) -> tuple[str, str]:
    try:
        url = str(sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])
    except ClientError as e:
        if error_code(e) not in ("QueueAlreadyExists", "QueueNameExists"):
            raise
        # A deploy changed the queue's settings: update it in place, as the stack does.
        url = str(sqs.get_queue_url(QueueName=name)["QueueUrl"])
        sqs.set_queue_attributes(QueueUrl=url, Attributes=attributes)
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, str(arn)


def _with_dead_letters(sqs: Any, name: str, visibility_s: int, receives: int) -> tuple[str, str]:
    """A queue whose messages go to ``<name>-dlq`` after ``receives`` deliveries."""
    _, dlq_arn = _queue(sqs, f"{name}-dlq", {"VisibilityTimeout": str(visibility_s)})
    redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(receives)})
    return _queue(sqs, name, {"VisibilityTimeout": str(visibility_s), "RedrivePolicy": redrive})


def create(clients: Any, names: Names, project: Path, queues: Mapping[str, QueueSettings]) -> AwsConfig:
    """Make (or find) the resources; returns the configuration the functions would read.
    ``queues``: every user queue the project names, with its settings, which give its
    ``maxReceiveCount`` (its attempts) and visibility timeout as in the stack
    (``infra/capabilities/queues.py``)."""
    try:
        clients.dynamodb.create_table(**table_definition(names.table))
        clients.dynamodb.update_time_to_live(
            TableName=names.table,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
        )
    except ClientError as e:
        if error_code(e) != "ResourceInUseException":
            raise
    wake_url, wake_arn = _with_dead_letters(clients.sqs, names.wake_queue, WAKE_VISIBILITY_S, MAX_RECEIVES)
    queue_urls = {
        name: _with_dead_letters(
            clients.sqs, names.user_queue(name), user_queue_visibility_s(q.retry_delay_s), q.attempts
        )[0]
        for name, q in sorted(queues.items())
    }
    try:
        clients.s3.create_bucket(Bucket=names.bucket, **_location(clients.s3))
    except ClientError as e:
        if error_code(e) not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise
    groups = {g["Name"] for g in clients.scheduler.list_schedule_groups().get("ScheduleGroups", [])}
    if names.group not in groups:
        clients.scheduler.create_schedule_group(Name=names.group)
    return AwsConfig(
        project=str(project),
        table=names.table,
        wake_queue_url=wake_url,
        wake_queue_arn=wake_arn,
        scheduler_group=names.group,
        scheduler_role_arn=names.role_arn,
        values_bucket=names.bucket,
        queue_urls=queue_urls,
        secrets_prefix=names.secrets_prefix,
    )


def runner_events_queue(sqs: Any, names: Names) -> str:
    """Make (or find) the queue the harness plays the runner's asynchronous invocations on."""
    return _queue(sqs, names.runner_events, {"VisibilityTimeout": str(WAKE_VISIBILITY_S)})[0]


def remove_queue(sqs: Any, url: str) -> None:
    try:
        sqs.delete_queue(QueueUrl=url)
    except ClientError as e:
        if error_code(e) not in ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"):
            raise


def _location(s3: Any) -> dict[str, Any]:
    region = s3.meta.region_name
    return {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}


def remove(clients: Any, config: AwsConfig) -> None:
    """Delete what ``create`` made (a harness with no data folder cleans up after itself)."""
    missing = (
        "ResourceNotFoundException",
        "AWS.SimpleQueueService.NonExistentQueue",
        "QueueDoesNotExist",
        "NoSuchBucket",
        "NoSuchKey",
    )
    calls: list[tuple[Any, dict[str, Any]]] = [
        (clients.dynamodb.delete_table, {"TableName": config.table}),
        (clients.scheduler.delete_schedule_group, {"Name": config.scheduler_group}),
    ]
    for url in [config.wake_queue_url, *config.queue_urls.values()]:
        calls += [
            (clients.sqs.delete_queue, {"QueueUrl": url}),
            (clients.sqs.delete_queue, {"QueueUrl": url + "-dlq"}),
        ]
    secrets = clients.secretsmanager.list_secrets(
        Filters=[{"Key": "name", "Values": [config.secrets_prefix]}]
    ).get("SecretList", [])
    calls += [
        (clients.secretsmanager.delete_secret, {"SecretId": x["ARN"], "ForceDeleteWithoutRecovery": True})
        for x in secrets
    ]
    s3 = clients.s3
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=config.values_bucket):
        for o in page.get("Contents", []):
            calls.append((s3.delete_object, {"Bucket": config.values_bucket, "Key": o["Key"]}))
    calls.append((s3.delete_bucket, {"Bucket": config.values_bucket}))
    for call, request in calls:
        try:
            call(**request)
        except ClientError as e:
            if error_code(e) not in missing:
                raise


def sync_schedules(clients: Any, config: AwsConfig, schedules: Mapping[str, Schedule]) -> None:
    """The declared schedules as the stack makes them (``infra/capabilities/schedules.py``):
    one per declaration, created or updated; one no longer declared is deleted, as a deploy
    removes its resource."""
    scheduler, group = clients.scheduler, config.scheduler_group
    wanted = {schedule_name(name): (name, s) for name, s in schedules.items()}
    listed = scheduler.list_schedules(GroupName=group, NamePrefix=SCHEDULE_PREFIX).get("Schedules", [])
    for summary in listed:
        if summary["Name"] not in wanted:
            scheduler.delete_schedule(Name=summary["Name"], GroupName=group)
    existing = {s["Name"] for s in listed}
    for aws_name, (name, declared) in sorted(wanted.items()):
        request: dict[str, Any] = {
            "Name": aws_name,
            "GroupName": group,
            "ScheduleExpression": declared.expression(),
            "ScheduleExpressionTimezone": declared.timezone,
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "State": "ENABLED",
            "Target": {
                "Arn": config.wake_queue_arn,
                "RoleArn": config.scheduler_role_arn,
                "Input": tick_input(name),
            },
        }
        if aws_name in existing:  # a deploy keeps a paused schedule paused
            request["State"] = scheduler.get_schedule(Name=aws_name, GroupName=group).get("State", "ENABLED")
            scheduler.update_schedule(**request)
        else:
            scheduler.create_schedule(**request)
