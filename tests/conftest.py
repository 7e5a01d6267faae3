from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

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
