"""The names the CDK stack and the AWS runtime share, defined once: the environment
variables the stack sets on every function, the stack outputs the CLI's ``--aws`` reads,
the CloudWatch namespace, service and metric names, and the log retention.

``infra/`` imports these to write them; ``runtime/aws/`` imports them to read them. A name
changed here changes on both sides at once.
"""

from __future__ import annotations

import math
import re
from enum import StrEnum


class Env(StrEnum):
    """Environment variables of every lunaflow function."""

    PROJECT = "LUNAFLOW_PROJECT"  # the project folder inside the bundle
    TABLE = "LUNAFLOW_TABLE"
    WAKE_QUEUE_URL = "LUNAFLOW_WAKE_QUEUE_URL"
    WAKE_QUEUE_ARN = "LUNAFLOW_WAKE_QUEUE_ARN"
    SCHEDULER_GROUP = "LUNAFLOW_SCHEDULER_GROUP"
    SCHEDULER_ROLE_ARN = "LUNAFLOW_SCHEDULER_ROLE_ARN"
    VALUES_BUCKET = "LUNAFLOW_VALUES_BUCKET"  # S3: texts too large for an item
    QUEUE_URLS = "LUNAFLOW_QUEUE_URLS"  # JSON: user queue name -> SQS URL
    SECRETS_PREFIX = "LUNAFLOW_SECRETS_PREFIX"
    DATABASE_ARN = "LUNAFLOW_DATABASE_ARN"
    DATABASE_SECRET_ARN = "LUNAFLOW_DATABASE_SECRET_ARN"
    DATABASE_NAME = "LUNAFLOW_DATABASE_NAME"
    CODE_DIGEST = "LUNAFLOW_CODE_DIGEST"  # the deploy gate's: which code its bundle holds
    WAKE_THREADS = "LUNAFLOW_WAKE_THREADS"  # the worker: wakes of one batch advanced at once
    STUCK_AFTER_S = "LUNAFLOW_STUCK_AFTER_S"  # the reconciler: a run woken this long ago is stuck
    EAGER_MS = "LUNAFLOW_EAGER_MS"  # the fetch function: how long a request advances its runs
    RUNNER_ARN = "LUNAFLOW_RUNNER_ARN"  # the fetch function: the runner's alias, which it invokes


class Output(StrEnum):
    """Stack outputs (``cdk deploy`` prints them; ``lunaflow ... --aws`` reads them)."""

    API_URL = "ApiUrl"
    TABLE_NAME = "TableName"
    DASHBOARD_URL = "DashboardUrl"
    WAKE_QUEUE_URL = "WakeQueueUrl"
    WAKE_QUEUE_ARN = "WakeQueueArn"
    SCHEDULER_GROUP = "SchedulerGroup"
    SCHEDULER_ROLE_ARN = "SchedulerRoleArn"
    VALUES_BUCKET = "ValuesBucket"


# What the CLI needs of a deployed stack to reach its runs.
REQUIRED_OUTPUTS = (
    Output.TABLE_NAME,
    Output.WAKE_QUEUE_URL,
    Output.WAKE_QUEUE_ARN,
    Output.SCHEDULER_GROUP,
    Output.SCHEDULER_ROLE_ARN,
    Output.VALUES_BUCKET,
)

NAMESPACE = "lunaflow"  # CloudWatch metrics namespace
SERVICE = "lunaflow"  # the Powertools service dimension and logger name


class Metric(StrEnum):
    """The metrics the runtime emits and the dashboard and alarms read."""

    RUNS_STARTED = "RunsStarted"
    RUNS_COMPLETED = "RunsCompleted"
    RUNS_FAILED = "RunsFailed"
    STEPS_SUCCEEDED = "StepsSucceeded"
    STEPS_FAILED = "StepsFailed"
    STEP_RETRIES = "StepRetries"
    SIGNAL_TO_RESUME_LATENCY = "SignalToResumeLatency"
    WAKE_FAILURES = "WakeFailures"  # wake records the worker failed (SQS retries them; the reconciler heals)
    STUCK_RUNS = "StuckRuns"  # runs the reconciler found woken long ago and still not moving


# The AWS services a Lambda handler makes clients for (runtime.aws.runtime.Clients); the
# bundle keeps botocore's models of these alone.
CLIENT_SERVICES = ("dynamodb", "sqs", "scheduler", "secretsmanager", "s3", "rds-data")
# Made on first use, not at a cold start: only the fetch function calls it (its hand-offs to
# the runner, runtime.aws.wake.AwsWaker.hand_off).
LAZY_CLIENT_SERVICES = ("lambda",)

LOG_RETENTION_DAYS = 30  # every function's and the API's log group


class Handler(StrEnum):
    """Each function's handler, as the stack configures it and as Lambda (or the harness,
    ``runtime.aws.harness``) resolves it: a module path and a function name."""

    FETCH = "functions.fetch.handler"
    WORKER = "functions.worker.handler"
    RUNNER = "functions.runner.handler"
    QUEUE = "functions.queue.handler"
    CONSOLE = "functions.console.handler"
    GATE = "functions.gate.handler"


# Timeouts and the wake path's queue settings: the stack writes them, the runtime plans by
# them (a worker invocation's deadline, the longest step it can run, when a failed wake
# comes back), and the harness builds its queues from them.
WORKER_TIMEOUT_S = 900  # Lambda's limit: a step may run up to almost all of it
FETCH_TIMEOUT_S = 29  # API Gateway's integration limit (30 s) less a second
QUEUE_TIMEOUT_S = 60
CONSOLE_TIMEOUT_S = 30
# The worker advances the wakes of one SQS batch (up to 10) at once, a Lua state each, so
# branches (child runs) woken together overlap within an invocation as across invocations.
# Each code version's files in the values bucket (runtime/aws/versions.py): what a run
# pinned to older code is loaded from.
CODE_PREFIX = "code/"
DEFAULT_WAKE_THREADS = 10
MAX_WAKE_THREADS = 10
# The deploy gate (functions/gate.py): Lambda's limit; it stops replaying GATE_MARGIN_S before
# it, to answer CloudFormation in time. Its custom resource waits GATE_SERVICE_TIMEOUT_S.
GATE_TIMEOUT_S = 900
GATE_MARGIN_S = 30
GATE_SERVICE_TIMEOUT_S = 960
GATE_THREADS = 16
GATE_LOGICAL_ID = "lunaflow-deploy-gate"  # the check resource's physical id, stable across updates
WAKE_VISIBILITY_S = 6 * WORKER_TIMEOUT_S  # AWS's advice for SQS event sources: 6x the timeout
USER_QUEUE_VISIBILITY_S = 6 * QUEUE_TIMEOUT_S
MAX_RECEIVES = 5  # deliveries of a wake before it goes to its dead-letter queue
DLQ_RETENTION_DAYS = 14
RECONCILE_MINUTES = 1
RECONCILE_EVENT = {"lunaflow": "reconcile"}  # what the reconcile rule sends the worker
# What the same rule sends the runner: it builds its runtime (the project's code loaded) and
# returns, so one container stays warm as the worker's does, for a hand-off at low traffic.
WARM_EVENT = {"lunaflow": "warm"}


def user_queue_visibility_s(retry_delay_s: float) -> int:
    """A user queue's visibility timeout: the usual one, or the queue's retry delay where that
    is longer, so a message whose invocation crashed waits as long as one that failed. (A
    user queue's ``maxReceiveCount`` is its ``attempts``: the stack and the harness both
    write it from the project's settings.)"""
    return max(USER_QUEUE_VISIBILITY_S, math.ceil(retry_delay_s))


# Declared schedules (``schedule "name" {...}``): one EventBridge Scheduler schedule each, in
# the timers' group, sending ``tick_input`` to the wake queue; the worker starts the tick's
# run. Scheduler fills in the tick's time (its context attribute) when it sends.
SCHEDULE_PREFIX = "lfs-"  # timers are lf-<hash>: the two never share a name
TIMER_PREFIX = "lf-"  # a run's timer schedule (runtime/aws/wake.py), the only ones functions make
TICK_TIME = "<aws.scheduler.scheduled-time>"


def schedule_name(name: str) -> str:
    """A Scheduler name (letters, digits, ``-_.``, at most 64) for a declared schedule:
    the name where it fits, else a hash of it."""
    import hashlib
    import re

    if re.fullmatch(r"[0-9A-Za-z_.-]{1,60}", name):
        return SCHEDULE_PREFIX + name
    return SCHEDULE_PREFIX + "h" + hashlib.sha256(name.encode()).hexdigest()[:40]


def tick_input(name: str) -> str:
    """What the schedule sends the wake queue: the worker tells it from a wake by its key."""
    import json

    return json.dumps({"schedule": name, "tick": TICK_TIME}, separators=(",", ":"))


def stack_name(project_folder: str) -> str:
    """The stack a project deploys as, and the one ``--aws`` looks for: lunaflow-<folder>,
    with what CloudFormation refuses in a stack name made '-' (``my_shop`` deploys as
    ``lunaflow-my-shop``: the CLI once looked for ``lunaflow-my_shop``)."""
    cleaned = re.sub(r"[^A-Za-z0-9-]", "-", project_folder).strip("-") or "project"
    return f"lunaflow-{cleaned}"[:128]
