"""Issue 16.6, an operator's stack: every alarm notifies the alarm topic (and an email when
`-c alarmEmail=` is given); alarms on the wake queue's age, DynamoDB throttling (table and
each index), Lambda throttles and every dead-letter queue; reserved concurrency and the SQS
event sources' maximum concurrency from context settings; each function with exactly the
actions its handler reaches and no wildcard action anywhere; the queue function only when
the project handles a queue; the database's deletion protection a setting, off by default."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Template

from conftest import QUEUE_SETTINGS, TINY_REQUIREMENTS, Synth, _synth, as_list, render
from infra.capabilities.alarms import WAKE_AGE_ALARM_S
from infra.capabilities.database import Database
from infra.settings import CONCURRENCY, QUEUE_MAX_CONCURRENCY, WAKE_MAX_CONCURRENCY, Settings, SettingsError
from runtime.store.dynamodb import INDEXES

XRAY = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
CONSUME = {
    "sqs:ReceiveMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueUrl",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
}
STORE = {
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:ConditionCheckItem",
}
VALUES = {"s3:PutObject", "s3:GetObject", "s3:DeleteObject"}
DATA_API = {
    "rds-data:ExecuteStatement",
    "rds-data:BeginTransaction",
    "rds-data:CommitTransaction",
    "rds-data:RollbackTransaction",
}
SECRETS = {"secretsmanager:GetSecretValue", "secretsmanager:UpdateSecretVersionStage"}
CANCEL = {"scheduler:DeleteSchedule"}
TIMERS = {"scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule", "iam:PassRole"}
HAND_OFF = {"lambda:InvokeFunction"}  # fetch -> the runner (runtime.aws.wake.AwsWaker.hand_off)


def alarms(synth: Synth) -> dict[str, dict[str, Any]]:
    return synth.of_type("AWS::CloudWatch::Alarm")


def topic(synth: Synth) -> str:
    return synth.id(synth.stack.alarms.topic)


def actions(synth: Synth, function_id: str) -> set[str]:
    """Every action a function's role allows, X-Ray's tracing grant left out."""
    return {
        a
        for s in synth.function_statements(function_id)
        if set(as_list(s["Action"])) - XRAY
        for a in as_list(s["Action"])
    }


@pytest.mark.parametrize("project", ["auction", "queue_project"])
def test_every_alarm_notifies_the_alarm_topic(project: str, request: pytest.FixtureRequest) -> None:
    """An alarm with no action is a red light in a console nobody watches."""
    synth: Synth = request.getfixturevalue(project)
    found = alarms(synth)
    assert len(found) >= 10
    for logical_id, props in found.items():
        assert props["AlarmActions"] == [f"<Ref:{topic(synth)}>"], logical_id


def test_the_alarm_topic_mails_the_alarm_email_when_one_is_given(
    auction: Synth, queue_project: Synth
) -> None:
    subscriptions = queue_project.of_type("AWS::SNS::Subscription")
    assert list(subscriptions.values()) == [
        {
            "Protocol": "email",
            "Endpoint": QUEUE_SETTINGS["alarmEmail"],
            "TopicArn": f"<Ref:{topic(queue_project)}>",
        }
    ]
    assert auction.of_type("AWS::SNS::Subscription") == {}  # no -c alarmEmail: the topic alone
    assert auction.template["Outputs"]["AlarmTopicArn"]["Value"] == {"Ref": topic(auction)}


def test_the_wake_queue_age_alarms_when_wakes_are_not_drained(auction: Synth) -> None:
    wake = auction.id(auction.stack.wake.queue)
    [age] = [p for p in alarms(auction).values() if p.get("MetricName") == "ApproximateAgeOfOldestMessage"]
    assert age["Namespace"] == "AWS/SQS"
    assert age["Dimensions"] == [{"Name": "QueueName", "Value": f"<GetAtt:{wake}.QueueName>"}]
    assert (age["Statistic"], age["Threshold"], age["ComparisonOperator"]) == (
        "Maximum",
        WAKE_AGE_ALARM_S,
        "GreaterThanThreshold",
    )
    assert age["EvaluationPeriods"] >= 2  # a sustained backlog, not one slow minute


def test_dynamodb_throttling_alarms_on_the_table_and_on_every_index(auction: Synth) -> None:
    table = f"<Ref:{auction.id(auction.stack.journal.table)}>"
    watched: dict[str | None, set[str]] = {}
    for props in alarms(auction).values():
        metrics = props.get("Metrics", [])
        stats = [m["MetricStat"]["Metric"] for m in metrics if "MetricStat" in m]
        if not stats or stats[0]["Namespace"] != "AWS/DynamoDB":
            continue
        for metric in stats:
            dims = {d["Name"]: d["Value"] for d in metric["Dimensions"]}
            assert dims["TableName"] == table
            watched.setdefault(dims.get("GlobalSecondaryIndexName"), set()).add(metric["MetricName"])
        assert props["Threshold"] == 0 and props["ComparisonOperator"] == "GreaterThanThreshold"
    assert set(watched) == {None, *INDEXES}
    for index, names in watched.items():
        assert names == {"ReadThrottleEvents", "WriteThrottleEvents"}, index


@pytest.mark.parametrize("project", ["auction", "queue_project"])
def test_every_function_alarms_on_its_throttles(project: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(project)
    watched = {
        props["Dimensions"][0]["Value"]
        for props in alarms(synth).values()
        if props.get("Namespace") == "AWS/Lambda" and props["MetricName"] == "Throttles"
    }
    assert watched == {f"<Ref:{fn}>" for fn in synth.functions().values()}


def test_every_dead_letter_queue_of_a_project_queue_alarms(queue_project: Synth) -> None:
    watched = {
        props["Dimensions"][0]["Value"]
        for props in alarms(queue_project).values()
        if props.get("MetricName") == "ApproximateNumberOfMessagesVisible"
    }
    dlqs = {"wake": queue_project.stack.wake.dead_letters, **queue_project.stack.queues.dead_letters}
    assert set(dlqs) == {"wake", "emails", "audit"}
    assert watched == {f"<GetAtt:{queue_project.id(q)}.QueueName>" for q in dlqs.values()}


def test_functions_have_the_default_reserved_concurrency(auction: Synth) -> None:
    for name, fn in auction.functions().items():
        assert auction.props(fn)["ReservedConcurrentExecutions"] == CONCURRENCY[name], name


def test_only_the_fetch_function_is_told_how_long_a_request_advances_its_runs(auction: Synth) -> None:
    """Issue 31: -c eagerMs (default 1000) reaches the fetch function as LUNAFLOW_EAGER_MS,
    which AwsConfig reads (tests/aws/test_eager.py: what a request then advances)."""
    told = {
        name: auction.props(fn)["Environment"]["Variables"].get("LUNAFLOW_EAGER_MS")
        for name, fn in auction.functions().items()
    }
    assert told.pop("Fetch") == "1000"
    assert set(told.values()) == {None}, told


def _traced(synth: Synth) -> dict[str, tuple[str | None, str, frozenset[str]]]:
    """Each lunaflow function (the deploy gate's too): its X-Ray mode, what it tells
    Powertools' Tracer, and the X-Ray actions its role is granted."""
    granted: dict[str, set[str]] = {}
    for policy in synth.of_type("AWS::IAM::Policy").values():
        for role in policy.get("Roles", []):
            for s in policy["PolicyDocument"]["Statement"]:
                granted.setdefault(role, set()).update(a for a in as_list(s["Action"]) if a in XRAY)
    out = {}
    for logical, props in synth.of_type("AWS::Lambda::Function").items():
        if not str(props.get("Description", "")).startswith("lunaflow"):
            continue  # CDK's own helpers
        role = props["Role"].removeprefix("<GetAtt:").split(".")[0]
        out[logical] = (
            props.get("TracingConfig", {}).get("Mode"),
            props["Environment"]["Variables"]["POWERTOOLS_TRACE_DISABLED"],
            frozenset(granted.get(f"<Ref:{role}>", set())),
        )
    return out


def test_x_ray_tracing_is_off_unless_the_setting_turns_it_on(auction: Synth, queue_project: Synth) -> None:
    """Issue 31: X-Ray traces were about 3 % of a wake-heavy bill; Lambda's default is no
    tracing, and so is lunaflow's: no tracing mode, no X-Ray grant, Powertools' Tracer off.
    -c tracing=true (the queue project's settings) traces every function, the gate too."""
    off = _traced(auction)
    assert len(off) >= 4 and set(off.values()) == {(None, "true", frozenset())}, off
    on = _traced(queue_project)
    assert len(on) >= 5 and set(on.values()) == {("Active", "false", frozenset(XRAY))}, on
    assert Settings.from_context(App().node).tracing is False


def test_eager_ms_is_a_context_setting_from_0_to_10000() -> None:
    assert Settings.from_context(App().node).eager_ms == 1000
    assert Settings.from_context(App(context={"eagerMs": "0"}).node).eager_ms == 0


def test_every_function_logs_json_without_lambdas_own_info_lines(auction: Synth) -> None:
    """Issue 31: Lambda's START/END/REPORT lines are INFO system lines, ~350 bytes of log
    ingestion per invocation; at system level WARN they are not written, application lines
    still are (and the deploy gate's function follows the same rule)."""
    functions = auction.of_type("AWS::Lambda::Function")
    ours = [props for props in functions.values() if "lunaflow" in str(props.get("Description", ""))]
    assert len(ours) >= 4  # fetch, worker, console and the deploy gate at least
    for props in ours:
        assert props["LoggingConfig"] == {
            "LogFormat": "JSON",
            "SystemLogLevel": "WARN",
            "ApplicationLogLevel": "INFO",
            "LogGroup": props["LoggingConfig"]["LogGroup"],
        }, props["Description"]


def test_ingress_url_puts_a_function_url_on_fetch_instead_of_the_http_api(tmp_path: Any) -> None:
    """Issue 31: -c ingress=url. The fetch function's live alias answers on a Function URL
    (public like the HTTP API; the project's handler decides), the stack output names it,
    no API Gateway resource is made, and cdk-nag still passes."""
    synth = _synth(
        tmp_path,
        {"project": "tests/projects/infra_schedules", "stack": "lunaflow-url", "ingress": "url"},
        TINY_REQUIREMENTS,
    )
    assert synth.error is None, synth.error
    assert not synth.of_type("AWS::ApiGatewayV2::Api")
    [(url_id, url)] = synth.of_type("AWS::Lambda::Url").items()
    assert url["AuthType"] == "NONE"
    # the live alias, which the deploy gate moves only once in-flight runs replay on the new code
    assert url["TargetFunctionArn"] == f"<GetAtt:{synth.id(synth.stack.functions.fetch)}.Arn>"
    assert url["Qualifier"] == "live"
    # Since October 2025 a public URL needs both grants; the second only through the URL
    grants = {
        props["Action"]: props
        for props in synth.of_type("AWS::Lambda::Permission").values()
        if props.get("FunctionUrlAuthType") == "NONE" or props.get("InvokedViaFunctionUrl")
    }
    assert set(grants) == {"lambda:InvokeFunctionUrl", "lambda:InvokeFunction"}
    assert grants["lambda:InvokeFunction"]["InvokedViaFunctionUrl"] is True
    outputs = synth.template["Outputs"]
    [api_url] = [o for name, o in outputs.items() if name.startswith("ApiUrl")]
    assert render(api_url["Value"]) == f"<GetAtt:{url_id}.FunctionUrl>"


def test_the_wake_event_source_stays_within_the_workers_reserved_concurrency(auction: Synth) -> None:
    [mapping] = [
        m
        for m in auction.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["FunctionName"].endswith(":live") and "WorkerLive" in m["FunctionName"]
    ]
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": WAKE_MAX_CONCURRENCY}
    assert CONCURRENCY["Worker"] > WAKE_MAX_CONCURRENCY  # room for the reconciler's invocation


def test_concurrency_settings_from_context_reach_the_functions(queue_project: Synth) -> None:
    """-c queueConcurrency=30 -c queueMaxConcurrency=15 -c consoleConcurrency=none."""
    fns = queue_project.functions()
    assert queue_project.props(fns["Queue"])["ReservedConcurrentExecutions"] == 30
    assert "ReservedConcurrentExecutions" not in queue_project.props(fns["Console"])
    assert queue_project.props(fns["Worker"])["ReservedConcurrentExecutions"] == CONCURRENCY["Worker"]
    mappings = [
        m
        for m in queue_project.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["FunctionName"].endswith(":live") and "QueueLive" in m["FunctionName"]
    ]
    assert mappings and all(m["ScalingConfig"] == {"MaximumConcurrency": 15} for m in mappings)
    assert QUEUE_MAX_CONCURRENCY != 15  # the setting, not the default, is what was read


def test_the_queue_function_exists_only_when_the_project_handles_a_queue(
    auction: Synth, queue_project: Synth
) -> None:
    """examples/auction has no on "queue" handler: no queue function to pay for or patch."""
    assert set(auction.functions()) == {"Fetch", "Worker", "Runner", "Console"}
    assert auction.stack.functions.queue is None
    assert set(queue_project.functions()) == {"Fetch", "Worker", "Runner", "Queue", "Console"}


def test_each_function_has_exactly_the_actions_its_handler_reaches(
    auction: Synth, queue_project: Synth
) -> None:
    """Read from the code paths: every handler runs the store (STORE, VALUES) and wakes runs;
    the worker, the runner and fetch (a request's eager activation) park runs (TIMERS); only
    the worker reads the wake queue's backlog; only fetch invokes the runner (HAND_OFF); a cancel from
    anywhere drops a schedule; project code (fetch, worker, queue) reaches secrets, user
    queues and the Data API; the console none of those, but reads, pauses and resumes the
    declared schedules where there are some (the auction's unpaid-report). No Scan, no
    BatchWriteItem."""
    send = {"sqs:SendMessage"}
    db = DATA_API | {"secretsmanager:GetSecretValue"}
    declared_schedules = {"scheduler:GetSchedule", "scheduler:UpdateSchedule", "iam:PassRole"}
    expected_auction = {
        "Fetch": STORE | VALUES | send | TIMERS | db | HAND_OFF,
        "Worker": STORE | VALUES | send | TIMERS | CONSUME | db,
        "Runner": STORE | VALUES | send | TIMERS | db,
        "Console": STORE | VALUES | send | CANCEL | declared_schedules,
    }
    for name, fn in auction.functions().items():
        assert actions(auction, fn) == expected_auction[name], name
    expected_queue = {
        "Fetch": STORE | VALUES | send | TIMERS | SECRETS | HAND_OFF,
        "Worker": STORE | VALUES | send | TIMERS | CONSUME | SECRETS,
        "Runner": STORE | VALUES | send | TIMERS | SECRETS,
        "Queue": STORE | VALUES | send | CANCEL | SECRETS | CONSUME,
        "Console": STORE | VALUES | send | CANCEL,
    }
    for name, fn in queue_project.functions().items():
        assert actions(queue_project, fn) == expected_queue[name], name


@pytest.mark.parametrize("project", ["auction", "queue_project"])
def test_no_policy_in_the_stack_allows_a_wildcard_action(
    project: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(project)
    documents = [p["PolicyDocument"] for p in synth.of_type("AWS::IAM::Policy").values()]
    for role in synth.of_type("AWS::IAM::Role").values():
        documents.extend(p["PolicyDocument"] for p in role.get("Policies", []))
    statements = [s for d in documents for s in d["Statement"]]
    assert statements
    for s in statements:
        for action in as_list(s.get("Action", [])):
            assert "*" not in action, s
            assert action not in {"dynamodb:Scan", "dynamodb:BatchWriteItem"}, s


def test_database_deletion_protection_is_a_context_setting() -> None:
    """Off by default (the auction's synth asserts it); -c databaseDeletionProtection=true
    turns it on, and the snapshot on removal stays either way."""
    app = App(context={"databaseDeletionProtection": "true"})
    stack = Stack(app, "Db")
    settings = Settings.from_context(stack.node)
    Database(stack, "Database", ["sales"], deletion_protection=settings.database_deletion_protection)
    [(cluster)] = Template.from_stack(stack).find_resources("AWS::RDS::DBCluster").values()
    assert cluster["Properties"]["DeletionProtection"] is True
    assert cluster["DeletionPolicy"] == "Snapshot"


@pytest.mark.parametrize(
    ("context", "says"),
    [
        ({"wakeMaxConcurrency": "200"}, "exceeds -c workerConcurrency=100"),
        ({"queueMaxConcurrency": "1"}, "outside SQS's range"),
        ({"workerConcurrency": "0"}, "at least 1"),
        ({"fetchConcurrency": "many"}, "not a whole number"),
        ({"alarmEmail": "nobody"}, "not an email address"),
        ({"alarmEmail": "@"}, "not an email address"),
        ({"alarmEmail": "ops@"}, "not an email address"),
        ({"alarmEmail": "ops@localhost"}, "not an email address"),
        ({"databaseDeletionProtection": "yes"}, "use true or false"),
        ({"force": "yes"}, "use true"),
        ({"ingress": "http"}, "is not a way in"),
        ({"eagerMs": "20000"}, "outside 0 to 10000"),
        ({"eagerMs": "soon"}, "not a whole number"),
        ({"tracing": "on"}, "use true"),
    ],
)
def test_a_bad_setting_is_refused_at_synth_with_the_fix(context: dict[str, str], says: str) -> None:
    with pytest.raises(SettingsError, match=says):
        Settings.from_context(App(context=context).node)


@pytest.mark.parametrize(
    ("context", "says"),
    [
        ({"workerConcurrency": "100", "wakeMaxConcurrency": "100"}, "less the reconciler's 1"),
        ({"workerConcurrency": "2"}, "workerConcurrency=2 is below 3"),
        ({"queueConcurrency": "1"}, "queueConcurrency=1 is below 2"),
    ],
)
def test_the_wake_source_leaves_the_reconciler_its_invocation(context: dict[str, str], says: str) -> None:
    """ "At most the worker's reserved concurrency less the reconciler's one" (the module's
    docstring, docs/operations.md): 100 of 100 passed, and a worker reserved below 3 was
    refused with a fix (lower wakeMaxConcurrency) that could not pass either."""
    with pytest.raises(SettingsError, match=says):
        Settings.from_context(App(context=context).node)


@pytest.mark.parametrize(("worker", "wake"), [("3", 2), ("50", 49), ("100", 90), ("500", 90)])
def test_a_default_wake_source_follows_a_lowered_worker(worker: str, wake: int) -> None:
    """Lowering only workerConcurrency below 91 was refused: the wake default (90) stayed."""
    settings = Settings.from_context(App(context={"workerConcurrency": worker}).node)
    assert settings.wake_max_concurrency == wake


@pytest.mark.parametrize(
    ("key", "says"),
    [("stuckAfterMinute", "did you mean -c stuckAfterMinutes?"), ("eager", "did you mean -c eagerMs?")],
)
def test_a_misspelt_setting_is_refused_naming_the_nearest(key: str, says: str) -> None:
    """It was ignored, and the setting it meant kept its default, as lunaflow.toml's did."""
    with pytest.raises(SettingsError, match=rf"-c {key} is not a setting lunaflow reads.*{says}"):
        Settings.from_context(App(context={key: "30"}).node)


def test_cdks_own_context_is_not_taken_for_a_setting() -> None:
    context = {
        "@aws-cdk/aws-lambda:recognizeLayerVersion": True,
        "aws:cdk:version-reporting": False,
        "acknowledged-issue-numbers": [1],
        "availability-zones:account=1:region=eu-west-1": ["a"],
        "project": "examples/auction",
    }
    assert Settings.from_context(App(context=context).node).eager_ms == 1000


def test_an_unreserved_worker_takes_any_wake_concurrency() -> None:
    settings = Settings.from_context(
        App(context={"workerConcurrency": "none", "wakeMaxConcurrency": "500"}).node
    )
    assert settings.concurrency["Worker"] is None and settings.wake_max_concurrency == 500


def test_force_is_a_context_setting_off_by_default() -> None:
    """-c force=true: the deploy gate passes diverging code (tests/aws/test_deploy_gate.py)."""
    assert Settings.from_context(App().node).force is False
    assert Settings.from_context(App(context={"force": "true"}).node).force is True
