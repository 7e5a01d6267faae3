"""A run written by a newer lunaflow is refused, not misread.

A later release that stores part of a run where this code does not look (a signal on the
run item, say) marks the run item with the run layout it needs (``lv``). This code reads
up to ``LAYOUT`` and refuses a run needing more: its activation fails with an error that
says so and writes nothing, the run's journal and wake-up stay as they were, and the
reconciler keeps trying, so a rollback leaves such runs whole until the newer code is back.
Before this guard, older code read such a run as if it knew it: a pending signal it could
not see let it park the run and drop the wake-up, and nothing woke the run again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import NewerLayout
from runtime.store.dynamodb_layout import LAYOUT, run_key
from runtime.testing import AwsPlatform, WakeFailed
from tests.support.aws_items import needs_layout
from tests.support.moto_table import partition_items

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_limits"


@pytest.fixture
def p() -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT, objects=lambda *a: ["through"], strict=False) as platform:
        yield platform


def journal_items(p: AwsPlatform, run_id: str) -> list[dict[str, Any]]:
    """The run's journal chunks as the table holds them (this code's own reads refuse it)."""
    return partition_items(p.clients.dynamodb, p.config.table, run_id, "J#")


def test_a_run_needing_a_newer_layout_is_left_whole_until_the_newer_code_reads_it(p: AwsPlatform) -> None:
    p.start("approval", {}, id="nl1")
    assert p.get("nl1").status == "awaiting"
    needs_layout(p, "nl1", LAYOUT + 1)
    before = journal_items(p, "nl1")
    assert p.platform.signal("nl1", "go", {"by": "ada"}) is True
    p.settle()
    errors = [r["message"] for r in p.logs if r.get("level") == "error"]
    assert any("written by a newer lunaflow" in m and "'nl1'" in m for m in errors), errors
    assert journal_items(p, "nl1") == before  # nothing written
    assert "nl1" in dict(p.runtime.store.wakeups())  # the reconciler keeps it
    p.advance("5m")
    assert journal_items(p, "nl1") == before
    assert p.get("nl1").status in ("awaiting", "running")  # its status still reads
    needs_layout(p, "nl1", None)  # the newer code is back: it reads its own runs
    p.advance("30m")
    run = p.get("nl1")
    assert run.status == "completed" and run.result == {"got": {"by": "ada"}}


def test_the_layout_this_code_reads_is_read_as_before(p: AwsPlatform) -> None:
    p.start("approval", {}, id="nl2")
    needs_layout(p, "nl2", LAYOUT)
    assert p.platform.signal("nl2", "go", {"by": "bo"}) is True
    p.settle()
    assert p.get("nl2").status == "completed"


def test_the_strict_harness_raises_the_refusal_with_its_fix() -> None:
    with AwsPlatform(PROJECT, objects=lambda *a: ["through"]) as strict:
        strict.start("approval", {}, id="nl3")
        needs_layout(strict, "nl3", LAYOUT + 1)
        with pytest.raises(
            WakeFailed,
            match=r"run .nl3. was written by a newer lunaflow: .*serve it with the lunaflow that wrote it",
        ):
            strict.platform.signal("nl3", "go", {})
            strict.settle()


def test_a_cancel_or_a_resume_of_such_a_run_writes_nothing_to_it(p: AwsPlatform) -> None:
    """Appends that read no journal first (a cancel's, a resume's) are refused as a load is."""
    p.start("approval", {}, id="nl4")
    p.get("nl4")  # the store now knows the run's tip, read before the mark
    needs_layout(p, "nl4", LAYOUT + 1)
    before = journal_items(p, "nl4")
    with pytest.raises(NewerLayout, match=r"run 'nl4' was written by a newer lunaflow"):
        p.cancel("nl4")
    assert journal_items(p, "nl4") == before
    assert p.get("nl4").status == "awaiting"


def test_a_parent_does_not_journal_the_state_of_a_child_a_newer_lunaflow_wrote() -> None:
    """A parent reading its child's status and result (``c:result()``) records them in its
    own journal for good: a child this code cannot read whole is refused there too."""
    project = PROJECT.parent / "children"
    with AwsPlatform(project, strict=False) as p:
        p.start("order", {"amount": 5, "child_id": "kid"}, id="parent")
        assert p.get("parent").status == "awaiting"
        needs_layout(p, "kid", LAYOUT + 1)
        before = journal_items(p, "parent")
        # The child ends on the newer code (here by hand: the status such code would write),
        # and its end wakes the parent, which this code then activates.
        p.clients.dynamodb.update_item(
            TableName=p.config.table,
            Key=run_key("kid"),
            UpdateExpression="SET #s = :done",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":done": {"S": "completed"}},
        )
        p.runtime.store.add_wakeup("parent")
        p.runtime.waker.prompt("parent")
        p.settle()
        errors = [r["message"] for r in p.logs if r.get("level") == "error"]
        assert any("run 'kid' was written by a newer lunaflow" in m for m in errors), errors
        assert journal_items(p, "parent") == before
        assert p.get("parent").status in ("awaiting", "running")
