"""SQS partial batch responses, as Powertools' ``process_partial_response`` gives them: each
record handled alone, the failed ones reported by message id, and a batch whose every
record failed raised as ``BatchProcessingError`` so Lambda retries it whole. Written here
because importing Powertools' batch utility (with the data classes of every event source)
was a sixth of the worker's cold-start imports; its exception is imported only when raised."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def partial_response(event: dict[str, Any], handle: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    records = event.get("Records")
    if not isinstance(records, list):
        raise ValueError("an SQS batch event has a 'Records' list; this event has none")
    failed: list[dict[str, str]] = []
    errors: list[Any] = []
    for record in records:
        try:
            handle(record)
        except Exception:
            failed.append({"itemIdentifier": record["messageId"]})
            errors.append(sys.exc_info())
    if records and len(failed) == len(records):
        from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

        raise BatchProcessingError(
            msg=f"All records failed processing. {len(errors)} individual errors logged separately below.",
            child_exceptions=errors,
        )
    return {"batchItemFailures": failed}
