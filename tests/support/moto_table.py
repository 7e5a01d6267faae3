"""The store's table alone under moto, for tests of ``DynamoDBStore`` without a platform."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from moto import mock_aws

from runtime.store.dynamodb import run_pk, table_definition

REGION = "eu-west-1"


@contextmanager
def store_table(name: str) -> Iterator[Any]:
    """A DynamoDB client, inside ``mock_aws``, with the table ``name`` as the store makes it."""
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        client.create_table(**table_definition(name))
        yield client


class Requests:
    """The DynamoDB operations a client makes, in order (botocore's retries not counted)."""

    def __init__(self, client: Any) -> None:
        self.ops: list[str] = []
        client.meta.events.register("before-call.dynamodb", self._seen)

    def _seen(self, model: Any, **_: Any) -> None:
        self.ops.append(model.name)

    def take(self) -> list[str]:
        """The operations made since the last take."""
        out, self.ops = self.ops, []
        return out


def partition_items(db: Any, table: str, run_id: str, prefix: str) -> list[dict[str, Any]]:
    """A run's items whose sort keys begin with ``prefix`` (``J#`` its journal chunks, ``S#``
    its signal items), as the table holds them, in key order: a consistent Query."""
    items: list[dict[str, Any]] = db.query(
        TableName=table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
        ExpressionAttributeValues={":pk": {"S": run_pk(run_id)}, ":prefix": {"S": prefix}},
        ConsistentRead=True,
    )["Items"]
    return items
