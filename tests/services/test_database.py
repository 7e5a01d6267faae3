"""Acceptance: ``database "name" { migrations = "migrations/name" }`` (SPEC sections 1 and 2),
on the local PostgreSQL server (the dialect Aurora runs), through
LocalPlatform; the last tests choose SQLite (``LUNAFLOW_DATABASES=sqlite``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.errors import ProjectLoadError
from runtime.testing import LocalPlatform
from tests.support import databases

from . import call, copy_project, error, project, value

EFFECT_RULE = "is an effect and belongs inside wf:step"


@pytest.fixture(autouse=True)
def _postgres(monkeypatch: pytest.MonkeyPatch) -> None:
    """These projects' SQL is PostgreSQL's, the dialect Aurora runs (LUNAFLOW_DATABASES)."""
    monkeypatch.setenv("LUNAFLOW_DATABASES", "postgres")


def applied_order(p: LocalPlatform) -> list[str]:
    rows = value(p, op="query", sql="SELECT file FROM applied_order ORDER BY n")
    return [r["file"] for r in rows]


tables = databases.tables


# --- migrations --------------------------------------------------------------------------


def test_migrations_are_applied_in_prefix_order_and_recorded(tmp_path: Path) -> None:
    """SPEC 1: "migrations/<db>/NNN_name.sql — schema migrations, applied in order, once"."""
    with LocalPlatform(project("svc_database"), data_dir=tmp_path) as p:
        assert applied_order(p) == ["001", "002", "010"]
        recorded = value(p, op="query", sql="SELECT file FROM _lunaflow_migrations ORDER BY file")
        assert [r["file"] for r in recorded] == ["001_items.sql", "002_seed.sql", "010_notes.sql"]
    assert databases.exists(tmp_path, "shop")


def test_migrations_are_not_rerun_after_a_restart(tmp_path: Path) -> None:
    """SPEC 1: migrations are applied "once": reopening the same data (as after a crash)
    does not run them again."""
    with LocalPlatform(project("svc_database"), data_dir=tmp_path) as p:
        p.restart()
        p.restart()
        assert applied_order(p) == ["001", "002", "010"]
        seeds = value(p, op="first", sql="SELECT COUNT(*) AS n FROM items WHERE name = 'seed'")
        assert seeds == {"n": 1}
    with LocalPlatform(project("svc_database"), data_dir=tmp_path) as p:
        assert applied_order(p) == ["001", "002", "010"]


def test_a_deploy_applies_only_the_new_migration(tmp_path: Path) -> None:
    """SPEC 1: "applied in order, once" — a deploy that adds 020 applies 020 alone."""
    v2 = copy_project("svc_database", tmp_path / "v2")
    (v2 / "migrations" / "shop" / "020_more.sql").write_text(
        "INSERT INTO applied_order (file) VALUES ('020');\n", encoding="utf-8"
    )
    with LocalPlatform(project("svc_database"), data_dir=tmp_path / "data") as p:
        p.deploy(v2)
        assert applied_order(p) == ["001", "002", "010", "020"]
        p.restart()
        assert applied_order(p) == ["001", "002", "010", "020"]


def test_migration_prefixes_are_ordered_by_number() -> None:
    """SPEC 1: NNN_name.sql migrations are "applied in order": the NNN prefix's order, so
    9_create.sql runs before 10_after.sql even though "10" sorts first as text."""
    with LocalPlatform(project("svc_database_numeric")) as p:
        assert value(p) == [{"file": "9"}, {"file": "10"}]


def test_a_failing_migration_is_rolled_back_and_refuses_the_load(tmp_path: Path) -> None:
    """A database's pending migrations apply together, in one transaction: a failing one
    leaves no trace of its earlier statements, nor of the files applied with it (the code
    that declared them is refused on the schema it found), and the load is refused naming
    the file and the SQL error."""
    proj = copy_project("svc_database", tmp_path / "proj")
    bad = proj / "migrations" / "shop" / "020_bad.sql"
    bad.write_text(
        "CREATE TABLE partial (id INTEGER);\n"
        "INSERT INTO applied_order (file) VALUES ('020');\n"
        "INSERT INTO no_such_table VALUES (1);\n",
        encoding="utf-8",
    )
    data = tmp_path / "data"
    with pytest.raises(ProjectLoadError) as refused:
        LocalPlatform(proj, data_dir=data)
    message = str(refused.value)
    assert "020_bad.sql" in message
    assert 'relation "no_such_table" does not exist' in message
    assert "database 'shop'" in message
    assert "main.lua" in message
    # Nothing of 001-020 is left: the schema is what it was (none).
    assert tables(data, "shop") & {"partial", "applied_order"} == set()
    # The ledger is rolled back with the files (PostgreSQL's DDL is transactional).
    ledger = "_lunaflow_migrations" in tables(data, "shop")
    assert not ledger or databases.rows(data, "shop", "SELECT file FROM _lunaflow_migrations") == []

    # The fixed file applies on the next start (CREATE TABLE without IF NOT EXISTS proves
    # the failed attempt left no table behind); earlier files are not re-run.
    bad.write_text(
        "CREATE TABLE partial (id INTEGER);\nINSERT INTO applied_order (file) VALUES ('020');\n",
        encoding="utf-8",
    )
    with LocalPlatform(proj, data_dir=data) as p:
        assert applied_order(p) == ["001", "002", "010", "020"]
        assert value(p, op="query", sql="SELECT * FROM partial") == {}
    assert "partial" in tables(data, "shop")


def test_a_failing_migration_refuses_a_deploy_and_the_old_code_keeps_serving(tmp_path: Path) -> None:
    """A deploy whose migration fails is refused (ProjectLoadError naming the file); the
    platform keeps the code it had."""
    v2 = copy_project("svc_database", tmp_path / "v2")
    (v2 / "migrations" / "shop" / "020_bad.sql").write_text("CREATE TABLE oops (;\n", encoding="utf-8")
    with LocalPlatform(project("svc_database"), data_dir=tmp_path / "data") as p:
        with pytest.raises(ProjectLoadError, match="020_bad.sql"):
            p.deploy(v2)
        assert applied_order(p) == ["001", "002", "010"]
        assert value(p, op="exec", sql="INSERT INTO items (name) VALUES ('after')")["changes"] == 1


def test_a_declared_migrations_folder_that_is_missing_refuses_the_load() -> None:
    """SPEC 1: loading is refused, with an error naming the script and line, when a script
    raises — here the declared migrations folder does not exist."""
    with pytest.raises(ProjectLoadError) as refused:
        LocalPlatform(project("svc_database_nofolder"))
    message = str(refused.value)
    assert "main.lua:2" in message
    assert "database 'ledger'" in message
    assert "migrations/ledger" in message and "does not exist" in message


# --- exec, query, first --------------------------------------------------------------------


def test_exec_returns_changes() -> None:
    """SPEC 2 (issue 25): ":exec(sql, params) returns { changes = n }" — ids come back with
    RETURNING through :first, as on Aurora PostgreSQL."""
    with LocalPlatform(project("svc_database")) as p:
        first = value(p, op="exec", sql="INSERT INTO items (name, qty) VALUES (?, ?)", params=["a", 1])
        second = value(p, op="exec", sql="INSERT INTO items (name, qty) VALUES (?, ?)", params=["b", 2])
        assert first == {"changes": 1} and second == {"changes": 1}
        updated = value(
            p, op="exec", sql="UPDATE items SET qty = qty + 10 WHERE name IN (?, ?)", params=["a", "b"]
        )
        assert updated["changes"] == 2
        none = value(p, op="exec", sql="DELETE FROM items WHERE name = ?", params=["nobody"])
        assert none["changes"] == 0


def test_query_returns_an_array_of_row_tables() -> None:
    """SPEC 2: ":query(sql, params) returns an array of row tables"."""
    with LocalPlatform(project("svc_database")) as p:
        for name, qty in [("b", 2), ("c", 3)]:
            value(p, op="exec", sql="INSERT INTO items (name, qty) VALUES (?, ?)", params=[name, qty])
        out = call(p, op="query", sql="SELECT name, qty FROM items ORDER BY name")
        assert out["type"] == "table" and out["len"] == 3
        assert out["value"] == [
            {"name": "b", "qty": 2},
            {"name": "c", "qty": 3},
            {"name": "seed", "qty": 1},
        ]
        empty = call(p, op="query", sql="SELECT name FROM items WHERE qty > ?", params=[100])
        assert empty["type"] == "table" and empty["len"] == 0


def test_first_returns_a_row_or_nil() -> None:
    """SPEC 2: ":first(sql, params) returns a row or nil"."""
    with LocalPlatform(project("svc_database")) as p:
        row = call(p, op="first", sql="SELECT name, qty, note FROM items ORDER BY id")
        assert row["type"] == "table"
        assert row["value"] == {"name": "seed", "qty": 1}  # a NULL column is absent (nil)
        missing = call(p, op="first", sql="SELECT * FROM items WHERE id = ?", params=[12345])
        assert missing == {"ok": True, "type": "nil"}


def test_question_mark_placeholders_bind_values_not_sql() -> None:
    """SPEC 2: "Placeholders are `?`" — values are bound, never spliced into the SQL."""
    with LocalPlatform(project("svc_database")) as p:
        hostile = "x'); DROP TABLE items; --"
        value(p, op="exec", sql="INSERT INTO items (name, qty) VALUES (?, ?)", params=[hostile, 7])
        row = value(p, op="first", sql="SELECT name, qty FROM items WHERE name = ?", params=[hostile])
        assert row == {"name": hostile, "qty": 7}
        assert value(p, op="first", sql="SELECT COUNT(*) AS n FROM items")["n"] == 2
        mixed = value(p, op="first", sql="SELECT ? AS i, ? AS f, ? AS s, ? AS b", params=[3, 1.5, "é", True])
        assert mixed == {"i": 3, "f": 1.5, "s": "é", "b": True}


def test_sql_errors_are_lua_errors_naming_the_database() -> None:
    """SQL errors surface as Lua errors (catchable with pcall) naming the database, the
    call and PostgreSQL's message, positioned at the user's line."""
    with LocalPlatform(project("svc_database")) as p:
        e = error(p, op="exec", sql="INSERT INTO no_such_table VALUES (1)")
        assert "database 'shop'" in e and "exec" in e
        assert 'relation "no_such_table" does not exist' in e
        assert e.startswith("main.lua:")
        e = error(p, op="query", sql="SELEC nonsense")
        assert "database 'shop'" in e and 'syntax error at or near "SELEC"' in e
        e = error(p, op="exec", sql="INSERT INTO items (name) VALUES (NULL)")
        assert 'null value in column "name" of relation "items" violates not-null constraint' in e


def test_writes_in_a_step_are_visible_to_later_steps_and_handlers(tmp_path: Path) -> None:
    """Seed: database calls belong "inside wf:step"; there they run and are recorded."""
    with LocalPlatform(project("svc_database"), data_dir=tmp_path) as p:
        run = p.start("restock", {"name": "widget", "qty": 4}, id="restock-1")
        assert run.status == "completed", run.error
        assert isinstance(run.result["inserted"]["id"], int)
        assert run.result["row"] == {"name": "widget", "qty": 4}
        p.restart()
        rows = value(p, op="query", sql="SELECT name, qty FROM items WHERE name = ?", params=["widget"])
        assert rows == [{"name": "widget", "qty": 4}]


# --- refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["exec", "query", "first"])
def test_a_database_call_outside_a_step_is_refused_in_run_code(op: str) -> None:
    """SPEC 3: "kv, database, object, queue and workflow-start calls outside a step |
    refused", with the message `database:exec is an effect and belongs inside wf:step`."""
    with LocalPlatform(project("svc_database")) as p:
        run = p.start("outside", {"op": op}, id=f"outside-{op}")
        assert run.status == "completed"
        assert run.result["ok"] is False
        assert run.result["error"].endswith(f"database:{op} {EFFECT_RULE}")


def test_an_uncaught_database_call_outside_a_step_fails_the_run() -> None:
    with LocalPlatform(project("svc_database")) as p:
        run = p.start("outside-uncaught", {}, id="outside-uncaught")
        assert run.status == "failed"
        assert f"database:exec {EFFECT_RULE}" in (run.error or "")
        assert value(p, op="first", sql="SELECT qty FROM items WHERE name = 'seed'") == {"qty": 1}


def test_a_database_call_at_a_scripts_top_level_refuses_the_load() -> None:
    """SPEC 1: "Top-level code declares things; it performs no effects"; loading is refused
    with an error naming the script and line."""
    with pytest.raises(ProjectLoadError) as refused:
        LocalPlatform(project("svc_database_toplevel"))
    message = str(refused.value)
    assert "main.lua:3" in message
    assert "database:exec is an effect" in message


def test_a_migration_file_applies_as_postgresql_reads_it(tmp_path: Path) -> None:
    """Issue 24 §5 on PostgreSQL: several statements may share a line, and a semicolon inside
    a string, a comment or a dollar-quoted function body does not end one (the server itself
    splits the file)."""
    proj = copy_project("svc_database", tmp_path / "proj")
    (proj / "migrations" / "shop" / "020_one_line.sql").write_text(
        "CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);INSERT INTO t VALUES (2);\n"
        "CREATE TABLE said (n BIGINT GENERATED ALWAYS AS IDENTITY, s TEXT);"
        " INSERT INTO said (s) VALUES ('a;b'); -- a comment; with a semicolon\n"
        "/* a block; comment */ INSERT INTO said (s) VALUES ('it''s; fine');\n"
        "CREATE FUNCTION note_t() RETURNS trigger AS $$ BEGIN INSERT INTO said (s) VALUES"
        " ('t got ' || new.x); RETURN new; END; $$ LANGUAGE plpgsql;\n"
        "CREATE TRIGGER count_t AFTER INSERT ON t FOR EACH ROW EXECUTE FUNCTION note_t();"
        " INSERT INTO t VALUES (3);\n"
        "INSERT INTO applied_order (file) VALUES ('020')",  # the last statement needs no semicolon
        encoding="utf-8",
    )
    with LocalPlatform(proj, data_dir=tmp_path / "data") as p:
        assert applied_order(p) == ["001", "002", "010", "020"]
        assert value(p, op="query", sql="SELECT x FROM t ORDER BY x") == [{"x": 1}, {"x": 2}, {"x": 3}]
        said = value(p, op="query", sql="SELECT s FROM said ORDER BY n")
        assert [r["s"] for r in said] == ["a;b", "it's; fine", "t got 3"]


SQLITE_PROJECT = """
local shop = database "shop" { migrations = "migrations/shop" }
on "fetch" (function(request)
    local q = json.parse(request.body)
    local ok, r = pcall(function() return shop[q.op](shop, q.sql, q.params) end)
    local out = ok and { ok = true, value = r } or { ok = false, error = r }
    return { status_code = 200, body = json.encode(out) }
end)
"""


def test_on_sqlite_a_migration_applies_as_sqlite3s_shell_would_run_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SQLite engine, chosen with LUNAFLOW_DATABASES=sqlite: a migration file applies as
    sqlite3's shell runs it (statements end at semicolons that complete them, so several may
    share a line, and a semicolon in a string, a comment or a trigger's body does not end
    one), into <data>/db/<name>.sqlite."""
    monkeypatch.setenv("LUNAFLOW_DATABASES", "sqlite")
    proj = tmp_path / "proj"
    (proj / "migrations" / "shop").mkdir(parents=True)
    (proj / "main.lua").write_text(SQLITE_PROJECT, encoding="utf-8")
    (proj / "migrations" / "shop" / "001_one_line.sql").write_text(
        "CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);INSERT INTO t VALUES (2);\n"
        "CREATE TABLE said (s TEXT); INSERT INTO said VALUES ('a;b'); -- a comment; with a semicolon\n"
        "/* a block; comment */ INSERT INTO said VALUES ('it''s; fine');\n"
        "CREATE TRIGGER count_t AFTER INSERT ON t BEGIN INSERT INTO said VALUES ('t got ' || new.x); END;"
        " INSERT INTO t VALUES (3)",
        encoding="utf-8",
    )
    with LocalPlatform(proj, data_dir=tmp_path / "data") as p:
        assert value(p, op="query", sql="SELECT x FROM t ORDER BY x") == [{"x": 1}, {"x": 2}, {"x": 3}]
        said = value(p, op="query", sql="SELECT s FROM said ORDER BY rowid")
        assert [r["s"] for r in said] == ["a;b", "it's; fine", "t got 3"]
    assert (tmp_path / "data" / "db" / "shop.sqlite").is_file()
    assert not (tmp_path / "data" / "pg").exists()


def test_a_later_migration_that_fails_keeps_none_of_the_new_ones(tmp_path: Path) -> None:
    """A deploy adding 020 (fine) and 030 (failing) is refused with the old schema intact:
    020 is rolled back with 030, and the old code keeps serving on the old tables."""
    with LocalPlatform(project("svc_database"), data_dir=tmp_path / "data") as p:
        v2 = copy_project("svc_database", tmp_path / "v2")
        shop = v2 / "migrations" / "shop"
        (shop / "020_fine.sql").write_text(
            "DROP TABLE items;\nINSERT INTO applied_order (file) VALUES ('020');", encoding="utf-8"
        )
        (shop / "030_bad.sql").write_text("INSERT INTO no_such_table VALUES (1);", encoding="utf-8")
        with pytest.raises(ProjectLoadError) as refused:
            p.deploy(v2)
        assert "030_bad.sql" in str(refused.value) and "020_fine.sql" in str(refused.value)
        assert applied_order(p) == ["001", "002", "010"]
        assert value(p, op="first", sql="SELECT COUNT(*) AS n FROM items") == {"n": 1}
        (shop / "030_bad.sql").write_text(
            "INSERT INTO applied_order (file) VALUES ('030');", encoding="utf-8"
        )
        p.deploy(v2)
        assert applied_order(p) == ["001", "002", "010", "020", "030"]
