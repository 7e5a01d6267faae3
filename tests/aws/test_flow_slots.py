"""Issue 30 on AWS: a slot is never leaked. DynamoDB frees a run's slots in the requests after
the write that ends it (a transaction would cost twice), so a worker that dies between the two
leaves its slot held by a run that has ended. The death here is the process's end as the table
sees it: an exception no code catches, raised as the release's first request leaves (the
request is never sent). The reconciler's sweep then frees the slot and admits the next run in
line, whose wake it sends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.core.journal import Status
from runtime.testing import AwsPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "flow"


class Died(BaseException):
    """The worker's process ended here."""


@pytest.fixture
def p() -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT, objects=lambda *a: [1]) as platform:
        yield platform


def die_at_first_release(p: AwsPlatform) -> list[str]:
    died: list[str] = []

    def hook(params: dict[str, Any], **_: Any) -> None:
        if not died and params.get("UpdateExpression") == "DELETE holders :r":
            died.append(json.dumps(params["ExpressionAttributeValues"]))
            raise Died()

    p.clients.dynamodb.meta.events.register("provide-client-params.dynamodb.UpdateItem", hook)
    return died


def test_the_reconciler_frees_a_slot_whose_release_died_with_its_worker(p: AwsPlatform) -> None:
    p.start("one", {"n": 1, "wait": True}, id="h1")
    p.start("one", {"n": 2, "wait": True}, id="h2")
    assert p.get("h2").current_step == "a slot of one"
    died = die_at_first_release(p)
    with pytest.raises(Died):
        p.signal("h1", "go")
    assert died and "h1" in died[0]
    assert p.get("h1").status == Status.COMPLETED
    (row,) = p.slots()
    assert (row.key, row.in_use, row.waiting) == ("one", 1, 1), "h1 ended and still holds the slot"
    assert p.get("h2").current_step == "a slot of one"
    p.advance("2m")  # the reconciler's rule fires; its sweep frees h1's slot and wakes h2
    assert p.get("h2").current_step == "await 'go'"
    p.signal("h2", "go")
    assert p.get("h2").status == Status.COMPLETED
    assert p.slots() == []


def test_a_wide_limit_spreads_its_slots_over_items_and_still_holds_exactly(p: AwsPlatform) -> None:
    """No hot key: a limit of 50 is two items of 25 slots on DynamoDB, each run trying its
    own first, so the key's takes and gives spread; the limit still holds over both."""
    for i in range(54):
        p.platform.start("wide", {"n": i}, id=f"w{i:02d}")
    p.settle()
    waiting = sorted(r.id for r in p.runs(workflow="wide") if r.current_step == "a slot of wide")
    assert len(waiting) == 4
    shards = [
        p.clients.dynamodb.get_item(
            TableName=p.config.table, Key={"pk": {"S": f"#SHARD#{i:02d}#wide"}, "sk": {"S": "K"}}
        )["Item"]["holders"]["SS"]
        for i in range(2)
    ]
    assert [len(h) for h in shards] == [25, 25] and not set(shards[0]) & set(shards[1])
    (row,) = p.slots()
    assert (row.in_use, row.limit, row.waiting) == (50, 50, 4)
    holders = sorted(set(shards[0]) | set(shards[1]))
    for run_id in holders[:3]:
        p.signal(run_id, "go")
    assert len([r for r in p.runs(workflow="wide") if r.current_step == "a slot of wide"]) == 1
    (row,) = p.slots()
    assert (row.in_use, row.waiting) == (50, 1)


def test_only_a_gated_runs_end_looks_for_slots_to_give_back(p: AwsPlatform) -> None:
    """Issue 31: every run's end used to read its partition's flow items (a consistent Query)
    to give slots back, gated or not; an activation now says whether its run passed a gate,
    and an ungated run's end reads nothing more."""
    releases: list[str] = []

    def hook(params: dict[str, Any], **_: Any) -> None:
        if "BETWEEN :c AND :f" in str(params.get("KeyConditionExpression", "")):
            releases.append(params["ExpressionAttributeValues"][":p"]["S"])

    p.clients.dynamodb.meta.events.register("provide-client-params.dynamodb.Query", hook)
    p.start("caller", {"calls": 0}, id="plain")
    assert p.get("plain").status == Status.COMPLETED
    assert releases == []
    p.start("one", {"n": 1}, id="gated")
    assert p.get("gated").status == Status.COMPLETED
    assert releases == ["RUN#gated"]
    (row,) = p.slots() or [None]
    assert row is None or row.in_use == 0, row
