"""What a project needs from its infrastructure: its queues, databases and secrets.

The CDK stack reads this to create a queue per ``on "queue"`` handler, a database when the
project declares one, and Secrets Manager access for the secrets its scripts name. Loading
runs each script's top level in a sandbox whose host functions only record declarations.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.engine.project import QUEUE_NAMED, ProjectSource, load
from runtime.engine.sandbox import DEFAULT_MEMORY_BYTES, Sandbox
from runtime.engine.schedules import Schedule, parse_schedule, schedules_of
from runtime.services.base import Declaration
from runtime.services.queues import QueueSettings

_SECRET = re.compile(r"""\bsecret\s*\(?\s*["']([^"'\\]+)["']""")


@dataclass(frozen=True)
class ProjectNeeds:
    name: str
    root: Path
    workflows: list[str] = field(default_factory=list)
    queues: list[str] = field(default_factory=list)  # names with an on "queue" handler
    sent_queues: list[str] = field(default_factory=list)  # names used with queue "name"
    # Every queue above, with its attempts and retry delay from lunaflow.toml (or the defaults).
    queue_settings: dict[str, QueueSettings] = field(default_factory=dict)
    databases: list[str] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)
    has_fetch: bool = False
    schedules: dict[str, Schedule] = field(default_factory=dict)  # one Scheduler schedule each
    version: str = ""  # the code's version (ProjectSource.digest): the deploy gate's ProjectDigest
    memory_bytes: int = DEFAULT_MEMORY_BYTES  # limits.memory_mb: each Lua state's bound


def describe(project: str | Path, source: ProjectSource | None = None) -> ProjectNeeds:
    """``source``: the project as already read (by a caller that needs its texts too)."""
    source = ProjectSource.read(project) if source is None else source
    sandbox = Sandbox(
        max_memory=source.limits.memory_bytes,
        instructions=source.limits.instructions,
        cpu_seconds=source.limits.cpu_seconds,
    )
    databases: list[str] = []
    declared: list[Declaration] = []

    def declare(kind: str, name: str, opts: Any, where: str | None = None) -> None:
        if kind == "database" and name not in databases:
            databases.append(name)
        if kind == "schedule":
            parse_schedule(name, json.loads(opts))  # refused at its line, as on every platform
            declared.append(Declaration(kind, name, json.loads(opts), where or ""))

    sandbox.register("declare", declare)
    declarations = load(source, sandbox)
    texts = source.texts
    secrets = sorted({m for text in texts for m in _SECRET.findall(text)})
    sent = sorted({m for text in texts for m in QUEUE_NAMED.findall(text)})
    handled = sorted(d.name for d in declarations if d.kind == "queue")
    workflows = sorted(d.name for d in declarations if d.kind == "workflow")
    return ProjectNeeds(
        name=source.name,
        root=source.root,
        workflows=workflows,
        queues=handled,
        sent_queues=sent,
        queue_settings={name: source.queue_settings(name) for name in sorted(set(handled) | set(sent))},
        databases=databases,
        secrets=secrets,
        has_fetch=any(d.kind == "fetch" for d in declarations),
        schedules=schedules_of(source.name, declared, workflows),
        version=source.digest,
        memory_bytes=source.limits.memory_bytes,
    )
