"""Acceptance: the seed's determinism table ("Run code must take the same path given the
same journal"), through LocalPlatform."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from runtime.core.journal import Kind
from runtime.testing import LocalPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "spec_determinism"
EFFECT_RULE = "is an effect and belongs inside wf:step"


class Effects:
    """Stand-ins for kv, database, queue and objects, recording every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def service(self, kind: str):
        def fn(name: str, method: str, args: list[Any]) -> list[Any]:
            self.calls.append((kind, name, method, args))
            return [{"changes": 1, "last_insert_id": 1}] if kind == "database" else []

        return fn

    def object(self, cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        self.calls.append(("object", cls, key, method, args))
        return []


@pytest.fixture
def fx() -> Effects:
    return Effects()


@pytest.fixture
def platform(harness: Any) -> Any:
    """platform(tmp_path, fx, **kw): a platform of the harness under test."""

    def make(tmp_path: Path, fx: Effects, **kw: Any) -> LocalPlatform:
        services = {k: fx.service(k) for k in ("kv", "database", "queue")}
        return harness(PROJECT, data_dir=tmp_path, services=services, objects=fx.object, **kw)  # type: ignore[no-any-return]

    return make


@pytest.fixture
def p(platform: Any, tmp_path: Path, fx: Effects):
    with platform(tmp_path, fx) as plat:
        yield plat


# --- journaled sources ------------------------------------------------------------------


@pytest.mark.parametrize("cache_size", [256, 0])
def test_time_clock_random_and_uuid_are_journaled_and_replayed_identically(
    platform: Any, tmp_path: Path, fx: Effects, cache_size: int
) -> None:
    """Seed: "`os.time()`, `os.clock()`, `math.random()`, `uuid.v4()` | journaled on first
    run, replayed identically" — values read before a sleep and a restart come back the
    same when the function replays from the top."""
    with platform(tmp_path, fx, cache_size=cache_size) as p:
        started_at = p.now
        p.start("drift", {}, id="d1")
        [record] = [e for e in p.journal("d1") if e.kind == Kind.STEP_RESULT]
        first = record.data["values"][0]
        assert first["t"] == int(started_at)
        assert 0 <= first["r"] < 1
        assert 1 <= first["ri"] <= 1_000_000 and isinstance(first["ri"], int)
        assert 1 <= first["rr"] <= 5 and isinstance(first["rr"], int)
        assert len(first["u"]) == 36
        p.restart()
        p.advance("1h")
        journal_mid = p.journal("d1")
        p.restart()
        assert p.journal("d1") == journal_mid
        p.signal("d1", "go")
        run = p.get("d1")
        assert run.status == "completed", run.error
        assert run.result["seen"] == first
        assert run.result["after"]["t"] == int(started_at) + 3600
        values = [e for e in p.journal("d1") if e.kind == Kind.VALUE]
        assert [v.name for v in values] == [
            "os.time",
            "os.clock",
            "math.random",
            "math.random",
            "math.random",
            "uuid.v4",
            "os.time",
            "math.random",
            "uuid.v4",
        ]
        assert values[6].data["value"] == run.result["after"]["t"]
        assert values[8].data["value"] == run.result["after"]["u"]
        assert run.result["after"]["u"] != first["u"]


def test_two_runs_draw_different_random_values(p: LocalPlatform) -> None:
    """Seed: "journaled on first run" — a new run draws afresh rather than reusing
    another run's values."""
    p.start("drift", {}, id="d1")
    p.start("drift", {}, id="d2")
    vals = [
        [e for e in p.journal(r) if e.kind == Kind.STEP_RESULT][0].data["values"][0] for r in ("d1", "d2")
    ]
    assert vals[0]["u"] != vals[1]["u"]
    assert vals[0]["r"] != vals[1]["r"]


# --- secrets ----------------------------------------------------------------------------


def test_secret_is_pinned_to_the_version_the_run_first_resolved(p: LocalPlatform) -> None:
    """Seed: "`secret "name"` | pinned to the version the run first resolved" — a run that
    read v1 keeps reading v1 after v2 is set (after a wait, a restart, inside a step); a
    new run gets v2."""
    p.set_secret("api-key", "v1")
    p.start("pinned", {}, id="old")
    p.set_secret("api-key", "v2")
    p.start("pinned", {}, id="new")
    p.restart()
    p.signal("old", "go")
    p.signal("new", "go")
    assert p.get("old").result == {"first": "v1", "second": "v1", "in_step": "v1"}
    assert p.get("new").result == {"first": "v2", "second": "v2", "in_step": "v2"}


# --- refused calls ----------------------------------------------------------------------


def test_os_date_and_math_randomseed_are_refused_naming_the_call(p: LocalPlatform) -> None:
    """Seed: "`os.date`, `math.randomseed` | refused". SPEC 3: "refused with an error naming
    the call" — in the workflow function and in step bodies."""
    run = p.start("refusals", {}, id="r1")
    assert run.status == "completed", run.error
    for where in ("run", "body"):
        assert "os.date" in run.result[where]["date"], run.result
        assert "math.randomseed" in run.result[where]["randomseed"], run.result


@pytest.mark.parametrize("workflow, call", [("os-date", "os.date"), ("randomseed", "math.randomseed")])
def test_an_uncaught_refused_call_fails_the_run_naming_the_call(
    p: LocalPlatform, workflow: str, call: str
) -> None:
    """SPEC 3: "`os.date`, `math.randomseed` | refused with an error naming the call"."""
    run = p.start(workflow, {}, id="r1")
    assert run.status == "failed"
    assert call in run.error
    assert not any(e.kind == Kind.COMPLETED for e in p.journal("r1"))


def test_effects_outside_a_step_are_refused_and_allowed_inside(p: LocalPlatform, fx: Effects) -> None:
    """Seed: "kv, database and object calls outside a step | refused: effects belong inside
    `wf:step`". SPEC 3 adds queue and workflow-start calls, refused with e.g.
    `kv:put is an effect and belongs inside wf:step`."""
    run = p.start("effects", {}, id="e1")
    assert run.status == "completed", run.error
    out = run.result
    assert out["kv"].endswith("kv:put is an effect and belongs inside wf:step"), out["kv"]
    for kind, word in (("database", "exec"), ("object", "notify"), ("queue", "send"), ("start", "start")):
        assert out[kind].endswith(EFFECT_RULE), (kind, out[kind])
        assert word in out[kind], (kind, out[kind])
    # Inside the step every call went through, in order, and nothing leaked from outside.
    assert fx.calls == [
        ("kv", "cache", "put", ["k", "v"]),
        ("database", "sales", "exec", ["UPDATE sales SET state = 'x' WHERE id = ?", [1]]),
        ("object", "Account", "ada", "notify", ["hi"]),
        ("queue", "mail", "send", [{"to": "ada"}]),
    ]
    child = p.get("child-1")
    assert child.parent_id == "e1"
    assert child.status == "completed"


@pytest.mark.parametrize(
    "kind",
    [
        "kv",
        "database",
        "object",
        "queue",
        "start",
    ],
)
def test_effect_refusal_points_at_the_calling_line(p: LocalPlatform, kind: str) -> None:
    """SPEC 3: refused with `kv:put is an effect and belongs inside wf:step` — raised at the
    user's call site (main.lua:N), not inside the engine."""
    run = p.start("effects", {}, id="e1")
    message = run.result[kind]
    assert re.match(r"^main\.lua:\d+: ", message), message
    assert message.endswith(EFFECT_RULE), message


@pytest.mark.parametrize(
    "kind, call",
    [("kv", "kv:put"), ("database", "exec"), ("object", "notify"), ("queue", "send"), ("start", "start")],
)
def test_an_uncaught_effect_outside_a_step_fails_the_run_without_performing_it(
    p: LocalPlatform, fx: Effects, kind: str, call: str
) -> None:
    """Seed: "kv, database and object calls outside a step | refused: effects belong inside
    `wf:step`"."""
    run = p.start("effect-uncaught", {"kind": kind}, id="u1")
    assert run.status == "failed"
    assert EFFECT_RULE in run.error and call in run.error, run.error
    assert fx.calls == []
    assert [r.id for r in p.runs()] == ["u1"]


# --- absent globals ---------------------------------------------------------------------


def test_http_crypto_and_jwt_are_absent_in_run_code_and_step_bodies(p: LocalPlatform) -> None:
    """Seed: "`http`, `crypto`, `Jwt` | absent, inside step bodies too"."""
    run = p.start("absent", {}, id="a1")
    assert run.status == "completed", run.error
    for where in ("outside", "inside"):
        assert set(run.result[where].values()) == {"nil"}, run.result


def test_http_crypto_and_jwt_exist_outside_run_code(p: LocalPlatform) -> None:
    """SPEC 2 lists `http`, `crypto`, `Jwt` as globals of a script; the determinism table
    removes them from run code only — a fetch handler has them."""
    resp = p.fetch("GET", "/")
    assert resp.status_code == 200
    assert json.loads(resp.body) == {"http": "table", "crypto": "table", "Jwt": "table"}


def test_http_crypto_and_jwt_captured_at_load_refuse_in_run_code(p: LocalPlatform) -> None:
    """Seed: "`http`, `crypto`, `Jwt` | absent, inside step bodies too" — a reference taken
    at a script's top level does not bring them back into run code."""
    run = p.start("captured", {}, id="c1")
    assert run.status == "completed", run.error
    assert run.result["captured"] == "table"
    for where in ("outside", "inside"):
        for name in ("http", "crypto", "Jwt"):
            message = run.result[where][name]
            assert message != "allowed", (where, name)
            assert name in message, (where, name, message)
