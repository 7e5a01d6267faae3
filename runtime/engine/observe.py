"""What the engine reports as runs progress: a seam for terminals, logs and metrics.

The executor (and the run API, for starts and cancels) calls an ``Observer`` at each event.
``Quiet`` listens to nothing (the test harness, ``lunaflow check``); ``lunaflow dev``
prints a line per event (``runtime.dev.terminal.Terminal``); on AWS
``runtime.aws.observe.PowertoolsObserver`` turns them into CloudWatch metrics and log keys.
Details an observer may not need (a step id, an error, a traceback) are keyword arguments,
so an observer that only counts events ignores them.
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

    def step(
        self,
        run_id: str,
        workflow: str,
        step: str,
        attempt: int,
        ok: bool,
        *,
        step_id: str = "",
        error: str | None = None,
    ) -> None:
        """One attempt of a step body ended; ``error`` says why a failed one failed (lines
        that follow are about no step)."""

    def retry(
        self, run_id: str, workflow: str, step: str, *, attempt: int = 0, retry_at: float | None = None
    ) -> None:
        """A failed attempt will be retried: attempt number ``attempt`` at ``retry_at``
        (epoch seconds), after its backoff."""

    def signal_resumed(self, run_id: str, workflow: str, latency_s: float) -> None:
        """A wait resolved by a signal, ``latency_s`` after the signal arrived."""

    def ended(
        self,
        run_id: str,
        workflow: str,
        status: str,
        *,
        error: str | None = None,
        traceback: str | None = None,
    ) -> None:
        """The run completed or failed (a failed run may be resumed later). A failure
        carries its error, and the Lua traceback (the user's frames) when the workflow
        function itself raised."""

    def cancelled(self, run_id: str, workflow: str) -> None:
        """The run was cancelled (directly, or as a child of a cancelled run)."""

    def continued(self, run_id: str, workflow: str, generation: int) -> None:
        """The run closed a generation (wf:continue_as_new, written): ``generation`` begins."""


class Quiet:
    def started(self, run_id: str, workflow: str) -> None:
        pass

    def activation(self, run_id: str, workflow: str) -> None:
        pass

    def activation_ended(self, run_id: str, workflow: str) -> None:
        pass

    def step_started(self, run_id: str, workflow: str, step: str, attempt: int) -> None:
        pass

    def step(
        self,
        run_id: str,
        workflow: str,
        step: str,
        attempt: int,
        ok: bool,
        *,
        step_id: str = "",
        error: str | None = None,
    ) -> None:
        pass

    def retry(
        self, run_id: str, workflow: str, step: str, *, attempt: int = 0, retry_at: float | None = None
    ) -> None:
        pass

    def signal_resumed(self, run_id: str, workflow: str, latency_s: float) -> None:
        pass

    def ended(
        self,
        run_id: str,
        workflow: str,
        status: str,
        *,
        error: str | None = None,
        traceback: str | None = None,
    ) -> None:
        pass

    def cancelled(self, run_id: str, workflow: str) -> None:
        pass

    def continued(self, run_id: str, workflow: str, generation: int) -> None:
        pass
