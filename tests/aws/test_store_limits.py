"""Key and value limits of kv and objects: one set, stated once (``runtime.platform.limits``),
honoured alike by the local store (SQLite), by DynamoDB on AWS and by a real `lunaflow dev`.

Issue 20.2: "A kv or object key over 1,024 bytes (fine under `lunaflow dev`) or object state
over the item limit gives an engine-bug line, a traceback at ERROR and a 500; and because the
failed state write is also the write that releases the object's lock, the object stays
locked for 60 s (the next call waits 10 s and fails "busy"). The platform states one set of
key and value limits that both stores honour (long keys hashed, or refused with the limit
named, the same locally and on AWS); a failed write releases the lock."

Each test runs the same requests through the project's fetch handler locally
(``LocalPlatform``) and on AWS (the fetch Lambda handler on moto), and compares what Lua saw.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from functions import fetch
from runtime.aws.services import DynamoObjects
from runtime.core.clock import FakeClock
from runtime.platform.limits import MAX_KEY_BYTES, MAX_VALUE_BYTES
from runtime.services import effects
from runtime.services.base import ServiceError
from runtime.testing import LocalPlatform
from tests.support.aws_events import PROJECTS, http_event
from tests.support.aws_world import AwsWorld, FakeContext
from tests.support.devserver import Servers

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")

PROJECT = PROJECTS / "store_limits"
STATE_OVERHEAD = len('{"data":""}')  # Box's state around its n x's

Call = Callable[[str, dict[str, Any]], tuple[int, dict[str, Any]]]


def key_message(what: str, n: int) -> str:
    return (
        f"{what}: the key is {n} bytes, over the limit of {MAX_KEY_BYTES} bytes; use a shorter key "
        "(keep long text in the value, and key it by an id or a hash of the text)"
    )


@pytest.fixture(params=["local", "aws"])
def where(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def call(
    where: str, request: pytest.FixtureRequest, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> Iterator[Call]:
    """POST a JSON body to the project's fetch handler, locally or through the fetch Lambda on
    moto; answers (status, decoded body). Nothing may be logged at ERROR on the way: a refused
    key is the user's mistake, not an engine bug."""
    caplog.set_level(logging.WARNING)
    if where == "local":
        with LocalPlatform(PROJECT, data_dir=tmp_path) as p:

            def local(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
                r = p.fetch("POST", path, body=json.dumps(body))
                return r.status_code, json.loads(r.body)

            yield local
    else:
        request.getfixturevalue("make_runtime")(PROJECT)

        def aws(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
            event = http_event("POST", path, json.dumps(body))
            answer = fetch.handler(event, FakeContext(function_name="lunaflow-fetch"))
            return answer["statusCode"], json.loads(answer["body"])

        yield aws
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], errors


def ok(got: tuple[int, dict[str, Any]]) -> Any:
    status, body = got
    assert status == 200 and body["ok"], got
    return body.get("value")


def refused(got: tuple[int, dict[str, Any]]) -> str:
    status, body = got
    assert status == 422 and not body["ok"], got
    message = str(body["error"])
    assert "engine bug" not in message
    return at_line(message)


def at_line(message: str) -> str:
    """The refusal without the `main.lua:N: ` Lua puts before it."""
    m = re.fullmatch(r"main\.lua:\d+: (.*)", message, re.S)
    assert m, message
    return m.group(1)


# --- keys ------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["k" * MAX_KEY_BYTES, "é" * (MAX_KEY_BYTES // 2)], ids=["ascii", "utf8"])
def test_a_kv_key_of_exactly_the_limit_works_everywhere(call: Call, key: str) -> None:
    """The largest legal key (1,024 bytes of UTF-8) is stored, read, listed and deleted."""
    assert ok(call("/kv", {"op": "put", "key": key, "value": {"a": 1}})) is True
    assert ok(call("/kv", {"op": "get", "key": key})) == {"a": 1}
    assert ok(call("/kv", {"op": "list", "prefix": key[:10]})) == [key]
    assert ok(call("/kv", {"op": "delete", "key": key})) is True


@pytest.mark.parametrize("op", ["put", "get", "delete"])
@pytest.mark.parametrize("key", ["k" * (MAX_KEY_BYTES + 1), "é" * (MAX_KEY_BYTES // 2) + "k"])
def test_a_kv_key_over_the_limit_is_refused_with_the_limit_named(call: Call, op: str, key: str) -> None:
    """Before: fine locally; on AWS a ValidationException surfacing as "lunaflow engine bug",
    a traceback at ERROR. Now the same refusal on both, which the code can catch."""
    message = refused(call("/kv", {"op": op, "key": key, "value": 1}))
    assert message == key_message(f"kv 'store':{op}", MAX_KEY_BYTES + 1)


def test_a_list_prefix_longer_than_any_key_finds_nothing(call: Call) -> None:
    """No key can start with a prefix longer than the longest key: an empty page, on both."""
    ok(call("/kv", {"op": "put", "key": "k" * MAX_KEY_BYTES, "value": 1}))
    assert ok(call("/kv", {"op": "list", "prefix": "k" * (MAX_KEY_BYTES + 1)})) == {}  # empty table


def test_a_kv_namespace_over_the_limit_is_refused(call: Call) -> None:
    ns = "n" * (MAX_KEY_BYTES + 1)
    message = refused(call("/kv", {"op": "put", "ns": ns, "key": "k", "value": 1}))
    assert message == (
        f"kv '{'n' * 60}...': the name is {MAX_KEY_BYTES + 1} bytes, over the limit of "
        f"{MAX_KEY_BYTES} bytes; use a shorter name"
    )


def test_an_object_key_over_the_limit_is_refused_and_one_at_the_limit_works(call: Call) -> None:
    long = "k" * (MAX_KEY_BYTES + 1)
    message = refused(call("/box", {"key": long, "method": "count"}))
    assert message == key_message(f"Box('{'k' * 60}...'):count", MAX_KEY_BYTES + 1)
    assert ok(call("/box", {"key": "k" * MAX_KEY_BYTES, "method": "count"})) == 1
    assert ok(call("/box", {"key": "k" * MAX_KEY_BYTES, "method": "count"})) == 2


# --- values ----------------------------------------------------------------------------------


def test_a_kv_value_at_the_limit_is_stored_and_one_over_is_refused(call: Call) -> None:
    """A string of n x's is n + 2 bytes of JSON."""
    largest = MAX_VALUE_BYTES - 2
    assert ok(call("/kv", {"op": "put", "key": "big", "size": largest})) is True
    assert ok(call("/kv", {"op": "get", "key": "big"})) == largest
    message = refused(call("/kv", {"op": "put", "key": "big", "size": largest + 1}))
    assert message == (
        f"the value of kv 'store' key 'big' is {MAX_VALUE_BYTES + 1} bytes encoded, over the limit of "
        f"{MAX_VALUE_BYTES} bytes (256 KiB); keep large data elsewhere (a database row, an object) "
        "and pass its key"
    )
    assert ok(call("/kv", {"op": "get", "key": "big"})) == largest  # the refused put wrote nothing


def test_object_state_over_the_limit_is_refused_and_the_object_is_not_left_locked(call: Call) -> None:
    """Before: on AWS the refused state write was also the write that drops the lock, so the
    next call waited 10 s and failed "busy". Now the call is refused, the state is as it was
    and the next call runs at once."""
    largest = MAX_VALUE_BYTES - STATE_OVERHEAD
    assert ok(call("/box", {"key": "b", "method": "fill", "n": largest})) == largest
    message = refused(call("/box", {"key": "b", "method": "fill", "n": largest + 1}))
    assert message == (
        f"the state of Box('b') is {MAX_VALUE_BYTES + 1} bytes encoded, over the limit of "
        f"{MAX_VALUE_BYTES} bytes (256 KiB); keep large data elsewhere (a database row, an object) "
        "and pass its key"
    )
    began = time.monotonic()
    assert ok(call("/box", {"key": "b", "method": "size"})) == largest  # the state as it was
    assert time.monotonic() - began < 5, "the object was left locked"


# --- a failed state write on DynamoDB ---------------------------------------------------------


class FailingStateWrites:
    """The DynamoDB client, except that writing an object's state fails as a throttled
    request would (what AWS may answer on any write)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def put_item(self, **request: Any) -> Any:
        if "state" in request["Item"]:
            raise ClientError(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}},
                "PutItem",
            )
        return self._client.put_item(**request)


class Runner:
    """A method that sets ``n``; with ``effect``, after a host call that reaches outside, so
    the call holds the key's lock when it writes its state."""

    def __init__(self, effect: bool) -> None:
        self.effect = effect

    def call_object(
        self, cls: str, key: str, method: str, state: Any, args: list[Any]
    ) -> tuple[list[Any], Any]:
        if self.effect:
            effects.before_effect()
        return [True], {"n": 1}


@pytest.mark.parametrize("effect", [True, False], ids=["locked", "optimistic"])
def test_a_failed_state_write_on_dynamodb_releases_the_lock(aws: AwsWorld, effect: bool) -> None:
    """Whatever makes the state write fail, the lock it would have dropped is dropped (and a
    call that took none leaves none)."""
    objects = DynamoObjects(FailingStateWrites(aws.dynamodb), aws.table, FakeClock())
    with pytest.raises(ServiceError) as e:
        objects.call(Runner(effect), "Box", "b", "count", [])
    assert str(e.value) == (
        "Box('b'):count: its new state could not be saved (DynamoDB said "
        "ProvisionedThroughputExceededException: slow down); the state is as it was before the "
        "call — call it again"
    )
    item = aws.dynamodb.get_item(
        TableName=aws.table, Key={"pk": {"S": "OBJ#Box"}, "sk": {"S": "b"}}, ConsistentRead=True
    ).get("Item", {})
    assert "lock_owner" not in item and "lock_until" not in item, item
    assert "state" not in item


# --- a real `lunaflow dev` ---------------------------------------------------------------------


def test_lunaflow_dev_refuses_a_long_key_as_aws_does(tmp_path: Path) -> None:
    servers = Servers(tmp_path)
    try:
        dev = servers.start(PROJECT)
        long = "k" * (MAX_KEY_BYTES + 1)
        reply = dev.post_json("/kv", {"op": "put", "key": long, "value": 1})
        assert reply.status == 422, reply
        assert at_line(reply.json()["error"]) == key_message("kv 'store':put", MAX_KEY_BYTES + 1)
        reply = dev.post_json("/kv", {"op": "put", "key": "k" * MAX_KEY_BYTES, "value": 1})
        assert reply.status == 200, reply
    finally:
        servers.close()
