"""examples/saga through both harnesses (LocalPlatform, AwsPlatform) and its own Lua tests:
a trip booked over three services in a loop of steps; a reservation that fails for good is
raised into the workflow (catch = true) and what was held is released, newest first."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.dev.luatest import run_tests
from runtime.testing import AwsPlatform, LocalPlatform

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "saga"


@pytest.fixture(params=["local", "aws"])
def p(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LocalPlatform]:
    harness = {"local": LocalPlatform, "aws": AwsPlatform}[request.param]
    with harness(EXAMPLE, data_dir=tmp_path / "data") as platform:
        yield platform


def _book(p: LocalPlatform, trip: dict[str, Any]) -> dict[str, Any]:
    r = p.fetch("POST", "/api/trips", body=json.dumps(trip))
    assert r.status_code == 202, r
    got: dict[str, Any] = json.loads(p.fetch("GET", f"/api/trips/{trip['id']}").body)
    return got


def _holds(p: LocalPlatform) -> dict[str, Any]:
    return dict(json.loads(p.fetch("GET", "/api/holds").body))


def test_the_examples_own_lua_tests_pass() -> None:
    report = run_tests(EXAMPLE)
    assert report.outcomes and not report.failed, [(o.name, o.error) for o in report.failed]


def test_a_trip_is_booked(p: LocalPlatform) -> None:
    trip = _book(p, {"id": "t1"})
    assert trip["status"] == "completed"
    assert trip["result"]["outcome"] == "booked"


def test_a_sold_out_service_is_compensated_once_per_step_even_across_a_restart(p: LocalPlatform) -> None:
    trip = _book(p, {"id": "t2", "sold_out": "car"})
    assert trip["result"] == {
        "outcome": "cancelled",
        "failed": "reserve-car",
        "reason": "no car left for trip t2",
        "attempts": 1,
        "released": 2,
    }
    before = [e.as_dict() for e in p.journal("trip-t2")]
    p.restart()
    p.settle()
    assert [e.as_dict() for e in p.journal("trip-t2")] == before  # replay raises, runs nothing
    holds = _holds(p)
    assert {k: v["state"] for k, v in holds["flight"].items()} == {"trip-t2/reserve-flight/1/1": "released"}
    assert {k: v["state"] for k, v in holds["hotel"].items()} == {"trip-t2/reserve-hotel/1/1": "released"}
    kinds = [(e.kind, e.name) for e in p.journal("trip-t2")]
    assert ("step.raised", "reserve-car") in kinds
    released = [n for k, n in kinds if k == "step.result" and (n or "").startswith("release-")]
    assert released == ["release-hotel", "release-flight"]
