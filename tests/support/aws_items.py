"""Items of the AWS harness's table, read as the tests check them (a consistent read by the
harness's own client, beside the platform's store)."""

from __future__ import annotations

import threading
from typing import Any

from runtime.store.dynamodb import RUN_SK, run_pk
from runtime.store.dynamodb_layout import LAYOUT_ATTR, run_key
from runtime.store.items import n
from runtime.testing import AwsPlatform


def run_item(p: AwsPlatform, run_id: str) -> dict[str, Any]:
    """The run item of ``run_id`` as stored (KeyError when there is none)."""
    item: dict[str, Any] = p.clients.dynamodb.get_item(
        TableName=p.config.table, Key={"pk": {"S": run_pk(run_id)}, "sk": {"S": RUN_SK}}, ConsistentRead=True
    )["Item"]
    return item


def needs_layout(p: AwsPlatform, run_id: str, layout: int | None) -> None:
    """The run item as a lunaflow writing run layout ``layout`` leaves it (None: none set)."""
    if layout is None:
        p.clients.dynamodb.update_item(
            TableName=p.config.table, Key=run_key(run_id), UpdateExpression=f"REMOVE {LAYOUT_ATTR}"
        )
        return
    p.clients.dynamodb.update_item(
        TableName=p.config.table,
        Key=run_key(run_id),
        UpdateExpression=f"SET {LAYOUT_ATTR} = :v",
        ExpressionAttributeValues={":v": n(layout)},
    )


class HeldGate:
    """The objects stand-in of a project whose step calls ``Gate(...):pass(...)``: each call
    records the run item of ``run_id`` as it is then (``seen``), says it has come
    (``entered``), and is held until ``release`` is set. ``platform``: set once the harness
    exists (the stand-in is given to it)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.platform: AwsPlatform | None = None
        self.entered = threading.Event()
        self.release = threading.Event()
        self.seen: list[dict[str, Any]] = []

    def __call__(self, *_: Any) -> list[Any]:
        assert self.platform is not None
        self.seen.append(run_item(self.platform, self.run_id))
        self.entered.set()
        assert self.release.wait(30)
        return ["through"]
