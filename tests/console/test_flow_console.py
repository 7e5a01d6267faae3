"""Issue 30.5 in the console: the runs list shows each key with runs holding or waiting for
its slots ("2 of 2 in use", who is next, each a link), and a waiting run's page says why it
is not moving ("waiting for a slot of sync/acme: 2 of 2 in use, 1st in line"). On the local
page over LocalPlatform and the CloudWatch widget over AwsPlatform."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.aws.contract import CONSOLE_TIMEOUT_S, Handler
from runtime.console.page import LocalConsole
from runtime.testing import AwsPlatform, LocalPlatform

from . import EVENTS, Html

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "flow"

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")


@pytest.fixture(params=["local", "aws"])
def p(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    harness = {"local": LocalPlatform, "aws": AwsPlatform}[request.param]
    with harness(PROJECT, data_dir=tmp_path / "data") as platform:
        yield platform


def page(p: Any, run_id: str | None = None) -> Html:
    if isinstance(p, AwsPlatform):
        event = json.loads((EVENTS / "cw_widget_runs.json").read_text(encoding="utf-8"))
        if run_id:
            event.update(view="run", run_id=run_id)
        return Html(p.invoke(Handler.CONSOLE, copy.deepcopy(event), CONSOLE_TIMEOUT_S))
    console = LocalConsole(p.platform, token="t", poke=lambda: None)
    answer = console.handle("GET", f"/_console/runs/{run_id}" if run_id else "/_console", {})
    assert answer.status_code == 200, answer.body
    return Html(answer.body)


def limit_rows(page: Html) -> dict[str, list[str]]:
    """The flow control table's rows by key, cell by cell."""
    return page.table_rows("limits")


def test_the_console_shows_who_holds_and_who_waits_for_each_key(p: Any) -> None:
    for i in range(4):
        p.start("sync", {"customer": "acme", "n": i}, id=f"s{i}")
    rows = limit_rows(page(p))
    assert rows["sync/acme"] == ["sync/acme", "2 of 2", "2", "s2 s3"]
    assert rows["sync"][1:3] == ["2 of 3", "2"]
    p.set_limit("sync/*", 3)
    assert limit_rows(page(p))["sync/acme"][1] == "3 of 3 (set at run time)"
    assert "waiting for a slot of sync/acme: 3 of 3 in use, 1st in line" in page(p, "s3").text
    for i in range(4):
        p.signal(f"s{i}", "go")
    assert limit_rows(page(p)) == {}
