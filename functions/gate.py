"""The deploy gate: a CloudFormation custom resource whose handler runs the NEW code's
bundle and replays every in-flight run's journal read-only before the functions' ``live``
aliases move to the new versions (infra/capabilities/gate.py orders them). A divergence
answers FAILED, so CloudFormation rolls the update back before any run meets the new code;
the reason names the runs and each one's first diverging entry (stack events), and the same
line goes to this function's log group.

With ``[deploys] pin_runs = true`` in the new code, the diverging runs are pinned to the code
deployed until now (``ProjectDigest`` of the update's old properties, whose code the gate
saved in the values bucket when it let it through) instead: they keep running on it, and
the update goes on (``runtime/aws/versions.py``). Every version the gate lets through is
saved so.

``Force = "true"`` (``cdk deploy -c force=true``) answers SUCCESS anyway, with what it
breaks in the resource's ``Report`` attribute, which the stack prints as an output.

An update whose ``CodeDigest`` is not this bundle's own is a rollback (CloudFormation puts
back the old properties while this function still holds the new code, or the reverse):
the old code served these runs until now, so it is let through without a check.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from typing import Any

import botocore.session
from aws_lambda_powertools.utilities.data_classes import CloudFormationCustomResourceEvent
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions._runtime import logger
from runtime.aws import container
from runtime.aws.config import AwsConfig
from runtime.aws.contract import GATE_LOGICAL_ID, GATE_MARGIN_S, GATE_THREADS, Env
from runtime.aws.runtime import AwsRuntime, Clients
from runtime.platform.check import GateReport, check_in_flight

REASON_BYTES = 3000  # CloudFormation takes a response of at most 4 KB


def _gate_runtime() -> AwsRuntime:
    """Read-only: the gate loads the new code without accepting it (no migration, no secret
    pin); it writes only pins of runs to the old code, and the new code's snapshot."""
    handed = container.serving_now()
    if handed is not None:
        return handed
    return AwsRuntime(
        AwsConfig.from_env(), Clients.from_botocore(botocore.session.get_session()), read_only=True
    )


def check(runtime: AwsRuntime, remaining_ms: int) -> GateReport:
    deadline = time.monotonic() + max(0.0, remaining_ms / 1000 - GATE_MARGIN_S)
    return check_in_flight(
        runtime.platform.new_worker, runtime.store, deadline=deadline, threads=GATE_THREADS
    )


def pinned_to(event: CloudFormationCustomResourceEvent) -> str:
    """The version of the code deployed until now (the update's old properties)."""
    old = event.get("OldResourceProperties") or {}
    return str(old.get("ProjectDigest") or "")


def pin(runtime: AwsRuntime, report: GateReport, event: CloudFormationCustomResourceEvent) -> list[str]:
    """With ``[deploys] pin_runs`` in the new code: pin the diverging runs to the code deployed
    until now, when that version's code is in the bucket (saved by the gate that let it
    through); none otherwise, and the gate refuses as before. Returns the runs pinned."""
    platform = runtime.platform
    old = pinned_to(event)
    if (
        not report.diverging
        or report.unchecked
        or not platform.source.pin_runs
        or not old
        or platform.versions is None
        or runtime.snapshots is None
        or not runtime.snapshots.has(old)
    ):
        return []
    runs = [v.run_id for v in report.diverging]
    platform.versions.pin({r: old for r in runs if platform.versions.pinned(r) is None})
    return runs


def keep_code(runtime: AwsRuntime) -> None:
    """The code let through, kept in the bucket: a later deploy may pin runs to it."""
    if runtime.snapshots is not None:
        runtime.snapshots.save(runtime.platform.source)


def _respond(
    event: CloudFormationCustomResourceEvent, status: str, reason: str, data: dict[str, str]
) -> None:
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason.encode("utf-8")[:REASON_BYTES].decode("utf-8", "ignore"),
            "PhysicalResourceId": GATE_LOGICAL_ID,
            "StackId": event.stack_id,
            "RequestId": event.request_id,
            "LogicalResourceId": event.logical_resource_id,
            "Data": {k: v[:REASON_BYTES] for k, v in data.items()},
        }
    ).encode("utf-8")
    # The pre-signed URL was signed without a content type: send none.
    request = urllib.request.Request(
        event.response_url, data=body, method="PUT", headers={"Content-Type": ""}
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (CloudFormation's URL)
        response.read()


def decide(event: CloudFormationCustomResourceEvent, remaining_ms: int) -> tuple[str, str, dict[str, str]]:
    """(status, reason, data) for one request."""
    if event.request_type == "Delete":
        return "SUCCESS", "nothing to check when the gate is removed", {"Report": ""}
    props = event.resource_properties
    if props.get("CodeDigest") != os.environ.get(Env.CODE_DIGEST):
        reason = "a rollback to the code that served the runs until now: let through unchecked"
        return "SUCCESS", reason, {"Report": reason}
    runtime = _gate_runtime()
    report = check(runtime, remaining_ms)
    pinned = pin(runtime, report, event)
    summary = report.summary()
    if report.clean or (pinned and not report.unchecked and len(pinned) == len(report.diverging)):
        if pinned:
            summary = (
                f"{len(report.verdicts)} in-flight run(s) replayed on the new code; {len(pinned)} it would "
                f"not replay keep running on the code they ran on ({pinned_to(event)}): "
                + ", ".join(pinned[:10])
                + (f" and {len(pinned) - 10} more" if len(pinned) > 10 else "")
            )
        keep_code(runtime)
        logger.info("deploy gate: %s", summary, extra={"checked": len(report.verdicts), "pinned": pinned})
        return "SUCCESS", summary, {"Report": summary}
    diverging = [{"run_id": v.run_id, "workflow": v.workflow, "entry": v.message} for v in report.diverging]
    extra = {"diverging": diverging, "unchecked": report.unchecked}
    if str(props.get("Force", "false")).lower() == "true":
        breaks = f"forced (-c force=true): deployed although {summary}; those runs fail when they next wake"
        logger.warning("deploy gate: %s", breaks, extra=extra)
        return "SUCCESS", breaks, {"Report": breaks}
    reason = (
        f"lunaflow deploy gate refused the new code: {summary}. In-flight runs replay their journal on "
        "the code they next wake on, so it must take the recorded path. Keep the old step names or branch "
        'with wf:version("change-id") and deploy again (lunaflow check --aws lists the runs), or deploy '
        "with -c force=true to ship anyway (those runs fail when they next wake)"
    )
    logger.error("deploy gate: %s", reason, extra=extra)
    return "FAILED", reason, {}


@logger.inject_lambda_context
def handler(raw: dict[str, Any], context: LambdaContext) -> None:
    event = CloudFormationCustomResourceEvent(raw)
    try:
        status, reason, data = decide(event, context.get_remaining_time_in_millis())
    except Exception as e:  # an answer is owed, or CloudFormation waits out the service timeout
        logger.exception("deploy gate failed to check")
        status, reason, data = "FAILED", f"lunaflow deploy gate could not check the in-flight runs: {e!r}", {}
    _respond(event, status, reason, data)
