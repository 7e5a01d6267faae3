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
from pathlib import Path
from typing import Any

import psycopg

from runtime.aws.dataapi import ARN, SECRET_ARN, DataApiStandIn, data_api_error, field_value
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


class PgDataApi(DataApiStandIn):
    def __init__(self, folder: Path, resource_arn: str = ARN, secret_arn: str = SECRET_ARN) -> None:
        super().__init__(folder, resource_arn, secret_arn)
        self._server: pgserver.Server | None = None

    def _connect(self, database: str) -> psycopg.Connection[Any]:
        with self._lock:
            if self._server is None:
                self.folder.mkdir(parents=True, exist_ok=True)
                self._server = pgserver.acquire(self.folder)
            server = self._server
        # On Aurora the stack creates each declared database; here the first use does.
        server.create(database)
        return typed(psycopg.connect(server.conninfo(database), autocommit=True))

    def _begin(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute("BEGIN")

    @staticmethod
    def _bind(sql: str, parameters: list[dict[str, Any]]) -> tuple[str, list[Any]]:
        fields = {p["name"]: p for p in parameters}
        pieces, refs = sql_api.placeholders(sql)
        out, values = [pieces[0]], []
        for ref, piece in zip(refs, pieces[1:], strict=True):
            if ref == 0 or ref not in fields:
                raise data_api_error(
                    "BadRequestException",
                    f"ERROR: no value was given for the parameter {'?' if ref == 0 else ':' + str(ref)}",
                    "ExecuteStatement",
                )
            field = fields[str(ref)]
            values.append(field_value(field["value"]))
            hint = field.get("typeHint")
            out.append(f"${len(values)}::{_HINTS[hint]}" if hint in _HINTS else f"${len(values)}")
            out.append(piece)
        return "".join(out), values

    def _statement(
        self,
        conn: psycopg.Connection[Any],
        sql: str,
        parameters: list[dict[str, Any]],
        as_json: bool,
        options: dict[str, Any],
    ) -> dict[str, Any]:
        text, values = self._bind(sql, parameters)
        numbers = options.get("decimalReturnType") == "DOUBLE_OR_LONG"
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
                if as_json:
                    out["formattedRecords"] = json.dumps(rows)
            return out
        except psycopg.Error as e:
            raise data_api_error("BadRequestException", f"ERROR: {message(e)}", "ExecuteStatement") from e

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
