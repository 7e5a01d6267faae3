"""The console on AWS: functions/console.py rendering CloudWatch custom widgets from DynamoDB,
under moto.

Issue: "The widget Lambda, called with the event CloudWatch sends (fixtures in
`tests/events/`), returns the same list and timeline, with `cwdb-action` buttons whose
payloads resume and cancel when sent back to it, under moto."

SPEC 4: "on AWS, a CloudWatch dashboard whose custom widgets (Lambda-rendered HTML, buttons
as `cwdb-action`) show the same lists, timelines and actions".

A custom widget's Lambda receives the widget's params as top-level keys plus
``widgetContext`` (tests/events/cw_widget_runs.json); a clicked ``cwdb-action`` sends its
JSON's keys the same way (tests/events/cw_widget_action.json). Each test here renders what
the dashboard would show, picks a button a reader would click, merges its payload into the
event as the dashboard does, and calls the function again. "The same" is checked against
the local ``/_console`` renderer over the same store: the rows of the list and of the
timeline read the same, only links and buttons differ.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from functions import console, worker
from runtime.aws.runtime import AwsRuntime
from runtime.console import render
from runtime.core.clock import FakeClock
from tests.support.aws_world import AwsWorld, FakeContext, run_due

from . import EVENTS, PROJECT, Html
from .conftest import CONSOLE_ARN

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")


def load(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return event


def call(event: dict[str, Any], context: FakeContext) -> Html:
    out = console.handler(copy.deepcopy(event), context)
    assert isinstance(out, str), out
    return Html(out)


def click(event: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """What the dashboard sends when a ``cwdb-action`` is clicked: its JSON's keys at the
    top level of the event, beside ``widgetContext``."""
    return {**copy.deepcopy(event), **payload}


def rows(page: Html) -> list[list[str]]:
    """The text of every table row, cell by cell (links and buttons carry no row text)."""
    out: list[list[str]] = []
    current: list[str] | None = None
    for tag in page.tags:
        if tag.name == "tr":
            current = []
            out.append(current)
        elif tag.name in ("td", "th") and current is not None:
            current.append(" ".join(tag.text.split()))
    return out


class World:
    """One deployment under moto with a fake clock: start runs, let the wake path run."""

    def __init__(self, aws: AwsWorld, rt: AwsRuntime, clock: FakeClock) -> None:
        self.aws, self.rt, self.clock = aws, rt, clock

    def settle(self, seconds: float = 0.0) -> None:
        self.clock.advance(seconds)
        run_due(self.aws, self.clock.now(), worker.handler)

    def start(self, workflow: str, input: Any, id: str) -> None:
        self.rt.platform.start(workflow, input, id=id)
        self.settle()

    def status(self, run_id: str) -> str:
        return self.rt.platform.get(run_id).status

    def fetch(self, method: str, path: str, body: str = "") -> int:
        response, failure = self.rt.fetch(
            {"method": method, "path": path, "query": {}, "headers": {}, "body": body}
        )
        assert failure is None, failure
        return response.status_code


@pytest.fixture
def world(aws: AwsWorld, make_runtime: Callable[..., AwsRuntime]) -> World:
    clock = FakeClock()
    return World(aws, make_runtime(PROJECT, clock=clock), clock)


def failed(world: World, workflow: str, input: Any, run_id: str) -> None:
    world.start(workflow, input, run_id)
    world.settle(1)  # past the 100ms backoff: the second attempt fails for good
    assert world.status(run_id) == "failed"


def test_fixtures_are_the_custom_widget_event_shape() -> None:
    """CloudWatch calls a custom widget's Lambda with the widget's params at the top level
    and a ``widgetContext``; a ``cwdb-action`` call adds its JSON's keys at the top level."""
    context_keys = {
        "dashboardName", "widgetId", "accountId", "locale", "timezone", "period", "isAutoPeriod",
        "timeRange", "theme", "linkCharts", "title", "forms", "params", "width", "height",
    }  # fmt: skip
    runs, action = load("cw_widget_runs.json"), load("cw_widget_action.json")
    for event in (runs, action):
        assert set(event["widgetContext"]) == context_keys
        assert set(event["widgetContext"]["timezone"]) == {"label", "offsetISO", "offsetInMinutes"}
        assert {"mode", "start", "end"} <= set(event["widgetContext"]["timeRange"])
    assert runs["view"] == runs["widgetContext"]["params"]["view"] == "runs"
    assert {k: action[k] for k in ("view", "run_id", "action")} == {
        "view": "run",
        "run_id": "restock-7",
        "action": "resume",
    }


def test_runs_widget_lists_the_same_runs_as_the_local_page(
    world: World, console_context: FakeContext
) -> None:
    """The runs widget shows each run with its workflow, status and current step: the same
    rows as the local page over the same store."""
    failed(world, "charge", {"card": "4242"}, "charge-1")
    world.start("parent", None, "parent-1")
    page = call(load("cw_widget_runs.json"), console_context)
    local = Html(render.runs_page(world.rt.platform, render.LocalActions(), render.RunQuery()))
    got = rows(page)
    assert got == rows(local)
    by_id = {r[0]: r for r in got[1:]}
    assert set(by_id) == {"charge-1", "parent-1", "parent-1-child"}
    assert by_id["charge-1"][1:4] == ["charge", "failed", "step 'charge-card'"]
    assert by_id["parent-1"][1:4] == ["parent", "awaiting", "await 'done'"]
    assert by_id["parent-1-child"][1:4] == ["child", "awaiting", "await 'go'"]
    # Each run id is a link whose cwdb-action opens that run in the widget.
    for run_id in by_id:
        link = page.actions_for(run_id, view="run", run_id=run_id)[0]
        assert link.attrs["action"] == "call"
        assert link.attrs["endpoint"] == CONSOLE_ARN
        assert link.attrs["display"] == "widget"
    assert "<script" not in page.source.lower()


def test_runs_widget_filters_by_status_through_its_links(world: World, console_context: FakeContext) -> None:
    """The filter links' payloads, sent back, list only the runs of that status."""
    failed(world, "charge", {"card": "4242"}, "charge-1")
    world.start("parent", None, "parent-1")
    event = load("cw_widget_runs.json")
    link = call(event, console_context).action("failed 1", view="runs")
    assert link.payload == {"view": "runs", "status": "failed"}
    got = rows(call(click(event, link.payload), console_context))
    assert [r[0] for r in got[1:]] == ["charge-1"]


def test_run_widget_shows_the_same_timeline_with_error_and_attempts(
    world: World, console_context: FakeContext
) -> None:
    """SPEC 4: the console "shows one run's journal as a timeline (each step's attempts
    with times, errors and step ids ...)"; on AWS the same as locally."""
    failed(world, "charge", {"card": "4242"}, "charge-1")
    event = load("cw_widget_runs.json")
    link = call(event, console_context).action("charge-1", view="run", run_id="charge-1")
    page = call(click(event, link.payload), console_context)
    local = Html(render.run_page(world.rt.platform, render.LocalActions(), "charge-1"))
    assert rows(page) == rows(local)
    text = page.text
    assert "step 'charge-card' failed after 2 attempts: card declined for 4242" in text
    assert "attempt 1: failed" in text and "attempt 2: failed" in text
    assert "charge-1/charge-card/1/1" in text and "charge-1/charge-card/1/2" in text
    assert text.count("card declined for 4242") >= 3  # the run's error and each attempt's
    # A failed run offers resume and cancel; both ask before they act.
    resume = page.action("Resume", run_id="charge-1")
    cancel = page.action("Cancel", run_id="charge-1")
    assert resume.payload == {"view": "run", "run_id": "charge-1", "action": "resume"}
    assert cancel.payload == {"view": "run", "run_id": "charge-1", "action": "cancel"}
    assert "Resume charge-1?" in resume.attrs["confirmation"]
    assert "Cancel run charge-1?" in cancel.attrs["confirmation"]
    assert resume.attrs["endpoint"] == cancel.attrs["endpoint"] == CONSOLE_ARN


def test_resume_button_payload_resumes_the_failed_run(world: World, console_context: FakeContext) -> None:
    """The seed: the console "offers resume for failed runs"; the widget's Resume button,
    sent back to the function, resumes the run, which then completes on the wake path."""
    failed(world, "restock", None, "restock-1")
    assert world.fetch("POST", "/flag/stock", "the widget test") == 200
    event = load("cw_widget_runs.json")
    opened = click(
        event, call(event, console_context).action("restock-1", view="run", run_id="restock-1").payload
    )
    resume = call(opened, console_context).action("Resume", run_id="restock-1")
    after = call(click(opened, resume.payload), console_context)
    assert "Run restock-1 resumed." in after.text
    assert world.status("restock-1") != "failed"
    world.settle()
    run = world.rt.platform.get("restock-1")
    assert (run.status, run.result) == ("completed", {"reserved": "set by the widget test"})
    # The page now shows the resume and the attempt that succeeded, and no more buttons.
    page = call(opened, console_context)
    assert "completed" in page.text and "resumed" in page.text
    # Attempts are counted across the resume (SPEC 3: "attempt counts recorded attempts").
    assert "attempt 3: ok" in page.text and "restock-1/reserve/1/3" in page.text
    assert [a.payload.get("action") for a in page.actions if "action" in a.payload] == ["signal"]


def test_cancel_button_payload_cancels_an_awaiting_parent_and_its_child(
    world: World, console_context: FakeContext
) -> None:
    """The seed: "Cancelling a run cancels the runs it spawned." The Cancel button's
    confirmation names the child it will also cancel."""
    world.start("parent", None, "parent-1")
    assert world.status("parent-1") == "awaiting" and world.status("parent-1-child") == "awaiting"
    event = load("cw_widget_runs.json")
    opened = click(event, call(event, console_context).actions_for("parent-1", run_id="parent-1")[0].payload)
    page = call(opened, console_context)
    assert "children parent-1-child" in page.text
    assert [a.label for a in page.actions if a.payload.get("action")] == [
        "Cancel",
        "Send signal",
    ]  # no resume
    cancel = page.action("Cancel", run_id="parent-1", action="cancel")
    assert "This also cancels the runs it started: parent-1-child." in cancel.attrs["confirmation"]
    after = call(click(opened, cancel.payload), console_context)
    assert "Run parent-1 cancelled." in after.text
    world.settle()
    assert world.status("parent-1") == "cancelled"
    assert world.status("parent-1-child") == "cancelled"


def test_action_event_fixture_resumes_the_run_it_names(world: World, console_context: FakeContext) -> None:
    """tests/events/cw_widget_action.json as CloudWatch sends it resumes its run."""
    event = load("cw_widget_action.json")
    failed(world, "restock", None, event["run_id"])
    world.fetch("POST", "/flag/stock", "the fixture")
    page = call(event, console_context)
    assert f"Run {event['run_id']} resumed." in page.text
    world.settle()
    assert world.status(event["run_id"]) == "completed"


def test_refused_action_is_shown_in_the_widget(world: World, console_context: FakeContext) -> None:
    """Resume applies to failed runs only (SPEC 3): a stale button on a completed run shows
    the refusal instead of failing the widget."""
    failed(world, "restock", None, "restock-1")
    world.fetch("POST", "/flag/stock", "x")
    event = click(load("cw_widget_runs.json"), {"view": "run", "run_id": "restock-1", "action": "resume"})
    call(event, console_context)
    world.settle()
    page = call(event, console_context)  # the same click again, on the completed run
    assert world.status("restock-1") == "completed"
    assert [t for t in page.tags if t.attrs.get("class") == "err"], page.source
