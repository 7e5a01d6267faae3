"""Issue 24.2 on AWS: a cancel whose process dies part-way through the cascade of a parent
with awaiting children (1,000 locally in test_crash.py; 100 here, each cancel being several
requests to the moto server) (DynamoDB on moto, through AwsPlatform) is finished by the
reconciler, a minute later, from the cancel's intent in the table.

The death is the process's end as the store sees it: an exception no code catches, raised
from the observer right after the first child's cancel committed (the same point at which
runtime/platform/faults.py SIGKILLs a local process), so nothing of the cascade after it
runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.core.clock import now_ms
from runtime.testing import AwsPlatform
from tests.cancel.trees import fan, statuses

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "cancel_cascade"
CHILDREN = 100


class Died(BaseException):
    """The cancelling process ended here."""


class DiesAfter:
    def __init__(self, inner: Any, cancels: int) -> None:
        self.inner, self.left = inner, cancels

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def cancelled(self, run_id: str, workflow: str) -> None:
        self.inner.cancelled(run_id, workflow)
        self.left -= 1
        if self.left == 0:
            raise Died(run_id)


@pytest.fixture
def p(tmp_path: Path) -> Iterator[AwsPlatform]:
    with AwsPlatform(PROJECT, data_dir=tmp_path / "data") as platform:
        yield platform


def test_the_reconciler_finishes_a_cascade_whose_process_died(p: AwsPlatform) -> None:
    store = p.platform.store
    ids = fan(store, "par", CHILDREN, at=p.now)
    p.platform.observer, kept = DiesAfter(p.platform.observer, 2), p.platform.observer
    with pytest.raises(Died):
        p.platform.cancel("par")
    p.platform.observer = kept
    assert store.pending_cancels() == ["par"]
    assert statuses(store, ids) == {"cancelled": 2, "awaiting": CHILDREN - 1}
    p._move_clock(now_ms(p._clock) + 61_000)  # a minute on: the intent is taken for orphaned
    p.reconcile()
    assert store.pending_cancels() == []
    assert statuses(store, ids) == {"cancelled": CHILDREN + 1}
