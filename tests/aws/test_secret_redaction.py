"""Secrets never leak through error text or logs: locally (LocalPlatform, a real
`lunaflow dev`) and on AWS (the Lambda handlers on moto).

Issue 20.5: "`http.get(url .. "?api_key=" .. secret "api-key")` that fails to connect puts the
whole URL, secret included, into the run's error, the journal, the DynamoDB table, the
console HTML and the function's ERROR log (locally too). Error texts never carry URL query
strings or userinfo, and values the platform handed out as secrets are redacted wherever run
data is written or shown."
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from functions import console, fetch, queue, worker
from runtime.aws.runtime import AwsRuntime
from runtime.console import render
from runtime.services.base import ServiceError
from runtime.services.builtins import http_request
from runtime.testing import LocalPlatform
from tests.support.aws_events import PROJECTS, http_event
from tests.support.aws_world import AwsWorld, FakeContext, receive, run_due, sqs_record
from tests.support.devserver import Servers, wait_for

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")

PROJECT = PROJECTS / "secret_leaks"
SECRET = "sk_live_5f3a9c2e7b41"
SHOWN = "[secret 'api-key']"
REFUSED = "http://127.0.0.1:1"  # nothing listens on port 1: the connection is refused at once


def clean(text: str) -> None:
    """Neither the secret nor the query string that carried it."""
    assert SECRET not in text
    assert "api_key=" not in text


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> Iterator[Callable[[], str]]:
    """Everything the process logged (lunaflow's loggers at every level, the libraries' from
    INFO, as a Lambda logs), as one text."""
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger="lunaflow")

    def text() -> str:
        out = []
        for r in caplog.records:
            out.append(r.getMessage())
            out.append(json.dumps({k: str(v) for k, v in vars(r).items()}))
            if r.exc_info:
                out.append(logging.Formatter().formatException(r.exc_info))
        return "\n".join(out)

    yield text


# --- error texts of http.request ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"http://127.0.0.1:1/v1/items?api_key={SECRET}", "http://127.0.0.1:1/v1/items?..."),
        (f"http://127.0.0.1:1/v1?a=1&api_key={SECRET}#frag", "http://127.0.0.1:1/v1?..."),
        (f"http://ada:{SECRET}@127.0.0.1:1/v1", "http://127.0.0.1:1/v1"),
        (f"http://{SECRET}@127.0.0.1:1/", "http://127.0.0.1:1/"),
        (f"ftp://ada:{SECRET}@example.com/x?api_key={SECRET}", "ftp://example.com/x?..."),
    ],
)
def test_a_failed_request_names_its_url_without_query_string_or_userinfo(url: str, shown: str) -> None:
    with pytest.raises(ServiceError) as e:
        http_request({"method": "GET", "url": url, "timeout": "5s"}, None)
    message = str(e.value)
    clean(message)
    assert "ada" not in message
    assert shown in message, message


# --- locally ----------------------------------------------------------------------------------


@pytest.fixture
def p(tmp_path: Path) -> Iterator[LocalPlatform]:
    with LocalPlatform(PROJECT, data_dir=tmp_path) as plat:
        plat.set_secret("api-key", SECRET)
        yield plat


def local_run_text(p: LocalPlatform, run_id: str) -> str:
    """What the platform wrote and shows of a run: its error, its journal, its log lines and
    the console's page."""
    run = p.get(run_id)
    journal = [{"kind": e.kind, "name": e.name, "data": e.data} for e in p.journal(run_id)]
    logs = [r for r in p.platform.logs if r.get("run") == run_id]
    page = render.run_page(p.platform, render.LocalActions(), run_id)
    return "\n".join([str(run.error), json.dumps(journal), json.dumps(logs), page])


def test_a_refused_request_leaves_no_secret_in_the_run_locally(
    p: LocalPlatform, logged: Callable[[], str]
) -> None:
    """The issue's case: the URL carried the secret in its query string."""
    p.start("call-api", {"base": REFUSED}, id="call-1")
    run = p.get("call-1")
    assert run.status == "failed"
    assert "http://127.0.0.1:1/v1/items?..." in str(run.error)
    clean(local_run_text(p, "call-1"))
    clean(logged())


def test_userinfo_leaves_no_secret_in_the_run_locally(p: LocalPlatform, logged: Callable[[], str]) -> None:
    p.start("call-api", {"as_user": True, "host": "127.0.0.1:1"}, id="call-2")
    assert p.get("call-2").status == "failed"
    clean(local_run_text(p, "call-2"))
    clean(logged())


def test_a_secret_quoted_by_a_step_is_redacted_in_errors_journal_and_logs(
    p: LocalPlatform, logged: Callable[[], str]
) -> None:
    """The step's error quotes the secret, and so does a log line (message and fields)."""
    p.start("say-it", {}, id="say-1")
    p.advance("2s")
    run = p.get("say-1")
    assert run.status == "failed"
    assert run.error == f"step 'say' failed after 2 attempts: refused with {SHOWN}"
    failures = [e.data["error"] for e in p.journal("say-1") if e.kind == "step.failed"]
    assert failures == [f"refused with {SHOWN}"] * 2
    said = [r for r in p.platform.logs if r.get("run") == "say-1"]
    assert said and said[0]["message"] == f"using key {SHOWN}"
    assert said[0]["fields"] == {"key": SHOWN, "nested": [SHOWN, {"deeper": f"x{SHOWN}x"}]}
    clean(local_run_text(p, "say-1"))
    clean(logged())


def test_a_secret_in_the_workflow_functions_error_is_redacted(
    p: LocalPlatform, logged: Callable[[], str]
) -> None:
    p.start("raise-it", {}, id="raise-1")
    assert p.get("raise-1").error == f"the workflow function raised holding {SHOWN}"
    clean(local_run_text(p, "raise-1"))
    clean(logged())


def test_handler_errors_are_redacted_in_logs_and_dead_letters(
    p: LocalPlatform, logged: Callable[[], str]
) -> None:
    """A fetch handler's 500 is logged; a queue handler's error is kept with the dead letter."""
    assert p.fetch("GET", "/boom").status_code == 500
    p.services.call("queue", "orders", "send", [{"n": 1}])
    p.settle()
    (dead,) = p.services.queues.dead_letters("orders")
    assert dead["error"] == f"the queue handler saw {SHOWN}"
    clean(logged())


def test_lunaflow_dev_writes_and_shows_no_secret(tmp_path: Path) -> None:
    """A real `lunaflow dev`: the console page of a failed run and everything the process
    printed carry no secret."""
    import subprocess
    import sys

    from tests.support.devserver import ROOT

    data = tmp_path / "data"
    subprocess.run(
        [sys.executable, "-m", "runtime.cli", "secret", "set", "api-key", SECRET, "--data", str(data)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=60,
    )
    servers = Servers(tmp_path)
    try:
        dev = servers.start(PROJECT, data)
        for workflow, run_id, input in [
            ("call-api", "call-1", {"base": REFUSED}),
            ("raise-it", "raise-1", {}),
        ]:
            body = {"workflow": workflow, "id": run_id, "input": input}
            assert dev.post_json("/start", body).status == 202
            page = wait_for(
                f"{run_id} to fail",
                lambda run_id=run_id: (lambda r: r.body if "failed" in r.body else None)(
                    dev.get(f"/_console/runs/{run_id}")
                ),
                timeout=20,
            )
            clean(page)
        assert dev.get("/boom").status == 500
        clean(dev.output())
    finally:
        servers.close()


# --- on AWS -----------------------------------------------------------------------------------


@pytest.fixture
def rt(make_runtime: Callable[..., AwsRuntime]) -> AwsRuntime:
    runtime = make_runtime(PROJECT)
    runtime.store.add_secret("api-key", SECRET)
    return runtime


def table_text(aws: AwsWorld) -> str:
    """Every item of the DynamoDB table, as text."""
    items: list[Any] = []
    request: dict[str, Any] = {"TableName": aws.table}
    while True:
        page = aws.dynamodb.scan(**request)
        items += page["Items"]
        if "LastEvaluatedKey" not in page:
            return json.dumps(items)
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def widget(run_id: str) -> str:
    event = json.loads((Path(__file__).parents[1] / "events" / "cw_widget_runs.json").read_text())
    event.update({"view": "run", "run_id": run_id})
    out = console.handler(event, FakeContext(function_name="lunaflow-console"))
    assert isinstance(out, str) and run_id in out
    return out


@pytest.mark.parametrize(
    ("workflow", "input"),
    [
        ("call-api", {"base": REFUSED}),
        ("call-api", {"as_user": True, "host": "127.0.0.1:1"}),
        ("say-it", {}),
        ("raise-it", {}),
    ],
)
def test_no_secret_in_the_table_the_widget_or_the_logs_on_aws(
    rt: AwsRuntime, aws: AwsWorld, logged: Callable[[], str], workflow: str, input: dict[str, Any]
) -> None:
    rt.platform.start(workflow, input, id="r-1")
    run_due(aws, rt.clock.now(), worker.handler)
    rt.clock.advance(5)
    run_due(aws, rt.clock.now(), worker.handler)
    assert rt.platform.get("r-1").status == "failed"
    clean(table_text(aws))
    clean(widget("r-1"))
    clean(logged())


def test_handler_errors_are_redacted_in_the_functions_logs_on_aws(
    rt: AwsRuntime, aws: AwsWorld, logged: Callable[[], str]
) -> None:
    """The fetch function's ERROR line for a 500, and the queue function's failed record."""
    answer = fetch.handler(http_event("GET", "/boom"), FakeContext(function_name="lunaflow-fetch"))
    assert answer["statusCode"] == 500
    assert SHOWN in logged()
    _, url, arn = aws.user_queues["orders"]
    aws.sqs.send_message(QueueUrl=url, MessageBody="{}")
    records = [sqs_record(m, arn) for m in receive(aws.sqs, url)]
    with pytest.raises(Exception, match="All records failed"):
        queue.handler({"Records": records}, FakeContext(function_name="lunaflow-queue"))
    clean(logged())
