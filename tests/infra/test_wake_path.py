"""The stack's side of issue 15: the worker has Lambda's 15 minutes (15.3), a step timeout
one invocation cannot give is refused when the stack is built (15.3), and failed wakes are
counted and alarmed (15.4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_cdk import App

from conftest import Synth
from infra.stack import LunaflowStack, ProjectError
from runtime.aws.contract import NAMESPACE, SERVICE, WAKE_VISIBILITY_S, Metric
from runtime.aws.invocation import LONGEST_STEP_MS, step_timeouts, too_long

TOO_LONG = Path(__file__).resolve().parents[1] / "projects" / "aws_too_long"


def test_the_worker_runs_for_lambdas_fifteen_minutes(auction: Synth) -> None:
    """On main the worker's timeout was 300 s: a long step ran out of its invocation."""
    worker = auction.props(auction.functions()["Worker"])
    assert worker["Timeout"] == 900
    wake = auction.props(auction.id(auction.stack.wake.queue))
    assert wake["VisibilityTimeout"] == WAKE_VISIBILITY_S == 6 * 900


def test_failed_wakes_are_counted_and_alarmed(auction: Synth) -> None:
    alarms = [
        auction.props(auction.id(a))
        for a in auction.stack.alarms.alarms
        if auction.props(auction.id(a)).get("MetricName") == Metric.WAKE_FAILURES
    ]
    [alarm] = alarms
    assert alarm["Namespace"] == NAMESPACE
    assert {d["Name"]: d["Value"] for d in alarm["Dimensions"]} == {"service": SERVICE}
    assert (alarm["ComparisonOperator"], alarm["Threshold"], alarm["Statistic"]) == (
        "GreaterThanThreshold",
        0,
        "Sum",
    )


def test_step_timeouts_written_in_a_project_are_found_with_their_place() -> None:
    found = [(t.script, t.line, t.step, t.timeout_ms) for t in step_timeouts(TOO_LONG)]
    assert found == [("main.lua", 3, "quick", 14 * 60_000), ("main.lua", 4, "render", 20 * 60_000)]


def test_a_step_timeout_longer_than_an_invocation_is_refused_when_the_stack_is_built() -> None:
    """14 minutes is the longest a step may ask for on AWS; 20 is refused before anything
    is deployed, naming the script, the line, the step and the limit."""
    assert LONGEST_STEP_MS == 840_000
    [problem] = too_long(TOO_LONG)
    assert problem.startswith("main.lua:4: step 'render' has timeout 1200000ms, more than the 840000ms")
    with pytest.raises(ProjectError, match=r"main\.lua:4: step 'render' has timeout 1200000ms"):
        LunaflowStack(App(), "lunaflow-too-long", project=TOO_LONG)


def test_the_example_project_asks_for_no_step_longer_than_an_invocation() -> None:
    assert too_long(Path(__file__).resolve().parents[2] / "examples" / "auction") == []
