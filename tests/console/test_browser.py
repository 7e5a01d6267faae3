"""The local console in a real browser: Debian's Chromium, headless, driven by Playwright for
Python, against a `lunaflow dev` process on loopback (tests/console/chromium.py).

The seed: "The console lists runs with status and current step, shows the journal as a
timeline, and offers resume for failed runs and cancel for the rest. Cancelling a run
cancels the runs it spawned."

The project is tests/projects/console_demo: "charge" always fails, "restock" fails while the
kv flag "stock" is unset (the test sets it through the project's own fetch route before it
clicks Resume), "parent" starts a "child" from a step and awaits a signal. Runs are started
through fetch routes too, so everything goes through the one server process. The failed
run's page becomes docs/console.png when LUNAFLOW_UPDATE_DOCS is set.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.devserver import DevServer

from . import PROJECT
from .chromium import (
    Browser,
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


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    yield from module_server(tmp_path_factory, PROJECT)


def test_console_in_chromium_lists_shows_resumes_and_cancels(server: DevServer, browser: Browser) -> None:
    """The list shows the runs; a click opens a failed run's timeline with its error and
    attempts; its resume button (after a confirmation step) resumes it; cancelling an
    awaiting parent cancels its child. One sequence, so one server and one browser serve
    it all; a screenshot is taken at each stage."""
    start(server, "charge", "charge-1", {"card": "4242"})
    start(server, "restock", "restock-1")
    start(server, "parent", "parent-1")
    settled(server, "charge", "charge-1", "failed")
    settled(server, "restock", "restock-1", "failed")
    settled(server, "parent", "parent-1", "awaiting")
    settled(server, "child", "parent-1-child", "awaiting")

    page = open_page(browser, server, 1280, 720)

    # --- the list shows the runs, with status and current step --------------------------
    page.goto(server.url("/_console?workflow=charge"))
    page.goto(server.url("/_console"))
    assert page.title() == "lunaflow runs"
    runs = {
        k: v for k, v in listed(page).items() if k in ("charge-1", "restock-1", "parent-1", "parent-1-child")
    }
    assert set(runs) == {"charge-1", "restock-1", "parent-1", "parent-1-child"}, runs
    assert runs["charge-1"][:3] == ["charge", "failed", "step 'charge-card'"]
    assert runs["restock-1"][:3] == ["restock", "failed", "step 'reserve'"]
    assert runs["parent-1"][:3] == ["parent", "awaiting", "await 'done'"]
    assert runs["parent-1-child"][:3] == ["child", "awaiting", "await 'go'"]
    shoot(page, "01-runs")

    # The status filter narrows the list to failed runs.
    page.select_option("select[name=status]", "failed")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**/_console?*status=failed*")
    assert {"charge-1", "restock-1"} <= set(listed(page))
    assert all(cells[1] == "failed" for cells in listed(page).values())

    # --- a click opens a failed run's timeline with its error and attempts --------------
    page.get_by_role("link", name="charge-1", exact=True).click()
    page.wait_for_url("**/_console/runs/charge-1")
    assert heading(page) == "charge-1 failed"
    error = page.locator("div.err pre").inner_text()
    assert error == "step 'charge-card' failed after 2 attempts: card declined for 4242"
    for attempt in (1, 2):
        row = page.locator("td.att", has_text=f"attempt {attempt}: failed")
        assert row.count() == 1
        assert f"step id charge-1/charge-card/1/{attempt}" in row.inner_text()
        assert "card declined for 4242" in row.inner_text()
    assert page.get_by_role("button", name="Resume").is_visible()
    assert page.get_by_role("button", name="Cancel").is_visible()
    shoot(page, "02-failed-run", docs="console.png")

    # --- its resume button resumes it ---------------------------------------------------
    page.get_by_role("link", name="all runs").click()
    page.get_by_role("link", name="restock-1", exact=True).click()
    page.wait_for_url("**/_console/runs/restock-1")
    assert heading(page) == "restock-1 failed"
    assert page.locator("td.att", has_text="out of stock").count() == 2
    r = server.request("POST", "/flag/stock", "the browser test")  # what the step was missing
    assert r.status == 200, r
    page.get_by_role("button", name="Resume").click()
    # A confirmation step first: nothing has happened yet.
    assert heading(page) == "Resume restock-1?"
    assert "Its failed step gets a fresh set of attempts." in page.locator("body").inner_text()
    assert status(server, "restock", "restock-1") == "failed"
    shoot(page, "03-confirm-resume")
    page.get_by_role("button", name="Yes, resume").click()
    page.wait_for_url("**/_console/runs/restock-1?done=*")
    assert "Run restock-1 resumed" in page.locator("p.note").inner_text()
    eventually("restock-1 to show completed", lambda: heading(page) == "restock-1 completed")
    text = page.locator("body").inner_text()
    assert 'result {"reserved":"set by the browser test"}' in text
    assert "resumed" in page.locator("td").all_inner_texts()
    assert page.locator("td.att", has_text="attempt 3: ok").count() == 1
    # A completed run offers neither resume nor cancel.
    assert page.get_by_role("button", name="Resume").count() == 0
    assert page.get_by_role("button", name="Cancel").count() == 0
    shoot(page, "04-resumed-run")

    # --- cancelling an awaiting parent cancels its child --------------------------------
    page.get_by_role("link", name="all runs").click()
    page.get_by_role("link", name="parent-1", exact=True).first.click()
    page.wait_for_url("**/_console/runs/parent-1")
    assert heading(page) == "parent-1 awaiting"
    assert page.get_by_role("link", name="parent-1-child", exact=True).is_visible()
    assert page.get_by_role("button", name="Resume").count() == 0  # resume is for failed runs
    page.get_by_role("button", name="Cancel").click()
    assert heading(page) == "Cancel parent-1?"
    assert (
        "Cancel run parent-1? This also cancels the runs it started: parent-1-child."
        in page.locator("body").inner_text()
    )
    shoot(page, "05-confirm-cancel")
    page.get_by_role("button", name="Yes, cancel").click()
    page.wait_for_url("**/_console/runs/parent-1?done=*")
    assert heading(page) == "parent-1 cancelled"
    page.get_by_role("link", name="parent-1-child", exact=True).click()
    page.wait_for_url("**/_console/runs/parent-1-child")
    assert heading(page) == "parent-1-child cancelled"
    assert status(server, "child", "parent-1-child") == "cancelled"
    shoot(page, "06-cancelled-child")

    page.get_by_role("link", name="all runs").click()
    runs = listed(page)
    assert {k: runs[k][1] for k in ("charge-1", "restock-1", "parent-1", "parent-1-child")} == {
        "charge-1": "failed",
        "restock-1": "completed",
        "parent-1": "cancelled",
        "parent-1-child": "cancelled",
    }
    shoot(page, "07-runs-after")
    assert all(url.startswith(server.url("/")) for url in page.requests), page.requests  # type: ignore[attr-defined]
    assert server.alive, server.output_tail()
