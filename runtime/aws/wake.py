"""The wake path on AWS: SQS messages bring runs to the worker Lambda; timers are SQS
per-message delays when due within 15 minutes, and one EventBridge Scheduler entry per
parked run otherwise. A late or repeated delivery is harmless: the worker replays and
re-parks; an early one (Scheduler fires up to a minute either side of its time) is sent
back with the delay it still has, so a run never wakes before its timer.

A run's schedule, when it has one, is noted on its run item (``TimerLedger``): a re-park at
the same time schedules nothing new, a switch to an SQS delay deletes the schedule, and a
run's end deletes a schedule only if there is one. An SQS delay needs no note: a message
that outlives its purpose only makes the worker replay and re-park. The note rides in the
write that parks or ends the run (``arm`` decides before it, creating a schedule first, so
a crash between the two leaves only an early wake; ``timer`` finishes after it); a change
of timer outside an activation (a cancel) notes it with a write of its own.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from runtime.aws.contract import TIMER_PREFIX
from runtime.core.clock import Clock, now_ms
from runtime.engine.wake import TimerPlan
from runtime.store.base import UNCHANGED, Unchanged
from runtime.store.items import error_code

log = logging.getLogger("lunaflow.aws")

MAX_SQS_DELAY_S = 900
SCHEDULE = "schedule"
HAND_OFF = "hand-off"  # a wake's reason: a run the fetch function began, sent to the runner
RUNNER_PER_REQUEST = 2  # runs one request hands to the runner; the rest go to the wake queue


class TimerLedger(Protocol):
    """Where a run's schedule is noted (the DynamoDB store): ``(due_ms, "schedule")``."""

    def armed_timer(self, run_id: str) -> tuple[int, str] | None: ...

    def arm_timer(self, run_id: str, armed: tuple[int, str] | None) -> None: ...


def schedule_name(run_id: str) -> str:
    """One schedule per run: 'lf-' and 40 hex digits, within Scheduler's 64 of [0-9a-zA-Z-_.]."""
    return TIMER_PREFIX + hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:40]


def wake_message(run_id: str, reason: str, due_ms: int | None = None, tries: int | None = None) -> str:
    """A wake's body: the run, why (``wake``, ``timer``, ``busy``, ``hand-off``), a timer's due time, and
    for a wake that found the run busy, how many times it has."""
    body: dict[str, Any] = {"run_id": run_id, "reason": reason}
    if due_ms is not None:
        body["due_ms"] = due_ms
    if tries is not None:
        body["tries"] = tries
    return json.dumps(body, separators=(",", ":"))


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class AwsWaker:
    def __init__(
        self,
        sqs: Any,
        scheduler: Any,
        clock: Clock,
        *,
        queue_url: str,
        queue_arn: str,
        group: str,
        role_arn: str,
        ledger: TimerLedger,
        invoker: Any = None,
        runner_arn: str | None = None,
    ) -> None:
        """``invoker``: a Lambda client, and ``runner_arn`` the runner's alias it invokes with a
        run the fetch function began and did not finish (``hand_off``); without them such a
        run goes to the wake queue as any other."""
        self._sqs = sqs
        self._invoker = invoker
        self.runner_arn = runner_arn if invoker is not None else None
        self._scheduler = scheduler
        self._clock = clock
        self._ledger = ledger
        self.queue_url = queue_url
        self.queue_arn = queue_arn
        self.group = group
        self.role_arn = role_arn
        # Messages this thread sent, so an activation can tell whether it sent one itself (the
        # worker advances several runs at once, a thread each).
        self._sent = threading.local()

    @property
    def prompts(self) -> int:
        """Wake messages sent by the calling thread so far."""
        return int(getattr(self._sent, "n", 0))

    def _count(self, n: int) -> None:
        self._sent.n = self.prompts + n

    def prompt(self, run_id: str, delay_s: int = 0) -> None:
        held: list[str] | None = getattr(self._sent, "held", None)
        if held is not None and delay_s == 0:
            held.append(run_id)
            return
        self.send(wake_message(run_id, "wake"), delay_s)

    @contextmanager
    def holding(self) -> Iterator[list[str]]:
        """Inside the block, the runs this thread prompts at once are collected instead of
        sent (a request's starts and signals, which ``AwsRuntime.fetch`` advances eagerly
        afterwards, prompting those it does not finish). Their wake-ups are recorded
        already, so a crash before they are sent leaves only the reconciler's re-send."""
        held: list[str] = []
        outer = getattr(self._sent, "held", None)
        self._sent.held = held
        try:
            yield held
        finally:
            self._sent.held = outer

    def hand_off(self, run_ids: Sequence[str]) -> None:
        """Wake the runs a request began and did not finish: the first ``RUNNER_PER_REQUEST``
        each with an asynchronous invocation of the runner (one request, where the wake
        queue's send, receive and delete are three), the rest on the wake queue ten to a
        request (a request that leaves many runs would otherwise wait on an invocation each,
        and take the runner's concurrency from other requests' runs). Without a runner, or
        when Lambda refuses an invocation, the wake queue. Each run's wake-up is recorded
        before this, so a lost invocation (an event Lambda dropped, a failed activation) is
        the reconciler's to re-send, as a lost message is. Inside ``holding``, collected as
        ``prompt`` collects."""
        if not run_ids:
            return
        held: list[str] | None = getattr(self._sent, "held", None)
        if held is not None:
            held.extend(run_ids)
            return
        direct = [] if self.runner_arn is None else list(run_ids[:RUNNER_PER_REQUEST])
        queued = list(run_ids[len(direct) :])
        queued += [run_id for run_id in direct if not self._invoke(run_id)]
        if len(queued) == 1:
            self.send(wake_message(queued[0], "wake"))
        elif queued:
            self.prompt_many(queued)

    def _invoke(self, run_id: str) -> bool:
        try:
            self._invoker.invoke(
                FunctionName=self.runner_arn,
                InvocationType="Event",
                Payload=wake_message(run_id, HAND_OFF).encode("utf-8"),
            )
        except (ClientError, BotoCoreError) as e:
            # Sent or not (a timeout may hide a success), the wake queue takes it: a second
            # activation finds the run's lease taken or its wake served.
            log.warning(
                "handing run '%s' to the runner (%s) failed (%s); it goes to the wake queue instead",
                run_id,
                self.runner_arn,
                e,
            )
            return False
        self._count(1)
        return True

    def send(self, body: str, delay_s: int = 0) -> None:
        self._count(1)
        self._sqs.send_message(
            QueueUrl=self.queue_url, MessageBody=body, DelaySeconds=max(0, min(MAX_SQS_DELAY_S, delay_s))
        )

    def backlog(self) -> int:
        """Wake messages waiting in the queue for a worker (SQS's approximate count)."""
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=self.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return int(attributes.get("ApproximateNumberOfMessages", 0))

    def prompt_many(self, run_ids: Sequence[str]) -> None:
        """Wake many runs, ten to a request (the reconciler's re-sends)."""
        for start in range(0, len(run_ids), 10):
            batch = run_ids[start : start + 10]
            self._count(len(batch))
            answer = self._sqs.send_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "MessageBody": wake_message(r, "wake")} for i, r in enumerate(batch)],
            )
            for failed in answer.get("Failed", []):  # throttled: one at a time
                self._sqs.send_message(
                    QueueUrl=self.queue_url, MessageBody=wake_message(batch[int(failed["Id"])], "wake")
                )

    def arm(self, run_id: str, due_ms: int | None) -> TimerPlan:
        """Decide the timer's transport before the write that parks or ends the run, and
        create a schedule now if one is needed (a crash before that write leaves only an
        early wake); the write records the note the plan carries."""
        armed = self._ledger.armed_timer(run_id)
        if due_ms is None or self._seconds_until(due_ms) <= MAX_SQS_DELAY_S:
            how = "none" if due_ms is None else "sqs"
            return TimerPlan(due_ms, how, armed, None if armed is not None else UNCHANGED)
        if armed is not None and armed[0] == due_ms:
            return TimerPlan(due_ms, "kept", armed)  # parked again at the same time: it still fires
        self._schedule(run_id, due_ms)
        return TimerPlan(due_ms, "schedule", armed, (due_ms, SCHEDULE))

    def timer(self, run_id: str, due_ms: int | None, plan: TimerPlan | None = None) -> None:
        """After the write: the rest of ``plan`` (an SQS delay sent, a schedule no longer
        needed deleted); without a plan, decided now and noted with a write of its own."""
        if plan is None:
            plan = self.arm(run_id, due_ms)
            if not isinstance(plan.note, Unchanged):
                self._ledger.arm_timer(run_id, plan.note)
        if plan.how == "sqs" and due_ms is not None:
            self.send(wake_message(run_id, "timer", due_ms), self._seconds_until(due_ms))
        if plan.how in ("none", "sqs") and plan.armed_before is not None:
            # A longer timer's schedule, no longer needed (one that fired deleted itself).
            self._delete(schedule_name(run_id))

    def early(self, run_id: str, due_ms: int) -> None:
        """A timer's wake came before its time: send it again for the time it still has."""
        self.send(wake_message(run_id, "timer", due_ms), self._seconds_until(due_ms))

    def _seconds_until(self, due_ms: int) -> int:
        """Whole seconds from now to ``due_ms``, rounded up, computed in whole milliseconds:
        in float seconds an epoch time carries an error of 2**-22 s, which rounds a delay of
        exactly 8 s up to 9."""
        return _ceil_div(due_ms - now_ms(self._clock), 1000)

    def _schedule(self, run_id: str, due_ms: int) -> None:
        at = datetime.fromtimestamp(_ceil_div(due_ms, 1000), UTC).strftime("%Y-%m-%dT%H:%M:%S")
        request = {
            "Name": schedule_name(run_id),
            "GroupName": self.group,
            "ScheduleExpression": f"at({at})",
            "ScheduleExpressionTimezone": "UTC",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "ActionAfterCompletion": "DELETE",
            "State": "ENABLED",
            "Target": {
                "Arn": self.queue_arn,
                "RoleArn": self.role_arn,
                "Input": wake_message(run_id, "timer", due_ms),
            },
        }
        try:
            self._scheduler.create_schedule(**request)
        except ClientError as e:
            if error_code(e) != "ConflictException":
                raise
            self._scheduler.update_schedule(**request)

    def _delete(self, name: str) -> None:
        try:
            self._scheduler.delete_schedule(Name=name, GroupName=self.group)
        except ClientError as e:
            if error_code(e) != "ResourceNotFoundException":  # it fired (and deleted itself)
                raise
