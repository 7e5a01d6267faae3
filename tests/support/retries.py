"""Lost answers: a request that commits and whose answer never comes back, so botocore's own
retry sends it again (what a reset, a timeout or a 500 after the commit does on AWS, where
DynamoDB says such an operation "may or may not have succeeded").

``LostAnswers(client)`` registers a ``needs-retry`` handler, first in line, that asks
botocore to send a chosen request again after its first attempt succeeded; the caller only
ever sees the retry's answer. Nothing of lunaflow is replaced: the store's own requests go
out twice, as on AWS.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Match = Callable[[str, dict[str, Any]], bool]  # (operation, request body) -> lose its answer?


class LostAnswers:
    def __init__(self, client: Any, service: str = "dynamodb") -> None:
        self._rules: list[tuple[Match, list[int]]] = []
        self.lost: list[tuple[str, dict[str, Any]]] = []  # what was sent twice
        client.meta.events.register_first(f"needs-retry.{service}", self._needs_retry)

    def lose(self, match: Match, times: int = 1) -> None:
        """Lose the answer of the next ``times`` requests ``match`` accepts."""
        self._rules.append((match, [times]))

    def _needs_retry(
        self, attempts: int, caught_exception: Any, request_dict: dict[str, Any], operation: Any, **_: Any
    ) -> int | None:
        if attempts != 1 or caught_exception is not None:
            return None
        raw = request_dict.get("body") or b"{}"
        body = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
        for match, left in self._rules:
            if left[0] > 0 and match(operation.name, body):
                left[0] -= 1
                self.lost.append((operation.name, body))
                return 0  # send it again now
        return None


def writes(operation: str, needle: str) -> Match:
    """Requests of ``operation`` whose body mentions ``needle`` (an attribute, a condition)."""
    return lambda name, body: name == operation and needle in json.dumps(body)


class CutAfterCommit:
    """In-process moto (``mock_aws``) only: the connection closes after moto has handled a
    chosen request, on every attempt, so botocore retries it until it gives up with
    ``ConnectionClosedError`` while the first attempt committed (an outcome the caller cannot
    know). The handler runs after moto's own ``before-send`` handler, which applied the
    request."""

    def __init__(self, client: Any, target: str, needle: str) -> None:
        self.target, self.needle = target, needle
        self.cut = 0
        client.meta.events.register("before-send", self._cut)

    def _cut(self, request: Any, **_: Any) -> None:
        body = request.body.decode("utf-8") if isinstance(request.body, bytes) else str(request.body or "")
        if request.headers.get("X-Amz-Target", b"").endswith(self.target.encode()) and self.needle in body:
            from botocore.exceptions import ConnectionClosedError

            self.cut += 1
            raise ConnectionClosedError(endpoint_url=request.url)
