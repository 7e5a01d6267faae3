"""Every number and name the stack uses, in one place."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PROJECT = "examples/auction"
NAMESPACE = "lunaflow"  # CloudWatch metrics namespace (runtime/aws/observe.py)
SERVICE = "lunaflow"  # the Powertools service dimension

PYTHON_VERSION = "3.12"
PIP_PLATFORM = "manylinux2014_aarch64"
# What the Lambda bundle installs (boto3 ships with the Lambda runtime).
# boto3 is bundled too: X-Ray pulls in botocore, and boto3 must match the botocore it finds first.
BUNDLE_REQUIREMENTS = ["lupa>=2.8,<3", "PyJWT>=2.8", "aws-lambda-powertools[tracer]>=3", "boto3>=1.34"]

FETCH_TIMEOUT_S = 29  # API Gateway's integration limit
WORKER_TIMEOUT_S = 300
QUEUE_TIMEOUT_S = 60
CONSOLE_TIMEOUT_S = 30
MEMORY_MB = 1024
WAKE_VISIBILITY_S = 6 * WORKER_TIMEOUT_S  # AWS's advice for SQS event sources: 6x the timeout
USER_QUEUE_VISIBILITY_S = 6 * QUEUE_TIMEOUT_S
MAX_RECEIVES = 5  # deliveries before a message goes to its dead-letter queue
DLQ_RETENTION_DAYS = 14
LOG_RETENTION_DAYS = 30
RECONCILE_MINUTES = 1
API_THROTTLE_RATE = 100  # requests per second, steady
API_THROTTLE_BURST = 200

METRICS = {
    "started": "RunsStarted",
    "completed": "RunsCompleted",
    "failed": "RunsFailed",
    "steps_ok": "StepsSucceeded",
    "steps_failed": "StepsFailed",
    "retries": "StepRetries",
    "signal_latency": "SignalToResumeLatency",
}
