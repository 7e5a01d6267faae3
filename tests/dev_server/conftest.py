"""Fixtures the ``lunaflow dev`` process tests share: servers killed at the end of each
test, a data folder read in this process, and a slow loopback upstream."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.devserver import Servers
from tests.support.stress import Folder, SlowUpstream, dev_servers, slow_upstream


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    with dev_servers(tmp_path) as s:
        yield s


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Folder]:
    f = Folder(tmp_path / "data")
    try:
        yield f
    finally:
        f.close()


@pytest.fixture
def upstream() -> Iterator[SlowUpstream]:
    with slow_upstream() as u:
        yield u
