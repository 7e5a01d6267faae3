"""Issue: "Configuration comes from environment variables read when the handler is built":
importing a handler module reads nothing; a missing variable is a clear error naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable

import pytest

import functions._runtime as container
from functions import fetch
from runtime.aws.config import AwsConfig
from runtime.aws.runtime import AwsRuntime
from runtime.errors import LunaflowError
from runtime.store.dynamodb import RUN_SK
from tests.support.aws_events import PROJECTS, ROOT, http_event
from tests.support.aws_world import AwsWorld, FakeContext

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")

HTTP = PROJECTS / "aws_http"

REQUIRED = [
    "LUNAFLOW_TABLE",
    "LUNAFLOW_WAKE_QUEUE_URL",
    "LUNAFLOW_WAKE_QUEUE_ARN",
    "LUNAFLOW_SCHEDULER_GROUP",
    "LUNAFLOW_SCHEDULER_ROLE_ARN",
    "LUNAFLOW_VALUES_BUCKET",
]

FULL = {
    "LUNAFLOW_PROJECT": "bundle/project",
    "LUNAFLOW_TABLE": "runs",
    "LUNAFLOW_WAKE_QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/123456789012/wake",
    "LUNAFLOW_WAKE_QUEUE_ARN": "arn:aws:sqs:eu-west-1:123456789012:wake",
    "LUNAFLOW_SCHEDULER_GROUP": "timers",
    "LUNAFLOW_SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/scheduler",
    "LUNAFLOW_VALUES_BUCKET": "lunaflow-prod-values",
    "LUNAFLOW_QUEUE_URLS": json.dumps({"orders": "https://sqs.eu-west-1.amazonaws.com/123456789012/o"}),
    "LUNAFLOW_SECRETS_PREFIX": "lunaflow/prod/",
    "LUNAFLOW_DATABASE_ARN": "arn:aws:rds:eu-west-1:123456789012:cluster:db",
    "LUNAFLOW_DATABASE_SECRET_ARN": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db",
    "LUNAFLOW_DATABASE_NAME": "postgres",
    "LUNAFLOW_RUNNER_ARN": "arn:aws:lambda:eu-west-1:123456789012:function:lunaflow-prod-runner:live",
}


def test_every_setting_is_read_from_its_variable() -> None:
    config = AwsConfig.from_env(FULL)
    assert config.project == "bundle/project"
    assert config.table == "runs"
    assert config.wake_queue_url == FULL["LUNAFLOW_WAKE_QUEUE_URL"]
    assert config.wake_queue_arn == FULL["LUNAFLOW_WAKE_QUEUE_ARN"]
    assert config.scheduler_group == "timers"
    assert config.scheduler_role_arn == FULL["LUNAFLOW_SCHEDULER_ROLE_ARN"]
    assert config.values_bucket == "lunaflow-prod-values"
    assert config.queue_urls == {"orders": "https://sqs.eu-west-1.amazonaws.com/123456789012/o"}
    assert config.secrets_prefix == "lunaflow/prod/"
    assert config.database_resource_arn == FULL["LUNAFLOW_DATABASE_ARN"]
    assert config.database_secret_arn == FULL["LUNAFLOW_DATABASE_SECRET_ARN"]
    assert config.database_name == "postgres"
    assert config.runner_arn == FULL["LUNAFLOW_RUNNER_ARN"]


def test_optional_settings_have_defaults() -> None:
    config = AwsConfig.from_env({k: FULL[k] for k in REQUIRED})
    assert config.eager_ms == 1000
    assert config.queue_urls == {}
    assert config.secrets_prefix == ""
    assert config.database_resource_arn is None and config.database_secret_arn is None
    assert config.runner_arn is None  # no runner: hand-offs take the wake queue


@pytest.mark.parametrize("name", REQUIRED)
def test_missing_variable_is_an_error_naming_it(name: str) -> None:
    env = {k: v for k, v in FULL.items() if k != name}
    with pytest.raises(LunaflowError) as caught:
        AwsConfig.from_env(env)
    message = str(caught.value)
    assert f"environment variable {name} is not set" in message
    assert "cdk deploy" in message


@pytest.mark.parametrize("name", REQUIRED)
def test_empty_variable_counts_as_missing(name: str) -> None:
    with pytest.raises(LunaflowError, match=name):
        AwsConfig.from_env({**FULL, name: ""})


def test_importing_the_handler_modules_reads_no_configuration() -> None:
    """A Lambda imports its handler module at init; nothing is read or built until the first
    event (a fresh interpreter, with no LUNAFLOW_* set and every read recorded)."""
    script = textwrap.dedent(
        """
        import os, sys
        reads = []
        class Recording(type(os.environ)):
            def __getitem__(self, key):
                if str(key).startswith("LUNAFLOW_"):
                    reads.append(key)
                return super().__getitem__(key)
        env = Recording(os.environ._data, os.environ.encodekey, os.environ.decodekey,
                        os.environ.encodevalue, os.environ.decodevalue)
        os.environ = env
        import functions.fetch, functions.worker, functions.runner, functions.queue
        import functions._runtime as container
        assert container._runtime is None, "a runtime was built at import"
        print("READS", reads)
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LUNAFLOW_")}
    env.update(AWS_DEFAULT_REGION="eu-west-1", POWERTOOLS_TRACE_DISABLED="1")
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "READS []" in done.stdout


def test_handler_without_configuration_fails_naming_the_variable(
    aws: AwsWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first event builds the runtime; a missing variable is the error it raises."""
    container.reset()
    monkeypatch.setenv("LUNAFLOW_PROJECT", str(HTTP))
    monkeypatch.delenv("LUNAFLOW_SCHEDULER_ROLE_ARN")
    with pytest.raises(LunaflowError, match="LUNAFLOW_SCHEDULER_ROLE_ARN"):
        fetch.handler(http_event("GET", "/x"), FakeContext())
    assert container._runtime is None


def test_handler_builds_its_runtime_from_the_environment_once_per_container(
    aws: AwsWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built on the first event from LUNAFLOW_* (and boto3's own AWS_* settings), then kept
    for the container's life: a changed variable is seen only by a new container."""
    container.reset()
    monkeypatch.setenv("LUNAFLOW_PROJECT", str(HTTP))
    answer = fetch.handler(http_event("GET", "/x", query="a=1"), FakeContext())
    assert answer["statusCode"] == 200
    built = container.runtime()
    assert isinstance(built, AwsRuntime)
    assert built.config.table == aws.table
    assert built.config.wake_queue_url == aws.wake_url
    assert built.config.scheduler_group == aws.group
    assert built.config.queue_urls == {"orders": aws.user_queues["orders"][1]}
    assert str(built.platform.source.root) == str(HTTP)

    monkeypatch.setenv("LUNAFLOW_TABLE", "another-table")
    fetch.handler(http_event("GET", "/x"), FakeContext())
    assert container.runtime() is built and built.config.table == aws.table

    container.reset()
    assert container.runtime().config.table == "another-table"


def test_runtime_built_from_the_environment_reaches_moto(
    aws: AwsWorld, make_runtime: Callable[..., AwsRuntime]
) -> None:
    """The runtime's store writes to the table the environment names."""
    rt = make_runtime(PROJECTS / "aws_timers")
    rt.platform.start("nap", {"sleep": "1h"}, id="cfg-1")
    item = aws.dynamodb.get_item(TableName=aws.table, Key={"pk": {"S": "RUN#cfg-1"}, "sk": {"S": RUN_SK}})
    assert item["Item"]["workflow"]["S"] == "nap"


@pytest.mark.parametrize("value", ["-1", "20000", "1s"])
def test_a_bad_eager_time_is_refused_naming_the_variable_and_the_setting(value: str) -> None:
    with pytest.raises(LunaflowError, match="LUNAFLOW_EAGER_MS.*-c eagerMs"):
        AwsConfig.from_env({**FULL, "LUNAFLOW_EAGER_MS": value})


def test_the_eager_time_is_read_from_its_variable() -> None:
    assert AwsConfig.from_env({**FULL, "LUNAFLOW_EAGER_MS": "0"}).eager_ms == 0
    assert AwsConfig.from_env({**FULL, "LUNAFLOW_EAGER_MS": "2500"}).eager_ms == 2500


def test_the_lambda_client_is_made_on_its_first_call_not_at_a_cold_start() -> None:
    """Only fetch calls Lambda (its hand-offs to the runner): the other functions' cold starts
    do not load its model or make its client."""
    import botocore.session

    from runtime.aws.runtime import Clients, LazyClient

    session = botocore.session.get_session()
    session.set_config_variable("region", "eu-west-1")
    clients = Clients.from_botocore(session)
    assert isinstance(clients.lambda_, LazyClient) and clients.lambda_._made is None
    assert clients.lambda_.meta.service_model.service_name == "lambda"  # made now
    assert clients.lambda_._made is not None


def test_the_lazy_client_is_made_once_when_two_threads_call_it_first() -> None:
    import threading

    from runtime.aws.runtime import LazyClient

    made: list[object] = []
    gate = threading.Barrier(2)

    class Session:  # botocore's session, as far as LazyClient uses it
        def create_client(self, service: str, config: object = None) -> object:
            made.append(service)
            return type("Client", (), {"invoke": lambda self, **_: {"StatusCode": 202}})()

    lazy = LazyClient(Session(), "lambda")

    def call() -> None:
        gate.wait()
        lazy.invoke(FunctionName="f", InvocationType="Event", Payload=b"{}")

    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert made == ["lambda"]
