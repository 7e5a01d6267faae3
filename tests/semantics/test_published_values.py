"""Values a run publishes (issue 28.2) and finding runs by them (28.3), on both harnesses:
``wf:set`` is journaled like every decision, the latest value per key is kept beside the run
and read without running its code (``p.values``, ``run:value`` in a script), and runs are
found through the store's index of values (``p.find("month>=3")``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.core.bounds import MAX_PUBLISHED_KEYS
from runtime.core.journal import Kind
from runtime.core.published import parse_where
from runtime.errors import NoSuchRun
from runtime.testing import LocalPlatform

PROJECTS = Path(__file__).resolve().parents[1] / "projects"
PROJECT = PROJECTS / "published"


@pytest.fixture
def p(harness: Any, tmp_path: Path) -> Iterator[Any]:
    with harness(PROJECT, data_dir=tmp_path) as plat:
        yield plat


def test_the_latest_value_per_key_is_read_without_the_code(p: LocalPlatform) -> None:
    p.start("subscription", {"plan": "gold", "months": 3}, id="sub-1")
    assert p.values("sub-1") == {"plan": "gold", "month": 1}
    p.signal("sub-1", "renewed")
    assert p.values("sub-1") == {"plan": "gold", "month": 2}
    sets = [(e.name, e.data["value"]) for e in p.journal("sub-1") if e.kind == Kind.VALUE_SET]
    assert sets == [("plan", "gold"), ("month", 1), ("month", 2)]
    p.signal("sub-1", "renewed")
    p.signal("sub-1", "renewed")
    assert p.get("sub-1").status == "completed"
    assert p.values("sub-1") == {"plan": "gold", "month": 3, "done": True}


def test_a_script_reads_a_runs_values_through_its_handle(p: LocalPlatform) -> None:
    p.start("subscription", {"plan": "gold", "months": 3}, id="sub-2")
    p.signal("sub-2", "renewed")
    one = p.fetch("GET", "/v", query={"id": "sub-2", "key": "month"})
    assert json.loads(one.body) == {"value": 2}
    missing = p.fetch("GET", "/v", query={"id": "sub-2", "key": "nope"})
    assert json.loads(missing.body) == {}
    assert json.loads(p.fetch("GET", "/v", query={"id": "sub-2"}).body) == {"plan": "gold", "month": 2}


def test_values_survive_a_restart_and_replay_gives_the_same(p: LocalPlatform) -> None:
    p.start("subscription", {"plan": "basic", "months": 2}, id="sub-3")
    p.restart()
    p.signal("sub-3", "renewed")  # a cold replay passes the first wf:set calls, recording none again
    assert p.values("sub-3") == {"plan": "basic", "month": 2}
    assert sum(e.kind == Kind.VALUE_SET for e in p.journal("sub-3")) == 3


def test_code_that_publishes_another_value_diverges(p: LocalPlatform) -> None:
    p.start("subscription", {"plan": "basic", "months": 2}, id="sub-4")
    p.deploy(PROJECTS / "published_v2")
    p.signal("sub-4", "renewed")
    run = p.get("sub-4")
    assert run.status == "failed"
    assert run.error == "journal divergence: expected wf:set('month', 1), code reached wf:set('month', 0)"


def test_runs_are_found_by_a_value_and_by_a_number_range(p: LocalPlatform) -> None:
    for n in range(1, 6):
        p.start("subscription", {"plan": "gold" if n % 2 else "basic", "months": 9}, id=f"s-{n}")
        for _ in range(n - 1):
            p.signal(f"s-{n}", "renewed")
    assert [r.id for r in p.find("month=3")] == ["s-3"]
    assert [r.id for r in p.find("month>=3")] == ["s-5", "s-4", "s-3"]
    assert [r.id for r in p.find("month>3")] == ["s-5", "s-4"]
    assert [r.id for r in p.find("month<2")] == ["s-1"]
    assert [r.id for r in p.find("month<=2")] == ["s-2", "s-1"]
    assert [r.id for r in p.find("plan=gold")] == ["s-5", "s-3", "s-1"]
    assert [r.id for r in p.find("plan!=gold")] == ["s-4", "s-2"]
    assert [r.id for r in p.find("month=3", workflow="probe")] == []
    assert p.find("nokey=1") == []


def test_a_boolean_is_found_as_a_boolean(p: LocalPlatform) -> None:
    p.start("subscription", {"plan": "x", "months": 0}, id="b-1")
    p.start("probe", {"key": "done", "value": 1}, id="b-2")
    assert [r.id for r in p.find("done=true")] == ["b-1"]
    assert [r.id for r in p.find("done=1")] == ["b-2"]


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "bad key",
            1,
            "wf:set: key 'bad key' is not allowed: a key is a letter or underscore then letters, digits, "
            "'_', '.' or '-', at most 64 bytes, so a search can name it (--where key=value); name it like "
            "'month' or 'sale.state'",
        ),
        (
            "k" * 65,
            1,
            f"wf:set: key {'k' * 60!r} is not allowed: a key is a letter or underscore then letters, digits, "
            "'_', '.' or '-', at most 64 bytes, so a search can name it (--where key=value); name it like "
            "'month' or 'sale.state'",
        ),
        (
            "note",
            "x" * 257,
            "wf:set('note', ...): the value is 257 bytes, over the limit of 256 bytes of a published "
            "string; publish a short label or an id, and keep the data elsewhere (a step's result, a "
            "database row)",
        ),
        (
            "sale",
            {"a": 1},
            "wf:set('sale', ...): the value is a table; a published value is a string, a number or a "
            "boolean (what a search compares) — publish one field, e.g. wf:set('state', sale.state)",
        ),
    ],
)
def test_a_refused_value_raises_into_the_code_and_records_nothing(
    p: LocalPlatform, key: str, value: Any, message: str
) -> None:
    run = p.start("probe", {"key": key, "value": value}, id="probe-1")
    assert run.status == "completed"
    assert run.result["ok"] is False
    assert message in run.result["err"]
    assert p.values("probe-1") == {}
    assert not [e for e in p.journal("probe-1") if e.kind == Kind.VALUE_SET]


def test_a_run_publishes_at_most_its_keys(p: LocalPlatform) -> None:
    run = p.start("probe", {"key": "first", "value": 0, "many": MAX_PUBLISHED_KEYS + 5}, id="probe-2")
    assert run.result["ok"] is False
    assert run.result["err"].endswith(
        f"run 'probe-2' cannot publish key 'k{MAX_PUBLISHED_KEYS}': it already published "
        f"{MAX_PUBLISHED_KEYS} keys, the most a run may; set the keys it has again, or publish fewer"
    )
    assert len(p.values("probe-2")) == MAX_PUBLISHED_KEYS


def test_wf_set_inside_a_step_body_is_refused(p: LocalPlatform) -> None:
    run = p.start("in-step", None, id="in-step-1")
    assert run.status == "failed"
    assert "wf:set was called inside step 's'" in (run.error or "")


def test_values_of_a_missing_run_are_refused(p: LocalPlatform) -> None:
    with pytest.raises(NoSuchRun, match="no run .nope."):
        p.values("nope")


def test_a_status_and_a_workflow_narrow_the_lookup_not_a_page_cut_before_them(p: LocalPlatform) -> None:
    """Three completed probes published ``month`` first, then newer subscriptions (awaiting)
    the same values: asked for two completed runs, the lookup gives two, not the completed
    ones among the two newest holders of the value (none)."""
    for n in (1, 2, 3):
        p.start("probe", {"key": "month", "value": n}, id=f"done-{n}")
        p.advance("1s")
    for n in (1, 2, 3):
        p.start("subscription", {"plan": "gold", "months": 9}, id=f"live-{n}")
        p.advance("1s")
    assert [p.get(f"done-{n}").status for n in (1, 2, 3)] == ["completed"] * 3

    def find(where: str, **narrowed: Any) -> list[str]:
        return [r.id for r in p.platform.find(parse_where(where), **narrowed)]

    assert find("month>=1", status="completed", limit=2) == ["done-3", "done-2"]
    assert find("month>=1", workflow="probe", limit=2) == ["done-3", "done-2"]
    assert find("month=1", status="completed", limit=1) == ["done-1"]
    assert find("month=1", workflow="probe", limit=1) == ["done-1"]
    assert find("month=1", status="awaiting", limit=5) == ["live-3", "live-2", "live-1"]
    assert find("month>=1", status="failed", limit=2) == []
