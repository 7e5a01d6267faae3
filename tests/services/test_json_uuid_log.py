"""Acceptance: ``json.parse(s)``, ``json.encode(v)``, ``uuid.v4()`` and ``log.info(msg, fields)``,
``log.warn``, ``log.error`` (SPEC section 2), through LocalPlatform."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.testing import LocalPlatform

from . import error, project, value

UUID_V4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


@pytest.fixture
def p(tmp_path: Path) -> Iterator[LocalPlatform]:
    with LocalPlatform(project("svc_json"), data_dir=tmp_path) as plat:
        yield plat


# --- json ----------------------------------------------------------------------------------


def test_json_parse_builds_lua_values(p: LocalPlatform) -> None:
    """SPEC 2: `json.parse(s)`."""
    text = '{"i": 1, "f": 1.5, "s": "x", "t": true, "a": [1, 2, 3], "o": {"k": "v"}, "n": null}'
    out = value(p, op="parse", text=text)
    assert out["value"] == {"i": 1, "f": 1.5, "s": "x", "t": True, "a": [1, 2, 3], "o": {"k": "v"}}
    assert out["types"]["$.s"] == "string" and out["types"]["$.t"] == "boolean"
    assert out["types"]["$.a"] == "table" and out["types"]["$.o"] == "table"
    assert "$.n" not in out["types"]  # null is nil


def test_json_parse_keeps_integers_integers(p: LocalPlatform) -> None:
    """SPEC 3: "numbers (integers stay integers)"."""
    out = value(p, op="parse", text='{"i": 7, "neg": -3, "big": 9007199254740993, "f": 1.5, "g": 2.0}')
    types = out["types"]
    assert types["$.i"] == types["$.neg"] == types["$.big"] == "integer"
    assert types["$.f"] == types["$.g"] == "float"
    assert out["value"]["big"] == 9007199254740993  # beyond a double's exact range, still exact


@pytest.mark.parametrize("text", ["3", '"s"', "true", "[]", "{}"])
def test_json_parse_accepts_any_json_value(p: LocalPlatform, text: str) -> None:
    expected = {"3": "number", '"s"': "string", "true": "boolean", "[]": "table", "{}": "table"}[text]
    assert value(p, op="parse_only", text=text) == expected


@pytest.mark.parametrize("text", ["{bad", "[1,2] x", "", "{'a': 1}", "[1,]"])
def test_json_parse_of_invalid_json_is_an_error(p: LocalPlatform, text: str) -> None:
    e = error(p, op="parse_only", text=text)
    assert "json.parse: the text is not valid JSON" in e
    assert e.startswith("main.lua:")


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "[1e400]"])
def test_json_parse_refuses_non_finite_numbers(p: LocalPlatform, text: str) -> None:
    assert "json.parse" in error(p, op="parse_only", text=text)


@pytest.mark.parametrize("text", ["123456789012345678901234567890", '"\\ud800"'])
def test_json_parse_refuses_values_lua_cannot_hold_with_a_clear_message(p: LocalPlatform, text: str) -> None:
    e = error(p, op="parse_only", text=text)  # error() also checks the error is a string
    assert "json.parse" in e


def test_json_encode_sorts_keys_and_keeps_integers(p: LocalPlatform) -> None:
    """SPEC 2: `json.encode(v)` — keys sorted (so equal tables encode equally), integers
    written as integers."""
    assert value(p, op="encode_sample") == (
        '{"a":{"y":"s","z":true},"b":1,"big":9007199254740993,"c":[1,2,3],"f":1.5,"i":2}'
    )


def test_json_encode_writes_floats_as_floats_that_round_trip(p: LocalPlatform) -> None:
    encoded = value(p, op="encode_floats")
    assert json.loads(encoded) == [2.0, 0.1, -0.0, 1e300]
    assert all(isinstance(x, float) for x in json.loads(encoded))
    assert encoded.startswith("[2.0,")  # a whole float stays a float


def test_json_round_trip_keeps_number_types(p: LocalPlatform) -> None:
    types = value(p, op="round_trip", text='{"i": 1, "neg": -5, "f": 2.0, "e": 1e3}')
    assert types == {"$": "table", "$.i": "integer", "$.neg": "integer", "$.f": "float", "$.e": "float"}


def test_json_encode_escapes_strings(p: LocalPlatform) -> None:
    encoded = value(p, op="encode_strings")
    assert json.loads(encoded) == ['quote " backslash \\ newline \n tab \t', "é€😀", "\x01"]


def test_json_encode_of_nil_and_an_empty_table(p: LocalPlatform) -> None:
    assert value(p, op="encode_nil") == "null"
    assert json.loads(value(p, op="encode_empty")) in ({}, [])


@pytest.mark.parametrize(
    ("kind", "problem"),
    [
        ("fn", "a function at value.f"),
        ("mixed", "a table mixing string keys and array items at value"),
        ("holes", "an array with holes at value"),
        ("nan", "a non-finite number at value.n"),
        ("cycle", "a cycle at value.self"),
    ],
)
def test_json_encode_refuses_what_is_not_json_naming_the_path(
    p: LocalPlatform, kind: str, problem: str
) -> None:
    e = error(p, op="encode_bad", kind=kind)
    assert f"json.encode: the value holds {problem}" in e


# --- uuid ----------------------------------------------------------------------------------


def test_uuid_v4_has_the_v4_shape_and_is_fresh_each_call(p: LocalPlatform) -> None:
    """SPEC 2: `uuid.v4()` — "a random UUID string"."""
    ids = value(p, op="uuids", n=50)
    assert all(UUID_V4.match(i) for i in ids), ids
    assert len(set(ids)) == 50
    assert not set(ids) & set(value(p, op="uuids", n=50))


@pytest.mark.parametrize("cache_size", [256, 0])
def test_uuid_v4_in_run_code_is_the_same_after_replay(tmp_path: Path, cache_size: int) -> None:
    """Seed: "`uuid.v4()` | journaled on first run, replayed identically"."""
    with LocalPlatform(project("svc_json"), data_dir=tmp_path, cache_size=cache_size) as p:
        p.start("ids", {}, id="ids")
        first = p.journal("ids")
        p.restart()
        p.signal("ids", "go")
        run = p.get("ids")
        assert run.status == "completed", run.error
        assert UUID_V4.match(run.result["a"]) and UUID_V4.match(run.result["b"])
        assert run.result["a"] == run.result["a_again"]
        assert run.result["a"] != run.result["b"]
        assert p.journal("ids")[: len(first)] == first


# --- log -----------------------------------------------------------------------------------


def test_log_records_level_message_and_fields(p: LocalPlatform) -> None:
    """SPEC 2: `log.info(msg, fields)`, `log.warn`, `log.error` — structured logs."""
    value(p, op="log")
    assert p.logs == [
        {"level": "info", "message": "info line", "fields": {"user": "ada", "n": 3}, "run": None},
        {"level": "warn", "message": "warn line", "fields": {"nested": {"ok": True}}, "run": None},
        {"level": "error", "message": "error line", "fields": None, "run": None},
        {
            "level": "info",
            "message": "bad fields",
            "fields": "(fields not logged: a function at fields.f)",
            "run": None,
        },
        {"level": "info", "message": "printed\t42", "fields": None, "run": None},
    ]


def test_logs_from_a_run_carry_its_id(p: LocalPlatform) -> None:
    p.start("logs", {}, id="log-run")
    p.signal("log-run", "go")
    from_run = [(e["level"], e["message"], e["fields"], e["run"]) for e in p.logs]
    assert from_run == [
        ("info", "in run", {"where": "function"}, "log-run"),
        ("warn", "in step", {"where": "body"}, "log-run"),
        ("info", "after wait", None, "log-run"),
    ]


def test_a_log_line_in_the_workflow_function_is_not_repeated_by_replay(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Seed: "A resuming run replays the function from the top, and steps that already ran
    return their recorded results instead of running again" — a replay re-executes code, it
    does not re-tell what already happened: the replayed line is kept for inspection, marked
    `replayed`, and not written to the log again. With no cache every wake replays."""
    caplog.set_level("INFO", logger="lunaflow.lua")
    with LocalPlatform(project("svc_json"), data_dir=tmp_path, cache_size=0) as p:
        p.start("logs", {}, id="log-run")
        p.signal("log-run", "go")
        fresh = [e["message"] for e in p.logs if not e.get("replayed")]
        assert fresh == ["in run", "in step", "after wait"]
        assert [e["message"] for e in p.logs if e.get("replayed")] == ["in run"]
        written = [r.getMessage().split(" ")[0] + " " + r.getMessage().split(" ")[1] for r in caplog.records]
        assert written.count("in run") == 1
