"""Issue 21, point 4: durations are capped at 100 years of 365 days, and a duration over
the cap is refused with its size and the limit, not with a complaint about its format."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.core.durations import MAX_MS, parse_ms
from runtime.errors import InvalidInput
from runtime.testing import LocalPlatform


def test_the_cap_is_36500_days_and_the_largest_legal_duration_is_accepted() -> None:
    assert MAX_MS == 36_500 * 86_400_000
    assert parse_ms("36500d") == MAX_MS
    assert parse_ms(MAX_MS / 1000) == MAX_MS
    assert parse_ms("36499d23h59m59s999ms") == MAX_MS - 1


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ("36501d", "36,501 days"),
        ("36500d1ms", "36,500.00000001 days"),
        ("876025h", "36,501.04166667 days"),
        (MAX_MS / 1000 + 86_400, "36,501 days"),
    ],
)
def test_a_duration_over_the_cap_names_its_size_and_the_limit(value: object, size: str) -> None:
    with pytest.raises(InvalidInput) as e:
        parse_ms(value, "wf:sleep")
    message = str(e.value)
    assert size in message, message
    assert "over the limit of 36,500 days (100 years of 365 days)" in message
    assert "wf:sleep" in message
    # the format was fine: the message does not recite the format rules
    assert "<number><unit>" not in message


@pytest.mark.parametrize("value", ["9" * 400 + "d", "1" + "0" * 320 + "ms", 1e300])
def test_a_duration_too_large_for_a_float_is_refused_by_size_not_an_overflow(value: object) -> None:
    """A string of 400 digits sums to infinity; rounding it raised OverflowError."""
    with pytest.raises(InvalidInput) as e:
        parse_ms(value, "wf:sleep")
    assert "over the limit of 36,500 days" in str(e.value)


def test_a_sleep_of_36501_days_fails_the_run_with_the_size_message(
    make_project: Callable[[dict[str, str]], Path], tmp_path: Path
) -> None:
    project = make_project(
        {"main.lua": 'workflow "nap" (function(wf) wf:sleep("36501d") return "woke" end)\n'}
    )
    with LocalPlatform(project, data_dir=tmp_path / "data") as p:
        p.start("nap", {}, id="nap-1")
        run = p.get("nap-1")
        assert run.status == "failed"
        assert run.error is not None
        assert 'bad duration "36501d" for wf:sleep: it is 36,501 days, over the limit of 36,500 days' in (
            run.error
        ), run.error
        assert not [e for e in p.journal("nap-1") if e.kind == "wait"], "nothing is journaled"
