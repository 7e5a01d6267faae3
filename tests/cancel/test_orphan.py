"""Issue 24.2: "no live child of a cancelled run, ever". A start checks its parent after
writing the child; a process that dies between the two leaves a child written under a
cancelled parent, which nothing then cancels. Its first activation does: it finds the
parent cancelled and cancels the child before any of its code runs. Both harnesses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.core.journal import Entry, Kind, Status
from runtime.store.base import RunRecord
from runtime.testing import AwsPlatform, LocalPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "cancel_cascade"
HARNESSES: dict[str, Any] = {"local": LocalPlatform, "aws": AwsPlatform}


@pytest.mark.parametrize("kind", sorted(HARNESSES))
def test_a_child_written_under_a_cancelled_parent_is_cancelled_by_its_first_activation(
    kind: str, tmp_path: Path
) -> None:
    with HARNESSES[kind](PROJECT, data_dir=tmp_path / "data") as p:
        p.start("leaf", None, id="parent")
        p.cancel("parent")
        # What a start that died after its write leaves: the child, woken, unchecked.
        at = p.now
        child = RunRecord(
            id="late", workflow="leaf", status=Status.RUNNING, input=None, parent_id="parent", created_at=at
        )
        p.platform.store.create_run(child, Entry(1, Kind.STARTED, "leaf", {"format": 1, "input": None}, at))
        p.platform.wakes.prompt("late")
        p.settle()
        assert p.get("late").status == Status.CANCELLED
        assert [e.kind for e in p.journal("late")] == [Kind.STARTED, Kind.CANCELLED]
