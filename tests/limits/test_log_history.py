"""The harness's log history is bounded per record and in all (issue 14, point 13)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from runtime.testing import LocalPlatform

LOG_ROUTE = r"""
on "fetch" (function(request)
  if request.path == "/log" then log.info(request.body, { size = #request.body, body = request.body }) end
  if request.path == "/small" then log.warn("small", { n = 1 }) end
  return { status_code = 200, body = "ok" }
end)
"""


def test_the_harness_log_history_is_bounded_per_record_and_in_all(
    make_project: Callable[..., Path], tmp_path: Path
) -> None:
    """LocalPlatform keeps a history because tests read it (p.logs), but after 100 log lines
    of 1 MiB (message and fields) it holds under 8 MiB, each message cut with a note of how
    much was cut, and the newest line is there. Before: all 200 MiB were kept."""
    body = "L" * (1024 * 1024)
    with LocalPlatform(
        make_project({"main.lua": LOG_ROUTE}), data_dir=tmp_path / "d", synchronous="OFF"
    ) as p:
        for _ in range(100):
            assert p.fetch("POST", "/log", body=body).status_code == 200
        assert p.fetch("GET", "/small").status_code == 200
        logs = p.logs
    kept = sum(len(str(r.get("message", ""))) + len(json.dumps(r.get("fields"))) for r in logs)
    assert kept <= 8 * 1024 * 1024, f"p.logs holds {kept / 2**20:.0f} MiB of log text"
    assert logs[-1]["message"] == "small" and logs[-1]["fields"] == {"n": 1}
    big = logs[-2]
    assert len(big["message"]) <= 16 * 1024 and big["message"].endswith(" more characters cut)"), big[
        "message"
    ][-80:]
    assert "cut" in big["fields"], big["fields"]
