"""Acceptance: ``kv "namespace"`` — ``:get(k)``, ``:put(k, v, { ttl = "1h" })``, ``:delete(k)``,
``:list({ prefix = "a", limit = 100 })`` (SPEC section 2), on the local backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.testing import LocalPlatform

from . import call, error, project, value


@pytest.fixture
def p(tmp_path: Path) -> Iterator[LocalPlatform]:
    with LocalPlatform(project("svc_kv"), data_dir=tmp_path) as plat:
        yield plat


def kv(p: LocalPlatform, op: str, *args: Any, ns: str = "cache") -> Any:
    return value(p, ns=ns, op=op, args=list(args), n=len(args))


def listed(p: LocalPlatform, opts: dict[str, Any] | None = None, ns: str = "cache") -> list[Any]:
    out = kv(p, "list", opts or {}, ns=ns)
    return [] if out == {} else out  # an empty Lua table encodes as {}


def test_put_then_get_returns_the_value(p: LocalPlatform) -> None:
    """SPEC 2: kv ":get(k)", ":put(k, v)" — JSON-like values come back as they went in."""
    stored = {"name": "ada", "tags": ["a", "b"], "n": 3, "ratio": 2.5, "ok": True}
    kv(p, "put", "user:ada", stored)
    assert kv(p, "get", "user:ada") == stored
    kv(p, "put", "count", 41)
    out = call(p, op="get", args=["count"], n=1)
    assert out["value"] == 41 and out["number"] == "integer"  # integers stay integers


def test_get_of_a_missing_key_is_nil(p: LocalPlatform) -> None:
    out = call(p, op="get", args=["never-put"], n=1)
    assert out == {"ok": True, "type": "nil"}


def test_put_overwrites(p: LocalPlatform) -> None:
    kv(p, "put", "k", "one")
    kv(p, "put", "k", "two")
    assert kv(p, "get", "k") == "two"
    assert [e["key"] for e in listed(p)] == ["k"]


def test_delete_removes_the_key(p: LocalPlatform) -> None:
    """SPEC 2: kv ":delete(k)"."""
    kv(p, "put", "k", "v")
    kv(p, "delete", "k")
    assert call(p, op="get", args=["k"], n=1)["type"] == "nil"
    assert listed(p) == []
    kv(p, "delete", "k")  # deleting a missing key is not an error


def test_put_of_nil_deletes_the_key(p: LocalPlatform) -> None:
    kv(p, "put", "k", "v")
    kv(p, "put", "k", None)
    assert call(p, op="get", args=["k"], n=1)["type"] == "nil"
    assert listed(p) == []


def test_values_survive_a_restart(p: LocalPlatform) -> None:
    kv(p, "put", "durable", {"x": 1})
    p.restart()
    assert kv(p, "get", "durable") == {"x": 1}


def test_list_returns_keys_and_values_in_key_order(p: LocalPlatform) -> None:
    """SPEC 2: kv ":list({ prefix = "a", limit = 100 })"."""
    for k in ["b2", "a2", "b1", "a1", "c"]:
        kv(p, "put", k, k.upper())
    assert listed(p) == [
        {"key": "a1", "value": "A1"},
        {"key": "a2", "value": "A2"},
        {"key": "b1", "value": "B1"},
        {"key": "b2", "value": "B2"},
        {"key": "c", "value": "C"},
    ]


def test_list_filters_by_prefix(p: LocalPlatform) -> None:
    for k in ["user_1", "user_2", "userX", "user", "other"]:
        kv(p, "put", k, 1)
    assert [e["key"] for e in listed(p, {"prefix": "user_"})] == ["user_1", "user_2"]
    assert [e["key"] for e in listed(p, {"prefix": "user"})] == ["user", "userX", "user_1", "user_2"]
    assert listed(p, {"prefix": "zzz"}) == []


def test_list_honours_limit(p: LocalPlatform) -> None:
    for i in range(5):
        kv(p, "put", f"k{i}", i)
    assert [e["key"] for e in listed(p, {"limit": 2})] == ["k0", "k1"]
    assert [e["key"] for e in listed(p, {"prefix": "k", "limit": 3})] == ["k0", "k1", "k2"]


def test_namespaces_are_separate(p: LocalPlatform) -> None:
    kv(p, "put", "shared", "in cache")
    kv(p, "put", "shared", "in other", ns="other")
    assert kv(p, "get", "shared") == "in cache"
    assert kv(p, "get", "shared", ns="other") == "in other"
    kv(p, "delete", "shared", ns="other")
    assert kv(p, "get", "shared") == "in cache"


def test_a_ttl_expires_the_key_on_the_platform_clock(p: LocalPlatform) -> None:
    """SPEC 2: kv ":put(k, v, { ttl = "1h" })" — the key lives for the ttl, measured on the
    platform's clock (p.advance)."""
    kv(p, "put", "session", "token", {"ttl": "1h"})
    kv(p, "put", "forever", "stays")
    p.advance("59m")
    assert kv(p, "get", "session") == "token"
    assert [e["key"] for e in listed(p)] == ["forever", "session"]
    p.advance("2m")
    assert call(p, op="get", args=["session"], n=1)["type"] == "nil"
    assert [e["key"] for e in listed(p)] == ["forever"]
    assert kv(p, "get", "forever") == "stays"


def test_a_put_without_ttl_clears_an_earlier_ttl(p: LocalPlatform) -> None:
    kv(p, "put", "k", "short", {"ttl": "10s"})
    kv(p, "put", "k", "long")
    p.advance("1h")
    assert kv(p, "get", "k") == "long"


def test_a_ttl_may_be_a_number_of_seconds(p: LocalPlatform) -> None:
    """SPEC 3: a duration is a string "or a number of seconds"."""
    kv(p, "put", "k", "v", {"ttl": 30})
    p.advance("29s")
    assert kv(p, "get", "k") == "v"
    p.advance("2s")
    assert call(p, op="get", args=["k"], n=1)["type"] == "nil"


@pytest.mark.parametrize("ttl", ["soon", "-1s", "1 hour", True])
def test_a_bad_ttl_is_refused_with_the_duration_message(p: LocalPlatform, ttl: Any) -> None:
    """SPEC 3: durations that are not `<number><unit>...` are "refused with the bad value in
    the message"."""
    e = error(p, op="put", args=["k", "v", {"ttl": ttl}], n=3)
    shown = f'"{ttl}"' if isinstance(ttl, str) else repr(ttl)
    assert f"bad duration {shown} for the ttl of kv 'cache':put" in e
    assert call(p, op="get", args=["k"], n=1)["type"] == "nil"


def test_an_empty_key_is_refused(p: LocalPlatform) -> None:
    e = error(p, op="get", args=[""], n=1)
    assert "kv 'cache':get" in e and "non-empty string key" in e


def test_kv_calls_inside_steps_are_allowed(p: LocalPlatform) -> None:
    run = p.start("kv-steps", {"key": "from-run", "value": [1, 2]}, id="kv-steps")
    assert run.status == "completed", run.error
    assert run.result == [1, 2]
    assert kv(p, "get", "from-run") == [1, 2]


@pytest.mark.parametrize("op", ["get", "put", "delete", "list"])
def test_kv_calls_outside_a_step_are_refused_in_run_code(p: LocalPlatform, op: str) -> None:
    """SPEC 3: outside a step, kv calls are "refused: `kv:put is an effect and belongs inside
    wf:step`"."""
    run = p.start("kv-outside", {"op": op}, id=f"kv-outside-{op}")
    assert run.status == "completed", run.error
    assert run.result["ok"] is False
    assert run.result["error"].endswith(f"kv:{op} is an effect and belongs inside wf:step")
    assert listed(p) == []
