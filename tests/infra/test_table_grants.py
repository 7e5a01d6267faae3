"""Every DynamoDB call the runtime makes on the journal table is one the functions' roles are
granted (infra/capabilities/functions.py, TABLE_ACTIONS): moto checks no IAM, so a call the
roles lack (BatchWriteItem, say) passes every local test and fails on AWS. The retention
sweep first deleted with BatchWriteItem, which no role has (tests/infra/test_operations.py
keeps it out); this reads the store's code for the calls it makes."""

from __future__ import annotations

import re
from pathlib import Path

from infra.capabilities.functions import TABLE_ACTIONS

ROOT = Path(__file__).resolve().parents[2]
# The DynamoDB store's parts, and the services on the same table.
STORE = ROOT / "runtime" / "store"
TABLE_CODE = [*sorted(STORE.glob("dynamodb*.py")), ROOT / "runtime" / "aws" / "services.py"]
CALL = re.compile(r"\._db\.([a-z_]+)\b")  # a call, or a method handed to conditional()
# Authorized as the Put, Update, Delete and ConditionCheck of its items.
THROUGH_ITEMS = {"TransactWriteItems"}


def _action(snake: str) -> str:
    return "".join(part.capitalize() for part in snake.split("_"))


def test_the_store_calls_only_table_actions_the_functions_are_granted() -> None:
    granted = {a.removeprefix("dynamodb:") for a in TABLE_ACTIONS} | THROUGH_ITEMS
    called = {
        (path.name, _action(m)) for path in TABLE_CODE for m in CALL.findall(path.read_text(encoding="utf-8"))
    }
    assert called, "no DynamoDB call found: the pattern no longer matches the store's code"
    assert sorted(c for c in called if c[1] not in granted) == []
