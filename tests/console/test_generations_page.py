"""Issue 27.3: a continued run's console page (local and CloudWatch styles, one renderer)
names its current generation and lists the earlier ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.console import render
from runtime.testing import LocalPlatform

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "continue"
ACTIONS: dict[str, render.Actions] = {
    "local": render.LocalActions(token="t"),
    "cloudwatch": render.CloudWatchActions(endpoint="arn:aws:lambda:eu-west-1:123456789012:function:c"),
}


@pytest.mark.parametrize("style", sorted(ACTIONS))
def test_the_run_page_shows_the_generation_and_the_earlier_ones(tmp_path: Path, style: str) -> None:
    with LocalPlatform(PROJECT, data_dir=tmp_path) as p:
        p.start("subscription", {"customer": "ada", "months": 5}, id="sub-1")
        p.signal("sub-1", "renew", None)
        page = render.run_page(p.platform, ACTIONS[style], "sub-1")
    assert "generation <b>2</b> (earlier: 1 (entries 1–5))" in page
