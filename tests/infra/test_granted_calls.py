"""Every AWS call a function makes is one its role allows.

moto allows every call, so a grant the stack forgot shows only on AWS, as an AccessDenied:
a request's eager activation that parked a run on a wait past 15 minutes created the run's
Scheduler schedule from the fetch function, whose role could not (fixed in stop 48). Here
workloads run on ``AwsPlatform`` with every call its clients make recorded against the
function running then (``AwsPlatform.invoking``), and each is checked against the
statements of that function's role in the same project's synthesized stack.

Each function serves from a container of its own, built as Lambda builds it: at the
function's first invocation, inside it, from the environment the stack gives that function
(the console is told of no database, so its container applies no migration). So a cold
start's calls (a migration applied through the Data API, anything a container reads when it
loads the code) count against the function whose container starts, not against whichever
function happened to run first in the harness's one shared container. The Data API, which
the harness answers itself (``runtime.aws.dataapi``: moto runs no SQL), is recorded at its
stand-in; each of its calls also needs ``secretsmanager:GetSecretValue`` on the cluster's
secret, which the Data API reads with the caller's credentials. The deploy gate
(``functions/gate.py``) is run as CloudFormation runs it, on a deployment holding in-flight
runs, and its calls are checked against its own role; the runs it pinned to the old code are
then advanced by the worker on that code, loaded from its snapshot in the values bucket.

Actions are checked for every call; resources for the calls on the table (its indexes
included), the values bucket, the queues and the Scheduler role, whose ARNs the template
names directly, and on schedules (a timer's ARN as the stack formats it in the timers'
group, a declared schedule's its own). The secrets' and the cluster's resources are not
checked here (tests/infra/test_stack.py checks those for the calls it lists).
"""

from __future__ import annotations

import copy
import fnmatch
import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import functions.gate as gate
from conftest import Synth, as_list, render
from runtime.aws import container
from runtime.aws.config import AwsConfig
from runtime.aws.contract import CONSOLE_TIMEOUT_S, Env, Handler
from runtime.aws.events import http_event
from runtime.aws.runtime import AwsRuntime, Clients
from runtime.aws.versions import code_key
from runtime.engine.project import ProjectSource
from runtime.testing import AwsPlatform
from tests.support.aws_events import GATE_ARN, gate_context

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")

ROOT = Path(__file__).resolve().parents[2]
ROLES = {
    Handler.FETCH: "Fetch",
    Handler.WORKER: "Worker",
    Handler.RUNNER: "Runner",
    Handler.QUEUE: "Queue",
    Handler.CONSOLE: "Console",
    Handler.GATE: "Gate",
}
SERVICES = ("dynamodb", "sqs", "scheduler", "s3", "secretsmanager")
# The Data API stand-in's methods (the boto3 client's names) -> the actions they need.
DATA_API = {
    "execute_statement": "rds-data:ExecuteStatement",
    "batch_execute_statement": "rds-data:BatchExecuteStatement",
    "begin_transaction": "rds-data:BeginTransaction",
    "commit_transaction": "rds-data:CommitTransaction",
    "rollback_transaction": "rds-data:RollbackTransaction",
}
# Operations IAM authorizes under another action's name.
RENAMED = {
    "s3:ListObjectsV2": "s3:ListBucket",
    "sqs:SendMessageBatch": "sqs:SendMessage",
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
}
# TransactWriteItems is authorized as each of its items' own action.
TRANSACT = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}
# An action, and the resource it touches as the template names it (the table, its indexes,
# the bucket and its objects, a queue, a schedule, the Scheduler role passed on), or None
# where resources are not checked (secrets, the Data API's cluster).
Call = tuple[str, str | None]


class Resources:
    """The deployment's resources -> the ARNs the synthesized template gives them: the table,
    the bucket, the queues and the Scheduler role as ``<GetAtt:Id.Arn>`` (as ``conftest.render``
    writes them), a timer's schedule as the ARN the stack formats in the timers' group, a
    declared schedule as its own ``<GetAtt>``."""

    def __init__(self, synth: Synth, p: AwsPlatform) -> None:
        stack = synth.stack
        self.table = (p.names.table, f"<GetAtt:{synth.id(stack.journal.table)}.Arn>")
        self.bucket = (p.config.values_bucket, f"<GetAtt:{synth.id(stack.values.bucket)}.Arn>")
        urls = {p.config.wake_queue_url: stack.wake.queue}
        urls |= {p.config.queue_urls[name]: queue for name, queue in stack.queues.queues.items()}
        # A queue's name (the last part of its URL) -> its ARN.
        self.queues = {url.rsplit("/", 1)[-1]: f"<GetAtt:{synth.id(q)}.Arn>" for url, q in urls.items()}
        self.group = (p.config.scheduler_group, str(stack.resolve(stack.wake.group.name)))
        self.declared = {
            str(s.name): f"<GetAtt:{synth.id(s)}.Arn>" for s in stack.schedules.schedules.values()
        }
        self.scheduler_role = (p.config.scheduler_role_arn, f"<GetAtt:{synth.id(stack.wake.role)}.Arn>")
        # Fetch invokes the runner's alias, which the stack names as the function's ARN and ":live".
        self.runner = (p.config.runner_arn, f"<GetAtt:{synth.id(stack.functions.runner)}.Arn>:live")
        self._stack = stack

    def table_arn(self, name: str, index: str | None = None) -> str:
        arn = self.table[1] if name == self.table[0] else f"<another table: {name}>"
        return arn if index is None else f"{arn}/index/{index}"

    def object_arn(self, bucket: str, key: str | None) -> str:
        arn = self.bucket[1] if bucket == self.bucket[0] else f"<another bucket: {bucket}>"
        return arn if key is None else f"{arn}/{key}"

    def queue_arn(self, url_or_name: str) -> str:
        return self.queues.get(url_or_name.rsplit("/", 1)[-1], f"<another queue: {url_or_name}>")

    def schedule_arn(self, group: str, name: str) -> str:
        if group != self.group[0]:
            return f"<another group: {group}>"
        if name in self.declared:
            return self.declared[name]
        arn = self._stack.format_arn(
            service="scheduler", resource="schedule", resource_name=f"{self.group[1]}/{name}"
        )
        return str(render(self._stack.resolve(arn)))

    def function_arn(self, arn: str) -> str:
        return self.runner[1] if arn == self.runner[0] else f"<another function: {arn}>"

    def role_arn(self, arn: str) -> str:
        return self.scheduler_role[1] if arn == self.scheduler_role[0] else f"<another role: {arn}>"


def calls_of(service: str, operation: str, params: dict[str, Any], names: Resources) -> set[Call]:
    if service == "dynamodb":
        if operation == "TransactWriteItems":
            return {
                (TRANSACT[kind], names.table_arn(request["TableName"]))
                for item in params.get("TransactItems", [])
                for kind, request in item.items()
            }
        if operation in ("BatchGetItem", "BatchWriteItem"):
            return {(f"dynamodb:{operation}", names.table_arn(t)) for t in params.get("RequestItems", {})}
        table = names.table_arn(params["TableName"], params.get("IndexName"))
        return {(f"dynamodb:{operation}", table)}
    action = RENAMED.get(f"{service}:{operation}", f"{service}:{operation}")
    if service == "s3":
        return {(action, names.object_arn(params["Bucket"], params.get("Key")))}
    if service == "sqs":
        return {(action, names.queue_arn(params.get("QueueUrl") or params["QueueName"]))}
    if service == "scheduler" and "Name" in params:  # one schedule's call (a list's names none)
        schedule = names.schedule_arn(params.get("GroupName", "default"), params["Name"])
        if operation in ("CreateSchedule", "UpdateSchedule"):  # the schedule carries the Scheduler role
            return {(action, schedule), ("iam:PassRole", names.role_arn(params["Target"]["RoleArn"]))}
        return {(action, schedule)}
    return {(action, None)}


class Recorder:
    """Role name -> the calls its function made, from the clients hooked on."""

    def __init__(self, p: AwsPlatform, synth: Synth) -> None:
        self.p = p
        self.names = Resources(synth, p)
        self.made: dict[str, set[Call]] = {}
        self.at_start: dict[str, set[Call]] = {}  # the part of ``made`` a container's start made
        self.starting = False
        self.hook(p.clients)

    def note(self, calls: set[Call]) -> None:
        if self.p.invoking:
            role = ROLES[self.p.invoking[-1]]
            self.made.setdefault(role, set()).update(calls)
            if self.starting:
                self.at_start.setdefault(role, set()).update(calls)

    def hook(self, clients: Clients) -> None:
        for service in SERVICES:

            def note(params: dict[str, Any], model: Any, service: str = service, **_: Any) -> None:
                if self.p.invoking:  # not the harness's own calls (Lambda's, Scheduler's)
                    self.note(calls_of(service, model.name, params, self.names))

            getattr(clients, service).meta.events.register(f"before-parameter-build.{service}", note)
        self._lambda(clients.lambda_)
        api = clients.rds_data
        if api is None or getattr(api, "_recorded", False):
            return
        for method, action in DATA_API.items():
            if hasattr(api, method):
                setattr(api, method, self._data_api(getattr(api, method), action))
        api._recorded = True

    def _lambda(self, invoker: Any) -> None:
        """The harness's Lambda stand-in (``runtime.aws.runner_events``): an invocation of
        the runner is ``lambda:InvokeFunction`` on the alias it names."""
        if invoker is None or getattr(invoker, "_recorded", False):
            return
        real = invoker.invoke

        def invoke(**request: Any) -> Any:
            self.note({("lambda:InvokeFunction", self.names.function_arn(request["FunctionName"]))})
            return real(**request)

        invoker.invoke = invoke
        invoker._recorded = True

    def _data_api(self, real: Callable[..., Any], action: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            # The Data API reads the cluster's secret with the caller's credentials.
            self.note({(action, None), ("secretsmanager:GetSecretValue", None)})
            return real(*args, **kwargs)

        return call

    def actions(self, role: str) -> set[str]:
        return {action for action, _ in self.made.get(role, set())}


def function_id(synth: Synth, role: str) -> str:
    return str(synth.id(synth.stack.gate.function) if role == "Gate" else synth.functions()[role])


def grants(synth: Synth, role: str) -> list[tuple[list[str], list[str]]]:
    """(actions, resources) of each Allow statement of the role of the function ``role``."""
    statements = synth.function_statements(function_id(synth, role))
    return [
        (as_list(s["Action"]), [str(r) for r in as_list(s["Resource"])])
        for s in statements
        if s["Effect"] == "Allow"
    ]


def allows(granted: list[tuple[list[str], list[str]]], call: Call) -> bool:
    action, resource = call
    return any(
        any(fnmatch.fnmatchcase(action, a) for a in actions)
        and (resource is None or any(fnmatch.fnmatchcase(resource, r) for r in resources))
        for actions, resources in granted
    )


def check(synth: Synth, made: dict[str, set[Call]]) -> None:
    assert made, "the workload made no call inside a function"
    missing = {
        role: sorted(c for c in calls if not allows(grants(synth, role), c)) for role, calls in made.items()
    }
    assert {role: m for role, m in missing.items() if m} == {}


# --- one container per function, started in its first invocation ---------------------------


# The harness's configuration as the stack's environment variables carry it.
def _harness_env(config: AwsConfig) -> dict[str, str]:
    return {
        Env.PROJECT: config.project,
        Env.TABLE: config.table,
        Env.WAKE_QUEUE_URL: config.wake_queue_url,
        Env.WAKE_QUEUE_ARN: config.wake_queue_arn,
        Env.SCHEDULER_GROUP: config.scheduler_group,
        Env.SCHEDULER_ROLE_ARN: config.scheduler_role_arn,
        Env.VALUES_BUCKET: config.values_bucket,
        Env.QUEUE_URLS: json.dumps(config.queue_urls),
        Env.SECRETS_PREFIX: config.secrets_prefix,
        Env.DATABASE_ARN: config.database_resource_arn or "",
        Env.DATABASE_SECRET_ARN: config.database_secret_arn or "",
        Env.DATABASE_NAME: config.database_name or "",
        Env.RUNNER_ARN: config.runner_arn or "",
    }


def function_config(synth: Synth, role: str, p: AwsPlatform) -> AwsConfig:
    """The configuration ``role``'s container reads from the environment the stack gives its
    function: the harness's resources for the settings the function is told of, the
    template's own values for the rest (the worker's threads, fetch's eager time)."""
    told = synth.props(function_id(synth, role))["Environment"]["Variables"]
    ours = _harness_env(p.config)
    env = {k: ours.get(k, v) for k, v in told.items()}
    return replace(AwsConfig.from_env(env), project=str(p.project))


def cold_started(p: AwsPlatform, synth: Synth, recorder: Recorder) -> None:
    """Every function of ``p`` serves from a container of its own, started (inside the
    function's first invocation, so its calls are that function's) from the function's
    environment; a deploy or restart of the harness starts new ones."""
    started: dict[Handler, AwsRuntime] = {}
    serving: list[AwsRuntime] = [p.runtime]
    invoke, deliver = p.invoke, p.deliver

    def own(handler: Handler) -> AwsRuntime:
        if serving[0] is not p.runtime:  # deployed or restarted: every container is new
            started.clear()
            serving[0] = p.runtime
        if handler not in started:
            config, p.config = p.config, function_config(synth, ROLES[handler], p)
            p.invoking.append(handler)
            recorder.starting = True
            try:
                started[handler] = p.container(p.project)
                recorder.at_start.setdefault(ROLES[handler], set())
            finally:
                recorder.starting = False
                p.invoking.remove(handler)
                p.config = config
        return started[handler]

    def invoking(
        handler: Handler, event: dict[str, Any], timeout_s: float, rt: AwsRuntime | None = None
    ) -> Any:
        return invoke(handler, event, timeout_s, rt or own(handler))

    def delivering(
        queue_url: str, queue_arn: str, handler: Handler, timeout_s: float, rt: AwsRuntime | None = None
    ) -> int:
        return deliver(queue_url, queue_arn, handler, timeout_s, rt or own(handler))

    p.invoke = invoking  # type: ignore[method-assign]
    p.deliver = delivering  # type: ignore[method-assign]


def post(p: AwsPlatform, path: str, body: Any) -> dict[str, Any]:
    answer: dict[str, Any] = p.invoke(
        Handler.FETCH, http_event("POST", path, json.dumps(body), now_s=p.now), 29
    )
    p.settle()
    return answer


def run(project: Path, synth: Synth, workload: Callable[[AwsPlatform], None]) -> Recorder:
    with AwsPlatform(project) as p:
        recorder = Recorder(p, synth)
        cold_started(p, synth, recorder)
        workload(p)
    return recorder


def test_the_auctions_calls_are_granted(auction: Synth, tmp_path: Path) -> None:
    """Sales opened, paid, timed out and cancelled, then the console's lists and a run's page;
    the sales database through the Data API. A migration added since the harness loaded the
    code is applied by the first container to start (fetch's), at its cold start; the
    worker's finds it applied."""
    project = shutil.copytree(ROOT / "examples" / "auction", tmp_path / "auction")

    def workload(p: AwsPlatform) -> None:
        (project / "migrations" / "sales" / "002_marks.sql").write_text(
            "CREATE TABLE marks (n INTEGER);\n", encoding="utf-8"
        )
        assert post(p, "/api/sale", {"id": "lot-1", "winner": "ada", "price": 25})["statusCode"] == 201
        assert post(p, "/api/sale/pay", {"id": "lot-1", "user": "ada"})["statusCode"] == 202
        assert post(p, "/api/sale", {"id": "lot-2", "winner": "bob", "price": 5})["statusCode"] == 201
        assert post(p, "/api/sale", {"id": "lot-3", "winner": "cy", "price": 7})["statusCode"] == 201
        assert post(p, "/api/sale/cancel", {"id": "lot-3", "user": "cy"})["statusCode"] == 202
        p.advance("73h")  # lot-2's timeout fires; the reconciler and the expiry run
        assert p.get("sale-lot-2").status == "completed"
        assert p.get("sale-lot-1").status == "completed"
        # The console widget: every run, the completed ones, one run's page.
        base = json.loads((ROOT / "tests" / "events" / "cw_widget_runs.json").read_text(encoding="utf-8"))
        for event in ({}, {"status": "completed"}, {"view": "run", "run_id": "sale-lot-1"}):
            page = p.invoke(Handler.CONSOLE, {**copy.deepcopy(base), **event}, CONSOLE_TIMEOUT_S)
            assert "sale-lot-1" in str(page)
        # Its cancel button on a sale still waiting (its 72-hour timer's schedule dropped).
        assert post(p, "/api/sale", {"id": "lot-4", "winner": "di", "price": 9})["statusCode"] == 201
        cancel = {"view": "run", "run_id": "sale-lot-4", "action": "cancel"}
        p.invoke(Handler.CONSOLE, {**copy.deepcopy(base), **cancel}, CONSOLE_TIMEOUT_S)
        p.settle()
        assert p.get("sale-lot-4").status == "cancelled"

    calls = run(project, auction, workload)
    assert {"Fetch", "Worker", "Console"} <= set(calls.made)
    assert "scheduler:DeleteSchedule" in calls.actions("Console")  # the cancel dropped the timer's schedule
    # Cold starts: fetch's container applied the new migration, the worker's read the ledger;
    # the console's, told of no database, made no call.
    data_api = {"rds-data:BeginTransaction", "rds-data:ExecuteStatement", "rds-data:CommitTransaction"}
    assert data_api | {"secretsmanager:GetSecretValue"} <= {a for a, _ in calls.at_start["Fetch"]}
    assert ("rds-data:ExecuteStatement", None) in calls.at_start["Worker"]
    assert calls.at_start["Console"] == set()
    for role in ("Fetch", "Worker"):  # the routes' and the steps' SQL, on Aurora
        assert "rds-data:ExecuteStatement" in calls.actions(role)
    assert not {a for a in calls.actions("Console") if a.startswith("rds-data:")}
    check(auction, calls.made)


def test_the_calls_of_runs_advanced_where_their_request_lands_are_granted(eager_project: Synth) -> None:
    """The regression: fetch parks ``patient`` on its 2-hour wait and makes its schedule."""

    def workload(p: AwsPlatform) -> None:
        post(p, "/start/patient/pt1", {})
        post(p, "/start/quick/q1", {})
        post(p, "/signal/quick/q1/go", {"n": 1})
        post(p, "/start/inbox/i1", {})
        post(p, "/signal/inbox/i1/go", {"n": 1})
        post(p, "/start/flaky/f1", {})
        post(p, "/signal/flaky/f1/go", {})
        p.advance("3h")
        assert p.get("pt1").status == "completed" and p.get("q1").status == "completed"

    calls = run(ROOT / "tests" / "projects" / "aws_eager", eager_project, workload)
    assert "scheduler:CreateSchedule" in calls.actions("Fetch")
    check(eager_project, calls.made)


def test_the_queue_functions_calls_are_granted(queue_project: Synth) -> None:
    """A user queue's message handled (its handler sends to another queue), one whose handler
    fails (put back with the queue's retry delay), and a run whose step reads a secret."""

    def workload(p: AwsPlatform) -> None:
        p.set_secret("api-key", "k-1")
        emails = p.config.queue_urls["emails"]
        p.clients.sqs.send_message(QueueUrl=emails, MessageBody=json.dumps({"to": "ada"}))
        p.clients.sqs.send_message(QueueUrl=emails, MessageBody=json.dumps(5))  # indexing a number fails
        post(p, "/notify", {"to": "bob"})
        p.advance("10m")
        assert p.get("notify-bob").status == "completed"

    calls = run(ROOT / "tests" / "projects" / "infra_queue", queue_project, workload)
    assert {"sqs:SendMessage", "sqs:ChangeMessageVisibility"} <= calls.actions("Queue")
    # The run's step, handed off by the request that started it, reads it in the runner.
    assert "secretsmanager:GetSecretValue" in calls.actions("Runner")
    assert "lambda:InvokeFunction" in calls.actions("Fetch")
    check(queue_project, calls.made)


# --- the deploy gate -------------------------------------------------------------------------

RENAMED_STEP = ('wf:step("notify",', 'wf:step("notify-winner",')
PIN_RUNS = "\n[deploys]\npin_runs = true\n"


def gate_event(old_version: str = "") -> dict[str, Any]:
    """The custom resource's Update, as CloudFormation sends it (tests/aws/test_deploy_gate.py)."""
    event: dict[str, Any] = {
        "RequestType": "Update",
        "ServiceToken": GATE_ARN,
        "ResponseURL": "http://127.0.0.1:9/response",
        "StackId": "arn:aws:cloudformation:eu-west-1:123456789012:stack/lunaflow-auction/1",
        "RequestId": "r-1",
        "LogicalResourceId": "DeployGateCheck",
        "PhysicalResourceId": "lunaflow-deploy-gate",
        "ResourceType": "Custom::LunaflowDeployGate",
        "ResourceProperties": {"CodeDigest": "new", "Force": "false"},
    }
    if old_version:
        event["OldResourceProperties"] = {"CodeDigest": "old", "ProjectDigest": old_version}
    return event


@contextmanager
def answered(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    """The gate's answers (status, reason), kept instead of PUT to CloudFormation's URL."""
    got: list[tuple[str, str]] = []
    monkeypatch.setattr(gate, "_respond", lambda event, status, reason, data: got.append((status, reason)))
    yield got


def run_gate(p: AwsPlatform, synth: Synth, calls: Recorder, project: Path, old_version: str = "") -> None:
    """The gate's Lambda holding ``project``'s code, invoked by CloudFormation: a container of
    its own, started in the invocation from the gate function's environment, read-only."""
    p.invoking.append(Handler.GATE)
    try:
        clients = p.new_clients()
        calls.hook(clients)
        config = replace(function_config(synth, "Gate", p), project=str(project))
        checking = AwsRuntime(config, clients, read_only=True)
        with container.serving(checking):
            gate.handler(gate_event(old_version), gate_context())  # type: ignore[arg-type]
    finally:
        p.invoking.remove(Handler.GATE)


@contextmanager
def pinned_sales(
    synth: Synth, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[AwsPlatform, Recorder, Path, str]]:
    """The auction with ``[deploys] pin_runs``, sales in flight (one with an input too large
    for its item, in the values bucket): the gate lets the same code through (and saves it in
    the bucket), then code renaming a step the sales recorded, pinning them to the old code.
    Yields the harness (serving the old code still), its recorder, the new code and the old
    code's version."""
    old = shutil.copytree(ROOT / "examples" / "auction", tmp_path / "old")
    with (old / "lunaflow.toml").open("a", encoding="utf-8") as toml:
        toml.write(PIN_RUNS)
    new = shutil.copytree(old, tmp_path / "new")
    sale = new / "sale.lua"
    sale.write_text(sale.read_text(encoding="utf-8").replace(*RENAMED_STEP), encoding="utf-8")
    old_version = ProjectSource.read(old).digest
    monkeypatch.setenv(Env.CODE_DIGEST, "new")  # the gate's bundle is the code it checks
    with AwsPlatform(old) as p, answered(monkeypatch) as answers:
        calls = Recorder(p, synth)
        cold_started(p, synth, calls)
        assert post(p, "/api/sale", {"id": "lot-1", "winner": "ada", "price": 25})["statusCode"] == 201
        big = {"id": "lot-2", "winner": "bob", "price": 5, "note": "x" * 100_000}
        assert p.start("settle-sale", big, id="sale-lot-2").status == "awaiting"
        assert p.get("sale-lot-1").status == "awaiting"
        run_gate(p, synth, calls, old)  # the old code, let through: saved for later pins
        assert answers.pop()[0] == "SUCCESS"
        run_gate(p, synth, calls, new, old_version)
        [(status, reason)] = answers
        assert status == "SUCCESS", reason
        assert {p.runtime.store.pin_of(r) for r in ("sale-lot-1", "sale-lot-2")} == {old_version}
        yield p, calls, new, old_version


def test_the_deploy_gates_calls_are_granted(
    auction: Synth, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate's two deploys of ``pinned_sales``: the first saves the old code, the second
    pins the sales to it (reading the big input from the bucket to replay it)."""
    with pinned_sales(auction, tmp_path, monkeypatch) as (_, calls, _, _):
        pass
    gate_calls = calls.actions("Gate")
    assert {"dynamodb:Query", "dynamodb:UpdateItem", "s3:GetObject", "s3:PutObject"} <= gate_calls
    assert any(r and "/runs/" in r for a, r in calls.made["Gate"] if a == "s3:GetObject")  # the big input
    assert any(r and "/code/" in r for a, r in calls.made["Gate"] if a == "s3:PutObject")  # the saved code
    check(auction, calls.made)


def test_the_calls_of_runs_advanced_on_pinned_code_are_granted(
    auction: Synth, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the gate's deploy of ``pinned_sales`` the aliases move: new containers serve the
    new code. Both sales are paid (``pay-sale``, on the new code, signals ``paid``); the
    request leaves a pinned sale to the worker, whose container loads the old code from its
    snapshot in the values bucket (``code/<version>.json``) and ends the sale on it (the
    new code, its step renamed, would not replay it: a failed wake raises here)."""
    with pinned_sales(auction, tmp_path, monkeypatch) as (p, calls, new, old_version):
        p.project, p.runtime = new, p.container(new)  # every function's next container: the new code
        for lot, user in (("lot-1", "ada"), ("lot-2", "bob")):
            assert post(p, "/api/sale/pay", {"id": lot, "user": user})["statusCode"] == 202
        for run_id in ("sale-lot-1", "sale-lot-2"):
            assert p.get(run_id).status == "completed"
            assert p.runtime.store.pin_of(run_id) is None, "an ended run's pin is dropped"
    snapshot = calls.names.object_arn(p.config.values_bucket, code_key(old_version))
    assert ("s3:GetObject", snapshot) in calls.made["Worker"]  # the pinned code, loaded by the worker
    assert ("s3:GetObject", snapshot) not in calls.made["Fetch"]  # a request leaves a pinned run alone
    check(auction, calls.made)
