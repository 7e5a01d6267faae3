"""The one ``AwsRuntime`` of this Lambda container, built on first use (not at import) from
the environment, with the Powertools logger and metrics every handler shares. Its clients
come from a botocore session: importing boto3 would import s3transfer too, about a fifth of
a cold start's imports, for nothing a handler calls."""

from __future__ import annotations

import botocore.session
from aws_lambda_powertools import Logger, Metrics, Tracer

from runtime.aws import container
from runtime.aws.config import AwsConfig
from runtime.aws.contract import NAMESPACE, SERVICE
from runtime.aws.observe import PowertoolsObserver
from runtime.aws.runtime import AwsRuntime, Clients

logger = Logger(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
tracer = Tracer(service=SERVICE, disabled=None)

_runtime: AwsRuntime | None = None


def runtime() -> AwsRuntime:
    handed = container.serving_now()  # the harness playing Lambda hands its own
    if handed is not None:
        return handed
    global _runtime
    if _runtime is None:
        _runtime = AwsRuntime(
            AwsConfig.from_env(),
            Clients.from_botocore(botocore.session.get_session()),
            observer=PowertoolsObserver(logger, metrics),
        )
    return _runtime


def reset() -> None:
    """Forget the built runtime (tests build a fresh one per environment)."""
    global _runtime
    _runtime = None
