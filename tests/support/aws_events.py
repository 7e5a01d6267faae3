"""Helpers for the AWS handler tests: paths, API Gateway events, and ``FakeRdsData``.

moto cannot run SQL for the RDS Data API, so ``FakeRdsData`` plays that API
(``execute_statement``, ``begin_transaction``, ``commit_transaction``,
``rollback_transaction``) over sqlite3: a fake of AWS, not of lunaflow's code, so
``runtime.aws.database.DataApiDatabases`` runs unchanged against it.
"""

from __future__ import annotations

import copy
import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from tests.support.aws_world import ACCOUNT, REGION

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


class FakeRdsData:
    """The RDS Data API over sqlite3: one in-memory database per ``database`` name."""

    def __init__(self, resource_arn: str = DB_ARN, secret_arn: str = DB_SECRET_ARN) -> None:
        self.resource_arn = resource_arn
        self.secret_arn = secret_arn
        self.dbs: dict[str, sqlite3.Connection] = {}
        self.transactions: dict[str, str] = {}  # transaction id -> database
        self.statements: list[str] = []

    def _check(self, resourceArn: str, secretArn: str) -> None:  # noqa: N803 (AWS names)
        if resourceArn != self.resource_arn or secretArn != self.secret_arn:
            raise ClientError(
                {"Error": {"Code": "BadRequestException", "Message": "unknown cluster or secret"}},
                "ExecuteStatement",
            )

    def _db(self, name: str) -> sqlite3.Connection:
        if name not in self.dbs:
            self.dbs[name] = sqlite3.connect(":memory:", isolation_level=None)
        return self.dbs[name]

    @staticmethod
    def _value(field: dict[str, Any]) -> Any:
        if field.get("isNull"):
            return None
        for key in ("stringValue", "longValue", "doubleValue", "booleanValue"):
            if key in field:
                return field[key]
        raise AssertionError(f"unsupported Data API field {field}")

    def execute_statement(
        self,
        *,
        resourceArn: str,  # noqa: N803
        secretArn: str,  # noqa: N803
        sql: str,
        database: str | None = None,
        parameters: list[dict[str, Any]] | None = None,
        transactionId: str | None = None,  # noqa: N803
        formatRecordsAs: str = "NONE",  # noqa: N803
        **_: Any,
    ) -> dict[str, Any]:
        self._check(resourceArn, secretArn)
        if transactionId is not None:
            if transactionId not in self.transactions:
                raise ClientError(
                    {"Error": {"Code": "NotFoundException", "Message": "Transaction not found"}},
                    "ExecuteStatement",
                )
            database = self.transactions[transactionId]
        assert database, "the Data API needs a database"
        params = {p["name"]: self._value(p["value"]) for p in parameters or []}
        self.statements.append(sql)
        try:
            cursor = self._db(database).execute(sql, params)
        except sqlite3.Error as e:
            raise ClientError(
                {"Error": {"Code": "BadRequestException", "Message": f"ERROR: {e}"}}, "ExecuteStatement"
            ) from e
        out: dict[str, Any] = {"numberOfRecordsUpdated": max(cursor.rowcount, 0), "generatedFields": []}
        if cursor.description is not None:
            columns = [c[0] for c in cursor.description]
            rows = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
            out["numberOfRecordsUpdated"] = 0
            if formatRecordsAs == "JSON":
                out["formattedRecords"] = json.dumps(rows)
        return out

    def begin_transaction(
        self, *, resourceArn: str, secretArn: str, database: str, **_: Any
    ) -> dict[str, Any]:  # noqa: N803
        self._check(resourceArn, secretArn)
        tx = str(uuid.uuid4())
        self._db(database).execute("BEGIN")
        self.transactions[tx] = database
        return {"transactionId": tx}

    def commit_transaction(self, *, resourceArn: str, secretArn: str, transactionId: str) -> dict[str, Any]:  # noqa: N803
        self._check(resourceArn, secretArn)
        self._db(self.transactions.pop(transactionId)).execute("COMMIT")
        return {"transactionStatus": "Transaction Committed"}

    def rollback_transaction(self, *, resourceArn: str, secretArn: str, transactionId: str) -> dict[str, Any]:  # noqa: N803
        self._check(resourceArn, secretArn)
        self._db(self.transactions.pop(transactionId)).execute("ROLLBACK")
        return {"transactionStatus": "Rollback Complete"}

    def rows(self, database: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Read the fake's data directly (assertions)."""
        return list(self._db(database).execute(sql, params).fetchall())
