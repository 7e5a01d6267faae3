"""Issue 24, section 6: the page of a run failed by journal divergence. Before: its await
still read `waiting`, its `updated` time was the wait's (so it `took 25 ms`), and the
failure was drawn nowhere: a divergence writes no journal entry, and the page read the
run's last change from its last entry. Both harnesses (the store records the failure's
time on the run: SQLite's `changed_at`, DynamoDB's `updated_at`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.console import render
from runtime.testing import AwsPlatform, LocalPlatform

from . import Html

PROJECTS = Path(__file__).resolve().parents[1] / "projects"
REWAITED = "journal divergence: expected await 'paid', code reached sleep"


def _effect(cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
    return [args[0]]


@pytest.fixture(params=["local", "aws"])
def p(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    harness = {"local": LocalPlatform, "aws": AwsPlatform}[request.param]
    with harness(PROJECTS / "seed_rename_v1", data_dir=tmp_path / "data", objects=_effect) as platform:
        yield platform


def test_a_run_failed_by_divergence_shows_its_wait_ended_and_its_failure(p: Any) -> None:
    p.start("waiter", None, id="w-1")
    started = p.get("w-1").created_at
    p.advance("2h")
    p.deploy(PROJECTS / "seed_rename_v2")
    p.signal("w-1", "paid", {"by": "ada"})
    run = p.get("w-1")
    assert (run.status, run.error) == ("failed", REWAITED)
    assert run.updated_at >= started + 7200  # the failure's time, not the wait's
    html = render.run_page(p.platform, render.LocalActions(), "w-1")
    page = Html(html)
    assert "took 2 h" in page.text and "took 25 ms" not in page.text
    journal = page.text.split("Journal", 1)[1]
    assert "waiting" not in journal  # the wait is not open
    assert "ended by the run's failure" in page.text
    assert "<tr id='failed'>" in html and REWAITED in page.text
    assert "class='mark failure'" in html and "data-lane='run failed'" in html  # drawn
    assert "still waiting" not in html


def test_the_start_form_offers_the_projects_workflows_and_no_examples_input(p: Any) -> None:
    """Before: the input's placeholder was the auction's `{"id": "lot-42"}` in every project."""
    html = render.runs_page(p.platform, render.LocalActions())
    form = html.split("<h2>Start a run</h2>", 1)[1]
    assert (
        "<option value='rename'>rename</option>" in form and "<option value='waiter'>waiter</option>" in form
    )
    assert "lot-42" not in html
