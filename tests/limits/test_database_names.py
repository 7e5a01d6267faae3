"""Database names are Aurora's rule everywhere (issue 25): on AWS a `database "name"` becomes
the cluster's `DatabaseName`, 1-63 letters, digits and underscores starting with a letter, so
`database "my-sales"`, `database "2024_orders"` or a 64-character name would pass every
local test and fail the deploy in CloudFormation. They are refused where they are declared:
loading the project (LocalPlatform, AwsPlatform, `lunaflow dev`, a deploy's synth) and
`lunaflow check`, naming the script and line, the rule and a name that fits.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.errors import ProjectLoadError
from runtime.testing import AwsPlatform, LocalPlatform
from tests.support.cli import cli

LONGEST = "a" + "b" * 62  # 63 characters: the most Aurora takes

REFUSED = [
    ("my-sales", "my_sales"),
    ("2024_orders", "db_2024_orders"),
    ("a" * 64, "a" * 63),
    ("sales.eu", "sales_eu"),
    ("_sales", "db__sales"),
    ("ventes-é", "ventes___"),
]


def project(tmp_path: Path, name: str) -> Path:
    root = tmp_path / "proj"
    (root / "migrations" / "x").mkdir(parents=True)
    (root / "main.lua").write_text(
        f'local ok = "first line"\nlocal db = database "{name}" {{ migrations = "migrations/x" }}\n',
        encoding="utf-8",
    )
    return root


def message(name: str, fix: str) -> str:
    return (
        f"database name '{name}' is not allowed: on AWS it is Aurora PostgreSQL's DatabaseName, "
        f'1-63 letters, digits or underscores starting with a letter; name it "{fix}"'
    )


@pytest.mark.parametrize(("name", "fix"), REFUSED, ids=[n[:12] for n, _ in REFUSED])
def test_local_platform_refuses_the_name_at_load(tmp_path: Path, name: str, fix: str) -> None:
    with pytest.raises(ProjectLoadError) as e:
        LocalPlatform(project(tmp_path, name), data_dir=tmp_path / "data")
    assert message(name, fix) in str(e.value)
    assert "main.lua:2" in str(e.value)


def test_aws_platform_refuses_the_name_at_load(tmp_path: Path) -> None:
    with pytest.raises(ProjectLoadError, match="database name 'my-sales' is not allowed"):
        AwsPlatform(project(tmp_path, "my-sales"), data_dir=tmp_path / "data")


def test_lunaflow_check_refuses_the_name(tmp_path: Path) -> None:
    """A project whose data folder holds runs, its database renamed to a name Aurora refuses."""
    root = project(tmp_path, "orders")
    LocalPlatform(root, data_dir=tmp_path / "data").close()
    main = root / "main.lua"
    main.write_text(main.read_text(encoding="utf-8").replace('"orders"', '"2024_orders"'), encoding="utf-8")
    done = cli("check", str(root), "--data", str(tmp_path / "data"))
    assert done.code != 0, done
    assert message("2024_orders", "db_2024_orders") in done.out + done.err, done


@pytest.mark.parametrize("name", ["sales", "Sales_2024", "s", LONGEST])
def test_names_within_the_rule_load(tmp_path: Path, name: str) -> None:
    with LocalPlatform(project(tmp_path, name), data_dir=tmp_path / "data") as p:
        assert p.fetch("GET", "/").status_code == 404  # loaded; no fetch handler
