"""Issue 17, point 10: the CLI prints user text literally (no rich markup), and bad JSON
arguments are bad usage (exit 2) with a clear message, never a traceback.

Runs are created with ``lunaflow start`` on a fresh data folder (no server needed: the run
exists, ``running``, and accepts signals); the markup-raising run is driven to failure with
``runtime.testing.LocalPlatform`` on the same data folder, then inspected with the CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import Done, cli
from tests.support.devserver import PROJECTS

EVENTS = PROJECTS / "events"


def _cli(data: Path, *args: str, **kw: object) -> Done:
    return cli(*args, "-p", str(EVENTS), "--data", str(data), **kw)  # type: ignore[arg-type]


def _no_traceback(d: Done) -> None:
    if "Traceback" in d.err or "MarkupError" in d.err:
        last = d.err.strip().splitlines()[-1]
        raise AssertionError(f"exit {d.code} with a traceback ending: {last}")


@pytest.fixture
def data(tmp_path: Path) -> Path:
    d = _cli(tmp_path / "data", "start", "waiter", "--id", "w1")
    assert d.code == 0, str(d)
    return tmp_path / "data"


def test_show_prints_a_signal_payload_with_markup_literally(data: Path) -> None:
    """Point 10: a signal whose payload is the string "[/]" does not crash ``lunaflow show``
    (today rich.errors.MarkupError, exit 1): exit 0 and "[/]" printed as is."""
    assert _cli(data, "signal", "w1", "go", '"[/]"').code == 0
    d = _cli(data, "show", "w1", env={"COLUMNS": "200"})
    _no_traceback(d)
    assert d.code == 0 and "[/]" in d.out, str(d)


def test_signal_named_with_markup_is_printed_literally(data: Path) -> None:
    """Point 10: ``lunaflow signal w1 '[bold]x'`` says it sent '[bold]x' (today: 'x'), and
    ``lunaflow show`` lists the signal as '[bold]x'."""
    d = _cli(data, "signal", "w1", "[bold]x")
    assert d.code == 0, str(d)
    assert "[bold]x" in d.out, f"the signal's name lost its brackets: {d.out!r}"
    d = _cli(data, "show", "w1", env={"COLUMNS": "200"})
    assert d.code == 0 and "[bold]x" in d.out, str(d)


def test_start_prints_a_run_id_with_markup_literally(tmp_path: Path) -> None:
    """Point 10: ``lunaflow start waiter --id '[bold]lot-7'`` prints the id as given
    (today "run lot-7 of waiter ..."), and ``lunaflow runs`` lists it as given."""
    data = tmp_path / "data"
    d = _cli(data, "start", "waiter", "--id", "[bold]lot-7")
    assert d.code == 0, str(d)
    assert "[bold]lot-7" in d.out, f"the run id lost its brackets: {d.out!r}"
    d = _cli(data, "runs", env={"COLUMNS": "200"})
    assert d.code == 0 and "[bold]lot-7" in d.out, str(d)


def test_start_with_run_id_closing_tag_does_not_crash(tmp_path: Path) -> None:
    """Point 10: ``lunaflow start waiter --id '[/]'`` ends with no traceback. Observed: the id
    is refused (it holds '/'), and printing the refusal crashes with MarkupError; the run is
    not created. Asserted: no traceback, and the outcome names '[/]' literally (on stdout if
    started, on stderr if refused)."""
    data = tmp_path / "data"
    d = _cli(data, "start", "waiter", "--id", "[/]")
    _no_traceback(d)
    assert "[/]" in (d.out if d.code == 0 else d.err), str(d)


def test_refusal_messages_print_user_text_literally(data: Path) -> None:
    """Point 10: errors that quote user input are printed literally: ``lunaflow show '[/]x'``
    exits 1 with "no run '[/]x'" on stderr, no traceback."""
    d = _cli(data, "show", "[/]x")
    _no_traceback(d)
    assert d.code == 1 and "[/]x" in d.err, str(d)


def test_show_prints_step_names_and_errors_with_markup_literally(tmp_path: Path) -> None:
    """Point 10: a run whose step '[bold]styled' failed with error "[/]boom" is shown by
    ``lunaflow show`` (exit 0) with both texts printed literally."""
    from runtime.testing import LocalPlatform

    data = tmp_path / "data"
    with LocalPlatform(str(EVENTS), data_dir=data) as p:
        p.start("markup", {}, id="m1")
        assert p.get("m1").status == "failed"
    d = _cli(data, "show", "m1", env={"COLUMNS": "250"})
    _no_traceback(d)
    assert d.code == 0, str(d)
    assert "[/]boom" in d.out and "[bold]styled" in d.out, d.out


DEEP = "[" * 3000 + "]" * 3000
HUGE = '{"n": ' + "9" * 5000 + "}"


@pytest.mark.parametrize("value", [DEEP, HUGE], ids=["nested-3000", "int-5000-digits"])
def test_start_with_unreadable_json_input_is_bad_usage(tmp_path: Path, value: str) -> None:
    """Point 10: ``lunaflow start waiter JSON`` with JSON nested 3,000 deep or a 5,000-digit
    integer exits 2 with a one-line message (today a RecursionError/ValueError traceback,
    exit 1), and creates no run."""
    data = tmp_path / "data"
    d = _cli(data, "start", "waiter", value, "--id", "big")
    _no_traceback(d)
    assert d.code == 2, str(d)
    assert d.err.strip() and len(d.err.strip().splitlines()) <= 3, d.err[-800:]


@pytest.mark.parametrize("value", [DEEP, HUGE], ids=["nested-3000", "int-5000-digits"])
def test_signal_with_unreadable_json_payload_is_bad_usage(data: Path, value: str) -> None:
    """Point 10: ``lunaflow signal w1 go JSON`` with JSON nested 3,000 deep or a 5,000-digit
    integer exits 2 with a short message and no traceback; no signal is recorded."""
    d = _cli(data, "signal", "w1", "go", value)
    _no_traceback(d)
    assert d.code == 2, str(d)
    shown = json.loads(_cli(data, "show", "w1", "--json").out)
    assert shown["signals"] == [], shown["signals"]


def test_a_json_argument_at_the_nesting_limit_is_accepted(data: Path) -> None:
    """The deepest payload the platform keeps (101 nested arrays: depths 0 to 100) is sent;
    one level more is refused (exit 1) naming the limit, and nothing is recorded."""
    ok = "[" * 101 + "]" * 101
    d = _cli(data, "signal", "w1", "go", ok)
    assert d.code == 0, str(d)
    d = _cli(data, "signal", "w1", "go", "[" + ok + "]")
    assert d.code == 1 and "100 levels" in d.err, str(d)
    assert "Traceback" not in d.err
    shown = json.loads(_cli(data, "show", "w1", "--json").out)
    assert len(shown["signals"]) == 1, shown["signals"]


def test_runs_prints_statuses_and_ids_with_brackets_literally(tmp_path: Path) -> None:
    """A run id such as ``[red]x`` is listed as typed, not as a coloured ``x``."""
    data = tmp_path / "data"
    assert _cli(data, "start", "waiter", "--id", "[red]x").code == 0
    d = _cli(data, "runs", env={"COLUMNS": "200"})
    assert d.code == 0 and "[red]x" in d.out, str(d)
