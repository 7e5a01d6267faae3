"""Issue 28 point 1: "The console and the CLI list schedules with their next ticks and last
runs, and pause, resume or trigger them." On both harnesses: the local page (``lunaflow
dev``'s ``/_console``, its forms POSTed with the process's token) over ``LocalPlatform``,
and the CloudWatch widget (``functions/console.py``, its ``cwdb-action`` buttons clicked as
the dashboard does) over ``AwsPlatform``, where a pause is the Scheduler schedule's state
and a trigger the tick message on the wake queue.

The project declares five schedules (tests/projects/schedules); the fake clock starts at
2026-01-01T00:00:00Z.
"""

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

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "schedules"
TOKEN = "t0ken"
DECLARED = ["nightly", "quarter", "slow-allow", "slow-cancel", "slow-skip"]

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")


class Console:
    """The console a person uses on one harness: its runs list, and a click on a
    schedule's button."""

    def __init__(self, p: Any) -> None:
        self.p = p
        self.aws = isinstance(p, AwsPlatform)
        self.local = LocalConsole(p.platform, token=TOKEN, poke=lambda: None, schedules=p.schedule_control)
        self.base = json.loads((EVENTS / "cw_widget_runs.json").read_text(encoding="utf-8"))

    def page(self) -> Html:
        if self.aws:
            return Html(self.p.invoke(Handler.CONSOLE, copy.deepcopy(self.base), CONSOLE_TIMEOUT_S))
        answer = self.local.handle("GET", "/_console", {})
        assert answer.status_code == 200, answer.body
        return Html(answer.body)

    def click(self, schedule: str, label: str) -> Html:
        """The button ``label`` in ``schedule``'s row; the page it leads to (with what
        happened)."""
        page = self.page()
        if self.aws:
            button = page.action(label, schedule=schedule)
            assert button.attrs.get("confirmation"), "a schedule action on the dashboard is confirmed first"
            event = {**copy.deepcopy(self.base), **button.payload}
            out = Html(self.p.invoke(Handler.CONSOLE, event, CONSOLE_TIMEOUT_S))
        else:
            [form] = [
                f for f in page.forms if f.action == f"/_console/schedules/{schedule}" and f.button == label
            ]
            answer = self.local.handle("POST", form.action, dict(form.fields))
            assert answer.status_code == 303, answer.body
            location = answer.headers["location"]
            out = Html(self.local.handle("GET", location, {}).body)
        self.p.settle()
        return out


@pytest.fixture(params=["local", "aws"])
def p(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    harness = {"local": LocalPlatform, "aws": AwsPlatform}[request.param]
    with harness(PROJECT, data_dir=tmp_path / "data") as platform:
        yield platform


def schedule_rows(page: Html) -> dict[str, list[str]]:
    """The schedules table's rows by schedule name, cell by cell."""
    return page.table_rows("schedules")


def test_the_runs_list_shows_every_schedule_with_its_next_tick_and_last_run(p: Any) -> None:
    console = Console(p)
    rows = schedule_rows(console.page())
    assert sorted(rows) == DECLARED
    nightly = rows["nightly"]
    assert nightly[1:5] == ["report", "0 3 * * * (Europe/Paris)", "skip", "active"]
    # 03:00 in Paris in January is 02:00 UTC, two hours after the clock's start.
    assert nightly[5].startswith("2026-01-01 02:00:00 UTC") and "in 2 h" in nightly[5], nightly
    assert nightly[6] == "none yet"
    assert rows["quarter"][2] == "every 15m"

    p.advance("1d")
    rows = schedule_rows(console.page())
    assert rows["nightly"][5].startswith("2026-01-02 02:00:00 UTC"), rows["nightly"]
    assert rows["nightly"][6] == "nightly@2026-01-01T02:00:00Z completed"
    # Its window ended at 01:00: no next tick; its last tick was 01:00's.
    assert rows["quarter"][5] == "none (window over)"
    assert rows["quarter"][6] == "quarter@2026-01-01T01:00:00Z completed"


def test_pause_and_resume_from_the_console(p: Any) -> None:
    console = Console(p)
    paused = console.click("nightly", "Pause")
    assert "Schedule nightly is paused" in paused.text
    row = schedule_rows(paused)["nightly"]
    assert row[4] == "paused" and "(skipped while paused)" in row[5], row
    assert p.schedule_control.is_paused("nightly") and not p.schedule_control.is_paused("quarter")
    p.advance("1d")
    assert not [r for r in p.runs() if r.id.startswith("nightly@")], "a paused schedule ticked"

    resumed = console.click("nightly", "Resume")
    assert "Schedule nightly is active" in resumed.text
    assert schedule_rows(resumed)["nightly"][4] == "active"
    p.advance("1d")
    assert [r.id for r in p.runs() if r.id.startswith("nightly@")] == ["nightly@2026-01-02T02:00:00Z"]


def test_trigger_now_from_the_console_starts_the_ticks_run(p: Any) -> None:
    console = Console(p)
    p.advance("10m")  # 00:10:00
    page = console.click("nightly", "Trigger now")
    assert "Schedule nightly triggered: run nightly@2026-01-01T00:10:00Z" in page.text
    run = p.get("nightly@2026-01-01T00:10:00Z")
    assert (run.workflow, run.status.value) == ("report", "completed")
    assert run.result["input"] == {"kind": "nightly"}
    assert schedule_rows(console.page())["nightly"][6] == "nightly@2026-01-01T00:10:00Z completed"


def test_a_paused_schedule_is_still_triggered(p: Any) -> None:
    console = Console(p)
    console.click("nightly", "Pause")
    console.click("nightly", "Trigger now")
    assert [r.id for r in p.runs() if r.id.startswith("nightly@")] == ["nightly@2026-01-01T00:00:00Z"]
    assert p.schedule_control.is_paused("nightly")


def test_an_action_on_a_schedule_the_code_does_not_declare_is_refused_naming_those_it_does(p: Any) -> None:
    console = Console(p)
    if console.aws:
        event = {**copy.deepcopy(console.base), "action": "schedule", "schedule": "weekly", "do": "pause"}
        page = Html(p.invoke(Handler.CONSOLE, event, CONSOLE_TIMEOUT_S))
    else:
        answer = console.local.handle(
            "POST", "/_console/schedules/weekly", {"token": TOKEN, "action": "pause"}
        )
        assert answer.status_code == 400
        page = Html(answer.body)
    assert "no schedule 'weekly' is declared in this project" in page.text
    assert "nightly, quarter, slow-allow, slow-cancel, slow-skip" in page.text
    assert not any(p.schedule_control.is_paused(name) for name in DECLARED)


def test_a_schedule_action_without_the_consoles_token_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    with LocalPlatform(PROJECT, data_dir=tmp_path / "data") as p:
        console = LocalConsole(p.platform, token=TOKEN, poke=lambda: None, schedules=p.schedule_control)
        for form in ({"action": "pause"}, {"action": "pause", "token": "forged"}):
            answer = console.handle("POST", "/_console/schedules/nightly", form)
            assert answer.status_code == 403, answer.body
        cross = console.handle(
            "POST",
            "/_console/schedules/nightly",
            {"action": "pause", "token": TOKEN},
            cross_site="evil.example",
        )
        assert cross.status_code == 403
        assert not p.schedule_control.is_paused("nightly")
        assert not (p.data_dir / "schedules.json").exists()


def test_an_unknown_schedule_action_is_refused(tmp_path: Path) -> None:
    with LocalPlatform(PROJECT, data_dir=tmp_path / "data") as p:
        console = LocalConsole(p.platform, token=TOKEN, poke=lambda: None, schedules=p.schedule_control)
        answer = console.handle("POST", "/_console/schedules/nightly", {"action": "delete", "token": TOKEN})
        assert answer.status_code == 400
        assert "unknown schedule action 'delete'" in Html(answer.body).text
        assert not p.runs()
