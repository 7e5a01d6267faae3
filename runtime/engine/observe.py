"""What the engine reports as runs progress: a seam for logs and metrics.

The executor calls an ``Observer`` at each event; locally nothing listens, on AWS
``runtime.aws.observe.PowertoolsObserver`` turns them into CloudWatch metrics and log keys.
"""

from __future__ import annotations

from typing import Protocol


class Observer(Protocol):
    def started(self, run_id: str, workflow: str) -> None:
        """A new run was created (not a start that joined an existing run)."""

    def activation(self, run_id: str, workflow: str) -> None:
        """A worker starts advancing the run (log lines that follow are about it, in no step)."""

    def activation_ended(self, run_id: str, workflow: str) -> None:
        """The worker is done with the run, however it left (lines that follow are about no run)."""

    def step_started(self, run_id: str, workflow: str, step: str, attempt: int) -> None:
        """One attempt of a step body starts (lines that follow are about that step)."""

    def step(self, run_id: str, workflow: str, step: str, attempt: int, ok: bool) -> None:
        """One attempt of a step body ended (lines that follow are about no step)."""

    def retry(self, run_id: str, workflow: str, step: str) -> None:
        """A failed attempt will be retried after its backoff."""

    def signal_resumed(self, run_id: str, workflow: str, latency_s: float) -> None:
        """A wait resolved by a signal, ``latency_s`` after the signal arrived."""

    def ended(self, run_id: str, workflow: str, status: str) -> None:
        """The run completed or failed (a failed run may be resumed later)."""


class Quiet:
    def started(self, run_id: str, workflow: str) -> None:
        pass

    def activation(self, run_id: str, workflow: str) -> None:
        pass

    def activation_ended(self, run_id: str, workflow: str) -> None:
        pass

    def step_started(self, run_id: str, workflow: str, step: str, attempt: int) -> None:
        pass

    def step(self, run_id: str, workflow: str, step: str, attempt: int, ok: bool) -> None:
        pass

    def retry(self, run_id: str, workflow: str, step: str) -> None:
        pass

    def signal_resumed(self, run_id: str, workflow: str, latency_s: float) -> None:
        pass

    def ended(self, run_id: str, workflow: str, status: str) -> None:
        pass
