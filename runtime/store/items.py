"""DynamoDB attribute values and conditional writes, for every writer of the one table
(the store, and kv and object state in ``runtime.aws.services``).

A conditional write that loses is not an error but an answer ("the slot was taken", "the
lock is held"): ``conditional`` turns it into ``False`` (or the item as it was, when asked
for), and lets every other failure through.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

Item = dict[str, Any]


def s(value: str) -> dict[str, str]:
    return {"S": value}


def n(value: float | int) -> dict[str, str]:
    """A number attribute; floats keep every digit (``repr``), as DynamoDB stores them."""
    return {"N": repr(value) if isinstance(value, float) else str(value)}


def num(attr: Mapping[str, Any] | None) -> float:
    return float(Decimal(str(attr["N"]))) if attr else 0.0


def whole(attr: Mapping[str, Any] | None) -> int:
    return int(Decimal(str(attr["N"]))) if attr else 0


def text(attr: Mapping[str, Any] | None) -> str | None:
    return str(attr["S"]) if attr else None


def item_bytes(item: Mapping[str, Any]) -> int:
    """About what DynamoDB bills an item's size as: its attribute names and values (a number
    counts as its digits, two a byte, plus one)."""

    def value(attr: Mapping[str, Any]) -> int:
        kind, v = next(iter(attr.items()))
        if kind == "S":
            return len(str(v).encode("utf-8"))
        if kind == "N":
            return len(str(v).lstrip("-").replace(".", "")) // 2 + 2
        if kind == "M":
            return 3 + sum(len(k.encode("utf-8")) + 1 + value(x) for k, x in v.items())
        if kind in ("L", "SS", "NS"):
            return 3 + sum(1 + (value(x) if isinstance(x, Mapping) else len(str(x).encode())) for x in v)
        return 1  # BOOL, NULL

    return sum(len(k.encode("utf-8")) + value(v) for k, v in item.items())


def error_code(e: ClientError) -> str:
    return str(e.response.get("Error", {}).get("Code", ""))


def condition_failed(e: ClientError) -> bool:
    return error_code(e) == "ConditionalCheckFailedException"


class Lost:
    """A conditional write whose condition did not hold; ``item`` is the item as it was
    (when the request asked for it with ``ReturnValuesOnConditionCheckFailure``)."""

    def __init__(self, item: Item | None, retried: bool = False) -> None:
        self.item = item
        # botocore sent the request more than once: an earlier attempt may have committed.
        self.retried = retried

    def __bool__(self) -> bool:
        return False


def conditional(write: Callable[..., Any], **request: Any) -> Any:
    """Make the write; its response, or ``Lost`` (falsy) when its condition failed."""
    try:
        return write(**request) or True
    except ClientError as e:
        if not condition_failed(e):
            raise
        item: Item | None = e.response.get("Item")  # type: ignore[assignment]
        return Lost(item, retried=_retried(e))


def _retried(e: ClientError) -> bool:
    return bool(e.response.get("ResponseMetadata", {}).get("RetryAttempts", 0))
