"""Issue 18 in a real browser: the console is live, visual, searchable and able to signal.
Headless Chromium (tests/console/chromium.py) against one `lunaflow dev` on
tests/projects/console_demo; each test starts its own runs, with ids of its own.

"tour" draws every shape of the timeline: a step that fails twice then succeeds (two
backoffs), a step whose first attempt times out, a wait a signal ends, a sleep its timer
ends and a wait the run's cancel ends. "child" awaits the signal "go"; "parent" starts a
child and awaits "done"; "charge" fails for good.
"""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.devserver import DevServer

from . import PROJECT
from .chromium import (
    Browser,
    Page,
    browser_fixture,
    eventually,
    heading,
    listed,
    module_server,
    open_page,
    settled,
    shoot,
    start,
    status,
)

browser = browser_fixture
DECLARED = ["charge", "child", "hostile", "parent", "restock", "review", "tour"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    yield from module_server(tmp_path_factory, PROJECT)


@pytest.fixture
def page(server: DevServer, browser: Browser) -> Iterator[Page]:
    p = open_page(browser, server)
    yield p
    # No request left the server: no framework, no font, no beacon.
    assert all(url.startswith(server.url("/")) or url.startswith("data:") for url in p.requests), p.requests  # type: ignore[attr-defined]
    p.context.close()


def shapes(page: Page) -> list[dict[str, str]]:
    """Every shape of the timeline: its lane, its classes and its title (the tooltip)."""
    found: list[dict[str, str]] = page.evaluate(
        """() => [...document.querySelectorAll('.chart svg [data-lane]')].map(s => ({
            lane: s.dataset.lane, cls: s.getAttribute('class'),
            title: s.querySelector('title').textContent}))"""
    )
    return found


def of(found: list[dict[str, str]], lane: str, css: str) -> list[str]:
    return [s["title"] for s in found if s["lane"] == lane and css in s["cls"].split()]


def marked(page: Page) -> None:
    """Mark the document, so a test can tell the page changed without being reloaded."""
    page.evaluate("() => { window.__not_reloaded = true; }")


def not_reloaded(page: Page) -> bool:
    return bool(page.evaluate("() => window.__not_reloaded === true"))


# --- 1. a picture of the run -----------------------------------------------------------------


def test_the_timeline_draws_retries_a_timeout_a_signal_a_sleep_and_a_cancel(
    server: DevServer, page: Page
) -> None:
    start(server, "tour", "tour-1", {"lot": 42})
    settled(server, "tour", "tour-1", "awaiting")
    assert server.cli("signal", "tour-1", "go", '{"by":"ada"}').code == 0
    server.wait_status("tour-1", {"awaiting"})
    eventually("tour-1 to await 'never'", lambda: server.run("tour-1")["current_step"] == "await 'never'")
    assert server.cli("cancel", "tour-1").code == 0
    page.goto(server.url("/_console/runs/tour-1"))
    assert heading(page) == "tour-1 cancelled"
    found = shapes(page)
    lanes = list(dict.fromkeys(s["lane"] for s in found))
    assert lanes == ["step 'flaky'", "step 'slow'", "await 'go'", "sleep", "await 'never'", "signals"]

    failed = of(found, "step 'flaky'", "o-failed")
    assert len(failed) == 2 and len(of(found, "step 'flaky'", "o-ok")) == 1
    assert "step id tour-1/flaky/1/1" in failed[0] and "error: flaky on attempt 1" in failed[0]
    assert "took" in failed[0] and "UTC" in failed[0]
    assert len(of(found, "step 'flaky'", "backoff")) == 2
    assert "backoff before attempt 2 of step 'flaky'" in of(found, "step 'flaky'", "backoff")[0]

    [timed_out] = of(found, "step 'slow'", "o-timed-out")
    assert "step 'slow' timed out after 150ms" in timed_out and "tour-1/slow/1/1" in timed_out
    assert len(of(found, "step 'slow'", "o-ok")) == 1 and len(of(found, "step 'slow'", "backoff")) == 1

    [signalled] = of(found, "await 'go'", "w-signal")
    assert "ended by signal 'go'" in signalled and "times out" in signalled and "waited" in signalled
    [slept] = of(found, "sleep", "w-timer")
    # A 1 s sleep: its timer's activation may begin a little late on a loaded machine.
    assert "ended by its timer" in slept and re.search(r"waited 1\.\d s", slept), slept
    [cut] = of(found, "await 'never'", "w-cancel")
    assert "ended by the run's cancel" in cut
    [mark] = of(found, "signals", "sig-consumed")
    assert "signal 'go' arrived" in mark and "consumed by journal entry" in mark
    # Bars are drawn to scale, left to right in the order they happened.
    xs = page.evaluate(
        "() => [...document.querySelectorAll('.chart svg rect.shape')].map(r => Number(r.getAttribute('x')))"
    )
    assert xs == sorted(xs)
    shoot(page, "10-timeline", docs="console-timeline.png", locator="div.timeline")


# --- 2. live -----------------------------------------------------------------------------------


def test_a_run_page_updates_itself_after_a_signal_sent_from_the_cli(server: DevServer, page: Page) -> None:
    start(server, "child", "live-1", {"from": "the test"})
    settled(server, "child", "live-1", "awaiting")
    page.goto(server.url("/_console/runs/live-1"))
    assert heading(page) == "live-1 awaiting"
    marked(page)
    assert server.cli("signal", "live-1", "go", '{"by":"cli"}').code == 0
    eventually("the page to show the run completed", lambda: heading(page) == "live-1 completed")
    assert not_reloaded(page)
    assert page.locator("table.signals td", has_text="consumed").count() == 1
    assert 'result "child done"' in " ".join(page.locator("body").inner_text().split())


def test_after_cancel_the_page_shows_the_new_state_and_the_list_refreshes(
    server: DevServer, page: Page
) -> None:
    start(server, "child", "live-2")
    settled(server, "child", "live-2", "awaiting")
    page.goto(server.url("/_console"))
    marked(page)
    start(server, "child", "live-3")  # appears in the open list by itself
    eventually("the list to show live-3", lambda: "live-3" in listed(page))
    assert not_reloaded(page)
    page.get_by_role("link", name="live-2", exact=True).click()
    page.get_by_role("button", name="Cancel").click()
    page.get_by_role("button", name="Yes, cancel").click()
    page.wait_for_url("**/_console/runs/live-2?done=*")
    assert heading(page) == "live-2 cancelled"
    assert page.locator("p.note").inner_text() == "Run live-2 cancelled."
    assert "ended by cancel" in page.locator("table.journal").inner_text()


# --- 3. find a run -------------------------------------------------------------------------------


def search(page: Page) -> None:
    """Submit the search form (a GET) and wait for the page it loads: read at once, the list
    was sometimes none, the new page not yet there (CI at bb6f65f)."""
    with page.expect_navigation():
        page.get_by_role("button", name="Search").click()


def test_search_by_id_status_workflow_and_time_with_counts(server: DevServer, page: Page) -> None:
    start(server, "charge", "find-alpha-1", {"card": "1111"})
    start(server, "parent", "find-alpha-2")
    start(server, "child", "find-beta-1", {"note": "x" * 200})
    settled(server, "charge", "find-alpha-1", "failed")
    settled(server, "child", "find-alpha-2-child", "awaiting")
    page.goto(server.url("/_console"))

    # A prefix finds the runs whose ids start with it, the child included.
    page.fill("input[name=id]", "find-alpha")
    search(page)
    assert set(listed(page)) == {"find-alpha-1", "find-alpha-2", "find-alpha-2-child"}
    counts = page.locator("div.counts").inner_text().split()
    assert counts[:2] == ["all", "3"] and counts[counts.index("failed") + 1] == "1"
    assert counts[counts.index("awaiting") + 1] == "2"
    # An exact id comes first.
    page.fill("input[name=id]", "find-alpha-2")
    search(page)
    assert list(listed(page))[0] == "find-alpha-2"

    # Columns: input (expandable), result or error, parent.
    rows = listed(page)
    assert rows["find-alpha-2-child"][5] == "find-alpha-2"  # its parent
    page.fill("input[name=id]", "find-")
    search(page)
    rows = listed(page)
    assert rows["find-alpha-1"][4].startswith("step 'charge-card' failed after 2 attempts")
    cell = page.locator("table.runs tr", has_text="find-beta-1").locator("details.json")
    assert not cell.locator("pre").is_visible()
    cell.locator("summary").click()
    assert '"note": "xxxx' in cell.locator("pre").inner_text()

    # Status and workflow: the workflow is chosen from the project's declared workflows.
    options = page.locator("select[name=workflow] option").all_inner_texts()
    assert options == ["any workflow", *DECLARED]
    page.select_option("select[name=status]", "failed")
    search(page)
    assert set(listed(page)) == {"find-alpha-1"}
    page.select_option("select[name=status]", "")
    page.select_option("select[name=workflow]", "child")
    search(page)
    assert set(listed(page)) == {"find-alpha-2-child", "find-beta-1"}

    # Time started: runs from the future are none, and the page says so.
    page.fill("input[name=since]", "2999-01-01T00:00")
    search(page)
    assert listed(page) == {}
    empty = page.locator("p.empty").inner_text()
    assert empty.startswith(
        "No runs with id 'find-' (exact or prefix), workflow child, started since 2999-01-01"
    )
    page.fill("input[name=since]", "2000-01-01T00:00")
    search(page)
    assert set(listed(page)) == {"find-alpha-2-child", "find-beta-1"}


# --- 4. act on a run ---------------------------------------------------------------------------


def _signals(server: DevServer, run_id: str) -> list[dict[str, Any]]:
    done = server.cli("show", run_id, "--json")
    assert done.code == 0, str(done)
    found: list[dict[str, Any]] = json.loads(done.out)["signals"]
    return found


def test_the_signal_form_checks_json_sends_and_says_what_happened(server: DevServer, page: Page) -> None:
    start(server, "child", "sig-1")
    settled(server, "child", "sig-1", "awaiting")
    page.goto(server.url("/_console/runs/sig-1"))
    form = page.locator("form#signal")
    form.locator("input[name=signal_name]").fill("go")
    form.locator("textarea[name=signal_payload]").fill('{"by": ')
    assert "not valid JSON" in form.locator(".jerr").inner_text()
    form.get_by_role("button", name="Send signal").click()
    assert page.url == server.url("/_console/runs/sig-1")  # not sent
    assert _signals(server, "sig-1") == []

    # Past the page's check (as a script-less client would be), the server checks again.
    page.evaluate(
        "() => document.querySelector('textarea[name=signal_payload]').removeAttribute('data-json')"
    )
    form.get_by_role("button", name="Send signal").click()
    assert "the payload of signal 'go' is not valid JSON" in page.locator("form#signal p.err").inner_text()
    assert page.locator("textarea[name=signal_payload]").input_value() == '{"by": '
    assert _signals(server, "sig-1") == []

    page.goto(server.url("/_console/runs/sig-1"))
    page.fill("input[name=signal_name]", "go")
    page.fill("textarea[name=signal_payload]", '{"by": "the form"}')
    page.get_by_role("button", name="Send signal").click()
    page.wait_for_url("**/_console/runs/sig-1?done=*")
    assert page.locator("p.note").inner_text().startswith("Signal 'go' was delivered to sig-1")
    eventually("sig-1 to complete", lambda: heading(page) == "sig-1 completed")
    assert [(s["name"], s["payload"], s["state"]) for s in _signals(server, "sig-1")] == [
        ("go", {"by": "the form"}, "consumed")
    ]

    # The run has ended: a signal now is set aside, and the page says so. The form stays out
    # of the live region (a swap would wipe what is being typed), so its note is the loaded
    # page's.
    page.reload()
    assert "a signal sent now is set aside" in page.locator("form#signal").inner_text()
    page.fill("input[name=signal_name]", "go")
    page.get_by_role("button", name="Send signal").click()
    page.wait_for_url("**/_console/runs/sig-1?done=*")
    assert page.locator("p.note").inner_text() == (
        "Run sig-1 has ended (completed), so signal 'go' was set aside; nothing consumes it."
    )
    assert [s["state"] for s in _signals(server, "sig-1")] == ["consumed", "set_aside"]


def test_the_start_form_starts_a_declared_workflow_with_an_input_and_an_id(
    server: DevServer, page: Page
) -> None:
    page.goto(server.url("/_console"))
    form = page.locator("form#start")
    assert form.locator("select[name=start_workflow] option").all_inner_texts() == DECLARED
    form.locator("select[name=start_workflow]").select_option("child")
    form.locator("textarea[name=start_input]").fill('{"from": ')
    form.get_by_role("button", name="Start run").click()
    assert "not valid JSON" in form.locator("textarea[name=start_input] ~ .jerr").inner_text()
    form.locator("textarea[name=start_input]").fill('{"from": "the form"}')
    form.locator("input[name=start_id]").fill("started-1")
    form.get_by_role("button", name="Start run").click()
    page.wait_for_url("**/_console/runs/started-1?done=*")
    assert page.locator("p.note").inner_text() == "Started run started-1 of child."
    eventually("started-1 to await", lambda: heading(page) == "started-1 awaiting")
    assert server.run("started-1")["input"] == {"from": "the form"}
    # The same id again joins that run.
    page.goto(server.url("/_console"))
    page.select_option("select[name=start_workflow]", "child")
    page.fill("input[name=start_id]", "started-1")
    page.get_by_role("button", name="Start run").click()
    page.wait_for_url("**/_console/runs/started-1?done=*")
    assert "already existed, so the start joined it" in page.locator("p.note").inner_text()


class _Evil(http.server.BaseHTTPRequestHandler):
    """A page on another origin that tries to act on the console when it is opened."""

    target = ""

    def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
        body = f"""<!doctype html><html><body>
<form id=f method=post action="{self.target}"><input name=action value=cancel><input name=step value=do>
<input name=token value=guessed></form>
<script>
fetch("{self.target}", {{method: "POST", mode: "no-cors", headers: {{"content-type": "text/plain"}},
  body: "action=cancel&step=do"}}).finally(() => document.getElementById("f").submit());
</script></body></html>""".encode()
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_page_on_another_site_cannot_cancel_a_run(server: DevServer, browser: Browser) -> None:
    """A page of another origin (another port on the same machine: same-site, cross-origin)
    posts a cancel to the console by fetch and by an auto-submitted form: both are refused
    (403) and the run still awaits."""
    start(server, "child", "xsite-1")
    settled(server, "child", "xsite-1", "awaiting")
    _Evil.target = server.url("/_console/runs/xsite-1")
    evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Evil)
    thread = threading.Thread(target=evil.serve_forever, daemon=True)
    thread.start()
    context = browser.new_context()
    page = context.new_page()
    try:
        answers: list[int] = []
        page.on("response", lambda r: answers.append(r.status) if "/_console/" in r.url else None)
        page.goto(f"http://127.0.0.1:{evil.server_address[1]}/")
        page.wait_for_url("**/_console/runs/xsite-1")
        assert "refused" in page.locator("body").inner_text()
        assert answers and all(code == 403 for code in answers), answers
    finally:
        context.close()
        evil.shutdown()
        evil.server_close()
    assert status(server, "child", "xsite-1") == "awaiting"


# --- 5. read values ------------------------------------------------------------------------------


def test_values_are_formatted_collapsible_cut_short_and_ids_copy(server: DevServer, page: Page) -> None:
    big = {"items": [{"n": i, "text": "y" * 40} for i in range(200)], "lot": 7}
    start(server, "child", "val-1", big)
    settled(server, "child", "val-1", "awaiting")
    page.goto(server.url("/_console/runs/val-1"))
    value = page.locator("details[data-key=input]")
    assert not value.locator("pre").is_visible()
    value.locator("summary").click()
    shown = value.locator("pre").inner_text()
    assert shown.startswith('{\n  "items": [\n    {\n      "n": 0,')  # formatted
    assert "more characters not shown" in value.inner_text()
    value.get_by_role("link", name="show all").click()
    page.wait_for_url("**/_console/runs/val-1/value/input")
    assert json.loads(page.locator("pre").inner_text()) == big

    page.goto(server.url("/_console/runs/val-1"))
    page.locator("h1 button.copy").click()
    assert page.evaluate("() => navigator.clipboard.readText()") == "val-1"
    start(server, "charge", "val-2")
    settled(server, "charge", "val-2", "failed")
    page.goto(server.url("/_console/runs/val-2"))
    page.locator("td.att", has_text="attempt 2").locator("button.copy").click()
    assert page.evaluate("() => navigator.clipboard.readText()") == "val-2/charge-card/1/2"


# --- 6. small truths -------------------------------------------------------------------------------


def test_times_durations_counts_cancelled_waits_and_button_styles(server: DevServer, page: Page) -> None:
    start(server, "parent", "truth-1")
    start(server, "charge", "truth-2")
    settled(server, "parent", "truth-1", "awaiting")
    settled(server, "charge", "truth-2", "failed")
    page.goto(server.url("/_console/runs/truth-2"))
    facts = page.locator("#live > p").first.inner_text()
    assert re.search(r"started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \((just now|[\d.]+ (ms|s) ago)\)", facts), (
        facts
    )
    journal = page.locator("table.journal").inner_text()
    assert "· 2 attempts" in journal and "took " in journal
    resume, cancel = page.get_by_role("button", name="Resume"), page.get_by_role("button", name="Cancel")
    red = "rgb(207, 34, 46)"
    assert resume.evaluate("b => getComputedStyle(b).color") != red
    assert resume.evaluate("b => getComputedStyle(b).backgroundColor") == "rgb(31, 136, 61)"
    assert cancel.evaluate("b => getComputedStyle(b).color") == red

    page.goto(server.url("/_console/runs/truth-1"))
    assert "· 1 attempt" in page.locator("table.journal").inner_text()  # not "1 attempts"
    page.get_by_role("button", name="Cancel").click()
    page.get_by_role("button", name="Yes, cancel").click()
    page.wait_for_url("**/_console/runs/truth-1?done=*")
    journal = page.locator("table.journal").inner_text()
    assert "→ ended by cancel at" in journal and "waiting" not in journal
    chart = [s["title"] for s in shapes(page) if s["lane"] == "await 'done'"]
    assert chart and all("ended by the run's cancel" in t for t in chart)
