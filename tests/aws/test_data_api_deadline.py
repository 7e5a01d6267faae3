"""The Data API's requests and a step attempt's deadline (runtime/aws/database.py): the
attempt's ``timeout`` bounds a statement, host calls included, as ``http.request``'s does.
tests/services/test_sql_api.py checks a slow statement end to end on both harnesses."""

from __future__ import annotations

import time
from typing import Any

import pytest

from runtime.aws.database import DataApiDatabases
from runtime.services import deadline
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
    limit = deadline.Deadline(time.monotonic() + 0.2, "step 'w' timed out after 200ms")
    with deadline.attempt(limit), pytest.raises(ServiceError, match=r"^step 'w' timed out after 200ms$"):
        db.request("shop", "SELECT pg_sleep(5)", [])
    assert len(api.calls) == 1  # sent while the attempt had time; its answer is not waited for
