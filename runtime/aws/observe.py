"""Powertools on AWS: run id, workflow and step on every log line said while a worker
advances that run (and the step while its body runs); metrics for runs, steps, retries and
signal-to-resume latency (CloudWatch embedded metric format)."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from runtime.aws.contract import Metric

RUN_KEYS = ("run_id", "workflow", "step")  # the keys a line about a run carries


class PowertoolsObserver:
    def __init__(self, logger: Logger, metrics: Metrics) -> None:
        self.logger = logger
        self.metrics = metrics

    # The keys live on the container's logger, per thread (the worker advances a batch's
    # runs at once, a thread each), and outlast an activation: each is set where its scope
    # begins and removed where it ends, so no line carries another run's or step's.

    def activation(self, run_id: str, workflow: str) -> None:
        self.logger.thread_safe_remove_keys(list(RUN_KEYS))
        self.logger.thread_safe_append_keys(run_id=run_id, workflow=workflow)

    def activation_ended(self, run_id: str, workflow: str) -> None:
        self.logger.thread_safe_remove_keys(list(RUN_KEYS))

    def step_started(self, run_id: str, workflow: str, step: str, attempt: int) -> None:
        self.logger.thread_safe_append_keys(step=step)

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
        self.logger.thread_safe_remove_keys(["step"])
        self.metrics.add_metric(
            name=Metric.STEPS_SUCCEEDED if ok else Metric.STEPS_FAILED, unit=MetricUnit.Count, value=1
        )

    def retry(
        self, run_id: str, workflow: str, step: str, *, attempt: int = 0, retry_at: float | None = None
    ) -> None:
        self.metrics.add_metric(name=Metric.STEP_RETRIES, unit=MetricUnit.Count, value=1)

    def signal_resumed(self, run_id: str, workflow: str, latency_s: float) -> None:
        self.metrics.add_metric(
            name=Metric.SIGNAL_TO_RESUME_LATENCY,
            unit=MetricUnit.Milliseconds,
            value=round(latency_s * 1000, 3),
        )

    def ended(
        self,
        run_id: str,
        workflow: str,
        status: str,
        *,
        error: str | None = None,
        traceback: str | None = None,
    ) -> None:
        name = Metric.RUNS_COMPLETED if status == "completed" else Metric.RUNS_FAILED
        self.metrics.add_metric(name=name, unit=MetricUnit.Count, value=1)

    def stuck_runs(self, run_ids: list[str]) -> None:
        """Runs the reconciler found woken long ago and still not moving (an alarm watches)."""
        self.metrics.add_metric(name=Metric.STUCK_RUNS, unit=MetricUnit.Count, value=len(run_ids))
        self.logger.warning("runs woken long ago and still not moving", extra={"stuck": run_ids[:50]})

    def wake_failed(self, run_id: str) -> None:
        """A wake record the worker failed (SQS retries it; the reconciler heals it)."""
        self.metrics.add_metric(name=Metric.WAKE_FAILURES, unit=MetricUnit.Count, value=1)

    def cancelled(self, run_id: str, workflow: str) -> None:
        pass  # no metric: a cancel is an operator's act, logged by whoever made it

    def continued(self, run_id: str, workflow: str, generation: int) -> None:
        pass  # no metric: the run goes on; its journal shows the generation

    def started(self, run_id: str, workflow: str) -> None:
        self.metrics.add_metric(name=Metric.RUNS_STARTED, unit=MetricUnit.Count, value=1)
