"""Issue 15.2: the run item never contradicts its journal.

On main a park wrote the journal chunk, then updated the run item unconditionally: a cancel
landing between the two left the journal ending in ``run.cancelled`` and the status
``awaiting``; a later signal was accepted as live and every advance after that raised
``EngineBug: wait at 2 is followed by run.cancelled``. The summary is now written in the
same transaction as the chunk it summarizes, and on the condition that the run has not
ended.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.core.journal import Entry, Kind, Status
from runtime.errors import JournalConflict
from runtime.store.base import RunUpdate
from runtime.testing import AwsPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_limits"


@pytest.fixture
def p() -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT, objects=lambda *a: ["through"]) as platform:
        yield platform


def parks(params: dict[str, Any], status: str) -> bool:
    """Whether a DynamoDB request writes the run item's status ``status`` (alone, or inside
    a transaction)."""
    updates = [params] + [i["Update"] for i in params.get("TransactItems", []) if "Update" in i]
    return any(u.get("ExpressionAttributeValues", {}).get(":st") == {"S": status} for u in updates)


def test_a_cancel_landing_between_the_journal_and_the_summary_leaves_them_agreeing(p: AwsPlatform) -> None:
    """The worker parks the run at its await; the moment before it writes the summary, a
    cancel (the console, another container) lands. The run ends cancelled, and stays so."""
    console = p.container(p.project)
    fired: list[str] = []

    def cancel_first(params: dict[str, Any], **_: Any) -> None:
        if not fired and parks(params, "awaiting"):
            fired.append("cancel")
            console.platform.cancel("r1")

    for op in ("UpdateItem", "TransactWriteItems"):
        p.clients.dynamodb.meta.events.register(f"before-parameter-build.dynamodb.{op}", cancel_first)
    p.start("approval", {}, id="r1")
    assert fired == ["cancel"]
    run = p.get("r1")
    assert run.status == "cancelled"
    assert p.journal("r1")[-1].kind == Kind.CANCELLED
    assert p.signal("r1", "go", {"late": True}) is False  # set aside: the run has ended
    p.advance("25h")  # the 24h timer and any wake find an ended run; nothing raises
    assert p.get("r1").status == "cancelled"


def test_no_status_comes_back_from_an_ended_run(p: AwsPlatform) -> None:
    """A summary written at the journal's true length still cannot bring a cancelled run
    back: the rule "the run has not ended" is part of the write."""
    p.start("approval", {}, id="r2")
    p.cancel("r2")
    store = p.runtime.store
    length = len(p.journal("r2"))
    wait = {"names": ["go"], "timeout_ms": None, "due_at": None}
    entry = Entry(length + 1, Kind.WAIT, "await", wait, p.now)
    with pytest.raises(JournalConflict):
        store.append("r2", length, [entry], update=RunUpdate(Status.AWAITING, "await 'go'"))
    assert p.get("r2").status == "cancelled"
    assert len(p.journal("r2")) == length
