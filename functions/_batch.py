"""SQS partial batch responses, as Powertools' ``process_partial_response`` gives them: each
record handled alone (several at once where the caller asks), the failed ones reported by
message id, and a batch whose every
record failed raised as ``BatchProcessingError`` so Lambda retries it whole. Written here
because importing Powertools' batch utility (with the data classes of every event source)
was a sixth of the worker's cold-start imports; its exception is imported only when raised."""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Callable
from typing import Any


def partial_response(
    event: dict[str, Any],
    handle: Callable[[dict[str, Any]], None],
    *,
    threads: int = 1,
    key: Callable[[dict[str, Any]], str] | None = None,
) -> dict[str, Any]:
    """``threads`` above 1 handles the batch's records at once, that many at a time (the
    worker's wakes), records with the same ``key`` (one run's wakes) one after another on
    one thread; the answer is the same, failures in the records' order."""
    records = event.get("Records")
    if not isinstance(records, list):
        raise ValueError("an SQS batch event has a 'Records' list; this event has none")
    failed: list[dict[str, str]] = []
    errors: list[Any] = []

    def one(record: dict[str, Any]) -> Any:
        try:
            handle(record)
        except Exception:
            return sys.exc_info()
        return None

    if threads > 1 and len(records) > 1:
        from concurrent.futures import ThreadPoolExecutor

        groups: dict[str, list[int]] = {}
        for i, record in enumerate(records):
            groups.setdefault(key(record) if key else str(i), []).append(i)
        outcomes: list[Any] = [None] * len(records)

        def group(indexes: list[int]) -> None:
            for i in indexes:
                outcomes[i] = one(records[i])

        # Each group's thread runs in a copy of this one's context (which container serves).
        with ThreadPoolExecutor(max_workers=min(threads, len(groups)), thread_name_prefix="wake") as pool:
            futures = [pool.submit(contextvars.copy_context().run, group, g) for g in groups.values()]
            for f in futures:
                f.result()
    else:
        outcomes = [one(record) for record in records]
    for record, error in zip(records, outcomes, strict=True):
        if error is not None:
            failed.append({"itemIdentifier": record["messageId"]})
            errors.append(error)
    if records and len(failed) == len(records):
        from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

        raise BatchProcessingError(
            msg=f"All records failed processing. {len(errors)} individual errors logged separately below.",
            child_exceptions=errors,
        )
    return {"batchItemFailures": failed}
