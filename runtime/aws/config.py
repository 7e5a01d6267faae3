"""The AWS runtime's configuration, read from environment variables when a handler is built."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from runtime.aws.contract import DEFAULT_WAKE_THREADS, MAX_WAKE_THREADS, Env
from runtime.errors import LunaflowError

# How long a request advances the runs it started or signalled (``AwsRuntime.fetch``), unless
# LUNAFLOW_EAGER_MS says otherwise; docs/reliability_limits.md.
EAGER_MS = 1_000


@dataclass(frozen=True)
class AwsConfig:
    project: str  # the project folder inside the bundle
    table: str  # the DynamoDB table of runs, journals, signals, kv and objects
    wake_queue_url: str  # SQS queue the worker Lambda consumes
    wake_queue_arn: str
    scheduler_group: str  # EventBridge Scheduler group for timers
    scheduler_role_arn: str  # the role Scheduler assumes to send to the wake queue
    values_bucket: str  # S3: journal chunks and texts too large for a DynamoDB item
    queue_urls: dict[str, str] = field(default_factory=dict)  # user queue name -> SQS URL
    secrets_prefix: str = ""  # Secrets Manager names are prefix + secret name
    database_resource_arn: str | None = None  # Aurora cluster (RDS Data API)
    database_secret_arn: str | None = None
    database_name: str | None = None
    wake_threads: int = 1  # the worker: wakes of one batch advanced at once (the stack sets 10)
    stuck_after_s: float = 900.0  # the reconciler counts runs woken this long ago as stuck
    # The fetch function advances the runs a request started or signalled for at most this
    # long (``AwsRuntime.fetch``); 0 hands every one to the worker.
    eager_ms: int = EAGER_MS
    # The runner function's ``live`` alias: the fetch function hands the runs it began and did
    # not finish to it with an asynchronous invocation, not a message on the wake queue
    # (``AwsWaker.hand_off``). None: the wake queue, as every other wake.
    runner_arn: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AwsConfig:
        env = os.environ if env is None else env

        def need(name: str) -> str:
            value = env.get(name)
            if not value:
                raise LunaflowError(
                    f"environment variable {name} is not set; the lunaflow CDK stack sets it on every "
                    "function — deploy with `cdk deploy`, or set it for a local test"
                )
            return value

        queues = json.loads(env.get(Env.QUEUE_URLS) or "{}")
        return cls(
            project=env.get(Env.PROJECT, "project"),
            table=need(Env.TABLE),
            wake_queue_url=need(Env.WAKE_QUEUE_URL),
            wake_queue_arn=need(Env.WAKE_QUEUE_ARN),
            scheduler_group=need(Env.SCHEDULER_GROUP),
            scheduler_role_arn=need(Env.SCHEDULER_ROLE_ARN),
            values_bucket=need(Env.VALUES_BUCKET),
            queue_urls={str(k): str(v) for k, v in queues.items()},
            secrets_prefix=env.get(Env.SECRETS_PREFIX, ""),
            database_resource_arn=env.get(Env.DATABASE_ARN) or None,
            database_secret_arn=env.get(Env.DATABASE_SECRET_ARN) or None,
            database_name=env.get(Env.DATABASE_NAME) or None,
            wake_threads=_threads(env.get(Env.WAKE_THREADS)),
            stuck_after_s=_stuck_after(env.get(Env.STUCK_AFTER_S)),
            eager_ms=_eager_ms(env.get(Env.EAGER_MS)),
            runner_arn=env.get(Env.RUNNER_ARN) or None,
        )


def _threads(text: str | None) -> int:
    if not text:
        return 1
    if not text.isdigit() or not 1 <= int(text) <= MAX_WAKE_THREADS:
        raise LunaflowError(
            f"environment variable {Env.WAKE_THREADS}={text!r} is not a whole number from 1 to "
            f"{MAX_WAKE_THREADS}; the lunaflow CDK stack sets it to {DEFAULT_WAKE_THREADS}"
        )
    return int(text)


def _stuck_after(text: str | None) -> float:
    if not text:
        return 900.0
    if not text.isdigit() or int(text) < 60:
        raise LunaflowError(
            f"environment variable {Env.STUCK_AFTER_S}={text!r} is not a whole number of seconds of at "
            "least 60; the lunaflow CDK stack sets it from -c stuckAfterMinutes"
        )
    return float(text)


MAX_EAGER_MS = 10_000  # a request waits for its runs' activations at most this long


def _eager_ms(text: str | None) -> int:
    if not text:
        return EAGER_MS
    if not text.isdigit() or int(text) > MAX_EAGER_MS:
        raise LunaflowError(
            f"environment variable {Env.EAGER_MS}={text!r} is not a whole number of milliseconds from 0 "
            f"to {MAX_EAGER_MS}; the lunaflow CDK stack sets it from -c eagerMs (0 hands every start and "
            "signal to the worker)"
        )
    return int(text)
