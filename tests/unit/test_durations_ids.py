from __future__ import annotations

import pytest

from runtime.core.durations import parse_ms
from runtime.core.ids import check_run_id, step_id
from runtime.errors import InvalidInput


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("100ms", 100),
        ("30s", 30_000),
        ("1h30m", 5_400_000),
        ("7d", 604_800_000),
        ("1.5s", 1500),
        (2, 2000),
        (0.05, 50),
    ],
)
def test_durations_read_units_and_numbers_of_seconds(text: object, ms: int) -> None:
    assert parse_ms(text) == ms


@pytest.mark.parametrize(
    "bad", ["", "5", "5 parsecs", "-1s", "1h 30m", "s", True, None, -1, float("nan"), {}]
)
def test_bad_durations_are_refused_with_the_value_in_the_message(bad: object) -> None:
    with pytest.raises(InvalidInput) as e:
        parse_ms(bad, "wf:sleep")
    assert "bad duration" in str(e.value) and "wf:sleep" in str(e.value)
    if isinstance(bad, str):
        assert f'"{bad}"' in str(e.value)


@pytest.mark.parametrize("bad", ["", "a/b", "x" * 201, "tab\there", 5, None])
def test_bad_run_ids_are_refused(bad: object) -> None:
    with pytest.raises(InvalidInput) as e:
        check_run_id(bad)
    assert str(e.value).startswith("run id must be a non-empty string without '/' (got ")


def test_the_spec_message_for_a_slash() -> None:
    with pytest.raises(
        InvalidInput, match="^run id must be a non-empty string without '/' \\(got \"a/b\"\\)$"
    ):
        check_run_id("a/b")


def test_run_ids_up_to_200_bytes_pass() -> None:
    assert check_run_id("é" * 100) == "é" * 100


def test_step_id_shape() -> None:
    assert step_id("sale-lot-42", "charge", 1, 2) == "sale-lot-42/charge/1/2"
