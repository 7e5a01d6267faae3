"""Store backends for the contract suite: every test here runs against each of them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.store.base import Store
from runtime.store.sqlite import SQLiteStore

BACKENDS = ["sqlite"]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        s: Store = SQLiteStore(tmp_path / "store.sqlite")
    else:  # pragma: no cover - backends are added above
        raise AssertionError(request.param)
    yield s
    s.close()
