"""The deployment settings an operator passes as CDK context (``-c name=value``), with their
defaults and checks. Each is documented in docs/operations.md.

- ``alarmEmail``: an address subscribed to the alarm topic (no subscription without it).
- ``fetchConcurrency``, ``workerConcurrency``, ``runnerConcurrency``, ``queueConcurrency``,
  ``consoleConcurrency``: each function's reserved concurrency (a cap, and capacity kept for
  it); ``none`` leaves a function unreserved, for an account whose concurrency quota is too
  small to reserve any. The runner's cap bounds a burst of requests' hand-offs, apart from
  the worker's wake queue.
- ``wakeMaxConcurrency``: the wake queue's event source maximum concurrency (at most the
  worker's reserved concurrency less the reconciler's one, so SQS never drives the worker
  into throttling); ``queueMaxConcurrency``: the same for each handled user queue.
- ``databaseDeletionProtection``: ``true`` protects the Aurora cluster from deletion, and
  ``cdk destroy`` then fails until it is turned off; by default off, and the cluster leaves
  a final snapshot when the stack is destroyed.
- ``stuckAfterMinutes``: a run woken this long ago and still not moving counts in the
  ``StuckRuns`` metric, which an alarm watches (default 15; 2 to 1,440).
- ``ingress``: ``api`` (default) puts the fetch function behind an API Gateway HTTP API, with
  its throttling and access logs; ``url`` behind a Lambda Function URL instead, with no
  per-request charge of its own, no throttle but the fetch function's reserved concurrency,
  and no access log (docs/operations.md weighs the two).
- ``eagerMs``: how long the fetch function advances the runs a request started or signalled,
  as far as a park or an end with no step between, before it answers (default 1000; 0 to
  10,000; 0 hands every start and signal to the worker, as before issue 31).
- ``tracing``: ``true`` turns X-Ray active tracing on for every function (the default
  sampling rule: the first request each second, then 5 %, about $5 per million traces);
  off by default, as Lambda's own default is, since the metrics, the logs and the console
  already say where a run is and the traces were a tenth of a wake-heavy project's bill.
- ``force``: ``true`` lets the deploy gate pass code that would make in-flight runs diverge;
  the stack output ``DeployGateReport`` then names the runs it breaks. Off by default.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from constructs import Node

# Defaults: 275 reserved executions in all, well inside the default account quota of 1,000
# (Lambda keeps 100 unreserved). The worker advances runs; fetch answers HTTP (the API's
# throttle, 100 requests/s at about 0.1 s each, needs far fewer); the runner takes the runs
# fetch hands off (at most one a request); the console serves people.
CONCURRENCY = {"Fetch": 100, "Worker": 100, "Runner": 50, "Queue": 20, "Console": 5}
WAKE_MAX_CONCURRENCY = 90  # the worker's 100 less headroom for reconcile and wakes in flight
QUEUE_MAX_CONCURRENCY = 10
# The reconciler re-sends a lost wake after a minute, then after pauses that double; a run
# still not moving a quarter of an hour later needs a person.
STUCK_AFTER_MINUTES = 15
EAGER_MS = 1000
MAX_EAGER_MS = 10_000
INGRESSES = ("api", "url")
# What SNS accepts to subscribe by email: a local part, an @ and a domain with a dot; "@" or
# "ops@" would pass a bare "@" test and fail only at deploy, after the stack began.
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s.]+")
MIN_EVENT_SOURCE_CONCURRENCY = 2  # SQS event source maximum concurrency: 2 to 1,000
MAX_EVENT_SOURCE_CONCURRENCY = 1000


class SettingsError(Exception):
    pass


@dataclass(frozen=True)
class Settings:
    alarm_email: str | None
    concurrency: dict[str, int | None]  # function role name -> reserved concurrency (None: unreserved)
    wake_max_concurrency: int
    queue_max_concurrency: int
    database_deletion_protection: bool
    force: bool = False
    stuck_after_minutes: int = STUCK_AFTER_MINUTES
    ingress: str = "api"
    eager_ms: int = EAGER_MS
    tracing: bool = False

    @classmethod
    def from_context(cls, node: Node) -> Settings:
        def get(name: str) -> Any:
            return node.try_get_context(name)

        _only_known(node.get_all_context())

        email = get("alarmEmail")
        if email is not None and (not isinstance(email, str) or not EMAIL.fullmatch(email)):
            raise SettingsError(
                f"-c alarmEmail={email!r} is not an email address; the alarm topic subscribes it by "
                "email, so pass one like -c alarmEmail=ops@example.com (or leave it out)"
            )
        concurrency = {
            role: _reserved(f"{role[0].lower()}{role[1:]}Concurrency", get, default)
            for role, default in CONCURRENCY.items()
        }
        # The worker's reserved concurrency keeps one invocation for the reconciler's minute
        # (it runs on the worker); the queue function has no other caller. An event source
        # left at its default follows a lowered reservation, so lowering only
        # workerConcurrency works.
        room = {"Worker": 1, "Queue": 0}
        limits: list[tuple[str, int, int | None, str, int]] = []
        for name, default, role in (
            ("wakeMaxConcurrency", WAKE_MAX_CONCURRENCY, "Worker"),
            ("queueMaxConcurrency", QUEUE_MAX_CONCURRENCY, "Queue"),
        ):
            reserved = concurrency[role]
            most = None if reserved is None else reserved - room[role]
            if most is not None and most < MIN_EVENT_SOURCE_CONCURRENCY:
                least = MIN_EVENT_SOURCE_CONCURRENCY + room[role]
                raise SettingsError(
                    f"-c {role[0].lower()}{role[1:]}Concurrency={reserved} is below {least}: its queue's "
                    f"event source takes at least {MIN_EVENT_SOURCE_CONCURRENCY} concurrent invocations"
                    + (" and the reconciler one more" if room[role] else "")
                    + f"; reserve at least {least}, or none"
                )
            given = get(name)
            value = _whole(name, given, default if most is None else min(default, most))
            limits.append((name, value, most, f"{role[0].lower()}{role[1:]}Concurrency", room[role]))
        wake, queue = limits[0][1], limits[1][1]
        for name, value, most, role, kept in limits:
            if not MIN_EVENT_SOURCE_CONCURRENCY <= value <= MAX_EVENT_SOURCE_CONCURRENCY:
                raise SettingsError(
                    f"-c {name}={value} is outside SQS's range for an event source's maximum "
                    f"concurrency ({MIN_EVENT_SOURCE_CONCURRENCY} to {MAX_EVENT_SOURCE_CONCURRENCY})"
                )
            if most is not None and value > most:
                spare = f" less the reconciler's {kept}" if kept else ""
                raise SettingsError(
                    f"-c {name}={value} exceeds -c {role}={most + kept}{spare}: SQS would invoke the "
                    f"function past its reserved concurrency and be throttled; lower {name} to at most "
                    f"{most} or raise {role}"
                )
        protection = get("databaseDeletionProtection")
        if protection not in (None, True, False, "true", "false"):
            raise SettingsError(f"-c databaseDeletionProtection={protection!r}: use true or false")
        force = get("force")
        if force not in (None, True, False, "true", "false"):
            raise SettingsError(
                f"-c force={force!r}: use true (deploy although in-flight runs would diverge) or false"
            )
        stuck = _whole("stuckAfterMinutes", get("stuckAfterMinutes"), STUCK_AFTER_MINUTES)
        if not 2 <= stuck <= 1440:
            raise SettingsError(
                f"-c stuckAfterMinutes={stuck} is outside 2 to 1440: the reconciler looks every minute "
                "and re-sends a lost wake after one, so fewer than 2 would count runs it is still healing"
            )
        ingress = get("ingress") or "api"
        if ingress not in INGRESSES:
            raise SettingsError(
                f"-c ingress={ingress!r} is not a way in: the fetch function takes HTTP through an API "
                "Gateway HTTP API (api, the default) or a Lambda Function URL (url); pass one of them"
            )
        eager = _whole("eagerMs", get("eagerMs"), EAGER_MS)
        if not 0 <= eager <= MAX_EAGER_MS:
            raise SettingsError(
                f"-c eagerMs={eager} is outside 0 to {MAX_EAGER_MS}: a request waits for its runs' "
                "activations that long before it answers; 0 hands every start and signal to the worker"
            )
        tracing = get("tracing")
        if tracing not in (None, True, False, "true", "false"):
            raise SettingsError(
                f"-c tracing={tracing!r}: use true (X-Ray active tracing on every function) or false "
                "(the default)"
            )
        return cls(
            tracing=tracing in (True, "true"),
            eager_ms=eager,
            ingress=ingress,
            force=force in (True, "true"),
            stuck_after_minutes=stuck,
            alarm_email=email,
            concurrency=concurrency,
            wake_max_concurrency=wake,
            queue_max_concurrency=queue,
            database_deletion_protection=protection in (True, "true"),
        )


def _whole(name: str, value: Any, default: int) -> int:
    if value is None:
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise SettingsError(f"-c {name}={value!r} is not a whole number") from None


# Every -c setting lunaflow reads (docs/operations.md), with infra/app.py's project and stack.
KNOWN = frozenset(
    {
        "project",
        "stack",
        "alarmEmail",
        *(f"{role[0].lower()}{role[1:]}Concurrency" for role in CONCURRENCY),
        "wakeMaxConcurrency",
        "queueMaxConcurrency",
        "databaseDeletionProtection",
        "stuckAfterMinutes",
        "ingress",
        "eagerMs",
        "tracing",
        "force",
    }
)
# A setting's shape: CDK's own context (feature flags "@aws-cdk/...", "aws:cdk:...", lookups
# cached in cdk.context.json, "acknowledged-issue-numbers") never has it.
_SETTING_SHAPE = re.compile(r"^[a-z][A-Za-z0-9]*$")


def _only_known(context: dict[str, Any]) -> None:
    """A misspelt setting (-c stuckAfterMinute=30) was ignored: the setting it meant kept its
    default, as a misspelt lunaflow.toml setting did."""
    for key in sorted(context):
        if _SETTING_SHAPE.match(key) and key not in KNOWN:
            near = difflib.get_close_matches(key, sorted(KNOWN), n=1)
            hint = f"did you mean -c {near[0]}? " if near else ""
            raise SettingsError(
                f"-c {key} is not a setting lunaflow reads, so it would change nothing; {hint}"
                "the settings are in docs/operations.md"
            )


def _reserved(name: str, get: Any, default: int) -> int | None:
    value = get(name)
    if value in ("none", "None"):
        return None
    reserved = _whole(name, value, default)
    if reserved < 1:
        # 0 would throttle every invocation: a stopped function, never what a setting means.
        raise SettingsError(
            f"-c {name}={reserved}: reserved concurrency must be at least 1 (0 stops the function); "
            f"use -c {name}=none to leave it unreserved"
        )
    return reserved
