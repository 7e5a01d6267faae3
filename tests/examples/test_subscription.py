"""examples/subscription: a 24-month subscription that continues as new each month (issue
27.3), through its own Lua tests, and its routes through both harnesses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.dev.luatest import run_tests
from runtime.testing import AwsPlatform, LocalPlatform

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "subscription"


@pytest.fixture(params=["local", "aws"])
def p(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LocalPlatform]:
    harness = {"local": LocalPlatform, "aws": AwsPlatform}[request.param]
    with harness(EXAMPLE, data_dir=tmp_path / "data") as platform:
        yield platform


def test_the_examples_own_lua_tests_pass() -> None:
    report = run_tests(EXAMPLE)
    assert report.outcomes and not report.failed, [(o.name, o.error) for o in report.failed]


def test_the_cancel_route_reaches_a_later_generation(p: LocalPlatform) -> None:
    assert p.fetch("POST", "/subs/cy").status_code == 202
    p.advance("30d")
    shown = json.loads(p.fetch("GET", "/subs/cy").body)
    assert shown["generation"] == 2 and shown["earlier"] == 1
    assert p.fetch("POST", "/subs/cy/cancel").status_code == 202
    done = json.loads(p.fetch("GET", "/subs/cy").body)
    assert done["status"] == "completed"
    assert done["result"] == {"customer": "cy", "months_billed": 2, "ended_by": "cancel"}
