"""The Lua database API (``:exec``, ``:query``, ``:first``), once, over a small executor seam.

Every platform shares this module's checks and conversions (issue 25): the SQL's ``?`` and
``:name`` placeholders are found here (outside quotes and comments; ``::`` casts are not
placeholders), bound to the call's values here, and each executor only renders the n-th
placeholder its own way (SQLite ``?``, the Data API ``:pN``) and runs the statement. Rows
come back through ``row`` for every executor, so a value reaches Lua as the same type
whichever backend answered.

``exec`` returns ``{ changes = n }`` everywhere: Aurora PostgreSQL cannot return a last
insert id, so none is returned anywhere; ids come back with ``RETURNING`` through ``:first``.
"""

from __future__ import annotations

import datetime
import decimal
import json
import re
import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from runtime.services.base import ServiceError

METHODS = ("exec", "query", "first")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Executor(Protocol):
    """What a backend does: render the n-th placeholder (1-based) and run one statement with
    its values in order. ``execute`` returns the rows changed and, for ``rows=True``, the rows
    as dicts (column name to a driver value); it raises the driver's own error on bad SQL."""

    def placeholder(self, n: int) -> str: ...

    def execute(
        self, method: str, sql: str, values: list[Any]
    ) -> tuple[int, list[dict[str, Any]] | None]: ...


def placeholders(sql: str) -> tuple[list[str], list[int | str]]:
    """Split SQL at its placeholders: the text pieces around them and, for each, ``0`` for a
    ``?`` or the name of a ``:name``. Quotes (``'...'``, ``"..."``) and comments are skipped."""
    pieces: list[str] = []
    refs: list[int | str] = []
    start = i = 0
    n = len(sql)
    while i < n:
        ch = sql[i]
        if ch in ("'", '"'):
            end = sql.find(ch, i + 1)
            i = n if end == -1 else end + 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end == -1 else end
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end == -1 else end + 2
        elif ch == ":" and sql.startswith("::", i):
            i += 2  # a PostgreSQL cast, x::int
        elif ch == ":" and (m := _NAME.match(sql, i + 1)) and not (i > 0 and sql[i - 1] == ":"):
            pieces.append(sql[start:i])
            refs.append(m.group(0))
            start = i = m.end()
        elif ch == "?":
            pieces.append(sql[start:i])
            refs.append(0)
            start = i = i + 1
        else:
            i += 1
    pieces.append(sql[start:])
    return pieces, refs


def bind(db: str, method: str, sql: str, params: Any, executor: Executor) -> tuple[str, list[Any]]:
    """The SQL with the executor's placeholders, and the values in their order; refuses a
    count or a name that does not match, and SQL mixing ``?`` with ``:name``."""
    if params is None:
        params = []
    elif isinstance(params, dict) and not params:
        params = []  # an empty Lua table `{}`: no parameters, whichever kind the SQL has
    pieces, refs = placeholders(sql)
    named = {r for r in refs if isinstance(r, str)}
    if named and any(r == 0 for r in refs):
        raise ServiceError(
            f"database '{db}':{method}: the SQL mixes ? and :name placeholders; use one kind — "
            "an array of values for ?, a table of named values for :name"
        )
    values: list[Any] = []
    if named:
        if not isinstance(params, dict):
            if not params:
                raise ServiceError(
                    f"database '{db}':{method}: the SQL has :name placeholders ({', '.join(sorted(named))}) "
                    "but no values were given; pass a table like { name = value }"
                )
            raise ServiceError(
                f"database '{db}':{method}: :name placeholders take a table of named values "
                "like { name = value }, not an array"
            )
        missing = sorted(named - set(params))
        if missing:
            raise ServiceError(
                f"database '{db}':{method}: no value for :{', :'.join(missing)}; "
                "pass one value per name in the parameters table"
            )
        values = [params[str(r)] for r in refs]
    else:
        if not isinstance(params, list):
            raise ServiceError(
                f"database '{db}':{method}: parameters must be an array for ? placeholders "
                "(or a table for :name placeholders)"
            )
        if len(params) != len(refs):
            raise ServiceError(
                f"database '{db}':{method}: the SQL has {len(refs)} ? placeholders but {len(params)} "
                "parameters were given; pass one value per ?"
            )
        values = list(params)
    out = [pieces[0]]
    for i, piece in enumerate(pieces[1:]):
        out.append(executor.placeholder(i + 1))
        out.append(piece)
    return "".join(out), values


def row(db: str, raw: dict[str, Any]) -> dict[str, Any]:
    """A row as Lua receives it on every platform: booleans, numbers (NUMERIC as numbers, as
    the Data API's ``DOUBLE_OR_LONG`` gives them), strings (times, dates and UUIDs in
    PostgreSQL's text form, JSON as its text), NULL as nil. BLOBs are refused."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        out[key] = _value(db, key, value)
    return out


def _value(db: str, key: str, value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, decimal.Decimal):
        exponent = value.as_tuple().exponent
        return int(value) if isinstance(exponent, int) and exponent >= 0 else float(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat(sep=" ") if isinstance(value, datetime.datetime) else value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, bytes | bytearray | memoryview):
        raise ServiceError(
            f"database '{db}': column '{key}' holds a BLOB; lunaflow returns text, numbers and NULL — "
            "store binary data hex- or base64-encoded"
        )
    return str(value)


def clip(sql: str) -> str:
    sql = " ".join(sql.split())
    return sql if len(sql) <= 120 else sql[:117] + "..."


def check_call(db: str, method: str, args: Sequence[Any]) -> tuple[str, Any]:
    """The SQL and parameters of a call, checked before anything runs."""
    if method not in METHODS:
        raise ServiceError(f"database '{db}' has no method '{method}'; use exec, query or first")
    if not args or not isinstance(args[0], str):
        raise ServiceError(f"database '{db}':{method} expects SQL text as its first argument")
    params = args[1] if len(args) > 1 else None
    if params is not None and not isinstance(params, list | dict):
        raise ServiceError(
            f"database '{db}':{method}: parameters must be an array for ? placeholders "
            "(or a table for :name placeholders)"
        )
    return args[0], params


def call(db: str, executor: Executor, method: str, args: Sequence[Any]) -> list[Any]:
    """One Lua call: checked, bound, run by the executor, its result converted. A driver
    error propagates for the caller to name (it knows its driver's errors)."""
    sql, params = check_call(db, method, args)
    text, values = bind(db, method, sql, params, executor)
    changes, rows = executor.execute(method, text, values)
    if method == "exec":
        return [{"changes": changes}]
    converted = [row(db, r) for r in rows or []]
    if method == "first":
        return [converted[0] if converted else None]
    return [converted]
