"""Every number and name the stack uses, in one place."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs

from runtime.aws.contract import (
    CLIENT_SERVICES,
    CONSOLE_TIMEOUT_S,
    DLQ_RETENTION_DAYS,
    FETCH_TIMEOUT_S,
    LAZY_CLIENT_SERVICES,
    LOG_RETENTION_DAYS,
    MAX_RECEIVES,
    QUEUE_TIMEOUT_S,
    RECONCILE_MINUTES,
    USER_QUEUE_VISIBILITY_S,
    WAKE_VISIBILITY_S,
    WORKER_TIMEOUT_S,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PROJECT = "examples/auction"

PYTHON_VERSION = "3.12"  # the functions' runtime (LAMBDA_RUNTIME) and the bundle's bytecode
PIP_PLATFORM = "manylinux2014_aarch64"


def pip_wheel_args() -> list[str]:
    """What pip is told so that it picks Lambda's wheels, not this machine's."""
    return [
        "--platform",
        PIP_PLATFORM,
        "--implementation",
        "cp",
        "--python-version",
        PYTHON_VERSION,
        "--only-binary=:all:",
    ]


# What the Lambda bundle needs (boto3 ships with the Lambda runtime, but is bundled too: X-Ray
# pulls in botocore, and boto3 must match the botocore it finds first). The bundle installs
# the lock made from these (python3 -m infra.lock), never these ranges themselves.
BUNDLE_REQUIREMENTS = ["lupa>=2.8,<3", "PyJWT>=2.8", "aws-lambda-powertools[tracer]>=3", "boto3>=1.34"]
BUNDLE_LOCK = REPO_ROOT / "infra" / "bundle.lock"
LUA_BUILD = "lua54"  # runtime/engine/sandbox.py imports lupa.lua54: the bundle keeps that build alone
# The botocore models the bundle keeps: the handlers' clients (runtime.aws.runtime.Clients),
# X-Ray, whose SDK makes a client for its sampling rules at import (outside Lambda's own
# sampling), and STS, which credential providers may call.
BOTOCORE_SERVICES = frozenset({*CLIENT_SERVICES, *LAZY_CLIENT_SERVICES, "xray", "sts"})
# What bundling installs: the lock file, or (tests) a list of plain requirements.
BUNDLE_SOURCE: Path | list[str] = BUNDLE_LOCK

API_THROTTLE_RATE = 100  # requests per second, steady
API_THROTTLE_BURST = 200


_RETENTION = {
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    90: logs.RetentionDays.THREE_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
}


__all__ = [
    "CONSOLE_TIMEOUT_S",
    "DLQ_RETENTION_DAYS",
    "FETCH_TIMEOUT_S",
    "MAX_RECEIVES",
    "QUEUE_TIMEOUT_S",
    "RECONCILE_MINUTES",
    "USER_QUEUE_VISIBILITY_S",
    "WAKE_VISIBILITY_S",
    "WORKER_TIMEOUT_S",
]


def log_retention() -> logs.RetentionDays:
    """Every log group keeps the runtime's stated retention (``LOG_RETENTION_DAYS``)."""
    return _RETENTION[LOG_RETENTION_DAYS]


def lambda_runtime() -> lambda_.Runtime:
    """The Lambda runtime of PYTHON_VERSION: the bundle's wheels and bytecode are for it, so the
    functions must run it and nothing else."""
    runtime: lambda_.Runtime = getattr(lambda_.Runtime, f"PYTHON_{PYTHON_VERSION.replace('.', '_')}")
    return runtime
