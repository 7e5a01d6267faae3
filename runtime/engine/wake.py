"""How a platform brings runs back to a worker.

The store keeps the durable record (wake-ups and timers); a ``Waker`` is the prompt on top:
locally nothing more is needed (the dev server's dispatcher reads the store), while on AWS
``runtime.aws.wake.AwsWaker`` sends an SQS message and keeps an EventBridge Scheduler entry
per parked run.
"""

from __future__ import annotations

from typing import Protocol


class Waker(Protocol):
    def wake(self, run_id: str) -> None:
        """Bring the run to a worker soon (after a start, a signal, a resume...)."""

    def timer(self, run_id: str, due_ms: int | None) -> None:
        """The run is parked until ``due_ms`` (epoch milliseconds), or has no timer (None)."""


class StoreOnly:
    """The store's own wake-ups and timers table are all a local platform needs."""

    def wake(self, run_id: str) -> None:
        pass

    def timer(self, run_id: str, due_ms: int | None) -> None:
        pass
