"""The console escapes every user-controlled string, in both action styles.

Issue: "Rendering escapes every user-controlled string (run ids, step names, errors,
payloads): a test with hostile strings proves it."

A run of tests/projects/console_demo's "hostile" workflow takes everything it can from
outside: its run id (which also names its child), its step names, the signal it awaits, its
error, the payload it is signalled with and its input. Each page is then read back with
``html.parser``, as a browser would, and must hold:
- only the elements and attributes the console writes (an unescaped ``<`` would add an
  element, an unescaped quote in an attribute would add an attribute such as ``onclick``);
- each hostile string as visible text, character for character (escaped, not dropped);
- links, form targets and ``cwdb-action`` payloads that decode to the exact run id.
The pages: the runs list (with a hostile workflow filter and id search), the run page
while awaiting and once failed (its timeline chart's titles included), the child's page,
the local confirmation pages, refusals and value pages, and the CloudWatch widget
function's own pages (under moto). The local page's own script is the one element a
hostile string never adds: it is checked to be the console's, with this response's nonce.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import pytest

from functions import console, worker
from runtime.aws.runtime import AwsRuntime
from runtime.console import html as console_html
from runtime.console import page as console_page
from runtime.console import render
from runtime.console.search import RunQuery
from runtime.core.clock import FakeClock
from runtime.platform.runs import Runs
from runtime.testing import LocalPlatform
from tests.support.aws_world import AwsWorld, FakeContext, run_due

from . import PROJECT, Html

# No '/' in a run id (SPEC 3), so the script tags here close with a backslash.
RUN_ID = "<script>alert('id')<\\script>\"&amp;<img src=x onerror=alert(1)>' onclick='x"
CHILD_ID = RUN_ID + "-child"
STEP = "<script>alert('step')</script> & \"dq\" ' onfocus='x"
SIGNAL = "<b>sig</b>\"' onmouseover='x&amp;"
FAIL_STEP = "f<i>ail</i>&quot;'"
ERROR = "<script>alert('err')</script>&lt;b&gt; \"q\" 'a' & done"
VALUE = {"k": "<img src=x onerror=alert('v')>&amp;\"'"}
PAYLOAD = {"p": "<script>x('p')</script>&\"'"}
INPUT = {"step": STEP, "value": VALUE, "signal": SIGNAL, "fail_step": FAIL_STEP, "error": ERROR}
WORKFLOW_FILTER = "<script>alert('wf')</script>\"' onblur='x&amp;"

TOKEN = "t0ken"

# What the console writes, and nothing else.
ELEMENTS = {
    "html", "head", "meta", "link", "title", "style", "body", "div", "p", "h1", "h2", "b", "i", "span",
    "code", "pre", "br", "table", "tr", "th", "td", "a", "form", "input", "button", "select", "option",
    "label", "textarea", "details", "summary", "time", "cwdb-action",
    "svg", "rect", "path", "text",
}  # fmt: skip
ATTRIBUTES = {
    "charset", "class", "href", "method", "action", "type", "name", "value", "selected", "id",
    "endpoint", "display", "confirmation", "content", "rel", "title", "placeholder", "rows", "size",
    "required", "datetime", "open", "data-key", "data-poll", "data-copy", "data-json", "data-lane",
    "xmlns", "role", "viewbox", "width", "height", "aria-label", "x", "y", "d", "rx", "stroke",
    "stroke-width", "fill", "text-anchor",
}  # fmt: skip


def compact(value: Any) -> str:
    """A value as the timeline shows it (compact JSON, non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def safe(source: str) -> Html:
    """Parse a page and fail on anything the console did not mean to write."""
    own = source.rfind("<script nonce=")
    if own >= 0:  # the local page's own script, last in the body: exactly the console's
        script = source[own:]
        assert script.endswith(f">{console_html.SCRIPT}</script></body></html>"), script[:200]
        source = source[:own] + "</body></html>"
    page = Html(source)
    for tag in page.tags:
        assert tag.name in ELEMENTS, f"unexpected <{tag.name}> element: hostile text broke out"
        assert set(tag.attr_names) <= ATTRIBUTES, f"unexpected attributes on <{tag.name}>: {tag.attr_names}"
        assert len(tag.attr_names) == len(set(tag.attr_names)), tag.attr_names
        for name, value in tag.attrs.items():
            assert not value.lower().lstrip().startswith("javascript:"), (name, value)
    lowered = source.lower()
    for needle in ("<script", "<img", "<i>", "<b>sig", "<\\script"):
        assert needle not in lowered, f"{needle!r} reached the page unescaped"
    return page


def local_targets(page: Html) -> list[str]:
    """Run ids that the page's links and forms point at (decoded)."""
    out = []
    for tag in page.tags:
        target = (
            tag.attrs.get("href")
            if tag.name == "a"
            else tag.attrs.get("action")
            if tag.name == "form"
            else None
        )
        if target and target.startswith("/_console/runs/"):
            quoted = urlsplit(target).path[len("/_console/runs/") :].split("/value/")[0]
            assert "/" not in quoted, target  # the id is one path segment, whatever it holds
            out.append(unquote(quoted))
    return out


@dataclass
class Hostile:
    platform: LocalPlatform
    awaiting_pages: dict[str, str]  # the run's page while it awaited, per action style

    @property
    def runs(self) -> Runs:
        return self.platform.platform


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    """The hostile run awaiting its signal (its pages rendered then), then failed."""
    with LocalPlatform(PROJECT, data_dir=tmp_path_factory.mktemp("hostile")) as p:
        p.start("hostile", INPUT, id=RUN_ID)
        assert p.get(RUN_ID).status == "awaiting"
        assert p.get(CHILD_ID).parent_id == RUN_ID
        awaiting = {name: render.run_page(p.platform, actions, RUN_ID) for name, actions in ACTIONS.items()}
        assert p.signal(RUN_ID, SIGNAL, PAYLOAD)
        run = p.get(RUN_ID)
        assert run.status == "failed", run
        assert run.error is not None and ERROR in run.error
        yield Hostile(p, awaiting)


ACTIONS: dict[str, render.Actions] = {
    "local": render.LocalActions(token=TOKEN),
    "cloudwatch": render.CloudWatchActions(endpoint="arn:aws:lambda:eu-west-1:123456789012:function:c"),
}


def check_run_targets(page: Html, style: str, expected: set[str]) -> None:
    """Every link and button of the page leads to one of the expected runs, decoded exactly."""
    if style == "local":
        got = set(local_targets(page))
    else:
        got = {a.payload["run_id"] for a in page.actions if "run_id" in a.payload}
    assert got == expected


@pytest.mark.parametrize("style", sorted(ACTIONS))
def test_hostile_run_ids_in_the_runs_list_are_text_and_exact_links(hostile: Hostile, style: str) -> None:
    """The runs list shows hostile run ids as text, and links to exactly those runs."""
    page = safe(render.runs_page(hostile.runs, ACTIONS[style], RunQuery()))
    assert RUN_ID in page.text and CHILD_ID in page.text
    check_run_targets(page, style, {RUN_ID, CHILD_ID})


@pytest.mark.parametrize("style", sorted(ACTIONS))
def test_a_hostile_id_search_is_escaped_and_finds_the_run(hostile: Hostile, style: str) -> None:
    """Searching for the hostile id (exact) finds the run and its child (prefix), and the
    search box gives the typed text back as typed."""
    page = safe(render.runs_page(hostile.runs, ACTIONS[style], RunQuery(id=RUN_ID)))
    check_run_targets(page, style, {RUN_ID, CHILD_ID})
    [box] = [t for t in page.tags if t.name == "input" and t.attrs.get("name") == "id"]
    assert box.attrs["value"] == RUN_ID


@pytest.mark.parametrize("style", sorted(ACTIONS))
def test_hostile_workflow_filter_is_escaped(hostile: Hostile, style: str) -> None:
    """A filter value typed by the reader comes back in the page (the input box, the
    caption, the paging links) escaped."""
    page = safe(
        render.runs_page(hostile.runs, ACTIONS[style], RunQuery(status="failed", workflow=WORKFLOW_FILTER))
    )
    assert WORKFLOW_FILTER in page.text
    [chosen] = [
        t for t in page.tags if t.name == "option" and "selected" in t.attrs and t.attrs["value"] != "failed"
    ]
    assert chosen.attrs["value"] == WORKFLOW_FILTER


@pytest.mark.parametrize("style", sorted(ACTIONS))
def test_hostile_strings_in_an_awaiting_run_page(hostile: Hostile, style: str) -> None:
    """While the run awaits its hostile signal: its id, step name, returned value, input,
    the awaited signal's name, its child's id and the cancel confirmation are all text."""
    page = safe(hostile.awaiting_pages[style])
    text = page.text
    for s in (RUN_ID, CHILD_ID, STEP, f"await '{SIGNAL}'", f"returned {compact(VALUE)}"):
        assert s in text, s
    assert f"{RUN_ID}/{STEP}/1/1" in text  # the step id
    check_run_targets(page, style, {RUN_ID, CHILD_ID})
    confirmation = f"Cancel run {RUN_ID}? This also cancels the runs it started: {CHILD_ID}."
    if style == "local":
        form = page.form("Cancel")  # the confirmation is the next page's (test below)
        assert form.fields == {"token": TOKEN, "action": "cancel"} and form.button_value == "ask"
    else:
        cancel = page.action("Cancel", action="cancel")
        assert cancel.payload == {"view": "run", "run_id": RUN_ID, "action": "cancel"}
        assert cancel.attrs["confirmation"] == confirmation


@pytest.mark.parametrize("style", sorted(ACTIONS))
def test_hostile_strings_in_a_failed_run_page(hostile: Hostile, style: str) -> None:
    """Once failed: the hostile error, the failing step's name, the signal's name and
    payload (in the wait's resolution and the signals table) are all text."""
    page = safe(render.run_page(hostile.runs, ACTIONS[style], RUN_ID, notice=ERROR))
    text = page.text
    for s in (
        RUN_ID,
        f"step '{FAIL_STEP}' failed after 1 attempts: {ERROR}",
        f"step '{FAIL_STEP}'",
        f"{RUN_ID}/{FAIL_STEP}/1/1",
        f"signal '{SIGNAL}' {compact(PAYLOAD)}",
        compact(PAYLOAD),
        SIGNAL,
        ERROR,
    ):
        assert s in text, s
    assert text.count(ERROR) >= 3  # the notice, the run's error, the attempt's error
    check_run_targets(page, style, {RUN_ID, CHILD_ID})
    for chart_title in (f"step id {RUN_ID}/{FAIL_STEP}/1/1", f"error: {ERROR}", f"signal '{SIGNAL}' arrived"):
        assert any(chart_title in t.text for t in page.tags if t.name == "title"), chart_title
    if style == "local":
        assert page.form("Resume").fields == {"token": TOKEN, "action": "resume"}
    else:
        resume = page.action("Resume", action="resume")
        assert resume.payload["run_id"] == RUN_ID
        assert resume.attrs["confirmation"].startswith(f"Resume {RUN_ID}?")


@pytest.mark.parametrize("style", sorted(ACTIONS))
def test_hostile_input_in_a_child_page(hostile: Hostile, style: str) -> None:
    """The child's page: its hostile id, its parent's, and the input it was started with."""
    page = safe(render.run_page(hostile.runs, ACTIONS[style], CHILD_ID))
    for s in (CHILD_ID, f"parent {RUN_ID}", compact(VALUE)):
        assert s in page.text, s
    check_run_targets(page, style, {CHILD_ID, RUN_ID})


@pytest.mark.parametrize("action", ["resume", "cancel"])
def test_local_confirmation_pages_escape_hostile_run_ids(hostile: Hostile, action: str) -> None:
    """The local confirmation step (POST step=ask) names the hostile runs as text and posts
    back to exactly that run."""
    response = console_page.render_console(
        hostile.runs,
        "POST",
        "/_console/runs/" + quote_id(RUN_ID),
        {"action": action, "token": TOKEN},
        poke=lambda: None,
        token=TOKEN,
    )
    assert response.status_code == 200
    page = safe(response.body)
    assert f"{action.capitalize()} {RUN_ID}?" in page.text
    if action == "cancel":
        assert f"This also cancels the runs it started: {CHILD_ID}." in page.text
    form = page.form(f"Yes, {action}")
    assert form.fields == {"token": TOKEN, "action": action} and form.button_value == "do"
    assert set(local_targets(page)) == {RUN_ID}


def test_local_not_found_and_refusal_pages_escape_hostile_ids(hostile: Hostile) -> None:
    """Errors that quote a hostile id (no such run; a refused resume) stay text."""
    missing = RUN_ID + "-missing"
    got = console_page.render_console(
        hostile.runs, "GET", "/_console/runs/" + quote_id(missing), {}, poke=lambda: None
    )
    assert got.status_code == 404
    assert missing in safe(got.body).text
    refused = console_page.render_console(
        hostile.runs,
        "POST",
        "/_console/runs/" + quote_id(CHILD_ID),
        {"action": "resume", "step": "do", "token": TOKEN},
        poke=lambda: None,
        token=TOKEN,
    )
    assert refused.status_code == 409  # the child awaits: resume applies to failed runs only
    page = safe(refused.body)
    assert CHILD_ID in page.text
    assert set(local_targets(page)) == {CHILD_ID}
    signalled = console_page.render_console(
        hostile.runs,
        "POST",
        "/_console/runs/" + quote_id(CHILD_ID),
        {"action": "signal", "signal_name": SIGNAL, "signal_payload": "{not json " + ERROR, "token": TOKEN},
        poke=lambda: None,
        token=TOKEN,
    )
    assert signalled.status_code == 400  # the payload is not JSON: the form again, with why
    page = safe(signalled.body)
    [area] = [t for t in page.tags if t.name == "textarea"]
    assert area.text == "{not json " + ERROR
    value = console_page.render_console(
        hostile.runs, "GET", "/_console/runs/" + quote_id(RUN_ID) + "/value/input", {}, poke=lambda: None
    )
    assert value.status_code == 200 and json.loads(safe(value.body).tags[-1].text) == INPUT


def quote_id(run_id: str) -> str:
    return quote(run_id, safe="")


# --- the widget function itself, under moto ----------------------------------------------


@pytest.fixture
def widget(aws: AwsWorld, make_runtime: Callable[..., AwsRuntime]) -> Callable[[dict[str, Any]], Html]:
    clock = FakeClock()
    rt = make_runtime(PROJECT, clock=clock)
    rt.platform.start("hostile", INPUT, id=RUN_ID)
    run_due(aws, clock.now(), worker.handler)
    rt.platform.signal(RUN_ID, SIGNAL, PAYLOAD)
    run_due(aws, clock.now(), worker.handler)
    assert rt.platform.get(RUN_ID).status == "failed"
    context = FakeContext(function_name="c", invoked_function_arn="arn:aws:lambda:eu-west-1:1:function:c")

    def call(params: dict[str, Any]) -> Html:
        return safe(console.handler({**params, "widgetContext": {"params": {}}}, context))

    return call


@pytest.mark.filterwarnings("ignore:No application metrics")
def test_widget_function_escapes_hostile_strings(widget: Callable[[dict[str, Any]], Html]) -> None:
    """functions/console.py's pages over DynamoDB: the list, the failed run, a refused
    action and a missing run, with hostile strings in each."""
    listing = widget({"view": "runs", "workflow": WORKFLOW_FILTER})
    assert WORKFLOW_FILTER in listing.text
    listing = widget({"view": "runs"})
    assert RUN_ID in listing.text and CHILD_ID in listing.text
    assert {a.payload["run_id"] for a in listing.actions if "run_id" in a.payload} == {RUN_ID, CHILD_ID}
    run = widget({"view": "run", "run_id": RUN_ID})
    for s in (ERROR, STEP, SIGNAL, compact(PAYLOAD), f"{RUN_ID}/{FAIL_STEP}/1/1"):
        assert s in run.text, s
    refused = widget({"view": "run", "run_id": CHILD_ID, "action": "resume"})
    assert CHILD_ID in refused.text
    missing = widget({"view": "run", "run_id": RUN_ID + "-missing"})
    assert RUN_ID + "-missing" in missing.text
