"""Issue 28 in a real browser: the console lists the auction's schedule with its next tick and
last run, pauses, resumes and triggers it, and a run's page shows the values it published.
Headless Chromium (tests/console/chromium.py) against `lunaflow dev examples/auction` on a
data folder of its own. With LUNAFLOW_UPDATE_DOCS set, the screenshots refresh
docs/console-schedules.png and docs/console-values.png.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support.devserver import DevServer, wait_for

from . import ROOT
from .chromium import SETTLE_S, Browser, Page, browser_fixture, module_server, open_page, shoot

browser = browser_fixture
AUCTION = ROOT / "examples" / "auction"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    yield from module_server(tmp_path_factory, AUCTION)


@pytest.fixture
def page(server: DevServer, browser: Browser) -> Iterator[Page]:
    p = open_page(browser, server)
    yield p
    p.context.close()


def schedule_row(page: Page, name: str) -> list[str]:
    row = page.locator("table.schedules tr", has=page.locator("td", has_text=name)).first
    return [" ".join(c.split()) for c in row.locator("td").all_inner_texts()]


def test_the_auctions_schedule_is_listed_paused_resumed_and_triggered_and_its_run_shows_its_values(
    server: DevServer, page: Page
) -> None:
    for lot, price in (("lot-1", 10), ("lot-2", 15), ("lot-3", 20)):
        r = server.post_json("/api/sale", {"id": lot, "winner": "ada", "price": price})
        assert r.status == 201, r
    assert server.post_json("/api/sale/pay", {"id": "lot-3", "user": "ada"}).status == 202
    server.wait_status("sale-lot-3", {"completed"})

    page.goto(server.url("/_console"))
    row = schedule_row(page, "unpaid-report")
    assert row[:5] == ["unpaid-report", "unpaid-report", "0 3 * * * (Europe/Paris)", "skip", "active"], row
    assert "UTC" in row[5] and "(in " in row[5], row  # its next tick, and how far off

    row_of = page.locator("table.schedules tr", has_text="unpaid-report")
    row_of.get_by_role("button", name="Pause").click()
    page.wait_for_url("**/_console?done=*")
    assert "Schedule unpaid-report is paused" in page.locator("p.note").inner_text()
    assert schedule_row(page, "unpaid-report")[4] == "paused"
    listed = server.cli("schedules", "--json")
    assert json.loads(listed.out)[0]["paused"] is True, str(listed)  # the CLI reads the same pause

    page.locator("table.schedules tr", has_text="unpaid-report").get_by_role(
        "button", name="Trigger now"
    ).click()
    page.wait_for_url("**/_console?done=*")
    note = page.locator("p.note").inner_text()
    assert "Schedule unpaid-report triggered: run unpaid-report@" in note, note
    run_id = note.split("run ", 1)[1].rstrip(".")
    server.wait_status(run_id, {"completed"}, timeout=SETTLE_S)
    row_of.get_by_role("button", name="Resume").click()
    page.wait_for_url("**/_console?done=*")
    wait_for(
        "the schedule's last run to be listed",
        lambda: (page.reload() or True) and f"{run_id} completed" in schedule_row(page, "unpaid-report")[6],
        SETTLE_S,
        interval=0.2,
    )
    assert schedule_row(page, "unpaid-report")[4] == "active"
    shoot(page, "20-schedules", docs="console-schedules.png", locator="table.schedules")

    # The run's page shows what it published: two sales unpaid, 25 in all.
    page.locator("table.schedules").get_by_role("link", name=run_id).click()
    page.wait_for_url("**/_console/runs/unpaid-report*")
    text = page.locator("#live").inner_text()
    assert "unpaid = 2" in " ".join(text.split()) and "unpaid_total = 25" in " ".join(text.split()), text
    shoot(page, "21-values", docs="console-values.png")
