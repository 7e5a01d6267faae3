"""The DynamoDB item layout of code before issue 31's status index, for upgrade tests.

Before, a run's ``status_pk`` was ``STATUS#<status>`` for every status (so each move between
running, sleeping and awaiting moved its index entry), every summary rewrote ``updated_at``
(which the status index carries), and every run item carried ``all_pk`` (the ``all_runs``
index; until stop 47). Those are the only things the older code wrote differently in the
run item, so patching them in the append module makes the current code write what it
wrote, and a test can then check that the current code reads, lists, heals and advances
such items.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from runtime.store import dynamodb_append
from runtime.store.base import RunRecord
from runtime.store.dynamodb_layout import ALL_RUNS, sharded
from runtime.store.items import s


def _old_partition(status: str) -> str:
    return f"STATUS#{status}"


_run_item = dynamodb_append.Appends._run_item


def _with_all_runs_entry(self: dynamodb_append.Appends, run: RunRecord) -> dict[str, Any]:
    return {**_run_item(self, run), "all_pk": s(sharded(ALL_RUNS, run.id))}


@contextmanager
def written_by_older_code() -> Iterator[None]:
    """Within the block, DynamoDB stores write the older layout (other stores: no change)."""
    with pytest.MonkeyPatch.context() as older:
        older.setattr(dynamodb_append, "status_partition", _old_partition)
        older.setattr(dynamodb_append, "CHANGED_AT", "updated_at")
        older.setattr(dynamodb_append.Appends, "_run_item", _with_all_runs_entry)
        yield
