"""The moto server's faster queries (``runtime.aws.motoserver.partition_queries``) answer
every query as moto itself does: the same items in the same order, page by page, on the
table and on its indexes; only the way moto gathers the candidates changes."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from runtime.aws.motoserver import partition_queries
from runtime.store.dynamodb_layout import INDEXES, table_definition

REGION = "eu-west-1"
TABLE = "queries"


@pytest.fixture
def db(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        client.create_table(**table_definition(TABLE))
        rng = random.Random(7)
        index_attrs = list(INDEXES.values())
        for run in range(40):
            pk = {"S": f"RUN#r{run:03d}"}
            item: dict[str, Any] = {"pk": pk, "sk": {"S": "K"}}
            for hash_attr, range_attr in rng.sample(index_attrs, 3):
                item[hash_attr] = {"S": f"{hash_attr}#{rng.randrange(3)}"}
                item[range_attr] = {"S": f"{rng.randrange(10):03d}#r{run:03d}"}
            client.put_item(TableName=TABLE, Item=item)
            for seq in range(rng.randrange(1, 12)):
                client.put_item(TableName=TABLE, Item={"pk": pk, "sk": {"S": f"J#{seq:010d}"}})
        yield client


def _pages(db: Any, **request: Any) -> list[dict[str, Any]]:
    pages = []
    while True:
        answer = db.query(TableName=TABLE, **request)
        pages.append({"items": answer["Items"], "count": answer["Count"]})
        if "LastEvaluatedKey" not in answer:
            return pages
        request["ExclusiveStartKey"] = answer["LastEvaluatedKey"]


def _queries() -> list[dict[str, Any]]:
    table = [
        {
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :a AND :b",
            "ExpressionAttributeValues": {
                ":pk": {"S": f"RUN#r{run:03d}"},
                ":a": {"S": "J#"},
                ":b": {"S": "K"},
            },
            **extra,
        }
        for run in (0, 7, 39, 99)  # 99: no such partition
        for extra in ({}, {"Limit": 3}, {"ScanIndexForward": False, "Limit": 2}, {"ConsistentRead": True})
    ]
    indexes = [
        {
            "IndexName": index,
            "KeyConditionExpression": f"{hash_attr} = :h AND {range_attr} < :below",
            "ExpressionAttributeValues": {":h": {"S": f"{hash_attr}#{shard}"}, ":below": {"S": "006#"}},
            **extra,
        }
        for index, (hash_attr, range_attr) in INDEXES.items()
        for shard in range(3)
        for extra in ({}, {"Limit": 4}, {"ScanIndexForward": False, "Limit": 5})
    ]
    return table + indexes


def test_every_query_answers_the_same_pages_with_the_partition_reads(db: Any) -> None:
    queries = _queries()
    moto_own = [_pages(db, **dict(q)) for q in queries]
    assert sum(len(page["items"]) for pages in moto_own for page in pages) > 100, "the queries find items"
    with partition_queries():
        faster = [_pages(db, **dict(q)) for q in queries]
    assert faster == moto_own


def test_a_table_query_reads_only_its_partition_and_a_scan_is_untouched(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.dynamodb.models.table import Table

    sorted_reads: list[str] = []
    every_item = Table.all_items

    def counted(self: Any) -> Any:
        sorted_reads.append(self.name)
        return every_item(self)

    monkeypatch.setattr(Table, "all_items", counted)
    with partition_queries():
        db.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": "RUN#r001"}},
        )
        assert sorted_reads == [], "a table query no longer sorts the whole table"
        scanned = db.scan(TableName=TABLE, Limit=5)
        assert sorted_reads == [TABLE], "a scan pages in moto's own order"
        assert len(scanned["Items"]) == 5
    assert Table.all_items is counted, "leaving restores moto's own"
