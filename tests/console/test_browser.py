"""The local console in a real browser: Debian's Chromium, headless, driven by Playwright for
Python, against a `lunaflow dev` process on loopback.

Issue: "A browser test drives Debian's Chromium (`/usr/bin/chromium`, installed by the test
set-up from Debian's packages, headless) with Playwright for Python against a `lunaflow dev`
subprocess: the list shows the runs; a click opens a failed run's timeline with its error
and attempts; its resume button resumes it; cancelling an awaiting parent cancels its child.
The test saves screenshots as artefacts. If Chromium cannot be installed on the machine, the
test is skipped with a clear reason."

The seed: "The console lists runs with status and current step, shows the journal as a
timeline, and offers resume for failed runs and cancel for the rest. Cancelling a run
cancels the runs it spawned."

The project is tests/projects/console_demo: "charge" always fails, "restock" fails while the
kv flag "stock" is unset (the test sets it through the project's own fetch route before it
clicks Resume), "parent" starts a "child" from a step and awaits a signal. Runs are started
through fetch routes too, so everything goes through the one server process. Screenshots
go to artifacts/console/ (git-ignored); the failed run's page is also copied to
docs/console.png.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.devserver import DevServer, Servers, wait_for

from . import ARTIFACTS, PROJECT, ROOT

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip(
        f"Debian's Chromium is not installed at {CHROMIUM} (apt-get install chromium); "
        "the browser test needs it",
        allow_module_level=True,
    )
try:
    from playwright.sync_api import Browser, Page, sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    pytest.skip(
        "Playwright for Python is not installed (pip install playwright); the browser test needs it",
        allow_module_level=True,
    )

ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DOCS_PICTURE = ROOT / "docs" / "console.png"
SETTLE_S = 15.0  # bound on a run reaching the status the test waits for
UI_MS = 10_000  # bound on one browser action


@pytest.fixture
def server(tmp_path: Path) -> Iterator[DevServer]:
    servers = Servers(tmp_path)
    try:
        yield servers.start(PROJECT)
    finally:
        servers.close()


@pytest.fixture
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def shots() -> Callable[[Page, str], Path]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def shoot(page: Page, name: str) -> Path:
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return shoot


def start(server: DevServer, workflow: str, run_id: str, input: Any = None) -> None:
    body = "" if input is None else json.dumps(input)
    r = server.request(
        "POST", f"/start/{workflow}/{run_id}", body, headers={"content-type": "application/json"}
    )
    assert r.status == 201, r


def status(server: DevServer, workflow: str, run_id: str) -> str:
    r = server.get(f"/status/{workflow}/{run_id}")
    assert r.status == 200, r
    value: str = r.json()["status"]
    return value


def settled(server: DevServer, workflow: str, run_id: str, want: str) -> None:
    wait_for(
        f"{run_id} to be {want}",
        lambda: status(server, workflow, run_id) == want,
        SETTLE_S,
        interval=0.1,
    )


def listed(page: Page) -> dict[str, list[str]]:
    """The runs table as the reader sees it: run id -> the row's other cells."""
    rows = page.locator("table tr").all()
    out = {}
    for row in rows[1:]:
        cells = [c.strip() for c in row.locator("td").all_inner_texts()]
        out[cells[0]] = cells[1:]
    return out


def heading(page: Page) -> str:
    return " ".join(page.locator("h1").inner_text().split())


def open_run(page: Page, run_id: str) -> None:
    """From the runs list, click the run's link."""
    page.get_by_role("link", name=run_id, exact=True).click()
    page.wait_for_url(f"**/_console/runs/{run_id}")


def reload_until(page: Page, what: str, cond: Callable[[], bool]) -> None:
    def check() -> bool:
        page.reload()
        return cond()

    wait_for(what, check, SETTLE_S, interval=0.2)


def test_console_in_chromium_lists_shows_resumes_and_cancels(
    server: DevServer, browser: Browser, shots: Callable[[Page, str], Path]
) -> None:
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

    page = browser.new_page(viewport={"width": 1100, "height": 420})
    page.set_default_timeout(UI_MS)

    # --- the list shows the runs, with status and current step --------------------------
    page.goto(server.url("/_console"))
    assert page.title() == "lunaflow runs"
    runs = listed(page)
    assert set(runs) == {"charge-1", "restock-1", "parent-1", "parent-1-child"}, runs
    assert runs["charge-1"][:3] == ["charge", "failed", "step 'charge-card'"]
    assert runs["restock-1"][:3] == ["restock", "failed", "step 'reserve'"]
    assert runs["parent-1"][:3] == ["parent", "awaiting", "await 'done'"]
    assert runs["parent-1-child"][:3] == ["child", "awaiting", "await 'go'"]
    shots(page, "01-runs")

    # The status filter narrows the list to failed runs.
    page.select_option("select[name=status]", "failed")
    page.get_by_role("button", name="filter").click()
    page.wait_for_url("**/_console?status=failed*")
    assert set(listed(page)) == {"charge-1", "restock-1"}

    # --- a click opens a failed run's timeline with its error and attempts --------------
    open_run(page, "charge-1")
    assert heading(page) == "charge-1 failed"
    text = page.locator("body").inner_text()
    assert "error step 'charge-card' failed after 2 attempts: card declined for 4242" in text
    for attempt in (1, 2):
        row = page.locator("td.att", has_text=f"attempt {attempt}: failed")
        assert row.count() == 1, text
        assert f"step id charge-1/charge-card/1/{attempt}" in row.inner_text()
        assert "card declined for 4242" in row.inner_text()
    assert page.get_by_role("button", name="Resume").is_visible()
    assert page.get_by_role("button", name="Cancel").is_visible()
    picture = shots(page, "02-failed-run")
    if os.environ.get("LUNAFLOW_UPDATE_DOCS"):  # refresh the README's picture on purpose only
        shutil.copyfile(picture, DOCS_PICTURE)

    # --- its resume button resumes it ---------------------------------------------------
    page.get_by_role("link", name="all runs").click()
    open_run(page, "restock-1")
    assert heading(page) == "restock-1 failed"
    assert page.locator("td.att", has_text="out of stock").count() == 2
    r = server.request("POST", "/flag/stock", "the browser test")  # what the step was missing
    assert r.status == 200, r
    page.get_by_role("button", name="Resume").click()
    # A confirmation step first: nothing has happened yet.
    assert heading(page) == "Resume restock-1?"
    assert "Its failed step gets a fresh set of attempts." in page.locator("body").inner_text()
    assert status(server, "restock", "restock-1") == "failed"
    shots(page, "03-confirm-resume")
    page.get_by_role("button", name="Yes, resume").click()
    page.wait_for_url("**/_console/runs/restock-1")
    reload_until(page, "restock-1 to show completed", lambda: heading(page) == "restock-1 completed")
    text = page.locator("body").inner_text()
    assert 'result {"reserved":"set by the browser test"}' in text
    assert "resumed" in page.locator("td").all_inner_texts()
    assert page.locator("td.att", has_text="attempt 3: ok").count() == 1
    assert page.get_by_role("button").count() == 0  # a completed run offers nothing
    shots(page, "04-resumed-run")

    # --- cancelling an awaiting parent cancels its child --------------------------------
    page.get_by_role("link", name="all runs").click()
    open_run(page, "parent-1")
    assert heading(page) == "parent-1 awaiting"
    assert page.get_by_role("link", name="parent-1-child", exact=True).is_visible()
    assert page.get_by_role("button", name="Resume").count() == 0  # resume is for failed runs
    page.get_by_role("button", name="Cancel").click()
    assert heading(page) == "Cancel parent-1?"
    assert (
        "Cancel run parent-1? This also cancels the runs it started: parent-1-child."
        in page.locator("body").inner_text()
    )
    shots(page, "05-confirm-cancel")
    page.get_by_role("button", name="Yes, cancel").click()
    page.wait_for_url("**/_console/runs/parent-1")
    reload_until(page, "parent-1 to show cancelled", lambda: heading(page) == "parent-1 cancelled")
    page.get_by_role("link", name="parent-1-child", exact=True).click()
    page.wait_for_url("**/_console/runs/parent-1-child")
    assert heading(page) == "parent-1-child cancelled"
    assert status(server, "child", "parent-1-child") == "cancelled"
    shots(page, "06-cancelled-child")

    page.get_by_role("link", name="all runs").click()
    runs = listed(page)
    assert {k: v[1] for k, v in runs.items()} == {
        "charge-1": "failed",
        "restock-1": "completed",
        "parent-1": "cancelled",
        "parent-1-child": "cancelled",
    }
    shots(page, "07-runs-after")
    assert server.alive, server.output_tail()
