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
from botocore.exceptions import ClientError

from runtime.core.journal import Entry, Kind, Status
from runtime.errors import JournalConflict
from runtime.store import dynamodb_append
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


@pytest.mark.usefixtures("no_head")
def test_a_summary_of_an_earlier_journal_position_is_refused(p: AwsPlatform) -> None:
    """Writer A writes its chunk; before A writes the summary, writer B (whose view has A's
    chunk) appends after it and ends the run. A's summary, of an earlier position, is
    refused: the run stays ended, whatever order the two summaries arrive in. (A run whose
    head is open writes entries and summary in one write: no "between" there.)"""
    p.start("approval", {}, id="r2")
    store, other = p.runtime.store, p.container(p.project).store
    length = len(p.journal("r2"))
    mine = Entry(length + 1, Kind.VALUE, "os.time", {"value": 1}, p.now)
    theirs = Entry(length + 2, Kind.CANCELLED, None, {}, p.now)
    fired: list[str] = []

    def theirs_first(params: dict[str, Any], **_: Any) -> None:
        if not fired and parks(params, "awaiting"):
            fired.append("theirs")
            other.append("r2", length + 1, [theirs], update=RunUpdate(Status.CANCELLED, None))

    p.clients.dynamodb.meta.events.register("before-parameter-build.dynamodb.UpdateItem", theirs_first)
    with pytest.raises(JournalConflict):
        store.append("r2", length, [mine], update=RunUpdate(Status.AWAITING, "await 'go'"))
    assert fired == ["theirs"]
    assert p.get("r2").status == "cancelled"
    assert [e.kind for e in p.journal("r2")][-2:] == [Kind.VALUE, Kind.CANCELLED]


@pytest.mark.parametrize("head", [False, True], ids=["chunks", "head"])
def test_a_run_whose_end_was_journaled_but_not_summarized_completes_with_its_result(
    head: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process dies between the end's journal chunk and the run item's summary: the
    reconciler wakes the run, replay finds the end in the journal and writes the summary,
    result included (the result lives in the journal, so it survives the lost write; found
    by the AWS torture run). In the run item's head the end and its summary are one write:
    lost together, the replay ends the run again."""
    monkeypatch.setattr(dynamodb_append.Appends, "run_head", head)
    with AwsPlatform(PROJECT, objects=lambda *a: ["through"], strict=False) as p:
        p.start("approval", {}, id="r3")
        lost: list[str] = []

        def die_once(params: dict[str, Any], **_: Any) -> None:
            if not lost and parks(params, "completed"):
                lost.append("summary")
                raise ClientError({"Error": {"Code": "InternalServerError", "Message": "gone"}}, "UpdateItem")

        p.clients.dynamodb.meta.events.register("before-parameter-build.dynamodb.UpdateItem", die_once)
        p.signal("r3", "go", {"by": "ada"})
        assert lost == ["summary"]
        assert (p.journal("r3")[-1].kind == Kind.COMPLETED) is not head
        # The summary is behind its journal: the run is as the worker's lease marked it.
        assert p.get("r3").status == "running"
        p.advance("2m")
        run = p.get("r3")
        assert run.status == "completed"
        assert run.result == {"got": {"by": "ada"}}
        assert [r.result for r in p.runs()] == [{"got": {"by": "ada"}}]
