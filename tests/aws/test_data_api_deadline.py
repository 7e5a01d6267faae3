"""AWS requests a step body makes and its attempt's deadline (runtime/services/deadline.py
``within``): the attempt's ``timeout`` bounds a Data API statement, a kv or a queue call,
host calls included, as it bounds ``http.request``.
tests/services/test_sql_api.py checks a slow statement end to end on both harnesses."""

from __future__ import annotations

import time
from typing import Any

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError

from runtime.aws.database import DataApiDatabases
from runtime.aws.services import AwsServices
from runtime.core.clock import SystemClock
from runtime.services import deadline, effects
from runtime.services.base import ServiceError


class RecordingDataApi:
    """The rds-data client's one call, answering after ``delay_s``."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.calls: list[dict[str, Any]] = []

    def execute_statement(self, **request: Any) -> dict[str, Any]:
        self.calls.append(request)
        time.sleep(self.delay_s)
        return {"numberOfRecordsUpdated": 1}


def test_a_statement_is_not_sent_once_the_attempts_deadline_has_passed() -> None:
    """Found by a review: the request's thread was started first, so an INSERT reached the
    database (and could commit) while the attempt was recorded as timed out and retried."""
    api = RecordingDataApi()
    db = DataApiDatabases(api, "arn:cluster", "arn:secret")
    past = deadline.Deadline(time.monotonic() - 0.05, "step 'w' timed out after 100ms")
    with deadline.attempt(past), pytest.raises(ServiceError, match=r"^step 'w' timed out after 100ms$"):
        db.request("shop", "INSERT INTO orders (id) VALUES (1)", [])
    time.sleep(0.1)
    assert api.calls == []


def test_a_statement_outside_an_attempt_runs_to_its_answer() -> None:
    """A fetch or queue handler has no attempt deadline: the call waits for its answer."""
    api = RecordingDataApi(delay_s=0.2)
    db = DataApiDatabases(api, "arn:cluster", "arn:secret")
    assert db.request("shop", "SELECT 1", []) == {"numberOfRecordsUpdated": 1}
    assert len(api.calls) == 1


def test_a_statement_past_the_attempts_deadline_fails_with_the_attempts_message() -> None:
    api = RecordingDataApi(delay_s=5.0)
    db = DataApiDatabases(api, "arn:cluster", "arn:secret")
    # 1 s: the call's thread is started and sends within it on a loaded machine too.
    limit = deadline.Deadline(time.monotonic() + 1.0, "step 'w' timed out after 1000ms")
    with deadline.attempt(limit), pytest.raises(ServiceError, match=r"^step 'w' timed out after 1000ms$"):
        db.request("shop", "SELECT pg_sleep(5)", [])
    assert len(api.calls) == 1  # sent while the attempt had time; its answer is not waited for


# --- found by a review: botocore's own retries went on after the attempt gave up --------


def test_no_kv_write_is_sent_again_after_the_attempts_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first try of a kv put hangs past the 1 s deadline and its connection then
    drops: botocore's retry mode (a Lambda's clients keep its default) would send the put
    again and again, possibly long after the step's next attempt wrote a newer value. With
    ``refuse_late`` on the client (as ``AwsRuntime`` registers it), no request of a call
    given up on goes out after the deadline."""
    client = boto3.session.Session(
        aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1"
    ).client("dynamodb", endpoint_url="http://127.0.0.1:9")
    client.meta.events.register("before-send", deadline.refuse_late)
    sends: list[float] = []

    def network(request: Any, *args: Any, **kwargs: Any) -> Any:
        sends.append(time.monotonic())
        if len(sends) == 1:
            time.sleep(2.0)
        raise EndpointConnectionError(endpoint_url=request.url)

    monkeypatch.setattr(client._endpoint.http_session, "send", network)
    services = AwsServices(dynamodb=client, table="t", sqs=None, queue_urls={}, clock=SystemClock())
    # 1 s: botocore's first call on a fresh client (its endpoint, its signing) sends within
    # it on a loaded machine too.
    limit = deadline.Deadline(time.monotonic() + 1.0, "step 's' timed out after 1000ms")
    with deadline.attempt(limit), pytest.raises(ServiceError, match=r"^step 's' timed out after 1000ms$"):
        services.call("kv", "box", "put", ["k", 1])
    time.sleep(2.5)  # the abandoned thread's retries would come now
    assert len(sends) == 1 and sends[0] < limit.at  # the first try only, sent in time


class _Guard:
    """An object call's guard (runtime/services/effects.py), as DynamoObjects holds one."""

    def before_effect(self) -> None:
        pass

    def hold(self, say: Any) -> bool:
        return False


def test_a_call_inside_an_object_method_runs_whole() -> None:
    """A kv write from an object method is not cut at the step's deadline: the method's key
    stays locked until its effects have landed, so none lands after the call gave up and
    another call to the key went ahead (found by a review)."""
    api = RecordingDataApi(delay_s=0.3)
    db = DataApiDatabases(api, "arn:cluster", "arn:secret")
    limit = deadline.Deadline(time.monotonic() + 0.05, "step 'w' timed out after 50ms")
    with deadline.attempt(limit), effects.guarded(_Guard()):
        assert db.request("shop", "SELECT 1", []) == {"numberOfRecordsUpdated": 1}
    assert len(api.calls) == 1
