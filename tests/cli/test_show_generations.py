"""Issue 27.3: `lunaflow show` names a continued run's current generation and lists the
earlier ones (text and --json), from the journal a local data folder keeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from runtime import cli
from runtime.testing import LocalPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "continue"


def test_show_names_the_generation_and_lists_the_earlier_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    with LocalPlatform(PROJECT, data_dir=data) as p:
        p.start("subscription", {"customer": "ada", "months": 5}, id="sub-1")
        p.signal("sub-1", "renew", None)
        p.signal("sub-1", "renew", None)
    monkeypatch.setattr(cli.output, "out", Console(highlight=False, soft_wrap=True, width=400))
    capsys.readouterr()
    assert cli.main(["show", "sub-1", "--data", str(data), "--project", str(PROJECT)]) == 0
    text = capsys.readouterr().out
    assert "generation 3  earlier 1 (entries 1-5), 2 (entries 6-10)" in text
    assert cli.main(["show", "sub-1", "--json", "--data", str(data), "--project", str(PROJECT)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["generation"] == 3
    assert [g["ended"] for g in shown["generations"]] == ["continued", "continued", None]
