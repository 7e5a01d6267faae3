"""Issue 28 points 2 and 3 in the console, on both harnesses: a run's page shows the values
it published (wf:set), and the list's value search (``where``) finds runs by them, a bad
filter being named on the page, never an error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.console import render
from runtime.console.html import Zone
from runtime.console.search import RunQuery
from runtime.testing import AwsPlatform, LocalPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "published"


@pytest.fixture(params=["local", "aws"])
def p(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    harness = {"local": LocalPlatform, "aws": AwsPlatform}[request.param]
    with harness(PROJECT, data_dir=tmp_path / "data") as platform:
        for n in range(1, 4):
            platform.start("subscription", {"plan": "gold", "months": 9}, id=f"s-{n}")
            for _ in range(n - 1):
                platform.signal(f"s-{n}", "renewed")
        yield platform


def test_the_run_page_shows_the_published_values(p: Any) -> None:
    html = render.run_page(p.platform, render.LocalActions(), "s-2")
    assert "<b>values</b> <code>month</code> = <code class='pub'>2</code>" in html
    assert "<code>plan</code> = <code class='pub'>&quot;gold&quot;</code>" in html


def test_the_list_finds_runs_by_a_value(p: Any) -> None:
    q = RunQuery.read({"where": "month>=2"}, Zone())
    html = render.runs_page(p.platform, render.LocalActions(), q)
    assert "s-3" in html and "s-2" in html and "'s-1'" not in html.replace('"', "'")
    assert "value month&gt;=2" in html
    bad = RunQuery.read({"where": "month>=gold"}, Zone())
    assert bad.where == "" and any(">= compares numbers" in n for n in bad.problems)
