"""Issue 24 §1 on AWS: `lunaflow check --aws` changes nothing.

On main, `check --aws` built the stack's `AwsRuntime`, whose `Platform` loaded the project
with the AWS services: `declare` → `DataApiDatabases.declare` → `migrate` on Aurora, so a
new `002_drop_orders.sql` dropped the live table before a single run was checked. The
check now loads the code read-only (`AwsRuntime(read_only=True)`, what `lunaflow check
--aws` builds): the database and the DynamoDB table are the same before and after, row by
row. A container serving the code (a Lambda's) still applies the migration.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from runtime.aws.database import pending_migrations
from runtime.aws.runtime import AwsRuntime
from runtime.dev.check import check_runs
from runtime.services.local import engine
from runtime.testing import AwsPlatform

MAIN = """
local shop = database "shop" { migrations = "migrations/shop" }
workflow "order" (function(wf, input)
    wf:step("reserve", function()
        shop:exec("UPDATE orders SET state = 'reserved' WHERE id = ?", { wf.id })
    end)
    return wf:await("paid", { timeout = "72h" })
end)
"""


def _items(p: AwsPlatform) -> list[dict[str, Any]]:
    client = p.clients.dynamodb
    items: list[dict[str, Any]] = []
    request: dict[str, Any] = {"TableName": p.config.table, "ConsistentRead": True}
    while True:
        page = client.scan(**request)
        items += page["Items"]
        if "LastEvaluatedKey" not in page:
            return sorted(items, key=repr)
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _shop(p: AwsPlatform) -> dict[str, Any]:
    listing = (
        "SELECT name FROM sqlite_master WHERE type = 'table'"
        if engine() == "sqlite"
        else "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
    )
    tables = [r[0] for r in p.databases.rows("shop", listing)]
    return {t: sorted(p.databases.rows("shop", f'SELECT * FROM "{t}"'), key=repr) for t in sorted(tables)}


def test_check_on_aws_applies_no_migration_and_writes_nothing(tmp_path: Path) -> None:
    project = tmp_path / "shop"
    (project / "migrations" / "shop").mkdir(parents=True)
    (project / "main.lua").write_text(MAIN, encoding="utf-8")
    (project / "migrations" / "shop" / "001_init.sql").write_text(
        "CREATE TABLE orders (id TEXT PRIMARY KEY, state TEXT NOT NULL);\n"
        "INSERT INTO orders VALUES ('o1', 'new');\n",
        encoding="utf-8",
    )
    with AwsPlatform(project, data_dir=tmp_path / "aws") as p:
        assert p.start("order", {}, id="o1").status == "awaiting"
        (project / "migrations" / "shop" / "002_drop_orders.sql").write_text("DROP TABLE orders;\n")
        before_items, before_shop = _items(p), _shop(p)
        assert before_shop["orders"] == [("o1", "reserved")]

        checking = AwsRuntime(replace(p.config, project=str(project)), p.new_clients(), read_only=True)
        verdicts = check_runs(checking.platform.worker, checking.store)
        assert [(v.run_id, v.diverges, v.message) for v in verdicts] == [
            ("o1", False, "replays cleanly; parked at await 'paid'")
        ]
        worker = checking.platform.worker
        pending = pending_migrations(checking.databases, worker.declarations, project, "shop")
        assert pending == {"shop": ["002_drop_orders.sql"]}  # what the check reports
        assert _shop(p) == before_shop
        assert _items(p) == before_items

        # The code accepted by a container that serves it migrates, as before.
        p.container(project)
        assert "orders" not in _shop(p)
        assert [f for f, _ in _shop(p)["_lunaflow_migrations"]] == ["001_init.sql", "002_drop_orders.sql"]
