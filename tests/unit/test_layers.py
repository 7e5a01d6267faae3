"""The layering of runtime/ (docs/architecture.md, "The folders"): no module imports one of
a higher layer, peers do not import each other, and the replay core imports nothing of
ours but errors. Every import counts, those inside functions too (a lazy import is still
a dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Bottom up. Packages on one floor are peers: neither may import the other.
FLOORS: list[tuple[str, ...]] = [
    ("runtime.errors",),
    ("runtime.core",),
    ("runtime.store", "runtime.services"),
    ("runtime.engine",),
    ("runtime.platform",),
    ("runtime.console",),
    ("runtime.dev", "runtime.aws"),
    ("runtime.testing",),
    ("runtime.cli", "functions"),
]


def floor_of(module: str) -> tuple[int, str] | None:
    if module == "runtime" or module == "runtime.__version__":
        return 0, "runtime"  # the package face: its docstring and version
    for level, group in enumerate(FLOORS):
        for package in group:
            if module == package or module.startswith(package + "."):
                return level, package
    return None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import of ours in the file, resolved to absolute names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else module_name(path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from runtime.core import values` imports runtime.core.values.
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if name.split(".")[0] in ("runtime", "functions", "infra")]


SOURCES = sorted([*(ROOT / "runtime").rglob("*.py"), *(ROOT / "functions").rglob("*.py")])


def test_every_module_of_runtime_has_a_floor() -> None:
    orphans = [module_name(p) for p in SOURCES if floor_of(module_name(p)) is None]
    assert orphans == [], "add these modules' packages to FLOORS (and to docs/architecture.md)"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_import_runs_up_or_across(path: Path) -> None:
    here = floor_of(module_name(path))
    assert here is not None
    level, package = here
    wrong = []
    for line, name in imports_of(path):
        if name.startswith("infra"):
            wrong.append(f"line {line}: {name} (the runtime never imports the CDK app)")
            continue
        there = floor_of(name)
        if there is None:
            continue  # a name imported from a package face, e.g. `from runtime import __version__`
        their_level, their_package = there
        if their_level > level:
            wrong.append(f"line {line}: {name} is on floor {their_level}, above this module's {level}")
        elif their_level == level and their_package != package:
            wrong.append(f"line {line}: {name} is a peer ({their_package}) of {package}")
    assert wrong == []


def test_the_replay_core_imports_nothing_of_ours_but_errors_and_itself() -> None:
    for path in sorted((ROOT / "runtime" / "core").rglob("*.py")):
        for line, name in imports_of(path):
            assert name.startswith(("runtime.core", "runtime.errors")), f"{path.name}:{line} imports {name}"


def test_the_replay_core_does_no_io() -> None:
    """No store, network, file or process module in the pure core."""
    banned = {"sqlite3", "boto3", "botocore", "socket", "urllib", "subprocess", "os", "lupa", "threading"}
    for path in sorted((ROOT / "runtime" / "core").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                assert name.split(".")[0] not in banned, f"{path.name}:{node.lineno} imports {name}"
