"""Issue 26 on the command line: `lunaflow start --timeout` bounds a run (over 36,500 days
is refused, nothing written) and `lunaflow retry` cuts a backoff short or says why not."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import cli

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "failures"


def test_start_timeout_is_journaled_and_a_bound_too_long_is_refused(tmp_path: Path) -> None:
    where = ("-p", str(PROJECT), "--data", str(tmp_path / "data"))
    refused = cli("start", "bounded-default", "--id", "c-1", "--timeout", "36501d", *where)
    assert refused.code == 1, str(refused)
    assert "bad duration \"36501d\" for the timeout of run 'c-1'" in refused.err
    assert cli("show", "c-1", *where).code == 1  # nothing was written
    done = cli("start", "bounded-default", "--id", "c-1", "--timeout", "3d", *where, "--json")
    assert done.code == 0, str(done)
    started = json.loads(cli("show", "c-1", *where, "--json").out)["journal"][0]
    assert started["data"]["timeout"] == "3d"
    assert started["data"]["deadline_at"] == round(started["at"] * 1000) + 3 * 86_400_000
    # without --timeout, the workflow's own default (2h)
    cli("start", "bounded-default", "--id", "c-2", *where)
    started = json.loads(cli("show", "c-2", *where, "--json").out)["journal"][0]
    assert started["data"]["timeout"] == "2h"


def test_retry_of_a_run_not_in_a_backoff_is_refused_with_the_rule(tmp_path: Path) -> None:
    where = ("-p", str(PROJECT), "--data", str(tmp_path / "data"))
    cli("start", "bounded-default", "--id", "c-3", *where)
    done = cli("retry", "c-3", *where)
    assert done.code == 1, str(done)
    assert "is running and not waiting out a step's backoff, so it cannot be retried now" in done.err
