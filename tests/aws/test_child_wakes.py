"""Issue 27.1 on AWS: a child's end wakes its parent in the same DynamoDB transaction as
the child's summary. A worker that dies between the child's end chunk and that transaction
leaves the child's own wake-up: the reconciler wakes the child, its replay writes the
summary with the parent's wake-up, and the parent gets the result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from runtime.core.journal import Kind, Status
from runtime.store import dynamodb_append
from runtime.testing import AwsPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "children"


def ends(params: dict[str, Any], status: str) -> bool:
    updates = [i["Update"] for i in params.get("TransactItems", []) if "Update" in i]
    return any(u.get("ExpressionAttributeValues", {}).get(":st") == {"S": status} for u in updates)


def wakes(params: dict[str, Any], run_id: str) -> bool:
    return any(
        i["Update"]["Key"]["pk"] == {"S": f"RUN#{run_id}"}
        and "ADD wake_token" in i["Update"]["UpdateExpression"]
        for i in params.get("TransactItems", [])
        if "Update" in i
    )


def test_the_childs_end_and_its_parents_wake_up_are_one_transaction(tmp_path: Path) -> None:
    with AwsPlatform(PROJECT, data_dir=tmp_path) as p:
        seen: list[bool] = []

        def look(params: dict[str, Any], **_: Any) -> None:
            if ends(params, "completed"):
                seen.append(wakes(params, "order-1"))

        p.clients.dynamodb.meta.events.register("before-parameter-build.dynamodb.TransactWriteItems", look)
        p.start("order", {"amount": 5, "child_id": "card-1"}, id="order-1")
        p.signal("card-1", "go", "ok")
        assert seen == [True]
        assert p.get("order-1").status == Status.COMPLETED


@pytest.mark.parametrize("head", [False, True], ids=["chunks", "head"])
def test_a_worker_dying_between_the_childs_end_and_the_parents_wake_heals(
    tmp_path: Path, head: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the child's head (``runtime.store.dynamodb_chunks.HEAD``) its end entries go in the
    same transaction: lost with it, the child's replay ends it again."""
    monkeypatch.setattr(dynamodb_append.Appends, "run_head", head)
    with AwsPlatform(PROJECT, data_dir=tmp_path, strict=False) as p:
        p.start("order", {"amount": 5, "child_id": "card-2"}, id="order-2")
        lost: list[str] = []

        def die_once(params: dict[str, Any], **_: Any) -> None:
            if not lost and ends(params, "completed"):
                lost.append("summary and wake")
                raise ClientError(
                    {"Error": {"Code": "InternalServerError", "Message": "gone"}}, "TransactWriteItems"
                )

        p.clients.dynamodb.meta.events.register(
            "before-parameter-build.dynamodb.TransactWriteItems", die_once
        )
        p.signal("card-2", "go", "ok")
        assert lost == ["summary and wake"]
        # The end's chunk is written; in the head, it went with the transaction.
        assert (p.journal("card-2")[-1].kind == Kind.COMPLETED) is not head
        assert p.get("order-2").status == Status.AWAITING  # and its parent not woken yet
        p.advance("2m")  # the reconciler finds the child's wake-up
        run = p.get("order-2")
        assert run.status == Status.COMPLETED
        assert run.result == {"ok": True, "child": "card-2", "result": {"charged": 5, "how": "ok"}}
