"""`lunaflow new NAME`: a project that runs and tests from the first minute.

Issue: "`lunaflow new demo && lunaflow test demo` passes on a fresh clone."
runtime/dev/scaffold.py: "a workflow, a fetch route, a migration, a Lua test, editor types and a
.gitignore for the data folder."
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

from runtime.dev.luatest import run_tests
from runtime.dev.scaffold import scaffold
from runtime.dev.server import data_folder
from runtime.errors import InvalidInput
from runtime.testing import LocalPlatform
from tests.support import databases

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60
SCAFFOLD = {
    "main.lua",
    "routes.lua",
    "migrations/orders/001_orders.sql",
    "tests/orders_test.lua",
    "types/lunaflow.lua",
    ".luarc.json",
    ".gitignore",
    "lunaflow.toml",
}


def lunaflow(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a real process, run from outside the repository."""
    env = {k: v for k, v in os.environ.items() if k != "LUNAFLOW_PROJECT"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, "-m", "runtime.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def files_under(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_lunaflow_new_demo_then_lunaflow_test_demo_passes(tmp_path: Path) -> None:
    """Issue: "`lunaflow new demo && lunaflow test demo` passes on a fresh clone"."""
    made = lunaflow(tmp_path, "new", "demo")
    assert made.returncode == 0, made.stderr
    assert made.stdout.splitlines()[-1] == "next: lunaflow test demo && lunaflow dev demo"
    created = {
        line.removeprefix("created ") for line in made.stdout.splitlines() if line.startswith("created ")
    }
    assert {Path(c).relative_to("demo").as_posix() for c in created} == SCAFFOLD

    tested = lunaflow(tmp_path, "test", "demo")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    lines = tested.stdout.splitlines()
    assert lines[-1] == "3 passed, 0 failed"
    assert all(line.startswith("PASS orders_test.lua: ") for line in lines[:-1])
    # Testing leaves the project as it was: no data folder, nothing new.
    assert files_under(tmp_path / "demo") == SCAFFOLD


def test_the_scaffold_is_a_workflow_a_route_a_migration_a_test_types_and_a_gitignore(tmp_path: Path) -> None:
    """scaffold.py: "a workflow, a fetch route, a migration, a Lua test, editor types and a
    .gitignore for the data folder"."""
    target = tmp_path / "demo"
    scaffold(target)
    assert files_under(target) == SCAFFOLD
    main = (target / "main.lua").read_text(encoding="utf-8")
    routes = (target / "routes.lua").read_text(encoding="utf-8")
    assert 'workflow "approve-order"' in main
    assert 'database "orders" { migrations = "migrations/orders" }' in main
    assert 'on "fetch"' in routes
    assert "CREATE TABLE orders" in (target / "migrations/orders/001_orders.sql").read_text(encoding="utf-8")
    assert 'test("' in (target / "tests/orders_test.lua").read_text(encoding="utf-8")


def test_the_scaffolds_route_runs_its_workflow_on_the_migrated_database(tmp_path: Path) -> None:
    """The scaffold works as a project, not only under its own tests: POST /orders starts a
    run, POST /orders/approve signals it, and the migration made the table the steps write."""
    target = tmp_path / "demo"
    scaffold(target)
    data = tmp_path / "data"
    with LocalPlatform(target, data_dir=data) as p:
        assert p.fetch("POST", "/orders", body='{"id": "7", "item": "tea"}').status_code == 201
        assert p.get("order-7").status == "awaiting"
        assert p.fetch("POST", "/orders/approve", body='{"id": "7", "by": "ada"}').status_code == 202
        assert p.get("order-7").result == {"state": "approved", "by": "ada"}
        assert p.fetch("GET", "/nowhere").status_code == 404
    assert databases.rows(data, "orders", "SELECT id, item, state FROM orders") == [("7", "tea", "approved")]


def test_the_scaffolds_own_tests_pass_in_process(tmp_path: Path) -> None:
    target = tmp_path / "demo"
    scaffold(target)
    report = run_tests(target)
    assert [o.name for o in report.passed] == [
        "an approved order is approved",
        "an order nobody approves expires after 48 hours",
        "a bad request is a 400, an unknown order a 404",
    ]
    assert report.failed == []


def test_the_gitignore_ignores_the_data_folder_lunaflow_dev_writes(tmp_path: Path) -> None:
    """scaffold.py: "a .gitignore for the data folder" — the default one, `PROJECT/.lunaflow`
    (SPEC 5: "State lives in SQLite under DIR (default PROJECT/.lunaflow/)")."""
    target = tmp_path / "demo"
    scaffold(target)
    data = data_folder(target, None)
    with LocalPlatform(target, data_dir=data) as p:  # what `lunaflow dev demo` would write
        p.fetch("POST", "/orders", body='{"id": "1", "item": "tea"}')
    written = [p.relative_to(target).as_posix() for p in data.rglob("*") if p.is_file()]
    assert written
    subprocess.run(["git", "init", "-q", str(target)], check=True, timeout=TIMEOUT_S)
    ignored = subprocess.run(
        ["git", "-C", str(target), "check-ignore", *written],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert sorted(ignored.stdout.split()) == sorted(written)
    untracked = subprocess.run(
        ["git", "-C", str(target), "ls-files", "--others", "--exclude-standard"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=True,
    )
    assert set(untracked.stdout.split()) == SCAFFOLD, "the project's own files stay tracked"


def test_lunaflow_new_into_a_non_empty_folder_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    """scaffold.py: "lunaflow new makes a fresh folder — pick another name"; cli.py: exit 1
    with the reason on stderr."""
    target = tmp_path / "demo"
    target.mkdir()
    (target / "notes.txt").write_text("mine\n", encoding="utf-8")
    done = lunaflow(tmp_path, "new", "demo")
    assert done.returncode == 1
    assert "demo exists and is not empty" in done.stderr
    assert "pick another name" in done.stderr
    assert files_under(target) == {"notes.txt"}
    assert (target / "notes.txt").read_text(encoding="utf-8") == "mine\n"


def test_a_folder_holding_only_a_hidden_file_is_not_empty(tmp_path: Path) -> None:
    target = tmp_path / "demo"
    (target / ".git").mkdir(parents=True)
    with pytest.raises(InvalidInput, match="exists and is not empty"):
        scaffold(target)
    assert files_under(target) == set()


def test_lunaflow_new_into_an_existing_empty_folder_works(tmp_path: Path) -> None:
    target = tmp_path / "demo"
    target.mkdir()
    scaffold(target)
    assert files_under(target) == SCAFFOLD


@pytest.mark.parametrize(
    "name",
    [
        "demo",
        "o'neil-shop",
        'say "hi"',
    ],
)
def test_the_project_is_named_after_its_folder(tmp_path: Path, name: str) -> None:
    """lunaflow.toml names the project after the folder `lunaflow new` made."""
    target = tmp_path / name
    scaffold(target)
    settings = tomllib.loads((target / "lunaflow.toml").read_text(encoding="utf-8"))
    assert settings["name"] == name


def test_the_editor_types_ship_with_the_package() -> None:
    """`lunaflow new` reads the types from the installed package (importlib.resources), so
    the package data must include them, or `lunaflow new` fails outside a clone."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["runtime.engine"]
    assert any(fnmatch("lua/types/lunaflow.lua", pattern) for pattern in patterns), patterns
