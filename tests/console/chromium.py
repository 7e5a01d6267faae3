"""Debian's Chromium, headless, driven by Playwright for Python: the fixtures and helpers the
console's browser tests share.

Chromium is /usr/bin/chromium (CI installs it with .ci/run); where it or the Python
package is missing, the browser tests skip and say why. Every browser action is bounded
(UI_MS), every wait for a run (SETTLE_S). Screenshots go to artifacts/console/
(git-ignored); with LUNAFLOW_UPDATE_DOCS set, the tests refresh docs/console.png,
docs/console-timeline.png, docs/console-schedules.png and docs/console-values.png.
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

from . import ARTIFACTS, ROOT

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip(
        f"Debian's Chromium is not installed at {CHROMIUM} (apt-get install chromium); "
        "the browser tests need it",
        allow_module_level=True,
    )
try:
    from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    pytest.skip(
        "Playwright for Python is not installed (pip install playwright); the browser tests need it",
        allow_module_level=True,
    )

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SETTLE_S = 15.0  # bound on a run reaching the status a test waits for
UI_MS = 10_000  # bound on one browser action
DOCS = ROOT / "docs"

__all__ = ["Browser", "BrowserContext", "Page", "browser_fixture", "open_page", "shoot"]


@pytest.fixture(scope="module")
def browser_fixture() -> Iterator[Browser]:
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            yield b
        finally:
            b.close()


def open_page(browser: Browser, server: DevServer, width: int = 1280, height: int = 800) -> Page:
    """A fresh context (clipboard allowed, time zone UTC) whose every request is recorded
    on ``page.requests`` so a test can check none left the server."""
    context = browser.new_context(viewport={"width": width, "height": height}, timezone_id="UTC")
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url(""))
    page = context.new_page()
    page.set_default_timeout(UI_MS)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.requests = requests  # type: ignore[attr-defined]
    return page


def shoot(page: Page, name: str, docs: str | None = None, locator: str | None = None) -> Path:
    """A screenshot in artifacts/console/; with LUNAFLOW_UPDATE_DOCS set, also docs/<docs>."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    if locator:
        page.locator(locator).first.screenshot(path=str(path))
    else:
        page.screenshot(path=str(path), full_page=True)
    if docs and os.environ.get("LUNAFLOW_UPDATE_DOCS"):
        shutil.copyfile(path, DOCS / docs)
    return path


def start(server: DevServer, workflow: str, run_id: str, input: Any = None) -> None:
    body = "" if input is None else json.dumps(input)
    r = server.request(
        "POST", f"/start/{workflow}/{run_id}", body, headers={"content-type": "application/json"}
    )
    assert r.status == 201, r


def status(server: DevServer, workflow: str, run_id: str) -> str:
    """The run's status; "" while it does not exist yet (a child its parent's step starts)."""
    r = server.get(f"/status/{workflow}/{run_id}")
    if r.status == 404:
        return ""
    assert r.status == 200, r
    value: str = r.json()["status"]
    return value


def settled(server: DevServer, workflow: str, run_id: str, want: str) -> None:
    wait_for(
        f"{run_id} to be {want}", lambda: status(server, workflow, run_id) == want, SETTLE_S, interval=0.1
    )


def listed(page: Page) -> dict[str, list[str]]:
    """The runs table as the reader sees it: run id -> the row's other cells."""
    rows = page.locator("table.runs tr").all()
    out = {}
    for row in rows[1:]:
        cells = [" ".join(c.split()) for c in row.locator("td").all_inner_texts()]
        out[cells[0]] = cells[1:]
    return out


def heading(page: Page) -> str:
    return " ".join(page.locator("h1").inner_text().split())


def eventually(what: str, cond: Callable[[], bool]) -> None:
    """Wait (bounded) for the page to show something by itself: no reload."""
    wait_for(what, cond, SETTLE_S, interval=0.1)


def module_server(tmp_path_factory: pytest.TempPathFactory, project: Path) -> Iterator[DevServer]:
    servers = Servers(tmp_path_factory.mktemp("browser"))
    try:
        yield servers.start(project)
    finally:
        servers.close()
