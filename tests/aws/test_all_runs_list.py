"""Issue 31.2 ("Indexes"): a new run is written to no all-runs index.

Before stop 47 every run item carried ``all_pk``, an entry of the ``all_runs`` index put at
the run's start and deleted at its expiry: 2 index WRU a run, for the list of every run.
Every run is also under exactly one partition of the status index (live, failed, completed,
cancelled, or an in-flight status older code wrote), so that list now merges those
partitions, each shard's first page asked for at once. Runs older code wrote carry both
entries, and are listed once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.testing import AwsPlatform
from tests.support.aws_items import run_item
from tests.support.older_layout import written_by_older_code

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "aws_statuses"


@pytest.fixture
def p() -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT) as platform:
        yield platform


def all_runs_entries(p: AwsPlatform) -> list[str]:
    items = p.clients.dynamodb.scan(TableName=p.config.table, IndexName="all_runs")["Items"]
    return sorted(item["pk"]["S"].removeprefix("RUN#") for item in items)


def test_a_new_run_is_written_to_no_all_runs_index(p: AwsPlatform) -> None:
    p.start("wait", "abc", id="w1")
    assert p.signal("w1", "go", 1) is True
    assert p.get("w1").status == "completed"
    assert "all_pk" not in run_item(p, "w1")
    assert all_runs_entries(p) == []


def test_a_list_of_every_run_lists_each_status_and_older_runs_once_newest_first(p: AwsPlatform) -> None:
    with written_by_older_code():
        p.start("wait", "ab", id="old-wait")  # awaiting, under STATUS#awaiting and #RUNS
        p.advance("1s")
        p.start("wait", "ab", id="old-done")
        assert p.signal("old-done", "go", 1) is True
        p.advance("1s")
    assert all_runs_entries(p) == ["old-done", "old-wait"]
    p.restart()  # the new code
    p.start("nap", None, id="new-nap")
    p.advance("1s")
    assert p.start("boom", None, id="new-boom").status == "failed"
    p.advance("1s")
    p.start("wait", "x", id="new-done")
    assert p.signal("new-done", "go", 1) is True
    p.advance("1s")
    p.start("wait", "x", id="new-cancelled")
    p.cancel("new-cancelled")
    p.advance("1s")
    p.start("wait", "x", id="new-wait")
    statuses = {r.id: r.status for r in p.runs()}
    assert list(statuses) == [
        "new-wait",
        "new-cancelled",
        "new-done",
        "new-boom",
        "new-nap",
        "old-done",
        "old-wait",
    ]
    assert statuses == {
        "new-wait": "awaiting",
        "new-cancelled": "cancelled",
        "new-done": "completed",
        "new-boom": "failed",
        "new-nap": "sleeping",
        "old-done": "completed",
        "old-wait": "awaiting",
    }
    store = p.runtime.store
    assert [r.id for r in store.list_runs(limit=3)] == ["new-wait", "new-cancelled", "new-done"]
    assert [r.id for r in p.runs(workflow="wait")] == [
        "new-wait",
        "new-cancelled",
        "new-done",
        "old-done",
        "old-wait",
    ]
    # The older run, moved to the live partition by nothing yet, is still listed once after
    # its end moves it (its all-runs entry stays until its expiry).
    assert p.signal("old-wait", "go", 2) is True
    assert [r.id for r in p.runs()][-2:] == ["old-done", "old-wait"]
    assert all_runs_entries(p) == ["old-done", "old-wait"]


def test_a_list_of_every_run_takes_the_newest_across_partitions_and_shards(p: AwsPlatform) -> None:
    ids = []
    for i in range(40):
        run_id = f"r{i:02d}"
        workflow = ("wait", "nap", "boom")[i % 3]
        p.start(workflow, "x" if workflow == "wait" else None, id=run_id)
        if i % 6 == 0:
            assert p.signal(run_id, "go", i) is True  # completed
        ids.append(run_id)
        p.advance("1s")
    newest = list(reversed(ids))
    assert [r.id for r in p.runtime.store.list_runs(limit=25)] == newest[:25]
    assert [r.id for r in p.runs()] == newest
