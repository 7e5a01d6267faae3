"""The RDS Data API over a real PostgreSQL, for ``AwsPlatform`` (issue 25).

moto cannot run SQL for the Data API, so the harness answers ``ExecuteStatement``,
``BeginTransaction``, ``CommitTransaction`` and ``RollbackTransaction`` itself, and
``DataApiDatabases`` (what runs on AWS) runs against it unchanged. It answers as the Data API
does for Aurora PostgreSQL (ExecuteStatement's documentation):

- ``:name`` placeholders, bound by their field: ``stringValue`` as ``character varying``
  (with a ``typeHint`` of JSON, UUID, TIMESTAMP, DATE, TIME or DECIMAL, as that type),
  ``longValue`` as bigint, ``doubleValue`` as double precision, ``booleanValue`` as boolean;
- with ``formatRecordsAs = JSON``, rows as a JSON array of objects; NUMERIC as strings
  unless ``resultSetOptions.decimalReturnType`` is ``DOUBLE_OR_LONG``; times, dates, UUIDs
  and JSON as their text;
- no ``generatedFields`` (Aurora PostgreSQL has none: ``RETURNING`` gives ids);
- an error as ``BadRequestException`` with PostgreSQL's message.

It is a stand-in for AWS, not for lunaflow's code. The server is the data folder's local
one (``runtime.services.pgserver``), or ``LUNAFLOW_DATABASE_URL``'s.
"""

from __future__ import annotations

import datetime
import decimal
import json
import threading
import uuid
from pathlib import Path
from typing import Any

import psycopg
from botocore.exceptions import ClientError

from runtime.aws.dataapi import ARN, SECRET_ARN
from runtime.services import pgserver
from runtime.services import sql as sql_api
from runtime.services.postgres import message, typed

_HINTS = {
    "JSON": "json",
    "UUID": "uuid",
    "TIMESTAMP": "timestamp",
    "DATE": "date",
    "TIME": "time",
    "DECIMAL": "numeric",
}


def _error(code: str, text: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": text}}, operation)


class PgDataApi:
    def __init__(self, folder: Path, resource_arn: str = ARN, secret_arn: str = SECRET_ARN) -> None:
        self.folder = folder
        self.resource_arn = resource_arn
        self.secret_arn = secret_arn
        self._server: pgserver.Server | None = None
        self.transactions: dict[str, tuple[str, psycopg.Connection[Any]]] = {}  # open ones
        self._lock = threading.Lock()
        self.statements: list[str] = []
        self.requests: list[dict[str, Any]] = []  # each ExecuteStatement as sent (tests)

    def _check(self, resource_arn: str, secret_arn: str, operation: str) -> None:
        if resource_arn != self.resource_arn or secret_arn != self.secret_arn:
            raise _error("BadRequestException", "unknown cluster or secret", operation)

    def _connect(self, database: str) -> psycopg.Connection[Any]:
        with self._lock:
            if self._server is None:
                self.folder.mkdir(parents=True, exist_ok=True)
                self._server = pgserver.acquire(self.folder)
            server = self._server
        # On Aurora the stack creates each declared database; here the first use does.
        server.create(database)
        return typed(psycopg.connect(server.conninfo(database), autocommit=True))

    @staticmethod
    def _bind(sql: str, parameters: list[dict[str, Any]]) -> tuple[str, list[Any]]:
        fields = {p["name"]: p for p in parameters}
        pieces, refs = sql_api.placeholders(sql)
        out, values = [pieces[0]], []
        for ref, piece in zip(refs, pieces[1:], strict=True):
            if ref == 0 or ref not in fields:
                raise _error(
                    "BadRequestException",
                    f"ERROR: no value was given for the parameter {'?' if ref == 0 else ':' + str(ref)}",
                    "ExecuteStatement",
                )
            field = fields[str(ref)]
            values.append(_value(field["value"]))
            hint = field.get("typeHint")
            out.append(f"${len(values)}::{_HINTS[hint]}" if hint in _HINTS else f"${len(values)}")
            out.append(piece)
        return "".join(out), values

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
                raise _error("NotFoundException", "Transaction not found", "ExecuteStatement")
            database, conn = found
        else:
            if not database:
                raise _error("BadRequestException", "a database is required", "ExecuteStatement")
            conn = self._connect(database)
        text, values = self._bind(sql, parameters or [])
        numbers = (resultSetOptions or {}).get("decimalReturnType") == "DOUBLE_OR_LONG"
        self.statements.append(sql)
        try:
            cur = psycopg.RawCursor(conn)
            cur.execute(text.encode(), values)
            out: dict[str, Any] = {"numberOfRecordsUpdated": max(cur.rowcount, 0)}
            if cur.description is not None:
                columns = [d.name for d in cur.description]
                rows = [
                    {c: _record(v, numbers) for c, v in zip(columns, r, strict=True)} for r in cur.fetchall()
                ]
                out["numberOfRecordsUpdated"] = 0
                if formatRecordsAs == "JSON":
                    out["formattedRecords"] = json.dumps(rows)
            return out
        except psycopg.Error as e:
            raise _error("BadRequestException", f"ERROR: {message(e)}", "ExecuteStatement") from e
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
        conn.execute("BEGIN")
        tx = str(uuid.uuid4())
        with self._lock:
            self.transactions[tx] = (database, conn)
        return {"transactionId": tx}

    def _end(self, transaction_id: str, how: str, operation: str) -> None:
        with self._lock:
            found = self.transactions.pop(transaction_id, None)
        if found is None:
            raise _error("NotFoundException", "Transaction not found", operation)
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

    def rows(self, database: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Read a database directly (tests), with ``?`` placeholders."""
        pieces, refs = sql_api.placeholders(sql)
        text = pieces[0] + "".join(f"${i + 1}{p}" for i, p in enumerate(pieces[1:]))
        with self._connect(database) as conn:
            return list(psycopg.RawCursor(conn).execute(text.encode(), list(params)).fetchall())

    def close(self) -> None:
        with self._lock:
            for _, conn in self.transactions.values():
                conn.close()
            self.transactions.clear()
            server, self._server = self._server, None
        if server is not None:
            pgserver.release(server)


def _value(field: dict[str, Any]) -> Any:
    if field.get("isNull"):
        return None
    for key in ("stringValue", "longValue", "doubleValue", "booleanValue"):
        if key in field:
            return field[key]
    raise _error("BadRequestException", f"unsupported field {field}", "ExecuteStatement")


def _record(v: Any, numbers: bool) -> Any:
    """A value as the Data API's JSON records carry it."""
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, decimal.Decimal):
        if not numbers:
            return str(v)
        exponent = v.as_tuple().exponent
        return int(v) if isinstance(exponent, int) and exponent >= 0 else float(v)
    if isinstance(v, datetime.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, datetime.date | datetime.time):
        return v.isoformat()
    if isinstance(v, dict | list):
        return json.dumps(v, separators=(",", ":"))
    return str(v)
