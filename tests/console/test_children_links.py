"""Issue 27.1: the console and `lunaflow show` link parent and children both ways and show
which child the parent waits for (its open c:result()). Runs of tests/projects/children
built with LocalPlatform on a data folder, then read as a user would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from runtime import cli
from runtime.console import page as console_page
from runtime.core.clock import SystemClock
from runtime.platform.runs import Runs
from runtime.store.sqlite import STORE_FILE, SQLiteStore
from runtime.testing import LocalPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "children"


def show(data: Path, run_id: str, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    capsys.readouterr()
    code = cli.main(["show", run_id, "--data", str(data), "--project", str(PROJECT), *extra])
    shown = capsys.readouterr()
    assert code == 0, shown.err
    return shown.out


def page(data: Path, run_id: str) -> str:
    runs = Runs(SQLiteStore(data / STORE_FILE), SystemClock())
    try:
        response = console_page.render_console(runs, "GET", f"/_console/runs/{run_id}", {}, poke=lambda: None)
    finally:
        runs.store.close()
    assert response.status_code == 200
    return response.body if isinstance(response.body, str) else response.body.decode()


def test_show_and_the_console_link_parent_and_child_and_name_the_awaited_child(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli.output, "out", Console(highlight=False, soft_wrap=True, width=400))
    data = tmp_path / "data"
    with LocalPlatform(PROJECT, data_dir=data) as p:
        p.start("order", {"amount": 5, "child_id": "card-1"}, id="order-1")
    shown = json.loads(show(data, "order-1", capsys, "--json"))
    assert shown["children"] == ["card-1"] and shown["waiting_for"] == "card-1"
    assert [i["title"] for i in shown["timeline"]] == [
        "started",
        "child 'card-1'",
        "result of child 'card-1'",
    ]
    assert json.loads(show(data, "card-1", capsys, "--json"))["run"]["parent_id"] == "order-1"
    text = show(data, "order-1", capsys)
    assert "children card-1" in text and "waiting for child card-1" in text
    assert "parent order-1" in show(data, "card-1", capsys)
    parent_page = page(data, "order-1")
    assert "waiting for child <a" in parent_page and "/_console/runs/card-1" in parent_page
    assert "/_console/runs/order-1" in page(data, "card-1")
    with LocalPlatform(PROJECT, data_dir=data) as p:
        p.signal("card-1", "go", "ok")
    done = json.loads(show(data, "order-1", capsys, "--json"))
    assert done["waiting_for"] is None
    assert done["timeline"][2]["resolution"].startswith("child completed ")
    assert "waiting for child" not in page(data, "order-1")


def test_the_run_page_says_when_an_ended_run_is_deleted(tmp_path: Path) -> None:
    """[runs] retention: the run page of an ended run gives the time it is deleted; a run in
    flight has none."""
    data = tmp_path / "data"
    with LocalPlatform(PROJECT, data_dir=data) as p:
        p.start("echo", 1, id="done-1")
        p.start("charge-card", {"amount": 1}, id="waiting-1")
    ended = page(data, "done-1")
    assert "deleted <time datetime='2026-01-31T00:00:00+00:00'>" in ended
    assert "<code>[runs] retention</code>" in ended
    assert "[runs] retention" not in page(data, "waiting-1")
