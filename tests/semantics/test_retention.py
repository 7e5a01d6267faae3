"""Retention (``[runs] retention`` in lunaflow.toml, 30 days by default): a completed or
cancelled run is deleted whole once the retention has passed since its end, and its id then
names no run until a start uses it again. A child whose parent is still in flight is kept
for the parent to read. Both harnesses (on AWS the reconciler deletes, locally the worker
loop)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.core.journal import Status
from runtime.errors import NoSuchRun

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "retention"


@pytest.fixture
def p(harness: Any, tmp_path: Path) -> Iterator[Any]:
    with harness(PROJECT, data_dir=tmp_path) as plat:
        yield plat


def test_a_completed_run_is_kept_for_its_retention_then_deleted_and_its_id_starts_a_new_run(p: Any) -> None:
    first = p.start("greet", {"name": "ada"}, id="g-1")
    assert first.status == Status.COMPLETED and first.result == {"hello": "ada", "run": 1}
    p.advance("47h")
    assert p.get("g-1").result == {"hello": "ada", "run": 1}
    joined = p.start("greet", {"name": "bob"}, id="g-1")  # joins while kept
    assert joined.result == {"hello": "ada", "run": 1}
    p.advance("2h")
    with pytest.raises(NoSuchRun):
        p.get("g-1")
    with pytest.raises(NoSuchRun):
        p.journal("g-1")
    assert "g-1" not in [r.id for r in p.runs()]
    again = p.start("greet", {"name": "bob"}, id="g-1")
    assert again.status == Status.COMPLETED and again.result == {"hello": "bob", "run": 2}
    assert [e.kind.value for e in p.journal("g-1")][0] == "run.started" and len(p.journal("g-1")) == 4


def test_a_run_of_many_steps_is_kept_for_its_retention_then_deleted_whole(p: Any) -> None:
    """A long journal (on AWS, several chunks, which the end gives their expiry one by one)
    reads whole until the retention is over, and nothing of it is part of the id's next run."""
    first = p.start("many", {"n": 40, "tag": "old"}, id="m-1")
    assert first.result == {"total": 820, "tag": "old"}
    p.advance("47h")
    assert len(p.journal("m-1")) == 82 and p.get("m-1").result == {"total": 820, "tag": "old"}
    p.advance("2h")
    with pytest.raises(NoSuchRun):
        p.journal("m-1")
    again = p.start("many", {"n": 2, "tag": "new"}, id="m-1")
    assert again.result == {"total": 3, "tag": "new"}
    assert len(p.journal("m-1")) == 6 and p.journal("m-1")[-1].data["result"] == {"total": 3, "tag": "new"}


def test_a_child_ended_long_ago_is_kept_until_its_parent_reads_it(p: Any) -> None:
    p.start("late-reader", {"child_id": "kid-1"}, id="reader-1")
    assert p.get("kid-1").status == Status.COMPLETED
    p.advance("5d")  # past the child's retention, with its parent still awaiting
    assert p.get("kid-1").status == Status.COMPLETED
    p.signal("reader-1", "go")
    assert p.get("reader-1").result == {"hello": "child", "run": 1}
    p.advance("3d")  # the parent's retention, and the child's put-off day, are over
    for gone in ("reader-1", "kid-1"):
        with pytest.raises(NoSuchRun):
            p.get(gone)


def test_a_signal_to_an_expired_run_is_refused_as_to_a_missing_one(p: Any) -> None:
    p.start("waiter", None, id="w-1")
    assert p.signal("w-1", "go", 1) is True
    assert p.signal("w-1", "late", 2) is False  # ended: set aside, and kept with the run
    p.advance("49h")
    with pytest.raises(NoSuchRun):
        p.signal("w-1", "later", 3)


def test_a_cancelled_run_is_deleted_after_its_retention_with_the_child_it_ended(p: Any) -> None:
    p.start("late-reader", {"child_id": "kid-2"}, id="reader-2")
    p.cancel("reader-2")
    assert p.get("reader-2").status == Status.CANCELLED
    p.advance("49h")
    for gone in ("reader-2", "kid-2"):
        with pytest.raises(NoSuchRun):
            p.get(gone)


def test_a_parent_that_ended_before_its_child_is_kept_until_the_child_is_gone(p: Any) -> None:
    """The child's end wakes its parent, and a new run of the parent's id would join the old
    child (child ids derive from the parent's): the parent goes after its children."""
    p.start("impatient", {"child_id": "late-kid"}, id="imp-1")
    p.advance("2h")
    assert p.get("imp-1").result == {"waited": False}
    assert p.get("late-kid").status == Status.AWAITING
    p.advance("5d")  # past the parent's retention, with its child in flight
    assert p.get("imp-1").status == Status.COMPLETED
    assert p.signal("late-kid", "go", 7) is True
    assert p.get("late-kid").result == {"input": "kid", "got": 7}
    p.advance("4d")  # the child's retention, then the parent's day put off
    for gone in ("late-kid", "imp-1"):
        with pytest.raises(NoSuchRun):
            p.get(gone)
