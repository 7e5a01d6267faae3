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


# --- issue 18: the same timeline, search and actions in the widgets --------------------------


def with_forms(event: dict[str, Any], **typed: str) -> dict[str, Any]:
    """The event a click sends when the widget's inputs hold ``typed``: CloudWatch puts
    every input's value under ``widgetContext.forms.all``."""
    out = copy.deepcopy(event)
    out["widgetContext"]["forms"] = {"all": dict(typed)}
    return out


def timeline_of(source: str) -> str:
    start = source.index("<div class='timeline'>")
    return source[start : source.index("<h2>Journal</h2>", start)]


def test_run_widget_draws_the_same_timeline_as_the_local_page(
    world: World, console_context: FakeContext
) -> None:
    """The tour's retries, timeout, signal, sleep and cancel, drawn by the widget exactly as
    the local page draws them (one renderer), with no script in the widget."""
    world.start("tour", {"lot": 1}, "tour-1")
    for _ in range(10):
        if world.status("tour-1") == "awaiting":
            break
        world.settle(1)
    assert world.status("tour-1") == "awaiting"
    world.rt.platform.signal("tour-1", "go", {"by": "ada"})
    world.settle()
    world.settle(2)  # the 1 s sleep's timer
    world.rt.platform.cancel("tour-1")
    world.settle()
    assert world.status("tour-1") == "cancelled"
    page = call(click(load("cw_widget_runs.json"), {"view": "run", "run_id": "tour-1"}), console_context)
    local = render.run_page(world.rt.platform, render.LocalActions(), "tour-1")
    assert timeline_of(page.source) == timeline_of(local)
    lanes = [t.attrs["data-lane"] for t in page.tags if "data-lane" in t.attrs]
    assert list(dict.fromkeys(lanes)) == [
        "step 'flaky'",
        "step 'slow'",
        "await 'go'",
        "sleep",
        "await 'never'",
        "signals",
    ]
    classes = " ".join(t.attrs.get("class", "") for t in page.tags if "data-lane" in t.attrs)
    for css in (
        "o-failed",
        "o-ok",
        "o-timed-out",
        "backoff",
        "w-signal",
        "w-timer",
        "w-cancel",
        "sig-consumed",
    ):
        assert css in classes, css
    assert "<script" not in page.source.lower() and "button class='copy'" not in page.source


def test_the_widget_shows_times_in_the_dashboards_time_zone(
    world: World, console_context: FakeContext
) -> None:
    world.start("child", None, "tz-1")
    event = load("cw_widget_runs.json")
    event["widgetContext"]["timezone"] = {"label": "CET", "offsetISO": "+01:00", "offsetInMinutes": -60}
    page = call(event, console_context)
    assert "2026-01-01 01:00:00 CET" in page.text  # the fake clock starts at 00:00 UTC


def test_the_signal_form_in_a_widget_sends_checks_json_and_answers(
    world: World, console_context: FakeContext
) -> None:
    world.start("child", None, "sig-1")
    opened = click(load("cw_widget_runs.json"), {"view": "run", "run_id": "sig-1"})
    send = call(opened, console_context).action("Send signal", action="signal")
    assert send.payload == {"view": "run", "action": "signal", "run_id": "sig-1"}
    refused = call(
        click(with_forms(opened, signal_name="go", signal_payload="{nope"), send.payload), console_context
    )
    assert "is not valid JSON" in refused.text and "nothing was sent" in refused.text
    assert world.rt.platform.store.signals("sig-1") == []
    sent = call(
        click(with_forms(opened, signal_name="go", signal_payload='{"by":"w"}'), send.payload),
        console_context,
    )
    assert "Signal 'go' was delivered to sig-1" in sent.text
    world.settle()
    assert world.status("sig-1") == "completed"
    late = call(click(with_forms(opened, signal_name="go", signal_payload=""), send.payload), console_context)
    assert "Run sig-1 has ended (completed), so signal 'go' was set aside" in late.text


def test_the_start_form_in_a_widget_starts_a_declared_workflow(
    world: World, console_context: FakeContext
) -> None:
    event = load("cw_widget_runs.json")
    page = call(event, console_context)
    options = [t.attrs["value"] for t in page.tags if t.name == "option" and t.attrs.get("value")]
    assert {"charge", "child", "tour"} <= set(options)
    start = page.action("Start run", action="start")
    typed = with_forms(event, start_workflow="child", start_input='{"from":"widget"}', start_id="w-1")
    done = call(click(typed, start.payload), console_context)
    assert "Started run w-1 of child." in done.text
    assert world.rt.platform.get("w-1").input == {"from": "widget"}
    bad = call(
        click(with_forms(event, start_workflow="nope", start_input=""), start.payload), console_context
    )
    assert "workflow 'nope' is not declared by this project" in bad.text


def test_search_in_a_widget_reads_the_inputs(world: World, console_context: FakeContext) -> None:
    for run_id in ("find-a-1", "find-a-2", "find-b-1"):
        world.start("child", None, run_id)
    event = load("cw_widget_runs.json")
    search = call(event, console_context).action("Search", action="search")
    found = call(
        click(with_forms(event, id="find-a", status="", workflow="child"), search.payload), console_context
    )
    assert [r[0] for r in rows(found)[1:]] == ["find-a-2", "find-a-1"]
    assert "awaiting 2" in found.text
    none = call(click(with_forms(event, id="zzz"), search.payload), console_context)
    assert "No runs with id 'zzz' (exact or prefix)." in none.text


@pytest.mark.parametrize("page", ["²", "10^23", "9" * 400, "-1", "1.5"])
def test_a_page_parameter_that_is_not_a_small_digit_string_shows_the_first_page(
    page: str, world: World, console_context: FakeContext
) -> None:
    """Issue 20.7: ``page="²"`` passes ``isdigit()`` and failed ``int()``; the widget takes only
    ASCII digit strings, clamps them, and says when it ignored one, as the local page does."""
    world.start("parent", None, "parent-1")
    event = {**load("cw_widget_runs.json"), "page": page}
    shown = call(event, console_context)
    assert "parent-1" in shown.source
    assert "Traceback" not in shown.source


def test_retry_now_button_payload_runs_the_next_attempt_at_once(
    world: World, console_context: FakeContext
) -> None:
    """Issue 26: a run waiting out a step's backoff offers Retry now in the widget; sent back
    to the function, the next attempt runs without the clock moving."""
    world.start("restock", None, "restock-r")
    assert world.status("restock-r") == "sleeping"
    assert world.fetch("POST", "/flag/stock", "retried now") == 200
    event = load("cw_widget_runs.json")
    opened = click(
        event, call(event, console_context).action("restock-r", view="run", run_id="restock-r").payload
    )
    retry = call(opened, console_context).action("Retry now", run_id="restock-r")
    assert retry.payload == {"view": "run", "run_id": "restock-r", "action": "retry"}
    assert "Retry restock-r now?" in retry.attrs["confirmation"]
    after = call(click(opened, retry.payload), console_context)
    assert "Run restock-r retried" in after.text
    world.settle()  # the wake it left, with the clock where it was
    run = world.rt.platform.get("restock-r")
    assert (run.status, run.result) == ("completed", {"reserved": "set by retried now"})
    assert [e.kind for e in world.rt.platform.journal("restock-r")].count("step.retry_now") == 1


def test_the_start_form_in_a_widget_starts_a_run_with_its_signal(
    world: World, console_context: FakeContext
) -> None:
    """Issue 28.4: the start form's signal and payload fields start the run with its signal
    in one write (signal-with-start); a payload with no signal is refused, nothing written."""
    event = load("cw_widget_runs.json")
    start = call(event, console_context).action("Start run", action="start")
    lone = with_forms(event, start_workflow="child", start_input="", start_id="ws-0", start_payload="{}")
    refused = call(click(lone, start.payload), console_context)
    assert "a payload goes with a signal" in refused.text and "nothing was sent" in refused.text
    assert world.rt.platform.runs() == []
    typed = with_forms(
        event,
        start_workflow="child",
        start_input="",
        start_id="ws-1",
        start_signal="go",
        start_payload='{"n":1}',
    )
    done = call(click(typed, start.payload), console_context)
    assert "Started run ws-1 of child. Signal 'go' was delivered to it." in done.text
    assert [(s.name, s.payload) for s in world.rt.platform.store.signals("ws-1")] == [("go", {"n": 1})]
    world.settle()
    assert world.status("ws-1") == "completed"
    again = call(click(typed, start.payload), console_context)
    assert "already existed, so the start joined it" in again.text
    assert "Run ws-1 has ended (completed), so signal 'go' was set aside." in again.text
