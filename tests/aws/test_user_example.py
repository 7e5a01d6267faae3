"""The example test of docs/reference.md ("The test harnesses"), as a user would write it
for their own project: the same test on both harnesses, the AWS one through the Lambda
handlers on a moto server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.testing import AwsPlatform, LocalPlatform

PROJECT = Path(__file__).resolve().parents[2] / "examples" / "auction"


@pytest.fixture(params=[LocalPlatform, AwsPlatform], ids=["local", "aws"])
def p(request, tmp_path):
    with request.param(PROJECT, data_dir=tmp_path) as platform:
        yield platform


def test_an_unpaid_sale_is_voided_after_72_hours(p):
    opened = p.fetch("POST", "/api/sale", body=json.dumps({"id": "lot-7", "winner": "ada", "price": 30}))
    assert opened.status_code == 201
    assert p.get("sale-lot-7").status == "awaiting"
    p.advance("71h")
    assert p.get("sale-lot-7").status == "awaiting"
    p.advance("1h")
    assert p.get("sale-lot-7").result == {"outcome": "void"}
