from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.devserver import Servers

PROJECTS = Path(__file__).parent / "projects"


@pytest.fixture
def make_project(tmp_path: Path) -> Callable[..., Path]:
    """Write a throwaway project: make_project({"main.lua": "..."}) -> its folder."""
    counter = 0

    def make(files: dict[str, str]) -> Path:
        nonlocal counter
        counter += 1
        root = tmp_path / f"project{counter}"
        for name, text in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        root.mkdir(exist_ok=True)
        return root

    return make


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    """``lunaflow dev`` processes for one test, killed when it ends."""
    started = Servers(tmp_path)
    try:
        yield started
    finally:
        started.close()


@pytest.fixture
def no_head(monkeypatch: pytest.MonkeyPatch) -> None:
    """New runs on DynamoDB keep no journal entries on their run items (no head,
    ``runtime.store.dynamodb_chunks.HEAD``): entries 2 on go to chunks, as they do for a run
    started before the head, one without room for it, and any run once its head is full. For
    the tests of the chunks' own rules (a crash between a chunk and its summary, a chunk's
    TTL), which a run with a head meets only past its head."""
    from runtime.store import dynamodb_append

    monkeypatch.setattr(dynamodb_append.Appends, "run_head", False)
