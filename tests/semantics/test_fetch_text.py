"""The harness refuses a request that is not text with a ``LunaflowError`` (issue 14,
point 12)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import InvalidInput
from runtime.testing import LocalPlatform

ECHO = 'on "fetch" (function(request) return { status_code = 200, body = "ok" } end)\n'


@pytest.mark.parametrize(
    ("kw", "part"),
    [
        ({"body": "a\ud800b"}, "body"),
        ({"headers": {"x-name": "a\udfffb"}}, "value of header 'x-name'"),
        ({"headers": {"x-\ud800": "v"}}, "header name"),
        ({"query": {"q": "\ud800"}}, "value of query 'q'"),
        ({"query": {"\udc00": "v"}}, "query name"),
    ],
    ids=["body", "header-value", "header-name", "query-value", "query-name"],
)
def test_local_platform_fetch_refuses_lone_surrogates_with_a_lunaflow_error(
    make_project: Callable[..., Path], tmp_path: Path, kw: dict[str, Any], part: str
) -> None:
    """LocalPlatform.fetch with a lone surrogate (no UTF-8 encoding) in the body, a header
    name or value, a query name or value raises InvalidInput naming the part, and the
    platform keeps serving. Before: a bare UnicodeEncodeError (`'utf-8' codec can't encode
    character '\\ud800' ...`)."""
    with LocalPlatform(make_project({"main.lua": ECHO}), data_dir=tmp_path / "d", synchronous="OFF") as p:
        with pytest.raises(InvalidInput) as e:
            p.fetch("POST", "/", **kw)
        assert part in str(e.value) and "UTF-8" in str(e.value), e.value
        assert p.fetch("GET", "/").status_code == 200
