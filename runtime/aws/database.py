"""``database "name"`` on AWS: Aurora Serverless v2 (PostgreSQL) through the RDS Data API.

The Lua API is the same as locally: ``?`` placeholders (rewritten to the Data API's
``:p1, :p2, ...`` outside string literals), rows as tables, migrations applied once, in
order, each in a transaction recorded in ``_lunaflow_migrations``. Each lunaflow database
is a PostgreSQL database of the cluster, named by the declaration.

Every cold container migrates, and several start at once. A migration's transaction first
claims its row in ``_lunaflow_migrations`` (``ON CONFLICT DO NOTHING``): a second container
claiming the same file waits for the first's transaction to end, then finds the row taken
and leaves the migration to it. So a migration is applied once however many containers
start together, and none of them fails for it.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from runtime.services import deadline
from runtime.services import sql as sql_api
from runtime.services.base import Declaration, ServiceError
from runtime.services.database import check_name

_MIGRATION = re.compile(r"^(\d+)_.*\.sql$")


def migration_number(name: str) -> int:
    match = _MIGRATION.match(name)
    return int(match.group(1)) if match else 0


def rewrite_placeholders(sql: str) -> tuple[str, int]:
    """``?`` outside quotes becomes ``:p1``, ``:p2``...; returns the SQL and the count."""
    out: list[str] = []
    count = 0
    quote: str | None = None
    for ch in sql:
        if quote is not None:
            if ch == quote:
                quote = None
        elif ch in ("'", '"'):
            quote = ch
        elif ch == "?":
            count += 1
            out.append(f":p{count}")
            continue
        out.append(ch)
    return "".join(out), count


def parameter(name: str, value: Any) -> dict[str, Any]:
    if value is None:
        field: dict[str, Any] = {"isNull": True}
    elif isinstance(value, bool):
        field = {"booleanValue": value}
    elif isinstance(value, int):
        field = {"longValue": value}
    elif isinstance(value, float):
        field = {"doubleValue": value}
    elif isinstance(value, str):
        field = {"stringValue": value}
    else:
        # A Lua table: JSON text typed as JSON, so it goes into a json or jsonb column (as a
        # plain stringValue it would be character varying, which PostgreSQL refuses there).
        text = json.dumps(value, separators=(",", ":"))
        return {"name": name, "value": {"stringValue": text}, "typeHint": "JSON"}
    return {"name": name, "value": field}


def _statements(sql: str) -> list[str]:
    """Split a migration at the semicolons that end statements: not those inside quotes,
    ``--`` comments or ``/* */`` comments (comments are dropped)."""
    out: list[str] = []
    current: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in ("'", '"'):
            end = sql.find(ch, i + 1)
            end = n - 1 if end == -1 else end
            current.append(sql[i : end + 1])
            i = end + 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end == -1 else end
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end == -1 else end + 2
        elif ch == ";":
            out.append("".join(current))
            current = []
            i += 1
        else:
            current.append(ch)
            i += 1
    out.append("".join(current))
    return [s.strip() for s in out if s.strip()]


def server_message(text: str) -> str:
    """The PostgreSQL message inside a Data API error, as a local server's reads: Aurora
    prefixes it with the severity and may add the position on lines of their own."""
    first = text.strip().split("\n", 1)[0]
    return first[len("ERROR: ") :] if first.startswith("ERROR: ") else first


class DataApiDatabases:
    def __init__(self, client: Any, resource_arn: str, secret_arn: str) -> None:
        self._rds = client
        self.resource_arn = resource_arn
        self.secret_arn = secret_arn
        self._migrated: set[str] = set()
        self._lock = threading.Lock()

    def _execute(
        self, database: str, sql: str, params: list[Any] | None = None, tx: str | None = None
    ) -> Any:
        text, count = rewrite_placeholders(sql)
        values = params or []
        if count != len(values):
            raise ServiceError(
                f"database '{database}': the SQL has {count} ? placeholders but {len(values)} "
                "parameters were given; pass one value per ?"
            )
        return self.request(database, text, values, tx=tx, shown=sql)

    def request(
        self,
        database: str,
        text: str,
        values: list[Any],
        tx: str | None = None,
        shown: str | None = None,
        method: str = "exec",
    ) -> Any:
        """One ExecuteStatement of SQL whose placeholders are already ``:p1``, ``:p2``..."""
        sql = shown if shown is not None else text
        request: dict[str, Any] = {
            "resourceArn": self.resource_arn,
            "secretArn": self.secret_arn,
            "database": database,
            "sql": text,
            "parameters": [parameter(f"p{i + 1}", v) for i, v in enumerate(values)],
            "formatRecordsAs": "JSON",
            # NUMERIC and DECIMAL (AVG, SUM of integers, NUMERIC(10,2)) as numbers, not strings.
            "resultSetOptions": {"decimalReturnType": "DOUBLE_OR_LONG"},
        }
        if tx is not None:
            request["transactionId"] = tx
        try:
            return deadline.within(lambda: self._rds.execute_statement(**request))
        except ClientError as e:
            message = server_message(e.response.get("Error", {}).get("Message", str(e)))
            raise ServiceError(
                f"database '{database}':{method} failed: {message} (SQL: {sql_api.clip(sql)})"
            ) from e

    def declare(self, name: str, opts: Any, project_root: Path) -> None:
        check_name(name)
        migrations = opts.get("migrations") if isinstance(opts, dict) else None
        if migrations is None:
            return
        with self._lock:
            if name in self._migrated:
                return
            self.migrate(name, project_root / str(migrations))
            self._migrated.add(name)

    def migrate(self, name: str, folder: Path) -> list[str]:
        if not folder.is_dir():
            raise ServiceError(f"database '{name}': migrations folder {folder} does not exist")
        self._ledger(name)
        done = {
            row["file"] for row in self._rows(self._execute(name, "SELECT file FROM _lunaflow_migrations"))
        }
        applied = []
        files = [p for p in folder.iterdir() if _MIGRATION.match(p.name)]
        for path in sorted(files, key=lambda p: (migration_number(p.name), p.name)):
            if path.name in done:
                continue
            tx = self._rds.begin_transaction(
                resourceArn=self.resource_arn, secretArn=self.secret_arn, database=name
            )["transactionId"]
            try:
                claimed = self._execute(
                    name,
                    "INSERT INTO _lunaflow_migrations (file, applied_at) VALUES (?, CURRENT_TIMESTAMP) "
                    "ON CONFLICT (file) DO NOTHING",
                    [path.name],
                    tx=tx,
                )
                if int(claimed.get("numberOfRecordsUpdated", 0)) == 0:
                    # Another container applied it while this one waited for the row.
                    self._rds.rollback_transaction(
                        resourceArn=self.resource_arn, secretArn=self.secret_arn, transactionId=tx
                    )
                    continue
                for statement in _statements(path.read_text(encoding="utf-8")):
                    self._execute(name, statement, tx=tx)
            except ServiceError as e:
                self._rds.rollback_transaction(
                    resourceArn=self.resource_arn, secretArn=self.secret_arn, transactionId=tx
                )
                raise ServiceError(
                    f"database '{name}': migration {path.name} failed and was rolled back: {e}"
                ) from e
            self._rds.commit_transaction(
                resourceArn=self.resource_arn, secretArn=self.secret_arn, transactionId=tx
            )
            applied.append(path.name)
        return applied

    def pending(self, name: str, folder: Path) -> list[str]:
        """The folder's migrations not applied yet, read without writing (``lunaflow check
        --aws``): a database with no ledger yet has applied none."""
        if not folder.is_dir():
            raise ServiceError(f"database '{name}': migrations folder {folder} does not exist")
        try:
            rows = self._rows(self._execute(name, "SELECT file FROM _lunaflow_migrations"))
        except ServiceError as e:
            if "_lunaflow_migrations" not in str(e):
                raise
            rows = []  # the ledger does not exist: nothing was migrated yet
        done = {row["file"] for row in rows}
        files = [p for p in folder.iterdir() if _MIGRATION.match(p.name) and p.name not in done]
        return [p.name for p in sorted(files, key=lambda p: (migration_number(p.name), p.name))]

    def _ledger(self, name: str) -> None:
        """The table of applied migrations. Two containers creating it at the same moment can
        collide in PostgreSQL's catalog even with IF NOT EXISTS; the loser finds it made."""
        create = "CREATE TABLE IF NOT EXISTS _lunaflow_migrations (file TEXT PRIMARY KEY, applied_at TEXT)"
        try:
            self._execute(name, create)
        except ServiceError:
            self._execute(name, create)

    @staticmethod
    def _rows(response: Any) -> list[dict[str, Any]]:
        records = response.get("formattedRecords")
        return list(json.loads(records)) if records else []

    def call(self, name: str, method: str, args: list[Any]) -> list[Any]:
        """One Lua call (runtime.services.sql checks, binds and converts; the Data API runs it)."""
        return sql_api.call(name, _DataApiExecutor(self, name), method, args)


class _DataApiExecutor:
    """The executor seam (runtime.services.sql.Executor) over one database of the cluster."""

    def __init__(self, databases: DataApiDatabases, name: str) -> None:
        self._databases = databases
        self._name = name

    def placeholder(self, n: int) -> str:
        return f":p{n}"

    def execute(self, method: str, sql: str, values: list[Any]) -> tuple[int, list[dict[str, Any]] | None]:
        response = self._databases.request(self._name, sql, values, method=method)
        if method == "exec":
            return int(response.get("numberOfRecordsUpdated", 0)), None
        return 0, DataApiDatabases._rows(response)


def pending_migrations(
    databases: DataApiDatabases | None, declarations: Sequence[Declaration], project_root: Path, project: str
) -> dict[str, list[str]]:
    """What accepting this code would migrate on the deployment's databases (``lunaflow check
    --aws`` reports it; nothing is written)."""
    pending: dict[str, list[str]] = {}
    if databases is None:
        return pending
    for d in declarations:
        migrations = d.opts.get("migrations") if d.kind == "database" and isinstance(d.opts, dict) else None
        if migrations is None:
            continue
        try:
            files = databases.pending(check_name(d.name), project_root / str(migrations))
        except ServiceError as e:
            raise d.refused(project, e) from e
        if files:
            pending[d.name] = files
    return pending
