"""Helpers for the AWS handler tests: paths, API Gateway events, and ``FakeRdsData``.

moto cannot run SQL for the RDS Data API, so ``FakeRdsData`` plays that API over SQLite
files (``runtime.aws.dataapi.SqliteDataApi``, the harness's own): a fake of AWS, not of
lunaflow's code, so ``runtime.aws.database.DataApiDatabases`` runs unchanged against it.
"""

from __future__ import annotations

import copy
import json
import tempfile
import uuid
from pathlib import Path
from typing import Any

from runtime.aws.dataapi import SqliteDataApi
from tests.support.aws_world import ACCOUNT, REGION, FakeContext

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "tests" / "events"
PROJECTS = ROOT / "tests" / "projects"
AUCTION = ROOT / "examples" / "auction"

TABLE = "lunaflow-test-runs"
BUCKET = "lunaflow-test-values"
WAKE_QUEUE = "lunaflow-wake"
GROUP = "lunaflow-timers"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/lunaflow-scheduler"
DB_ARN = f"arn:aws:rds:{REGION}:{ACCOUNT}:cluster:lunaflow-db"
DB_SECRET_ARN = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:lunaflow-db-AbCdEf"
USER_QUEUES = {"orders": "lunaflow-orders"}  # lunaflow name -> physical SQS name


def load_event(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return data


def http_event(
    method: str,
    path: str,
    body: str | None = None,
    *,
    query: str = "",
    headers: dict[str, str] | None = None,
    base64: bool = False,
) -> dict[str, Any]:
    """An API Gateway v2 event shaped like tests/events/apigw_v2_post.json."""
    event = copy.deepcopy(load_event("apigw_v2_post.json"))
    event["rawPath"] = path
    event["rawQueryString"] = query
    event["requestContext"]["http"]["method"] = method
    event["requestContext"]["http"]["path"] = path
    event["requestContext"]["requestId"] = str(uuid.uuid4())
    event.pop("cookies", None)
    if headers is not None:
        event["headers"] = headers
    if body is None:
        event.pop("body", None)
        event["headers"].pop("content-length", None)
    else:
        event["body"] = body
        event["headers"]["content-length"] = str(len(body.encode("utf-8")))
    event["isBase64Encoded"] = base64
    return event


class FakeRdsData(SqliteDataApi):
    """The RDS Data API over SQLite (``runtime.aws.dataapi``, what ``AwsPlatform`` uses), in a
    folder of its own that goes with it."""

    def __init__(self, resource_arn: str = DB_ARN, secret_arn: str = DB_SECRET_ARN) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="lunaflow-rds-")
        super().__init__(Path(self._folder.name), resource_arn, secret_arn)


GATE_ARN = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:gate"


def gate_context() -> FakeContext:
    """The Lambda context of the deploy gate's invocation (its 15 minutes, barely begun)."""
    return FakeContext(function_name="gate", invoked_function_arn=GATE_ARN)
