"""Items of the AWS harness's table, read as the tests check them (a consistent read by the
harness's own client, beside the platform's store)."""

from __future__ import annotations

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
