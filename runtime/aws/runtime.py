"""``AwsRuntime``: the platform on AWS, as the Lambda handlers use it.

Built once per Lambda container from ``AwsConfig`` (environment variables) and boto3
clients. It holds one ``Platform`` over the DynamoDB store, the AWS waker and services;
the worker's coroutine cache lives as long as the container, so a warm invocation skips
the replay.
"""

from __future__ import annotations

import logging
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runtime.aws.config import AwsConfig
from runtime.aws.database import DataApiDatabases
from runtime.aws.secrets import SecretsManagerSecrets
from runtime.aws.services import AwsServices
from runtime.aws.wake import AwsWaker
from runtime.core.clock import Clock, SystemClock, now_ms
from runtime.engine.observe import Observer
from runtime.platform.fetch import Failure, Response
from runtime.platform.platform import LeaseTerms, Platform
from runtime.services.base import Services
from runtime.store.base import Lease
from runtime.store.blobs import Blobs
from runtime.store.dynamodb import DynamoDBStore

log = logging.getLogger("lunaflow.aws")

SAFETY_S = 20.0  # stop starting new work this long before the Lambda deadline
LEASE_MS = 16 * 60 * 1000  # longer than any invocation (Lambda's limit is 15 minutes)
BUSY_RETRY_S = 2  # a wake for a run another invocation holds comes back after this


@dataclass(frozen=True)
class Clients:
    dynamodb: Any
    sqs: Any
    scheduler: Any
    secretsmanager: Any
    s3: Any = None
    rds_data: Any = None

    @classmethod
    def from_session(cls, session: Any) -> Clients:
        return cls(
            dynamodb=session.client("dynamodb"),
            sqs=session.client("sqs"),
            scheduler=session.client("scheduler"),
            secretsmanager=session.client("secretsmanager"),
            s3=session.client("s3"),
            rds_data=session.client("rds-data"),
        )


class AwsRuntime:
    def __init__(
        self,
        config: AwsConfig,
        clients: Clients,
        *,
        clock: Clock | None = None,
        observer: Observer | None = None,
        owner: str | None = None,
        services: Callable[[Services], Services] | None = None,
        cache_size: int = 256,
    ) -> None:
        """``services`` wraps the AWS services (the harness's stand-ins)."""
        self.config = config
        self.clock = clock or SystemClock()
        self.owner = owner or f"lambda-{uuid.uuid4()}"
        secrets = SecretsManagerSecrets(
            clients.secretsmanager, clients.dynamodb, config.table, prefix=config.secrets_prefix
        )
        blobs = None if clients.s3 is None else Blobs(clients.s3, config.values_bucket)
        self.store = DynamoDBStore(
            clients.dynamodb, config.table, secrets=secrets, clock=self.clock, blobs=blobs
        )
        self.waker = AwsWaker(
            clients.sqs,
            clients.scheduler,
            self.clock,
            queue_url=config.wake_queue_url,
            queue_arn=config.wake_queue_arn,
            group=config.scheduler_group,
            role_arn=config.scheduler_role_arn,
        )
        databases = None
        if config.database_resource_arn and config.database_secret_arn and clients.rds_data is not None:
            databases = DataApiDatabases(
                clients.rds_data, config.database_resource_arn, config.database_secret_arn
            )
        aws_services: Services = AwsServices(
            dynamodb=clients.dynamodb,
            table=config.table,
            sqs=clients.sqs,
            queue_urls=config.queue_urls,
            clock=self.clock,
            databases=databases,
        )
        self.platform = Platform(
            config.project,
            self.store,
            self.clock,
            services=aws_services if services is None else services(aws_services),
            waker=self.waker,
            observer=observer,
            cache_size=cache_size,
        )

    # --- the worker --------------------------------------------------------------------

    def advance(self, run_id: str, *, remaining_ms: int | None = None) -> str:
        """Advance one run under its lease. Returns "done", "busy" (another invocation holds
        it; the wake comes back shortly) or "missing"."""
        deadline = (
            None if remaining_ms is None else time.monotonic() + max(0.0, remaining_ms / 1000 - SAFETY_S)
        )
        try:
            outcome = self.platform.advance(run_id, lease=LeaseTerms(self.owner, LEASE_MS), deadline=deadline)
        except Exception as e:
            self.log_error(f"advancing run '{run_id}' failed: {e}", traceback.format_exc(), run=run_id)
            raise
        if outcome == Lease.BUSY:
            self.platform.wakes.prompt(run_id, delay_s=BUSY_RETRY_S)
            return "busy"
        return "missing" if outcome == Lease.MISSING else "done"

    def reconcile(self, older_than_s: float = 60.0, running_for_s: float = 300.0) -> list[str]:
        """Heal what a lost message or a dead invocation left behind: wakes that waited too
        long, timers that fell due without firing, and runs left running with no lease."""
        now = self.clock.now()
        stale = set(self.store.wakeups_older_than(now - older_than_s))
        stale.update(self.store.fire_due_timers(now_ms(self.clock) - int(older_than_s * 1000)))
        stale.update(self.store.stale_running(now - running_for_s, now_ms(self.clock)))
        for run_id in sorted(stale):
            self.platform.wakes.prompt(run_id)
        return sorted(stale)

    # --- requests and user queues ------------------------------------------------------

    def fetch(self, request: dict[str, Any]) -> tuple[Response, Failure | None]:
        response, failure = self.platform.fetch(request)
        if failure is not None:
            self.log_error(failure.message, failure.traceback, request_id=failure.request_id)
        return response, failure

    def log_error(self, message: str, tb: str | None, *, run: str | None = None, **more: Any) -> None:
        """Keep an error in the platform's log, as ``lunaflow dev`` and the harness show them
        (the handlers write it to CloudWatch as well)."""
        self.platform.logs.append({"level": "error", "message": message, "traceback": tb, "run": run, **more})

    def deliver(self, queue: str, message: dict[str, Any]) -> str | None:
        """Run ``on "queue"``'s handler on one message; None on success, else the error."""
        worker = self.platform.worker = self.platform.fresh(self.platform.worker)
        if not worker.has_queue_handler(queue):
            return f'this project has no on "queue" ("{queue}", ...) handler'
        return worker.call_queue_handler(queue, message)
