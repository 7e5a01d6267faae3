"""The RDS Data API over SQLite files, for ``AwsPlatform``: moto cannot run SQL for the Data
API, so the harness answers ``ExecuteStatement``, ``BeginTransaction``,
``CommitTransaction`` and ``RollbackTransaction`` itself, and ``DataApiDatabases`` (what
runs on AWS, placeholders, rows and migrations included) runs against it unchanged. It is a
stand-in for AWS, not for lunaflow's code. ``DataApiStandIn`` is what it shares with the
PostgreSQL stand-in (``runtime.aws.pgdataapi``): the requests, the transactions.

One SQLite file per database name under ``folder`` (WAL). Each transaction has a connection
of its own that takes the write lock when it begins, so a second writer waits for the
first to end, as two Aurora transactions writing the same rows do; a statement outside a
transaction commits on its own.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

import runtime.services.database  # noqa: F401 - registers the BOOLEAN, DATE, TIMESTAMP converters

ARN = "arn:aws:rds:eu-west-1:123456789012:cluster:lunaflow-harness"
SECRET_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:lunaflow-harness-db"
BUSY_TIMEOUT_S = 30.0


def data_api_error(code: str, message: str, operation: str) -> ClientError:
    """An error as boto3 raises the Data API's."""
    return ClientError({"Error": {"Code": code, "Message": message}}, operation)


def field_value(field: dict[str, Any]) -> Any:
    """A parameter's value from its Data API field."""
    if field.get("isNull"):
        return None
    for key in ("stringValue", "longValue", "doubleValue", "booleanValue"):
        if key in field:
            return field[key]
    raise data_api_error("BadRequestException", f"unsupported field {field}", "ExecuteStatement")


class DataApiStandIn:
    """What both stand-ins share: the cluster and secret check, the requests as sent, and
    transactions (each a connection of its own, kept by id until it commits or rolls
    back). A subclass connects to a database, begins a transaction on a connection, and
    runs one statement."""

    def __init__(self, folder: Path, resource_arn: str = ARN, secret_arn: str = SECRET_ARN) -> None:
        self.folder = folder
        self.resource_arn = resource_arn
        self.secret_arn = secret_arn
        self.transactions: dict[str, tuple[str, Any]] = {}  # open ones: id -> (database, connection)
        self._lock = threading.Lock()
        self.statements: list[str] = []
        self.requests: list[dict[str, Any]] = []  # each ExecuteStatement as sent (tests)

    def _check(self, resource_arn: str, secret_arn: str, operation: str) -> None:
        if resource_arn != self.resource_arn or secret_arn != self.secret_arn:
            raise data_api_error("BadRequestException", "unknown cluster or secret", operation)

    def _connect(self, database: str) -> Any:
        raise NotImplementedError

    def _begin(self, conn: Any) -> None:
        raise NotImplementedError

    def _statement(
        self, conn: Any, sql: str, parameters: list[dict[str, Any]], as_json: bool, options: dict[str, Any]
    ) -> dict[str, Any]:
        raise NotImplementedError

    def execute_statement(
        self,
        *,
        resourceArn: str,  # noqa: N803 (the Data API's names)
        secretArn: str,  # noqa: N803
        sql: str,
        database: str | None = None,
        parameters: list[dict[str, Any]] | None = None,
        transactionId: str | None = None,  # noqa: N803
        formatRecordsAs: str = "NONE",  # noqa: N803
        resultSetOptions: dict[str, Any] | None = None,  # noqa: N803
        **_: Any,
    ) -> dict[str, Any]:
        self._check(resourceArn, secretArn, "ExecuteStatement")
        self.requests.append(
            {"sql": sql, "parameters": parameters or [], "resultSetOptions": resultSetOptions, **_}
        )
        own = transactionId is None
        if transactionId is not None:
            with self._lock:
                found = self.transactions.get(transactionId)
            if found is None:
                raise data_api_error("NotFoundException", "Transaction not found", "ExecuteStatement")
            database, conn = found
        else:
            if not database:
                raise data_api_error("BadRequestException", "a database is required", "ExecuteStatement")
            conn = self._connect(database)
        self.statements.append(sql)
        try:
            return self._statement(
                conn, sql, parameters or [], formatRecordsAs == "JSON", resultSetOptions or {}
            )
        finally:
            if own:
                conn.close()

    def begin_transaction(
        self,
        *,
        resourceArn: str,  # noqa: N803
        secretArn: str,  # noqa: N803
        database: str,
        **_: Any,
    ) -> dict[str, Any]:
        self._check(resourceArn, secretArn, "BeginTransaction")
        conn = self._connect(database)
        self._begin(conn)
        tx = str(uuid.uuid4())
        with self._lock:
            self.transactions[tx] = (database, conn)
        return {"transactionId": tx}

    def _end(self, transaction_id: str, how: str, operation: str) -> None:
        with self._lock:
            found = self.transactions.pop(transaction_id, None)
        if found is None:
            raise data_api_error("NotFoundException", "Transaction not found", operation)
        _, conn = found
        try:
            conn.execute(how)
        finally:
            conn.close()

    def commit_transaction(self, *, resourceArn: str, secretArn: str, transactionId: str) -> dict[str, Any]:  # noqa: N803
        self._check(resourceArn, secretArn, "CommitTransaction")
        self._end(transactionId, "COMMIT", "CommitTransaction")
        return {"transactionStatus": "Transaction Committed"}

    def rollback_transaction(self, *, resourceArn: str, secretArn: str, transactionId: str) -> dict[str, Any]:  # noqa: N803
        self._check(resourceArn, secretArn, "RollbackTransaction")
        self._end(transactionId, "ROLLBACK", "RollbackTransaction")
        return {"transactionStatus": "Rollback Complete"}


class SqliteDataApi(DataApiStandIn):
    def _connect(self, database: str) -> sqlite3.Connection:
        self.folder.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(
            str(self.folder / f"{database}.sqlite"),
            isolation_level=None,
            check_same_thread=False,
            timeout=BUSY_TIMEOUT_S,
            detect_types=sqlite3.PARSE_DECLTYPES,  # BOOLEAN columns as booleans, as Aurora answers
        )
        db.execute("PRAGMA journal_mode=WAL")
        return db

    def _begin(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")  # waits while another transaction writes

    def _statement(
        self,
        conn: sqlite3.Connection,
        sql: str,
        parameters: list[dict[str, Any]],
        as_json: bool,
        options: dict[str, Any],
    ) -> dict[str, Any]:
        params = {p["name"]: field_value(p["value"]) for p in parameters}
        try:
            cursor = conn.execute(sql, params)
            out: dict[str, Any] = {"numberOfRecordsUpdated": max(cursor.rowcount, 0), "generatedFields": []}
            if cursor.description is not None:
                columns = [c[0] for c in cursor.description]
                rows = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
                out["numberOfRecordsUpdated"] = 0
                if as_json:
                    out["formattedRecords"] = json.dumps(rows)
            return out
        except sqlite3.Error as e:
            raise data_api_error("BadRequestException", f"ERROR: {e}", "ExecuteStatement") from e

    def rows(self, database: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Read a database directly (tests)."""
        db = self._connect(database)
        try:
            return list(db.execute(sql, params).fetchall())
        finally:
            db.close()
