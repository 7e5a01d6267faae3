"""The DynamoDB item layout of code before issue 31's status index, for upgrade tests.

Before, a run's ``status_pk`` was ``STATUS#<status>`` for every status (so each move between
running, sleeping and awaiting moved its index entry) and every summary rewrote
``updated_at`` (which the status index carries). Those are the only two things the older
code wrote differently, so patching them in the append module makes the current code write
what it wrote, and a test can then check that the current code reads, lists, heals and
advances such items.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from runtime.store import dynamodb_append


def _old_partition(status: str) -> str:
    return f"STATUS#{status}"


@contextmanager
def written_by_older_code() -> Iterator[None]:
    """Within the block, DynamoDB stores write the older layout (other stores: no change)."""
    with pytest.MonkeyPatch.context() as older:
        older.setattr(dynamodb_append, "status_partition", _old_partition)
        older.setattr(dynamodb_append, "CHANGED_AT", "updated_at")
        yield
