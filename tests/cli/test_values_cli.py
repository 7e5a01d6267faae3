"""Issue 28 points 2 and 3 from the command line: `lunaflow show` and `lunaflow runs --json`
carry the values a run published (wf:set), and `lunaflow runs --where` finds runs by them
(equality, number ranges, several filters), against the local data folder and with --aws
against the AwsPlatform's moto stack (tests/support/aws_stack.py), the CLI a process of its
own reading the store's index of values."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runtime.testing import AwsPlatform, LocalPlatform
from tests.support.aws_stack import moto_env, put_behind_stack
from tests.support.cli import Done, cli

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "published"
STACK = "lunaflow-cli-values"


def _subscriptions(p: LocalPlatform) -> None:
    for n in range(1, 5):
        p.start("subscription", {"plan": "gold" if n % 2 else "basic", "months": 9}, id=f"s-{n}")
        for _ in range(n - 1):
            p.signal(f"s-{n}", "renewed")


def _check(run: Callable[..., Done]) -> None:
    shown = run("show", "s-3", "--json")
    assert shown.code == 0, str(shown)
    assert json.loads(shown.out)["values"] == {"plan": "gold", "month": 3}
    text = run("show", "s-3")
    assert "value month = 3" in text.out and 'value plan = "gold"' in text.out, str(text)

    listed = run("runs", "--json")
    assert {r["id"]: r["values"]["month"] for r in json.loads(listed.out)} == {
        f"s-{n}": n for n in range(1, 5)
    }

    def ids(*where: str) -> list[str]:
        d = run("runs", "--json", *(a for w in where for a in ("--where", w)))
        assert d.code == 0, str(d)
        return [r["id"] for r in json.loads(d.out)]

    assert ids("month=3") == ["s-3"]
    assert ids("month>=2") == ["s-4", "s-3", "s-2"]
    assert ids("month<3", "plan=gold") == ["s-1"]
    assert ids("plan=basic") == ["s-4", "s-2"]
    table = run("runs", "--where", "month>3")
    assert "s-4" in table.out and "s-3" not in table.out, str(table)

    bad = run("runs", "--where", "month>=gold")
    assert bad.code == 1, str(bad)
    assert "--where 'month>=gold': >= compares numbers, and 'gold' is not one" in bad.err, str(bad)


def test_values_and_where_on_the_local_store(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with LocalPlatform(PROJECT, data_dir=data) as p:
        _subscriptions(p)

    def run(*args: str, **kw: Any) -> Done:
        return cli(*args, "-p", str(PROJECT), "--data", str(data), **kw)

    _check(run)


def test_values_and_where_on_aws(tmp_path: Path) -> None:
    with AwsPlatform(PROJECT, data_dir=tmp_path / "aws") as p:
        _subscriptions(p)
        put_behind_stack(p, STACK)
        env = moto_env(p)

        def run(*args: str, **kw: Any) -> Done:
            return cli(*args, "-p", str(PROJECT), "--aws", "--stack", STACK, env=env, **kw)

        _check(run)
