"""AWS prices the cost benchmarks use: one table, dated, overridable (``--price name=value``).

On-demand, us-east-1, USD. Sources: the AWS pricing pages named beside each line, as read on
PRICES_DATE. DynamoDB on-demand throughput is the price since the 1 November 2024 cut (half
of the earlier $1.25 / $0.25). Lambda durable functions and Step Functions are the peers the
engine is compared with, priced by their published models (PEER_MODELS below).
"""

from __future__ import annotations

PRICES_DATE = "2026-12-01"

PRICES: dict[str, float] = {
    # DynamoDB (aws.amazon.com/dynamodb/pricing/on-demand/)
    "dynamodb_wru_per_million": 0.625,  # table and index writes alike
    "dynamodb_rru_per_million": 0.125,
    "dynamodb_storage_gb_month": 0.25,
    "dynamodb_pitr_gb_month": 0.20,
    # Lambda, arm64 (aws.amazon.com/lambda/pricing/)
    "lambda_requests_per_million": 0.20,
    "lambda_arm_gb_second": 0.0000133334,
    # SQS standard queue, per 64 KB chunk of a request (aws.amazon.com/sqs/pricing/)
    "sqs_requests_per_million": 0.40,
    # EventBridge Scheduler, invocations: a schedule that fires (creating and deleting one is
    # an API call, not billed) (aws.amazon.com/eventbridge/pricing/)
    "scheduler_invocations_per_million": 1.00,
    # X-Ray, traces recorded (aws.amazon.com/xray/pricing/): the functions trace actively
    "xray_traces_per_million": 5.00,
    # API Gateway HTTP API, first 300 million a month (aws.amazon.com/api-gateway/pricing/)
    "http_api_requests_per_million": 1.00,
    # CloudWatch (aws.amazon.com/cloudwatch/pricing/): logs ingested, custom metrics
    "cloudwatch_logs_gb": 0.50,
    "cloudwatch_metric_month": 0.30,
    # S3 standard (values too large for an item): requests
    "s3_put_per_thousand": 0.005,
    "s3_get_per_thousand": 0.0004,
    # Peers
    "durable_operations_per_million": 8.00,  # Lambda durable functions, per durable operation
    "durable_data_written_gb": 0.25,  # Lambda durable functions, checkpoint data written
    "stepfunctions_transitions_per_million": 25.00,  # Step Functions Standard
    "durable_retained_gb_month": 0.15,  # Lambda durable functions, data retained (14 days by default)
    # Models, not prices (overridable the same way): the share of invocations that start a
    # new container (INIT is billed on managed runtimes since 2025-08-01), each INIT's length
    # for lunaflow's bundle (bench/cold_start.py: import and first activation, with bytecode)
    # and for a durable function's Python handler (its SDK and boto3), and the share of
    # invocations X-Ray's default sampling rule records (one a second, then 5 %).
    "cold_start_share": 0.01,
    "lunaflow_init_ms": 1200.0,
    "durable_init_ms": 400.0,
    "xray_sampled_share": 0.05,
    "durable_retention_days": 14.0,
}

# The engine's Lambda model: a function's billed duration is its round trips to AWS services
# times ROUND_TRIP_MS plus HANDLER_MS of its own (the replay, Lua, JSON), at MEMORY_MB; moto
# in one process cannot time AWS, so this is a model, stated, not a measurement.
ROUND_TRIP_MS = 8.0
HANDLER_MS = 15.0
MEMORY_MB = 1024  # infra/memory.py function_memory_mb at the default bound (its floor)
# Log lines per invocation: Lambda's START/END/REPORT (~350 bytes, text format), which
# lunaflow's functions no longer write (JSON log format, system log level WARN), and the
# runtime's own line when a metric moved (one EMF line, ~400 bytes).
PLATFORM_LOG_BYTES = 350
OWN_LOG_BYTES = 400
LOG_BYTES_PER_INVOCATION = OWN_LOG_BYTES  # lunaflow's, since issue 31


def apply(overrides: list[str]) -> dict[str, float]:
    """The table with ``name=value`` overrides (a name not in the table is refused)."""
    prices = dict(PRICES)
    for item in overrides:
        name, _, value = item.partition("=")
        if name not in prices:
            raise SystemExit(f"unknown price '{name}'; known: {', '.join(sorted(prices))}")
        prices[name] = float(value)
    return prices
