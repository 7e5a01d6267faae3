"""DynamoDB attribute values and conditional writes, for every writer of the one table
(the store, and kv and object state in ``runtime.aws.services``).

A conditional write that loses is not an error but an answer ("the slot was taken", "the
lock is held"): ``conditional`` turns it into ``False`` (or the item as it was, when asked
for), and lets every other failure through.
"""

from __future__ import annotations

import math
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


def _number_bytes(text: str) -> int:
    digits = Decimal(text).normalize().as_tuple().digits
    return 1 + math.ceil(max(1, len(digits)) / 2)


def _value_bytes(value: Mapping[str, Any]) -> int:
    """An attribute value's size by DynamoDB's rules (a number: its significant digits, two
    a byte, plus one)."""
    ((kind, v),) = value.items()
    if kind == "S":
        return len(v.encode("utf-8"))
    if kind == "N":
        return _number_bytes(v)
    if kind == "B":
        return len(v)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(x.encode("utf-8")) for x in v)
    if kind == "NS":
        return sum(_number_bytes(x) for x in v)
    if kind == "L":
        return 3 + sum(1 + _value_bytes(x) for x in v)
    if kind == "M":
        return 3 + sum(1 + len(k.encode("utf-8")) + _value_bytes(x) for k, x in v.items())
    raise ValueError(kind)


def item_bytes(item: Mapping[str, Any] | None) -> int:
    """An item's size as DynamoDB bills it: its attribute names and values."""
    if not item:
        return 0
    return sum(len(name.encode("utf-8")) + _value_bytes(v) for name, v in item.items())


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
