"""Issue 24 §1: `lunaflow check`, `test`, `record` and `deploy --dry-run` change nothing.

A check "runs no effects" (SPEC 5): it must not migrate, write a journal, a secret, a kv or
object item, or anything else. On main, loading the project for a check ran `declare` →
`LocalServices.declare` → `Database.migrate` on the real data folder: a project that ran
with `001_init.sql` (creates and fills `orders`) and then gained `002_drop_orders.sql`
(`DROP TABLE orders;`) lost the table to `lunaflow check`, which recorded 002 as applied.

The data folder here is the project's default one (PROJECT/.lunaflow, which `lunaflow test`
could reach too), made by a real run; each command is run against it and every file under
it is compared byte for byte before and after, and the tables of every database row by row.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from runtime import cli
from runtime.services.local import engine
from runtime.store.sqlite import SCHEMA_VERSION, STORE_FILE
from runtime.testing import LocalPlatform
from tests.support import databases
from tests.support.cli import copy_kept, in_process

MAIN = """
local shop = database "shop" { migrations = "migrations/shop" }
local seen = kv "seen"

workflow "order" (function(wf, input)
    local key = secret "api-key"
    wf:step("reserve", function()
        seen:put(wf.step_id, "reserved")
        shop:exec("UPDATE orders SET state = 'reserved' WHERE id = ?", { wf.id })
    end)
    local paid = wf:await("paid", { timeout = "72h" })
    wf:step("ship", function()
        shop:exec("UPDATE orders SET state = 'shipped' WHERE id = ?", { wf.id })
    end)
    return { paid = paid, key = #key }
end)
"""

INIT = """CREATE TABLE orders (id TEXT PRIMARY KEY, state TEXT NOT NULL);
INSERT INTO orders VALUES ('o1', 'new');
INSERT INTO orders VALUES ('o2', 'new');
"""

TEST = """
test("an order awaits payment", function(p)
  p:start("order", {}, { id = "t1" })
  assert_eq(p:get("t1").status, "failed")  -- no secret in a test platform: the run fails
end)
"""


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def lunaflow(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Result]]:
    monkeypatch.setattr(cli.output, "out", Console(highlight=False, soft_wrap=True, width=400))
    monkeypatch.setattr(cli.output, "err", Console(stderr=True, highlight=False, soft_wrap=True, width=400))

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = cli.main(list(args))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    yield run


@pytest.fixture(scope="module")
def ran_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project that ran (runs awaiting, a secret pinned, a kv entry, orders reserved), then
    gained a migration that drops the orders table, and one that started a run through the CLI.
    Made once: each test gets a copy (``project``), as the tests change what they are given."""
    root = tmp_path_factory.mktemp("read-only") / "shop"
    (root / "migrations" / "shop").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "main.lua").write_text(MAIN, encoding="utf-8")
    (root / "migrations" / "shop" / "001_init.sql").write_text(INIT, encoding="utf-8")
    (root / "tests" / "order_test.lua").write_text(TEST, encoding="utf-8")
    with LocalPlatform(root, data_dir=root / ".lunaflow") as p:
        p.set_secret("api-key", "v1")
        p.start("order", {}, id="o1")
        p.start("order", {}, id="o2")
        p.signal("o2", "paid", {"by": "ada"})
        assert {r.id: r.status for r in p.runs()} == {"o1": "awaiting", "o2": "completed"}
    done = in_process(["start", "order", "--id", "o3", "--project", str(root)])
    assert done.code == 0, done
    drop = root / "migrations" / "shop" / "002_drop_orders.sql"
    drop.write_text("DROP TABLE orders;\n", encoding="utf-8")
    return root


@pytest.fixture
def project(ran_project: Path, tmp_path: Path) -> Path:
    """A copy of ``ran_project``, its servers stopped: owners and modes kept, as the cluster's
    server runs as another user when the tests run as root."""
    return copy_kept(ran_project, tmp_path / "shop")


def files(folder: Path) -> dict[str, str]:
    """Every file's digest, but the PostgreSQL cluster's (a server writes its own files, its
    statistics and checkpoints, whenever it runs: its databases are compared by their rows)."""
    cluster = folder / ".lunaflow" / "pg"
    return {
        str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(folder.rglob("*"))
        if f.is_file() and cluster not in f.parents
    }


def pg_tables(data: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every table of the project's database on the data folder's server, row by row."""
    if engine() != "postgres":
        return {}
    with databases.held(data):
        if not databases.exists(data, "shop"):
            return {}
        return {
            n: sorted(databases.rows(data, "shop", f'SELECT * FROM "{n}"'), key=repr)
            for n in sorted(databases.tables(data, "shop"))
        }


def tables(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every table of a SQLite file, row by row."""
    conn = sqlite3.connect(db)
    try:
        listed = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        names = [r[0] for r in listed]
        return {n: sorted(conn.execute(f'SELECT * FROM "{n}"').fetchall(), key=repr) for n in names}
    finally:
        conn.close()


def shop_tables(data: Path) -> dict[str, list[tuple[Any, ...]]]:
    """The project database's tables, on whichever engine runs it."""
    return pg_tables(data) if engine() == "postgres" else tables(data / "db" / "shop.sqlite")


def state(root: Path) -> dict[str, Any]:
    data = root / ".lunaflow"
    return {
        "files": files(root),
        "tables": {str(db.relative_to(data)): tables(db) for db in sorted(data.rglob("*.sqlite"))},
        "postgres": pg_tables(data),
    }


def assert_unchanged(root: Path, before: dict[str, Any], *, except_files: set[str] = frozenset()) -> None:
    after = state(root)
    assert after["tables"] == before["tables"]
    assert after["postgres"] == before["postgres"]
    kept = {k: v for k, v in after["files"].items() if k not in except_files}
    assert kept == before["files"]


def test_check_reports_the_new_migration_and_applies_nothing(lunaflow, project):
    before = state(project)
    assert "orders" in shop_tables(project / ".lunaflow")
    r = lunaflow("check", str(project))
    assert r.code == 0, r.out + r.err
    assert_unchanged(project, before)
    assert "database 'shop': would apply 002_drop_orders.sql" in r.out
    assert "2 in-flight run(s), 0 would diverge" in r.out
    shop = shop_tables(project / ".lunaflow")
    assert shop["orders"] == [("o1", "reserved"), ("o2", "shipped")]
    assert [f for f, _ in shop["_lunaflow_migrations"]] == ["001_init.sql"]


def test_check_json_lists_the_migrations_it_would_apply(lunaflow, project):
    before = state(project)
    r = lunaflow("check", str(project), "--json")
    assert r.code == 0, r.out + r.err
    listed = json.loads(r.out)
    assert {"database": "shop", "would_apply": ["002_drop_orders.sql"]} in listed
    assert sorted(v["run_id"] for v in listed if "run_id" in v) == ["o1", "o3"]
    assert_unchanged(project, before)


def test_deploy_dry_run_against_the_data_folder_changes_nothing(lunaflow, project):
    before = state(project)
    r = lunaflow("deploy", str(project), "--data", str(project / ".lunaflow"), "--dry-run")
    assert r.code == 0, r.out + r.err
    assert "would run: npx cdk deploy" in r.out
    assert "would apply 002_drop_orders.sql" in r.out
    assert "force=true" not in r.out
    assert_unchanged(project, before)


def test_deploy_force_reaches_the_gate_inside_cdk_deploy(lunaflow, project):
    """Issue 29 §1: the local check is the fast path; --force must also let the deploy gate
    pass, or cdk deploy would refuse what the CLI let through."""
    r = lunaflow("deploy", str(project), "--data", str(project / ".lunaflow"), "--dry-run", "--force")
    assert r.code == 0, r.out + r.err
    assert "-c force=true" in r.out


def test_lunaflow_test_changes_nothing(lunaflow, project):
    before = state(project)
    r = lunaflow("test", str(project))
    assert "1 passed, 0 failed" in r.out, r.out + r.err
    assert_unchanged(project, before)


def test_record_writes_the_golden_and_nothing_else(lunaflow, project):
    before = state(project)
    r = lunaflow("record", "o1", "--project", str(project))
    assert r.code == 0, r.out + r.err
    assert_unchanged(project, before, except_files={"tests/golden/o1.json"})
    assert (project / "tests" / "golden" / "o1.json").is_file()
    # The golden then replays in check, which still changes nothing.
    before = state(project)
    r = lunaflow("check", str(project))
    assert r.code == 0, r.out + r.err
    assert "1 golden journal(s), 0 would not replay" in r.out
    assert_unchanged(project, before)


def test_a_refused_project_changes_nothing(lunaflow, project):
    """The migration's script loads first; a later script fails to parse. Check refuses the
    project and nothing is migrated."""
    (project / "zz_broken.lua").write_text("local x = (\n", encoding="utf-8")
    before = state(project)
    r = lunaflow("check", str(project))
    assert r.code == 1
    assert "zz_broken.lua:" in r.err
    assert_unchanged(project, before)


def downgrade_store(data: Path) -> None:
    """Make the store what an older lunaflow (schema 2: wake-ups without a time) left."""
    conn = sqlite3.connect(data / STORE_FILE)
    try:
        conn.execute("ALTER TABLE wakeups DROP COLUMN at")
        conn.execute("UPDATE schema_version SET version = 2")
        conn.commit()
    finally:
        conn.close()


@pytest.mark.parametrize("command", ["check", "record"])
def test_a_store_of_an_older_schema_is_read_through_a_copy(lunaflow, project, command):
    """Read-only commands read an older store as it is: its copy is migrated, not it."""
    assert SCHEMA_VERSION > 2  # the store made here is newer than the one downgraded to
    downgrade_store(project / ".lunaflow")
    before = state(project)
    if command == "check":
        r = lunaflow("check", str(project))
        assert "2 in-flight run(s), 0 would diverge" in r.out, r.out + r.err
    else:
        r = lunaflow("record", "o1", "--project", str(project))
    assert r.code == 0, r.out + r.err
    assert_unchanged(project, before, except_files={"tests/golden/o1.json"})
    assert before["tables"]["lunaflow.sqlite"]["schema_version"] == [(2,)]


def downgrade_store_to_4(data: Path) -> None:
    """Make the store what lunaflow left before schema 5 (no list indexes, no kept counts)."""
    conn = sqlite3.connect(data / STORE_FILE)
    try:
        conn.executescript(
            "DROP TRIGGER run_counts_insert; DROP TRIGGER run_counts_update; DROP TRIGGER run_counts_delete;"
            "DROP TABLE run_counts; DROP INDEX runs_by_created; DROP INDEX runs_by_status_created;"
            "DROP INDEX runs_by_workflow; UPDATE schema_version SET version = 4;"
        )
        conn.commit()
    finally:
        conn.close()


@pytest.mark.parametrize("older", [None, 2, 4], ids=["current-schema", "schema-2", "schema-4"])
@pytest.mark.parametrize("command", [["runs"], ["runs", "--json"], ["show", "o1"], ["show", "o1", "--json"]])
def test_runs_and_show_only_read(lunaflow, project, command, older):
    """Before: ``runs`` and ``show`` opened the store read-write, so an older store was
    migrated in place by a command that only looks."""
    if older == 2:
        downgrade_store(project / ".lunaflow")
    elif older == 4:
        downgrade_store_to_4(project / ".lunaflow")
    before = state(project)
    r = lunaflow(*command, "--project", str(project))
    assert r.code == 0, r.out + r.err
    assert "o1" in r.out
    assert_unchanged(project, before)
