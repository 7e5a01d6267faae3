"""Issue 24.2: "children started after the cancel live on". A step starts 1,500 children and
its run is cancelled part-way through (from inside the step, by a stand-in the step calls
before child 750, so the cancel commits while the step is running, whatever the machine's
speed). No child of a cancelled run may be left live: the ones started before the cancel
are cancelled by its cascade, the ones started after it are cancelled at once and the start
refused. On both harnesses (SQLite in-process; the Lambda handlers over DynamoDB on moto).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.core.journal import Status
from runtime.testing import AwsPlatform, LocalPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "cancel_cascade"
# (children, the one before which the step cancels its run): on moto each start and cancel is
# several HTTP requests, so the AWS path runs a small size, cut halfway as well.
SIZES = {"local": (1_500, 750), "aws": (60, 30)}


def open_harness(kind: str, tmp_path: Path, services: dict[str, Any]) -> Any:
    if kind == "local":
        return LocalPlatform(PROJECT, data_dir=tmp_path / "data", services=services, synchronous="OFF")
    return AwsPlatform(PROJECT, data_dir=tmp_path / "data", services=services)


@pytest.mark.parametrize("kind", ["local", "aws"])
def test_a_step_starting_1500_children_cancelled_part_way_leaves_none_live(kind: str, tmp_path: Path) -> None:
    cancels: list[str] = []
    holder: dict[str, Any] = {}

    def gate(name: str, method: str, args: list[Any]) -> list[Any]:
        if method == "put" and args[0] == "cancel":
            holder["p"].platform.cancel(args[1])  # the cancel commits while the step runs
            cancels.append(args[1])
        return [None]

    with open_harness(kind, tmp_path, {"kv": gate}) as p:
        holder["p"] = p
        n, at = SIZES[kind]
        p.start("fanout", {"n": n, "at": at}, id="fan")
        assert cancels == ["fan"]
        assert p.get("fan").status == Status.CANCELLED
        children = p.platform.store.children("fan")
        statuses = {r: p.get(r).status for r in children}
        live = sorted(r for r, st in statuses.items() if st != Status.CANCELLED)
        assert live == [], f"{len(live)} children of a cancelled run are live: {live[:5]}"
        # Those before the cancel all exist; after it, each start was refused, leaving the
        # run it made cancelled (none, or one per refused start).
        assert {f"fan-{i}" for i in range(1, at)} <= set(children)
