"""One Lua database API on every platform (issue 25): the same calls give the same results
under LocalPlatform (SQLite) and AwsPlatform (the RDS Data API's requests), since both run
runtime/services/sql.py over an executor of their own."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.testing import AwsPlatform, LocalPlatform

from . import call, error, project, value

Platform = LocalPlatform | AwsPlatform


@pytest.fixture(autouse=True)
def _postgres(monkeypatch: pytest.MonkeyPatch) -> None:
    """These projects' SQL is PostgreSQL's, the dialect Aurora runs (LUNAFLOW_DATABASES)."""
    monkeypatch.setenv("LUNAFLOW_DATABASES", "postgres")


@pytest.fixture(params=["local", "aws"])
def p(request: pytest.FixtureRequest) -> Iterator[Any]:
    cls = LocalPlatform if request.param == "local" else AwsPlatform
    # No data folder given: the harness's own, whose database goes on the process's scratch
    # server (a CREATE DATABASE, where a folder given made a PostgreSQL cluster copied and
    # started for each test, most of its time).
    with cls(project("svc_sql")) as platform:
        yield platform


def insert(p: Any, name: str, price: float, active: bool) -> Any:
    return value(
        p,
        op="exec",
        sql="INSERT INTO items (name, price, active) VALUES (?, ?, ?)",
        params=[name, price, active],
    )


def test_exec_returns_changes_only(p: Any) -> None:
    assert insert(p, "a", 2.5, True) == {"changes": 1}


def test_reading_last_insert_id_says_ids_come_back_with_returning(p: Any) -> None:
    insert(p, "a", 2.5, True)
    message = error(
        p, op="exec", sql="UPDATE items SET price = ? WHERE name = ?", params=[3, "a"], read="last_insert_id"
    )
    assert "database 'shop':exec returns { changes = n } only: there is no last_insert_id" in message
    assert "RETURNING through :first" in message


def test_a_generated_id_comes_back_with_returning_through_first(p: Any) -> None:
    row = value(p, op="first", sql="INSERT INTO items (name) VALUES (?) RETURNING id", params=["x"])
    assert isinstance(row["id"], int)
    again = value(p, op="first", sql="SELECT name FROM items WHERE id = ?", params=[row["id"]])
    assert again == {"name": "x"}


def test_booleans_are_booleans_both_ways(p: Any) -> None:
    insert(p, "on", 1, True)
    insert(p, "off", 1, False)
    rows = value(p, op="query", sql="SELECT name, active FROM items ORDER BY name")
    assert rows == [{"name": "off", "active": False}, {"name": "on", "active": True}]
    assert [type(r["active"]) for r in rows] == [bool, bool]  # not 0 and 1 (1 is truthy in Lua, 0 too)
    only = value(p, op="query", sql="SELECT name FROM items WHERE active = ?", params=[True])
    assert only == [{"name": "on"}]


def test_an_empty_parameter_table_is_accepted(p: Any) -> None:
    assert value(p, op="first", sql="SELECT COUNT(*) AS n FROM items", params={}) == {"n": 0}
    assert value(p, op="exec", sql="DELETE FROM items", params={}) == {"changes": 0}


def test_name_placeholders_take_a_table_of_values(p: Any) -> None:
    value(
        p,
        op="exec",
        sql="INSERT INTO items (name, price, active) VALUES (:name, :price, :active)",
        params={"name": "n", "price": 4, "active": True},
    )
    row = value(
        p,
        op="first",
        sql="SELECT name FROM items WHERE name = :who AND 'x:y' = 'x:y'",
        params={"who": "n"},
    )
    assert row == {"name": "n"}
    missing = error(p, op="first", sql="SELECT 1 AS one WHERE :a = :b", params={"a": 1})
    assert "no value for :b" in missing
    mixed = error(p, op="first", sql="SELECT ? AS x, :b AS y", params=[1])
    assert "mixes ? and :name placeholders" in mixed


def test_a_table_parameter_is_sent_as_json(p: Any) -> None:
    value(p, op="exec", sql="INSERT INTO items (name, payload) VALUES (?, ?)", params=["j", {"a": [1, 2]}])
    row = value(p, op="first", sql="SELECT payload FROM items WHERE name = ?", params=["j"])
    assert json.loads(row["payload"]) == {"a": [1, 2]}


def test_numeric_and_avg_arrive_as_numbers(p: Any) -> None:
    insert(p, "a", 2.5, True)
    insert(p, "b", 3.5, True)
    row = value(p, op="first", sql="SELECT AVG(price) AS avg, SUM(price) AS total FROM items")
    assert row == {"avg": 3.0, "total": 6.0}


def test_the_data_api_request_carries_the_typing_aurora_needs(tmp_path: Path) -> None:
    """On AWS a table parameter is typed JSON (jsonb refuses character varying), booleans go
    as booleanValue, and NUMERIC comes back as numbers (decimalReturnType = DOUBLE_OR_LONG)."""
    with AwsPlatform(project("svc_sql"), data_dir=tmp_path / "data") as p:
        value(
            p,
            op="exec",
            sql="INSERT INTO items (name, active, payload) VALUES (?, ?, ?)",
            params=["j", True, {"a": 1}],
        )
        sent = p.databases.requests[-1]
        assert sent["sql"] == "INSERT INTO items (name, active, payload) VALUES (:p1, :p2, :p3)"
        assert sent["parameters"] == [
            {"name": "p1", "value": {"stringValue": "j"}},
            {"name": "p2", "value": {"booleanValue": True}},
            {"name": "p3", "value": {"stringValue": '{"a":1}'}, "typeHint": "JSON"},
        ]
        assert sent["resultSetOptions"] == {"decimalReturnType": "DOUBLE_OR_LONG"}
        assert call(p, op="first", sql="SELECT 1 AS one", params={})["value"] == {"one": 1}


def test_a_failing_statement_is_reported_alike_on_both(p: Any) -> None:
    """The same words locally and through the Data API: which database, which call, the
    server's message, and the SQL."""
    message = error(p, op="query", sql="SELECT nope FROM items")
    assert message.startswith("main.lua:8: database 'shop':query failed: column "), message
    assert 'column "nope" does not exist' in message and "(SQL: SELECT nope FROM items)" in message


def test_a_statement_in_a_step_is_cut_at_the_attempts_timeout(p: Any) -> None:
    """A 300 ms attempt whose statement sleeps 12 s fails at its timeout, as the step options
    promise ("host calls included"). Before, on AWS, the Data API's request ignored the
    attempt's deadline: the attempt took the statement's 12 s (a row lock may hold one 45 s),
    and a step run where a request landed held the request that long."""
    began = time.monotonic()
    run = p.start("slow_statement", {"seconds": 12}, id="slow-1")
    p.settle()
    took = time.monotonic() - began
    run = p.get("slow-1")
    assert run.status == "failed"
    assert run.error == "step 'wait' failed after 1 attempts: step 'wait' timed out after 300ms"
    assert took < 8, f"the attempt waited {took:.1f} s for a statement of 12 s"
