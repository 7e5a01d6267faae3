"""Properties of the synthesized stack: what each resource is allowed to do and what it is
wired to, read from the template `cdk synth` writes (never resource counts).

SPEC: "Lambda handlers replay a run per invocation from a DynamoDB journal, EventBridge
Scheduler entries implement sleeps and timeouts, API Gateway carries fetch routes and
signals, CloudWatch is the console, and CDK provisions everything."
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App
from aws_cdk.assertions import Match

from conftest import QUEUE_PROJECT, TINY_REQUIREMENTS, Synth, as_list, render
from infra import constants
from infra.app import build
from runtime.aws.config import AwsConfig
from runtime.aws.contract import LOG_RETENTION_DAYS, NAMESPACE, WARM_EVENT, Metric
from runtime.aws.wake import AwsWaker
from runtime.core.clock import FakeClock
from runtime.core.journal import Status
from runtime.store.dynamodb import table_definition
from tests.support.aws_world import FakeContext

XRAY = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
RECEIVE = {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"}
# What CDK's grant_send_messages gives: the send, and two reads of the queue's own metadata.
SEND = {"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}
ACCOUNT_ARN = "arn:<Ref:AWS::Partition>:{service}:<Ref:AWS::Region>:<Ref:AWS::AccountId>:{resource}"


def arn(service: str, resource: str) -> str:
    return ACCOUNT_ARN.format(service=service, resource=resource)


def allows(statements: list[dict[str, Any]], action: str, resource: str) -> bool:
    return any(
        s["Effect"] == "Allow" and action in as_list(s["Action"]) and resource in as_list(s["Resource"])
        for s in statements
    )


def live(synth: Synth, role: str) -> str:
    """The ``<Ref:...>`` of a function's ``live`` alias, which everything invoking project code
    invokes (the deploy gate moves it; tests/infra/test_deploy_gate.py)."""
    return f"<Ref:{synth.id(synth.stack.functions.live[role])}>"


def live_name(synth: Synth, role: str) -> str:
    """The alias as an event source mapping names it: <function name>:live."""
    return f"{{'Fn::Select': [6, {{'Fn::Split': [':', '{live(synth, role)}']}}]}}:live"


def runner_live(synth: Synth, ids: Ids) -> str:
    """The runner's ``live`` alias as fetch names it: the function's ARN and the alias."""
    return f"<GetAtt:{ids.functions['Runner']}.Arn>:live"


def environment(synth: Synth, function_id: str) -> dict[str, str]:
    env: dict[str, str] = synth.props(function_id)["Environment"]["Variables"]
    return env


class Ids:
    """Logical ids of the auction stack's resources, found through the construct tree."""

    def __init__(self, synth: Synth) -> None:
        stack = synth.stack
        self.table = synth.id(stack.journal.table)
        self.bucket = synth.id(stack.values.bucket)
        self.wake = synth.id(stack.wake.queue)
        self.wake_dlq = synth.id(stack.wake.dead_letters)
        self.scheduler_role = synth.id(stack.wake.role)
        self.group = synth.id(stack.wake.group)
        self.group_name = synth.props(self.group)["Name"]
        assert stack.database is not None, "examples/auction declares database 'sales'"
        self.cluster = synth.id(stack.database.cluster)
        self.cluster_secret = synth.id(stack.database.cluster.secret)  # type: ignore[arg-type]
        self.functions = synth.functions()
        self.schedules = arn("scheduler", f"schedule/{self.group_name}/lf-*")  # runs' timers only
        self.cluster_arn = arn("rds", f"cluster:<Ref:{self.cluster}>")


@pytest.fixture(scope="module")
def ids(auction: Synth) -> Ids:
    return Ids(auction)


# --- functions ------------------------------------------------------------------------------


def test_every_function_runs_python_312_on_arm64(auction: Synth, ids: Ids) -> None:
    """The bundle holds lupa's aarch64 cp312 wheel: every function must be arm64 + python3.12,
    with its handler in the bundle's functions/ package (no queue function: the auction has
    no queue)."""
    assert set(ids.functions) == {"Fetch", "Worker", "Runner", "Console"}
    for name, fn in ids.functions.items():
        auction.assertions.has_resource_properties(
            "AWS::Lambda::Function",
            Match.object_like(
                {
                    "FunctionName": Match.absent(),
                    "Architectures": ["arm64"],
                    "Runtime": "python3.12",
                    "Handler": f"functions.{name.lower()}.handler",
                    "Role": {"Fn::GetAtt": [auction.function_role(fn), "Arn"]},
                }
            ),
        )
        props = auction.props(fn)
        assert props["Architectures"] == ["arm64"], name
        assert props["Runtime"] == "python3.12", name
    gate = auction.id(auction.stack.gate.function)
    assert (
        auction.props(gate)["Architectures"] == ["arm64"] and auction.props(gate)["Runtime"] == "python3.12"
    )
    assert set(auction.of_type("AWS::Lambda::Function")) == {*ids.functions.values(), gate}


def test_every_function_logs_to_its_own_group_with_a_retention(auction: Synth, ids: Ids) -> None:
    """Logs are the console's log-query source; a group without retention grows forever."""
    groups = set()
    for fn in ids.functions.values():
        group = auction.props(fn)["LoggingConfig"]["LogGroup"]
        assert group.startswith("<Ref:"), group
        logical = group[len("<Ref:") : -1]
        assert auction.resource(logical)["Type"] == "AWS::Logs::LogGroup"
        assert auction.props(logical)["RetentionInDays"] == LOG_RETENTION_DAYS
        groups.add(logical)
    assert len(groups) == len(ids.functions)


def test_every_function_has_the_configuration_the_runtime_reads(auction: Synth, ids: Ids) -> None:
    """AwsConfig.from_env (what a handler builds its runtime from) accepts every function's
    environment, and each value names this stack's resource."""
    for name, fn in ids.functions.items():
        config = AwsConfig.from_env(environment(auction, fn))
        assert config.project == "project", name  # the bundle's project/ folder
        assert config.table == f"<Ref:{ids.table}>", name
        assert config.wake_queue_url == f"<Ref:{ids.wake}>", name
        assert config.wake_queue_arn == f"<GetAtt:{ids.wake}.Arn>", name
        assert config.scheduler_group == ids.group_name, name
        assert config.scheduler_role_arn == f"<GetAtt:{ids.scheduler_role}.Arn>", name
        assert config.values_bucket == f"<Ref:{ids.bucket}>", name
        assert config.secrets_prefix == f"{auction.name}/", name
        if name == "Console":
            # It runs no project code; told of the database, its runtime would check the
            # migrations at start through the Data API, which its role may not call.
            assert config.database_resource_arn is None and config.database_name is None, name
            assert config.database_secret_arn is None, name
        else:
            assert config.database_resource_arn == ids.cluster_arn, name
            assert config.database_secret_arn == f"<Ref:{ids.cluster_secret}>", name
            assert config.database_name == "sales", name
        assert environment(auction, fn)["POWERTOOLS_METRICS_NAMESPACE"] == NAMESPACE
        # Only the worker advances runs; it takes a batch's wakes at once (issue 27.2).
        assert config.wake_threads == (10 if name == "Worker" else 1), name


def test_every_function_policy_names_only_this_stacks_resources(auction: Synth, ids: Ids) -> None:
    """Least privilege: each grant names the table (and its indexes), the values bucket's run
    objects, the wake queue, this stack's schedule group or its declared schedules, the
    Scheduler role, the cluster or its secret; '*' only for X-Ray, which has no
    resource-level permissions."""
    allowed = {
        *(f"<GetAtt:{declared}.Arn>" for declared in auction.of_type("AWS::Scheduler::Schedule")),
        f"<GetAtt:{ids.table}.Arn>",
        f"<GetAtt:{ids.table}.Arn>/index/*",
        f"<GetAtt:{ids.bucket}.Arn>/runs/*",
        f"<GetAtt:{ids.bucket}.Arn>/code/*",
        f"<GetAtt:{ids.wake}.Arn>",
        ids.schedules,
        f"<GetAtt:{ids.scheduler_role}.Arn>",
        ids.cluster_arn,
        f"<Ref:{ids.cluster_secret}>",
        runner_live(auction, ids),
    }
    for name, fn in ids.functions.items():
        statements = auction.function_statements(fn)
        assert statements, name
        for s in statements:
            assert s["Effect"] == "Allow", (name, s)
            resources = as_list(s["Resource"])
            if resources == ["*"]:
                assert set(as_list(s["Action"])) <= XRAY, (name, s)
                continue
            assert set(resources) <= allowed, (name, s)
            assert not any(a.endswith("*") for a in as_list(s["Action"])), (name, s)
        role = auction.props(auction.function_role(fn))
        managed = [m for m in role.get("ManagedPolicyArns", [])]
        assert managed == [
            "arn:<Ref:AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
        ]


def test_every_function_may_make_the_calls_the_runtime_makes(auction: Synth, ids: Ids) -> None:
    """The AWS calls in runtime/aws and runtime/store/dynamodb.py, each on the resource it
    targets: a missing grant is an AccessDenied in production that moto never shows. The
    worker and fetch (a request's eager activation: tests/aws/test_eager.py) park runs (set
    timer schedules, pass the Scheduler role); only the worker reads the wake queue's
    backlog; every function may drop a schedule (a cancel)."""
    table = f"<GetAtt:{ids.table}.Arn>"
    core = [
        *[
            (f"dynamodb:{a}", table)
            for a in ("GetItem", "BatchGetItem", "PutItem", "UpdateItem", "DeleteItem", "Query")
        ],
        ("dynamodb:ConditionCheckItem", table),  # TransactWriteItems with a ConditionCheck
        ("dynamodb:Query", f"{table}/index/*"),  # runs by status/workflow/parent, timers, wakes
        ("sqs:SendMessage", f"<GetAtt:{ids.wake}.Arn>"),
        ("scheduler:DeleteSchedule", ids.schedules),
    ]
    timers = [
        *[(f"scheduler:{a}Schedule", ids.schedules) for a in ("Create", "Update")],
        ("iam:PassRole", f"<GetAtt:{ids.scheduler_role}.Arn>"),
    ]
    backlog = [("sqs:GetQueueAttributes", f"<GetAtt:{ids.wake}.Arn>")]
    database = [
        *[
            (f"rds-data:{a}", ids.cluster_arn)
            for a in ("ExecuteStatement", "BeginTransaction", "CommitTransaction", "RollbackTransaction")
        ],
        ("secretsmanager:GetSecretValue", f"<Ref:{ids.cluster_secret}>"),
    ]
    hand_off = [("lambda:InvokeFunction", runner_live(auction, ids))]
    needs = {
        "Fetch": core + timers + database + hand_off,
        "Worker": core + timers + backlog + database,
        "Runner": core + timers + database,
        "Console": core,
    }
    assert set(ids.functions) == set(needs)
    for name, fn in ids.functions.items():
        statements = auction.function_statements(fn)
        missing = [need for need in needs[name] if not allows(statements, *need)]
        assert missing == [], name


def test_only_the_consumers_may_receive_from_a_queue(auction: Synth, ids: Ids) -> None:
    """The worker alone consumes the wake queue; fetch and console consume nothing; nobody
    may read or delete from a dead-letter queue."""
    for name, fn in ids.functions.items():
        received = {
            r
            for s in auction.function_statements(fn)
            if RECEIVE & set(as_list(s["Action"]))
            for r in as_list(s["Resource"])
        }
        assert received == ({f"<GetAtt:{ids.wake}.Arn>"} if name == "Worker" else set()), name


def test_functions_may_pass_only_the_scheduler_role_and_only_to_scheduler(auction: Synth, ids: Ids) -> None:
    """Schedules carry the Scheduler role; a function that could pass any role could escalate.
    The worker and fetch (a request's eager activation) make runs' schedules, and the console
    pauses and resumes the declared ones (an update carries the role), so only they may pass
    the role."""
    for name, fn in ids.functions.items():
        passes = [s for s in auction.function_statements(fn) if "iam:PassRole" in as_list(s["Action"])]
        assert bool(passes) == (name in ("Worker", "Runner", "Fetch", "Console")), name
        for s in passes:
            assert as_list(s["Resource"]) == [f"<GetAtt:{ids.scheduler_role}.Arn>"], name
            assert s["Condition"] == {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}}


def test_the_console_reads_and_updates_the_declared_schedules_only(auction: Synth, ids: Ids) -> None:
    """Issue 28: the console pauses, resumes and triggers the project's schedules. It may get
    and update the declared schedules (examples/auction declares unpaid-report), never the
    runs' timers in the same group, and may create or delete none."""
    [declared] = auction.of_type("AWS::Scheduler::Schedule")
    statements = auction.function_statements(ids.functions["Console"])
    scheduling = [s for s in statements if any(a.startswith("scheduler:") for a in as_list(s["Action"]))]
    reads = [s for s in scheduling if "scheduler:GetSchedule" in as_list(s["Action"])]
    assert len(reads) == 1, scheduling
    assert sorted(as_list(reads[0]["Action"])) == ["scheduler:GetSchedule", "scheduler:UpdateSchedule"]
    assert as_list(reads[0]["Resource"]) == [f"<GetAtt:{declared}.Arn>"]
    others = {a for s in scheduling if s is not reads[0] for a in as_list(s["Action"])}
    assert others <= {"scheduler:DeleteSchedule"}, others  # a cancel drops a run's timer, as before
    assert not any("scheduler:CreateSchedule" in as_list(s["Action"]) for s in statements)


# --- the journal table ------------------------------------------------------------------------


def test_journal_table_has_point_in_time_recovery_encryption_and_ttl(auction: Synth, ids: Ids) -> None:
    """Journals are the only copy of a run's history: PITR on, encrypted, retained when the
    stack goes; kv entries with a ttl expire through expires_at."""
    auction.assertions.has_resource(
        "AWS::DynamoDB::Table",
        Match.object_like(
            {
                "DeletionPolicy": "Retain",
                "UpdateReplacePolicy": "Retain",
                "Properties": Match.object_like(
                    {
                        "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                        "SSESpecification": {"SSEEnabled": True},
                        "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
                    }
                ),
            }
        ),
    )
    props = auction.props(ids.table)
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True


def test_journal_table_has_the_keys_and_indexes_the_store_queries(auction: Synth, ids: Ids) -> None:
    """The deployed table has the keys, attributes and index key schemas of the table
    DynamoDBStore is tested against (runtime.store.dynamodb.table_definition)."""
    want = table_definition("unused")
    props = auction.props(ids.table)
    assert props["BillingMode"] == want["BillingMode"]
    assert props["KeySchema"] == want["KeySchema"]
    key = lambda d: d["AttributeName"]  # noqa: E731
    assert sorted(props["AttributeDefinitions"], key=key) == sorted(want["AttributeDefinitions"], key=key)
    deployed = {g["IndexName"]: g["KeySchema"] for g in props["GlobalSecondaryIndexes"]}
    assert deployed == {g["IndexName"]: g["KeySchema"] for g in want["GlobalSecondaryIndexes"]}


def test_journal_table_indexes_project_what_the_store_projects(auction: Synth, ids: Ids) -> None:
    """The store keeps leases, wake tokens and signal counters out of its indexes so taking a
    lease writes no index; the deployed indexes must project the same attributes."""
    want = {g["IndexName"]: g["Projection"] for g in table_definition("unused")["GlobalSecondaryIndexes"]}
    deployed = {g["IndexName"]: g["Projection"] for g in auction.props(ids.table)["GlobalSecondaryIndexes"]}
    assert deployed == want


# --- the wake path and timers ---------------------------------------------------------------------


def test_wake_queue_moves_a_poison_message_to_its_dead_letter_queue(auction: Synth, ids: Ids) -> None:
    """A wake the worker keeps failing on lands in the DLQ after MAX_RECEIVES deliveries
    instead of cycling forever; the DLQ keeps it for DLQ_RETENTION_DAYS."""
    wake = auction.props(ids.wake)
    assert wake["RedrivePolicy"] == {
        "deadLetterTargetArn": f"<GetAtt:{ids.wake_dlq}.Arn>",
        "maxReceiveCount": constants.MAX_RECEIVES,
    }
    assert wake["SqsManagedSseEnabled"] is True
    # AWS's advice for an SQS event source: visibility at least six times the function timeout.
    assert wake["VisibilityTimeout"] >= 6 * auction.props(ids.functions["Worker"])["Timeout"]
    dlq = auction.props(ids.wake_dlq)
    assert "RedrivePolicy" not in dlq
    assert dlq["MessageRetentionPeriod"] == constants.DLQ_RETENTION_DAYS * 86400


def test_fetch_hands_off_to_the_runner_s_live_alias_whose_events_are_not_retried(
    auction: Synth, ids: Ids
) -> None:
    """Fetch invokes the runner's ``live`` alias (the deploy gate moves it with the others)
    asynchronously: it is told the alias's ARN and may invoke that alone. Lambda retries no
    failed event (the reconciler re-sends the run's wake-up) and drops one throttled past 15
    minutes; the runner has a reserved concurrency of its own, apart from the worker's."""
    fetch = AwsConfig.from_env(environment(auction, ids.functions["Fetch"]))
    assert fetch.runner_arn == runner_live(auction, ids)
    for name in ("Worker", "Runner", "Console"):
        assert AwsConfig.from_env(environment(auction, ids.functions[name])).runner_arn is None, name
    invokers = [
        name
        for name, fn in ids.functions.items()
        if any("lambda:InvokeFunction" in as_list(s["Action"]) for s in auction.function_statements(fn))
    ]
    assert invokers == ["Fetch"]
    runner = auction.props(ids.functions["Runner"])
    assert runner["Handler"] == "functions.runner.handler"
    assert runner["ReservedConcurrentExecutions"] == 50
    assert runner["Timeout"] == auction.props(ids.functions["Worker"])["Timeout"]
    # The alias fetch names is the one the deploy gate moves (tests/infra/test_deploy_gate.py),
    # and the one whose events have no retries.
    alias_id = auction.id(auction.stack.functions.live["Runner"])
    alias = auction.props(alias_id)
    assert alias["Name"] == "live" and alias["FunctionName"] == f"<Ref:{ids.functions['Runner']}>"
    [config] = auction.of_type("AWS::Lambda::EventInvokeConfig").values()
    assert config["FunctionName"] == f"<Ref:{ids.functions['Runner']}>"
    assert f"<Ref:{alias_id}>" in str(config["Qualifier"])  # the alias's name, split from its ARN
    assert config["MaximumRetryAttempts"] == 0 and config["MaximumEventAgeInSeconds"] == 900
    # What Lambda drops (no retries, or throttled past its age) is healed late: an alarm says so.
    dropped = [
        a
        for a in auction.of_type("AWS::CloudWatch::Alarm").values()
        if a.get("MetricName") == "AsyncEventsDropped"
    ]
    assert [a["Dimensions"] for a in dropped] == [
        [{"Name": "FunctionName", "Value": f"<Ref:{ids.functions['Runner']}>"}]
    ]


def test_worker_consumes_the_wake_queue_with_partial_batch_failures(auction: Synth, ids: Ids) -> None:
    """functions/worker.py returns batchItemFailures: the mapping must ask for them, or one bad
    wake would redeliver the whole batch."""
    mappings = auction.of_type("AWS::Lambda::EventSourceMapping")
    assert {m["EventSourceArn"]: m["FunctionName"] for m in mappings.values()} == {
        f"<GetAtt:{ids.wake}.Arn>": live_name(auction, "Worker")
    }
    auction.assertions.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": {"Fn::GetAtt": [ids.wake, "Arn"]},
            "FunctionName": Match.any_value(),
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "BatchSize": Match.any_value(),
        },
    )


def test_scheduler_role_trusts_only_scheduler_from_this_account(auction: Synth, ids: Ids) -> None:
    """The role a schedule carries is assumable by EventBridge Scheduler alone, for this
    account's schedules in this stack's group (confused-deputy guard: source account and ARN)."""
    role = auction.props(ids.scheduler_role)
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {
            "Action": "sts:AssumeRole",
            "Effect": "Allow",
            "Principal": {"Service": "scheduler.amazonaws.com"},
            "Condition": {
                "StringEquals": {"aws:SourceAccount": "<Ref:AWS::AccountId>"},
                "ArnEquals": {"aws:SourceArn": f"<GetAtt:{ids.group}.Arn>"},
            },
        }
    ]
    assert "ManagedPolicyArns" not in role


def test_scheduler_role_may_only_send_to_the_wake_queue(auction: Synth, ids: Ids) -> None:
    """The Scheduler role sends wake messages to the wake queue and can do nothing else: no
    other queue but the wake dead-letter queue (where a declared schedule's undeliverable
    tick goes: examples/auction declares one), no receive or delete (CDK's send grant adds
    two reads of the queue's own attributes, which expose no messages)."""
    statements = auction.role_statements(ids.scheduler_role)
    assert allows(statements, "sqs:SendMessage", f"<GetAtt:{ids.wake}.Arn>")
    assert allows(statements, "sqs:SendMessage", f"<GetAtt:{ids.wake_dlq}.Arn>")
    for s in statements:
        assert s["Effect"] == "Allow"
        assert as_list(s["Resource"]) in ([f"<GetAtt:{ids.wake}.Arn>"], [f"<GetAtt:{ids.wake_dlq}.Arn>"]), s
        assert set(as_list(s["Action"])) <= SEND, s


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, method: str) -> Any:
        def call(**kwargs: Any) -> dict[str, Any]:
            self.calls.append((method, kwargs))
            return {}

        return call


class _NoTimers:
    """A run item with no timer armed yet (the DynamoDB store keeps these)."""

    def armed_timer(self, run_id: str) -> None:
        return None

    def arm_timer(self, run_id: str, armed: Any) -> None:
        pass


@pytest.mark.parametrize("parks", ["Worker", "Fetch"])
def test_a_timer_schedule_targets_the_wake_queue_with_the_scheduler_role(
    auction: Synth, ids: Ids, parks: str
) -> None:
    """A run parked beyond SQS's 15-minute delay gets a Scheduler entry, made by the worker or
    by a request's eager activation in fetch (before stop 48 fetch could not: an AccessDenied
    on AWS). Built from that function's deployed environment, the entry sits in this stack's
    group, targets the wake queue and carries the Scheduler role; the function may create it
    and pass the role, and the role may send to the target."""
    config = AwsConfig.from_env(environment(auction, ids.functions[parks]))
    scheduler, sqs = _Recorder(), _Recorder()
    clock = FakeClock()
    waker = AwsWaker(
        sqs,
        scheduler,
        clock,
        queue_url=config.wake_queue_url,
        queue_arn=config.wake_queue_arn,
        group=config.scheduler_group,
        role_arn=config.scheduler_role_arn,
        ledger=_NoTimers(),
    )
    waker.timer("sale-lot-42", int((clock.now() + 72 * 3600) * 1000))
    assert [m for m, _ in scheduler.calls] == ["create_schedule"]
    request = scheduler.calls[0][1]
    assert request["GroupName"] == ids.group_name
    assert request["Target"]["Arn"] == f"<GetAtt:{ids.wake}.Arn>"
    assert request["Target"]["RoleArn"] == f"<GetAtt:{ids.scheduler_role}.Arn>"
    worker = auction.function_statements(ids.functions[parks])
    schedule = arn("scheduler", f"schedule/{request['GroupName']}/{request['Name']}")
    assert any(
        "scheduler:CreateSchedule" in as_list(s["Action"])
        and any(re.fullmatch(re.escape(r).replace(r"\*", ".*"), schedule) for r in as_list(s["Resource"]))
        for s in worker
    )
    assert allows(worker, "iam:PassRole", request["Target"]["RoleArn"])
    assert allows(auction.role_statements(ids.scheduler_role), "sqs:SendMessage", request["Target"]["Arn"])
    assert auction.props(ids.group)["Name"] == f"{auction.name}-timers"


@pytest.mark.filterwarnings("ignore:No application metrics to publish")
def test_reconcile_rule_invokes_the_worker_with_the_event_it_handles(
    auction: Synth, ids: Ids, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every minute a rule invokes the worker's reconciler (a lost wake message heals); the
    rule's Input, given to functions.worker.handler, reaches reconcile()."""
    rules = auction.of_type("AWS::Events::Rule")
    targets = [t for r in rules.values() for t in r["Targets"] if r["ScheduleExpression"] == "rate(1 minute)"]
    # The same rule keeps a runner container warm (functions/runner.py: it builds its runtime).
    assert [t["Arn"] for t in targets] == [live(auction, "Worker"), live(auction, "Runner")]
    assert json.loads(targets[1]["Input"]) == WARM_EVENT
    event = json.loads(targets[0]["Input"])

    import functions._runtime as container
    from functions import worker

    class Reconciler:
        stuck: list[str] = []

        def reconcile(self) -> list[str]:
            return ["lost-1"]

    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    monkeypatch.setattr(container, "_runtime", Reconciler())
    context = FakeContext(remaining_ms=60_000)  # the worker's, a reconcile's minute
    assert worker.handler(event, context) == {"rewoken": ["lost-1"], "stuck": []}
    permissions = auction.of_type("AWS::Lambda::Permission")
    assert any(
        p["Principal"] == "events.amazonaws.com" and p["FunctionName"] == live(auction, "Worker")
        for p in permissions.values()
    )


# --- the HTTP API ---------------------------------------------------------------------------------


def test_http_api_stage_has_access_logs_and_throttling(auction: Synth) -> None:
    """The public surface logs every request and is throttled, so a flood cannot run up the
    Lambda bill unbounded."""
    stage = auction.stack.api.api.default_stage
    assert stage is not None
    props = auction.props(auction.id(stage))
    logs = auction.id(auction.stack.api.access_logs)
    assert props["AccessLogSettings"]["DestinationArn"] == f"<GetAtt:{logs}.Arn>"
    fields = json.loads(props["AccessLogSettings"]["Format"])
    assert {"requestId", "status", "path"} <= set(fields)
    assert props["DefaultRouteSettings"] == {
        "ThrottlingBurstLimit": constants.API_THROTTLE_BURST,
        "ThrottlingRateLimit": constants.API_THROTTLE_RATE,
    }
    assert props["AutoDeploy"] is True
    assert auction.props(logs)["RetentionInDays"] == LOG_RETENTION_DAYS


def test_http_api_sends_every_route_to_the_fetch_function(auction: Synth, ids: Ids) -> None:
    """SPEC: API Gateway carries fetch routes and signals — every path reaches on "fetch"."""
    routes = auction.of_type("AWS::ApiGatewayV2::Route")
    assert [r["RouteKey"] for r in routes.values()] == ["$default"]
    target = next(iter(routes.values()))["Target"]
    integration = auction.props(target.removeprefix("integrations/<Ref:").removesuffix(">"))
    assert integration["IntegrationUri"] == live(auction, "Fetch")
    assert integration["PayloadFormatVersion"] == "2.0"


# --- the console and alarms -------------------------------------------------------------------------


def dashboard(synth: Synth) -> dict[str, Any]:
    boards = synth.of_type("AWS::CloudWatch::Dashboard")
    assert len(boards) == 1
    body: dict[str, Any] = json.loads(next(iter(boards.values()))["DashboardBody"])
    return body


def emitted_metrics() -> dict[str, dict[str, Any]]:
    """What the runtime's observer emits on AWS, by event: namespace, dimensions, name."""
    from functions._runtime import logger, metrics
    from runtime.aws.observe import PowertoolsObserver

    observer = PowertoolsObserver(logger, metrics)
    events: dict[str, Callable[[], None]] = {
        Metric.RUNS_STARTED: lambda: observer.started("r", "w"),
        Metric.RUNS_COMPLETED: lambda: observer.ended("r", "w", Status.COMPLETED),
        Metric.RUNS_FAILED: lambda: observer.ended("r", "w", Status.FAILED),
        Metric.STEPS_SUCCEEDED: lambda: observer.step("r", "w", "s", 1, True),
        Metric.STEPS_FAILED: lambda: observer.step("r", "w", "s", 1, False),
        Metric.STEP_RETRIES: lambda: observer.retry("r", "w", "s"),
        Metric.SIGNAL_TO_RESUME_LATENCY: lambda: observer.signal_resumed("r", "w", 0.25),
        Metric.WAKE_FAILURES: lambda: observer.wake_failed("r"),
        Metric.STUCK_RUNS: lambda: observer.stuck_runs(["r"]),
    }
    out = {}
    metrics.clear_metrics()
    try:
        for event, emit in events.items():
            emit()
            blob: dict[str, Any] = dict(metrics.serialize_metric_set())
            (directive,) = blob["_aws"]["CloudWatchMetrics"]
            (metric,) = directive["Metrics"]
            (dimensions,) = directive["Dimensions"]
            out[event] = {
                "namespace": directive["Namespace"],
                "name": metric["Name"],
                "dimensions": {d: blob[d] for d in dimensions},
            }
            metrics.clear_metrics()
    finally:
        metrics.clear_metrics()
    return out


def test_dashboard_custom_widgets_are_rendered_by_the_console_function(auction: Synth, ids: Ids) -> None:
    """SPEC: "a CloudWatch dashboard whose custom widgets (Lambda-rendered HTML, buttons as
    cwdb-action) show the same lists, timelines and actions" — the runs list and the run view
    both call the console function."""
    custom = [w for w in dashboard(auction)["widgets"] if w["type"] == "custom"]
    assert {w["properties"]["params"]["view"] for w in custom} == {"runs", "run"}
    for widget in custom:
        assert widget["properties"]["endpoint"] == f"<GetAtt:{ids.functions['Console']}.Arn>"
        assert widget["properties"]["updateOn"]["refresh"] is True


def test_dashboard_graphs_every_metric_the_runtime_emits(auction: Synth) -> None:
    """The dashboard's graphs read exactly the metrics the Powertools observer emits, in its
    namespace and with its service dimension (a renamed metric would leave a flat line)."""
    emitted = emitted_metrics()
    assert set(emitted) == set(Metric)  # every metric of the contract has an event that emits it
    assert {k: e["name"] for k, e in emitted.items()} == {m: m.value for m in Metric}
    graphed = set()
    for widget in dashboard(auction)["widgets"]:
        if widget["type"] != "metric":
            continue
        for line in widget["properties"]["metrics"]:
            namespace, name, *rest = line
            dims = dict(zip(rest[0:-1:2], rest[1:-1:2], strict=True))
            by_name = {e["name"]: e for e in emitted.values()}
            assert name in by_name, f"the dashboard graphs {name}, which the runtime never emits"
            want = by_name[name]
            assert namespace == want["namespace"] == NAMESPACE
            assert dims == want["dimensions"], name
            graphed.add(name)
    assert graphed == {m.value for m in Metric}


def test_dashboard_queries_every_functions_log_group(auction: Synth, ids: Ids) -> None:
    """One run's log lines come from every function (run_id is on every line)."""
    (query,) = [w for w in dashboard(auction)["widgets"] if w["type"] == "log"]
    sources = set(re.findall(r"SOURCE '([^']+)'", query["properties"]["query"]))
    assert sources == {auction.props(fn)["LoggingConfig"]["LogGroup"] for fn in ids.functions.values()}
    assert "run_id" in query["properties"]["query"]


def test_failed_runs_alarm_watches_the_metric_the_runtime_emits_when_a_run_fails(auction: Synth) -> None:
    """The alarm fires on the very metric, namespace and dimensions the observer emits when a
    run parks as failed — and not on the completion metric."""
    failed = emitted_metrics()[Metric.RUNS_FAILED]
    alarm = auction.props(auction.id(auction.stack.alarms.alarms[0]))
    assert alarm["MetricName"] == failed["name"] == "RunsFailed"
    assert alarm["Namespace"] == failed["namespace"]
    assert {d["Name"]: d["Value"] for d in alarm["Dimensions"]} == failed["dimensions"]
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["Threshold"] == 0
    assert alarm["TreatMissingData"] == "notBreaching"
    auction.assertions.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        Match.object_like({"MetricName": "RunsFailed", "Namespace": "lunaflow", "Statistic": "Sum"}),
    )


def dead_letter_queues(synth: Synth) -> set[str]:
    """Logical ids of the queues some RedrivePolicy points at."""
    out = set()
    for props in synth.of_type("AWS::SQS::Queue").values():
        if "RedrivePolicy" in props:
            target = props["RedrivePolicy"]["deadLetterTargetArn"]
            out.add(target.removeprefix("<GetAtt:").removesuffix(".Arn>"))
    return out


def dead_letter_alarms(synth: Synth) -> dict[str, dict[str, Any]]:
    """DLQ logical id -> the alarm on its visible messages."""
    out = {}
    for props in synth.of_type("AWS::CloudWatch::Alarm").values():
        if (
            props.get("Namespace") == "AWS/SQS"
            and props["MetricName"] == "ApproximateNumberOfMessagesVisible"
        ):
            (dim,) = props["Dimensions"]
            assert dim["Name"] == "QueueName"
            out[dim["Value"].removeprefix("<GetAtt:").removesuffix(".QueueName>")] = props
    return out


def test_every_dead_letter_queue_has_an_alarm(auction: Synth, ids: Ids) -> None:
    """A message in a dead-letter queue is a run or a job nobody will retry: it must alarm."""
    assert dead_letter_queues(auction) == {ids.wake_dlq}
    alarms = dead_letter_alarms(auction)
    assert set(alarms) == dead_letter_queues(auction)
    for props in alarms.values():
        assert props["Threshold"] == 0 and props["ComparisonOperator"] == "GreaterThanThreshold"


def test_every_function_has_an_errors_alarm(auction: Synth, ids: Ids) -> None:
    """A handler that raises (not a run that fails) alarms on its own Errors metric."""
    watched = {}
    for props in auction.of_type("AWS::CloudWatch::Alarm").values():
        if props.get("Namespace") == "AWS/Lambda" and props["MetricName"] == "Errors":
            (dim,) = props["Dimensions"]
            watched[dim["Value"]] = props
    assert set(watched) == {f"<Ref:{fn}>" for fn in ids.functions.values()}


def test_outputs_name_the_api_the_table_and_the_dashboard(auction: Synth, ids: Ids) -> None:
    """`cdk deploy` prints where the project lives: its API URL, table and console."""
    outputs = render(auction.template["Outputs"])
    api = auction.id(auction.stack.api.api)
    board = auction.id(auction.stack.console.dashboard)
    assert outputs["ApiUrl"]["Value"] == f"<GetAtt:{api}.ApiEndpoint>"
    assert outputs["TableName"]["Value"] == f"<Ref:{ids.table}>"
    assert outputs["DashboardUrl"]["Value"].startswith("https://<Ref:AWS::Region>.console.aws.amazon.com/")
    assert outputs["DashboardUrl"]["Value"].endswith(f"#dashboards/dashboard/<Ref:{board}>")
    auction.assertions.has_output("ApiUrl", Match.object_like({"Value": Match.any_value()}))


def test_database_is_an_encrypted_aurora_cluster_reached_through_the_data_api(
    auction: Synth, ids: Ids
) -> None:
    """The auction's `database "sales"` becomes Aurora PostgreSQL with the Data API (Lambdas
    need no VPC), encrypted, kept as a snapshot on removal; deletion protection is off by
    default so `cdk destroy` ends cleanly (-c databaseDeletionProtection=true turns it on)."""
    cluster = auction.resource(ids.cluster)
    assert cluster["DeletionPolicy"] == "Snapshot"
    props = auction.props(ids.cluster)
    assert props["Engine"] == "aurora-postgresql"
    assert props["EnableHttpEndpoint"] is True
    assert props["StorageEncrypted"] is True
    assert props["DeletionProtection"] is False
    assert props["DatabaseName"] == "sales"
    for fn in ids.functions.values():
        assert "VpcConfig" not in auction.props(fn)


# --- a project with user queues and a secret (tests/projects/infra_queue) -------------------------


def queue_ids(synth: Synth) -> dict[str, tuple[str, str]]:
    """lunaflow queue name -> (queue logical id, its DLQ logical id)."""
    q = synth.stack.queues
    return {name: (synth.id(q.queues[name]), synth.id(q.dead_letters[name])) for name in q.queues}


def test_user_queues_move_poison_messages_to_their_dead_letter_queues(queue_project: Synth) -> None:
    """SPEC: an error retries the message "up to the queue's attempts, then it goes to a
    dead-letter store" — each queue's attempts from lunaflow.toml (issue 20.4: `attempts = 1`
    is one delivery, not 5); a retry delay longer than the usual visibility timeout becomes
    the queue's, so a message whose invocation crashed waits as long."""
    ids = queue_ids(queue_project)
    assert {"emails", "audit"} <= set(ids)
    queue_fn = queue_project.id(queue_project.stack.functions.queue)
    usual = 6 * queue_project.props(queue_fn)["Timeout"]
    expected = {"emails": (1, 2 * 3600), "audit": (3, usual)}  # tests/projects/infra_queue/lunaflow.toml
    for name, (queue, dlq) in ids.items():
        props = queue_project.props(queue)
        attempts, visibility = expected[name]
        assert props["RedrivePolicy"] == {
            "deadLetterTargetArn": f"<GetAtt:{dlq}.Arn>",
            "maxReceiveCount": attempts,
        }, name
        assert props["SqsManagedSseEnabled"] is True
        assert props["VisibilityTimeout"] == visibility, name
    alarms = dead_letter_alarms(queue_project)
    assert {dlq for _, dlq in ids.values()} <= set(alarms)


def test_the_queue_function_may_hide_a_failed_message_for_its_retry_delay(queue_project: Synth) -> None:
    """The retry delay is a ChangeMessageVisibility by the queue function on the message it
    received: its role must allow it on each queue it consumes."""
    emails, _ = queue_ids(queue_project)["emails"]
    queue_fn = queue_project.id(queue_project.stack.functions.queue)
    allowed = {
        r
        for s in queue_project.function_statements(queue_fn)
        if "sqs:ChangeMessageVisibility" in as_list(s["Action"])
        for r in as_list(s["Resource"])
    }
    assert f"<GetAtt:{emails}.Arn>" in allowed


def test_the_queue_function_consumes_each_handled_user_queue(queue_project: Synth) -> None:
    """on "queue" ("emails", ...) runs in the queue function, fed by an event source on the
    emails queue that reports per-message failures."""
    emails, _ = queue_ids(queue_project)["emails"]
    queue_fn = queue_project.id(queue_project.stack.functions.queue)
    queue_project.assertions.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": {"Fn::GetAtt": [emails, "Arn"]},
            "FunctionName": Match.any_value(),
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "BatchSize": Match.any_value(),
        },
    )
    received = {
        r
        for s in queue_project.function_statements(queue_fn)
        if RECEIVE & set(as_list(s["Action"]))
        for r in as_list(s["Resource"])
    }
    assert f"<GetAtt:{emails}.Arn>" in received
    mappings = queue_project.of_type("AWS::Lambda::EventSourceMapping").values()
    assert live_name(queue_project, "Queue") in {m["FunctionName"] for m in mappings}


def test_a_send_only_queue_is_not_consumed_by_the_queue_function(queue_project: Synth) -> None:
    """`queue "audit"` is only sent to: with no `on "queue" ("audit", ...)` handler the runtime
    answers every delivery with an error, so consuming it would burn MAX_RECEIVES invocations
    per message and then dead-letter it (locally, such messages just wait in the queue)."""
    audit, _ = queue_ids(queue_project)["audit"]
    mappings = queue_project.of_type("AWS::Lambda::EventSourceMapping")
    assert f"<GetAtt:{audit}.Arn>" not in {m["EventSourceArn"] for m in mappings.values()}


def test_the_stack_creates_queues_only_for_the_projects_queue_names(queue_project: Synth) -> None:
    """The project names two queues (emails handled, audit sent to); the stack must not invent
    others."""
    assert set(queue_project.stack.queues.queues) == {"emails", "audit"}


def test_secret_access_is_scoped_to_the_projects_secret_names(queue_project: Synth) -> None:
    """`secret "api-key"` is read as Secrets Manager's `<stack>/api-key` (any version suffix),
    and nothing else: no other secret, no listing, no writes beyond version labels."""
    want = arn("secretsmanager", f"secret:{queue_project.name}/api-key-*")
    for name, fn in queue_project.functions().items():
        if name == "Console":
            continue  # runs no project code (see the console's own least-privilege test)
        statements = [
            s
            for s in queue_project.function_statements(fn)
            if any(a.startswith("secretsmanager:") for a in as_list(s["Action"]))
        ]
        assert statements, name
        for s in statements:
            assert as_list(s["Resource"]) == [want], name
            assert set(as_list(s["Action"])) == {
                "secretsmanager:GetSecretValue",
                "secretsmanager:UpdateSecretVersionStage",  # labels the versions runs are pinned to
            }, name
        env = environment(queue_project, fn)
        assert env["LUNAFLOW_SECRETS_PREFIX"] == f"{queue_project.name}/"


def test_user_queue_urls_reach_every_function(queue_project: Synth) -> None:
    """queue "audit" :send works from any function that runs project code: each one's
    LUNAFLOW_QUEUE_URLS maps the lunaflow names to this stack's queues, and it may send to
    them (the console runs no project code)."""
    ids = queue_ids(queue_project)
    for name, fn in queue_project.functions().items():
        if name == "Console":
            continue
        config = AwsConfig.from_env(environment(queue_project, fn))
        for queue in ("emails", "audit"):
            assert config.queue_urls[queue] == f"<Ref:{ids[queue][0]}>", (name, queue)
            assert allows(
                queue_project.function_statements(fn), "sqs:SendMessage", f"<GetAtt:{ids[queue][0]}.Arn>"
            )


def test_the_console_function_may_not_reach_what_only_project_code_uses(
    auction: Synth, queue_project: Synth
) -> None:
    """Least privilege: the console lists runs, shows journals, resumes (a journal entry and a
    wake) and cancels (journal entries and a schedule delete) — runtime/platform/runs.py. It never runs
    project code, so it needs no Data API, no database or project secret, no user queue."""
    for synth in (auction, queue_project):
        console = synth.id(synth.stack.functions.console)
        wake = f"<GetAtt:{synth.id(synth.stack.wake.queue)}.Arn>"
        for s in synth.function_statements(console):
            actions = set(as_list(s["Action"]))
            assert not any(a.startswith(("rds-data:", "secretsmanager:")) for a in actions), s
            if "sqs:SendMessage" in actions:
                assert as_list(s["Resource"]) == [wake], s


def test_a_project_folder_with_an_underscore_gets_a_valid_stack_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`cdk synth -c project=tests/projects/infra_queue` must work without naming the stack."""
    monkeypatch.setattr(constants, "BUNDLE_SOURCE", TINY_REQUIREMENTS)
    monkeypatch.delenv("CDK_DEFAULT_ACCOUNT", raising=False)
    monkeypatch.delenv("CDK_DEFAULT_REGION", raising=False)
    stack = build(App(outdir=str(tmp_path), context={"project": str(QUEUE_PROJECT)}))
    assert re.fullmatch(r"[A-Za-z][A-Za-z0-9-]*", stack.stack_name)
