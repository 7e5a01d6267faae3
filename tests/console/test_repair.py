"""Issue 29.3 in the console: "The console offers the same [repair by query] for a search's
results, with a confirmation naming the count." On both harnesses: the local page's search
shows a repair bar whose buttons name how many runs they reach, a preview page lists them
(and the ones the current code would not replay, left out) before anything is done; in the
CloudWatch widget the button's confirmation names the count and CloudWatch asks it."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from runtime.aws.contract import CONSOLE_TIMEOUT_S, Handler
from runtime.console.page import LocalConsole
from runtime.testing import AwsPlatform, LocalPlatform

from . import EVENTS, Html

PROJECTS = Path(__file__).resolve().parents[1] / "projects"
TOKEN = "t0ken"

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")


@contextmanager
def repairable(harness: Any, tmp_path: Path) -> Iterator[Any]:
    """Three failed runs the current code replays, one it would not, one parked."""
    with harness(PROJECTS / "why", data_dir=tmp_path / "data") as platform:
        for i in (1, 2, 3):
            platform.start("flaky", None, id=f"f{i}")
        platform.advance("1m")
        platform.start("waiter", None, id="diverged")
        platform.deploy(PROJECTS / "why_v2")
        platform.signal("diverged", "paid", {"by": "ada"})
        platform.start("waiter", None, id="parked")
        yield platform


def statuses(p: Any) -> dict[str, str]:
    return {r.id: str(r.status) for r in p.runs()}


def test_the_local_console_previews_a_repair_naming_the_count_then_acts(tmp_path: Path) -> None:
    with repairable(LocalPlatform, tmp_path) as p:
        local_repair(p)


def local_repair(p: Any) -> None:
    console = LocalConsole(p.platform, token=TOKEN, poke=lambda: None)
    listed = Html(console.handle("GET", "/_console?status=failed", {}).body)
    [form] = [f for f in listed.forms if f.action == "/_console/bulk" and f.fields.get("action") == "resume"]
    assert form.button == "Resume all 4 failed runs"
    assert form.fields["query"] == "status=failed"
    before = statuses(p)
    preview = console.handle("POST", "/_console/bulk", {**form.fields, "step": "ask"})
    assert preview.status_code == 200
    page = Html(preview.body)
    assert "Resume 3 run(s)?" in page.text
    assert "3 run(s) would be resumed (status failed); 1 left out" in page.text
    assert "diverged: journal divergence: expected await 'paid'" in " ".join(page.text.split())
    assert statuses(p) == before, "the preview changes nothing"
    [yes] = [f for f in page.forms if f.button == "Yes, resume these 3"]
    done = console.handle("POST", "/_console/bulk", dict(yes.fields) | {"step": "do"})
    assert done.status_code == 303 and done.headers["location"].startswith("/_console?status=failed")
    shown = Html(console.handle("GET", done.headers["location"], {}).body)
    assert "Resumed 3 run(s); 1 left out (the current code would not replay them: diverged)." in shown.text
    p.settle()
    after = statuses(p)
    assert [after[r] for r in ("f1", "f2", "f3", "diverged", "parked")] == [
        "sleeping",
        "sleeping",
        "sleeping",
        "failed",
        "awaiting",
    ]


def test_the_widgets_repair_button_names_the_count_in_its_confirmation(tmp_path: Path) -> None:
    with repairable(AwsPlatform, tmp_path) as p:
        widget_repair(p)


def widget_repair(p: Any) -> None:
    base = json.loads((EVENTS / "cw_widget_runs.json").read_text(encoding="utf-8"))
    event = {**copy.deepcopy(base), "status": "failed"}
    page = Html(p.invoke(Handler.CONSOLE, event, CONSOLE_TIMEOUT_S))
    button = page.action("Resume all 4 failed runs", action="bulk", do="resume")
    assert button.attrs["confirmation"].startswith("Resume the 4 runs this search selects (failed runs)?")
    out = Html(p.invoke(Handler.CONSOLE, {**copy.deepcopy(base), **button.payload}, CONSOLE_TIMEOUT_S))
    assert "Resumed 3 run(s); 1 left out (the current code would not replay them: diverged)." in out.text
    p.settle()
    assert statuses(p)["f1"] == "sleeping" and statuses(p)["diverged"] == "failed"


def test_a_search_without_a_filter_offers_no_repair_and_one_posted_is_refused(tmp_path: Path) -> None:
    with LocalPlatform(PROJECTS / "why", data_dir=tmp_path / "data") as p:
        p.start("flaky", None, id="f1")
        p.advance("1m")
        console = LocalConsole(p.platform, token=TOKEN, poke=lambda: None)
        page = Html(console.handle("GET", "/_console", {}).body)
        assert not [f for f in page.forms if f.action == "/_console/bulk"]
        refused = console.handle("POST", "/_console/bulk", {"token": TOKEN, "action": "cancel", "step": "do"})
        assert refused.status_code == 400
        assert p.get("f1").status == "failed"
        forged = console.handle(
            "POST", "/_console/bulk", {"action": "resume", "status": "failed", "step": "do"}
        )
        assert forged.status_code == 403 and p.get("f1").status == "failed"


def test_retry_all_counts_only_the_runs_in_a_backoff_not_a_wf_sleep(tmp_path: Path) -> None:
    """Two runs sleep in wf:sleep, one waits out its step's backoff: the search for sleeping
    runs offers to retry one, and its preview lists that one."""
    with LocalPlatform(PROJECTS / "why", data_dir=tmp_path / "data") as p:
        p.start("napper", None, id="n1")
        p.start("napper", None, id="n2")
        p.start("flaky", None, id="b1")
        console = LocalConsole(p.platform, token=TOKEN, poke=lambda: None)
        listed = Html(console.handle("GET", "/_console?status=sleeping", {}).body)
        [form] = [
            f for f in listed.forms if f.action == "/_console/bulk" and f.fields.get("action") == "retry"
        ]
        assert form.button == "Retry now all 1 sleeping runs (those in a step's backoff)"
        preview = Html(console.handle("POST", "/_console/bulk", {**form.fields, "step": "ask"}).body)
        assert "1 run(s) would be retried (status sleeping); 2 matched but" in preview.text
        naps = Html(console.handle("GET", "/_console?workflow=napper", {}).body)
        assert not [f for f in naps.forms if f.fields.get("action") == "retry"]
        assert [f.button for f in naps.forms if f.fields.get("action") == "cancel"] == ["Cancel all 2 runs"]


def test_the_widgets_retry_all_counts_only_the_runs_in_a_backoff(tmp_path: Path) -> None:
    with AwsPlatform(PROJECTS / "why", data_dir=tmp_path / "data") as p:
        p.start("napper", None, id="n1")
        p.start("flaky", None, id="b1")
        base = json.loads((EVENTS / "cw_widget_runs.json").read_text(encoding="utf-8"))
        page = Html(
            p.invoke(Handler.CONSOLE, {**copy.deepcopy(base), "status": "sleeping"}, CONSOLE_TIMEOUT_S)
        )
        button = page.action(
            "Retry now all 1 sleeping runs (those in a step's backoff)", action="bulk", do="retry"
        )
        out = Html(p.invoke(Handler.CONSOLE, {**copy.deepcopy(base), **button.payload}, CONSOLE_TIMEOUT_S))
        assert "Retried 1 run(s)." in out.text
        assert statuses(p)["n1"] == "sleeping"


def test_retry_now_is_offered_again_after_one_was_used(tmp_path: Path) -> None:
    """After a retry now the timeline's last item is its marker (the next attempt joins the
    step's item): the button still follows the journal, so a run back in its backoff offers
    it again, as ``lunaflow retry RUN`` accepts it."""
    with LocalPlatform(PROJECTS / "why", data_dir=tmp_path / "data") as p:
        p.start("flaky", None, id="b1")
        console = LocalConsole(p.platform, token=TOKEN, poke=lambda: None)

        def offered() -> bool:
            page = Html(console.handle("GET", "/_console/runs/b1", {}).body)
            return any(f.button == "Retry now" for f in page.forms)

        assert offered()
        p.platform.retry("b1")
        p.settle()  # attempt 2 fails too: the run waits out the backoff before attempt 3
        assert p.get("b1").status == "sleeping"
        assert [e.kind for e in p.journal("b1")][-2:] == ["step.intent", "step.failed"]
        assert offered()
        p.platform.retry("b1")  # and the run API takes it, as the button would


REPLAYED = "Each is replayed on the current code first; those it would not replay are left out."
NOT_REPLAYED = (
    "Nothing is replayed: each run not ended is cancelled as it stands (its on_cancel handler, "
    "if any, runs), with the runs it started."
)


def test_the_cancel_confirmation_says_nothing_is_replayed(tmp_path: Path) -> None:
    """A cancel replays nothing (only a resume or a retry hands runs to the current code):
    its confirmation says so, the resume's still names the replay, on the local page and in
    the widget alike."""
    with repairable(LocalPlatform, tmp_path) as p:
        console = LocalConsole(p.platform, token=TOKEN, poke=lambda: None)
        listed = Html(console.handle("GET", "/_console?status=failed", {}).body)
        titles = {t.attrs.get("title", "") for t in listed.tags if t.name == "form"}
        assert "Cancel the 4 runs this search selects (failed runs)? " + NOT_REPLAYED in titles
        assert "Resume the 4 runs this search selects (failed runs)? " + REPLAYED in titles
    with repairable(AwsPlatform, tmp_path / "aws") as p:
        base = json.loads((EVENTS / "cw_widget_runs.json").read_text(encoding="utf-8"))
        page = Html(p.invoke(Handler.CONSOLE, {**copy.deepcopy(base), "status": "failed"}, CONSOLE_TIMEOUT_S))
        cancel = page.action("Cancel all 4 runs", action="bulk", do="cancel")
        assert cancel.attrs["confirmation"].endswith("(failed runs)? " + NOT_REPLAYED)
        resume = page.action("Resume all 4 failed runs", action="bulk", do="resume")
        assert resume.attrs["confirmation"].endswith("(failed runs)? " + REPLAYED)
