"""Store backends for the contract suite: every test here runs against each of them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from runtime.aws.secrets import SecretsManagerSecrets
from runtime.core.clock import FakeClock
from runtime.store.base import Store
from runtime.store.blobs import Blobs
from runtime.store.dynamodb import DynamoDBStore, table_definition
from runtime.store.sqlite import SQLiteStore

BACKENDS = ["sqlite", "dynamodb"]
BUCKET = "lunaflow-values"


@pytest.fixture
def clock() -> FakeClock:
    """The stores' clock (wake-ups are timed with it), moved by hand."""
    return FakeClock(1_000.0)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> Iterator[Store]:
    if request.param == "sqlite":
        s: Store = SQLiteStore(tmp_path / "store.sqlite", clock=clock)
        yield s
        s.close()
        return
    os.environ.setdefault("AWS_DEFAULT_REGION", "eu-west-1")
    with mock_aws():
        db = boto3.client("dynamodb", region_name="eu-west-1")
        db.create_table(**table_definition("lunaflow"))
        secrets = SecretsManagerSecrets(
            boto3.client("secretsmanager", region_name="eu-west-1"), db, "lunaflow"
        )
        s3 = boto3.client("s3", region_name="eu-west-1")
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        yield DynamoDBStore(db, "lunaflow", secrets=secrets, clock=clock, blobs=Blobs(s3, BUCKET))
