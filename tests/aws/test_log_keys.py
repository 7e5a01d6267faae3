"""Which run and step a log line of the worker carries (Powertools keys on every line).

Issue 20.3: "In the worker, lines inside a step are tagged with the previous step, run B's
lines carry run A's step, and a dropped-wake warning carries another run's id, so the
dashboard's one-run log query shows other runs' lines. Set the keys when a step starts and
clear them at each activation and each record."
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import functions._runtime as container
from functions import worker
from runtime.aws.runtime import AwsRuntime
from tests.support.aws_events import PROJECTS
from tests.support.aws_world import AwsWorld, FakeContext, receive, sqs_record

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")

PROJECT = PROJECTS / "aws_logs"
KEYS = ("run_id", "workflow", "step")


@pytest.fixture
def lines() -> Iterator[list[dict[str, Any]]]:
    """Every line the Lambda writes, as the JSON Powertools prints (keys included)."""
    got: list[dict[str, Any]] = []
    formatter = container.logger.registered_formatter

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            got.append(json.loads(formatter.format(record)))

    handler = Keep(level=logging.DEBUG)
    base = container.logger._logger
    base.addHandler(handler)
    yield got
    base.removeHandler(handler)


def tags(lines: list[dict[str, Any]], message: str) -> list[dict[str, Any]]:
    return [{k: line[k] for k in KEYS if k in line} for line in lines if line.get("message") == message]


def said(lines: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """The keys of each Lua log line whose message starts with ``text``."""
    return [
        {k: line[k] for k in KEYS if k in line}
        for line in lines
        if str(line.get("message", "")).startswith(text + " ")
    ]


def test_each_line_carries_its_own_run_and_step(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld, lines: list[dict[str, Any]]
) -> None:
    """Two runs advanced in one batch, then a wake without a run id: every line names the
    run and step it was said in, and only those."""
    rt = make_runtime(PROJECT)
    rt.platform.start("chatty", {"who": "a"}, id="run-a")
    rt.platform.start("chatty", {"who": "b"}, id="run-b")
    messages = receive(aws.sqs, aws.wake_url)
    assert [json.loads(m["Body"])["run_id"] for m in messages] == ["run-a", "run-b"]
    records = [sqs_record(m, aws.wake_arn) for m in messages]
    records.append({**records[0], "messageId": "00000000-0000-4000-8000-00000000dead", "body": "{}"})
    lines.clear()
    answer = worker.handler({"Records": records}, FakeContext())
    assert answer == {"batchItemFailures": []}

    for text in ("before", "in first", "between", "in second", "after"):
        assert len(said(lines, text)) == 2, text  # one line per run, each tagged below
    for run in ("a", "b"):
        run_keys = {"run_id": f"run-{run}", "workflow": "chatty"}
        assert [t for t in said(lines, "before") if t.get("run_id") == f"run-{run}"] == [run_keys]
        assert [t for t in said(lines, "in first") if t.get("run_id") == f"run-{run}"] == [
            {**run_keys, "step": "first"}
        ]
        assert [t for t in said(lines, "between") if t.get("run_id") == f"run-{run}"] == [run_keys]
        assert [t for t in said(lines, "in second") if t.get("run_id") == f"run-{run}"] == [
            {**run_keys, "step": "second"}
        ]
        assert [t for t in said(lines, "after") if t.get("run_id") == f"run-{run}"] == [run_keys]
    assert tags(lines, "wake message without a run id dropped") == [{}]


def test_a_later_invocation_does_not_inherit_the_last_runs_keys(
    make_runtime: Callable[..., AwsRuntime], aws: AwsWorld, lines: list[dict[str, Any]]
) -> None:
    """The container outlives the invocation: the next one's lines start with no run."""
    rt = make_runtime(PROJECT)
    rt.platform.start("chatty", {"who": "a"}, id="run-a")
    messages = receive(aws.sqs, aws.wake_url)
    worker.handler({"Records": [sqs_record(m, aws.wake_arn) for m in messages]}, FakeContext())
    lines.clear()
    bad = {**sqs_record(messages[0], aws.wake_arn), "body": "not json"}
    worker.handler({"Records": [bad]}, FakeContext())
    assert tags(lines, "wake message without a run id dropped") == [{}]
