"""Reading a project folder and loading its scripts into a sandbox (SPEC section 1).

A project is scripts (``*.lua`` at the top level, loaded in file-name order), modules
(any other ``.lua`` file, reached as ``require "lib.name"``) and an optional
``lunaflow.toml``. Loading runs every script's top level once; top-level code only
declares things.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import tomllib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from runtime.core.durations import parse_ms
from runtime.engine.sandbox import (
    DEFAULT_CPU_SECONDS,
    DEFAULT_INSTRUCTIONS,
    DEFAULT_MEMORY_BYTES,
    LuaMemoryError,
    Sandbox,
)
from runtime.errors import InvalidInput, NoProjectFolder, ProjectLoadError
from runtime.services.queues import MAX_ATTEMPTS, MAX_RETRY_DELAY_S, QueueSettings

SNAPSHOT_NAME = ".lunaflow-project"  # in a code snapshot: the project's name
# wf:version("change-id") with a literal id: runs record the ids their starting code knew.
# queue "name" in the code, but not the event name in on "queue" ("name", fn): the queues a
# project sends to (a [queues.<name>] table may set one it sends to and another handles).
QUEUE_NAMED = re.compile(r"""(?<!["'])\bqueue\s*\(?\s*["']([^"'\\]+)["']""")
_VERSION = re.compile(r"""[:.]version\s*\(\s*["']([^"'\\]+)["']\s*\)""")
# An ended run is kept this long by default, as Lambda durable functions keep an execution's
# history 14 days and Temporal Cloud a namespace's 30 (docs/operations.md, "Retention").
DEFAULT_RETENTION_S = 30 * 86_400.0
# At least a day: EventBridge Scheduler retries a tick's delivery for up to 24 hours, and a
# retried tick joins the run it started by its id only while that run is kept.
MIN_RETENTION_S = 86_400.0


# Every setting lunaflow.toml may hold, by table ("" is the top level; a queue's table is
# "queues.*"). A misspelt name used to be ignored, so the setting it meant silently kept its
# default: a retention of 30 days instead of the one written, pins off, a bound left high.
SETTINGS: dict[str, tuple[str, ...]] = {
    "": ("name", "limits", "deploys", "runs", "queues"),
    "limits": ("memory_mb", "instructions", "cpu_seconds"),
    "deploys": ("pin_runs",),
    "runs": ("retention",),
    "queues.*": ("attempts", "retry_delay"),
}


def _only_known(root: Path, settings: dict[str, Any]) -> None:
    """Refuse a setting lunaflow does not read, naming the nearest one it does."""
    tables: list[tuple[str, str, Any]] = [("", "", settings)]
    for name in ("limits", "deploys", "runs"):
        tables.append((name, f"[{name}]", settings.get(name)))
    queues = settings.get("queues")
    if isinstance(queues, dict):
        tables += [("queues.*", f"[queues.{q}]", t) for q, t in queues.items()]
    for kind, shown, table in tables:
        if not isinstance(table, dict):
            continue  # its own check says what a table must be
        known = SETTINGS[kind]
        for key in table:
            if key in known:
                continue
            near = difflib.get_close_matches(key, known, n=1)
            where = f"in {shown}" if shown else "at the top level"
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise ProjectLoadError(
                f"lunaflow.toml in {root}: {key!r} {where} is not a setting lunaflow reads, so it would "
                f"change nothing; the settings there are {', '.join(known)}; {hint}correct or remove it"
            )


def _whole_limit(root: Path, limits: dict[str, Any], name: str, default: int, example: int, most: int) -> int:
    """A ``[limits]`` setting that is a whole number from 1 to ``most``: ``int()`` alone took
    ``1.5`` as 1 and ``"abc"`` as a crash, a memory bound of 0 refused every script, and one
    past what lupa takes (2**44 MiB) crashed it. A whole float (``1e3``) or a string of digits
    (``"512"``, which ``int()`` took, and a code snapshot may hold) is read as its number."""
    value = limits.get(name, default)
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        number = int(value.strip())
    if number is None or not 1 <= number <= most:
        raise ProjectLoadError(
            f"lunaflow.toml in {root}: limits.{name} must be a whole number from 1 to {most:,} "
            f"(got {value!r}); write, for example, {name} = {example}"
        )
    return number


MiB = 2**20
MAX_MEMORY_MB = 2**20  # a TiB: far past any machine, and well inside what lupa takes
MAX_INSTRUCTIONS = 2**62  # a Lua integer, with room for the hook's arithmetic


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = DEFAULT_MEMORY_BYTES
    instructions: int = DEFAULT_INSTRUCTIONS
    cpu_seconds: float = DEFAULT_CPU_SECONDS


@dataclass(frozen=True)
class ProjectSource:
    """A project's files, read once: nothing touches the disk while runs execute."""

    root: Path
    name: str
    scripts: dict[str, str]  # file name -> source, in load order
    modules: dict[str, tuple[str, str]]  # dotted name -> (relative path, source)
    limits: Limits = field(default_factory=Limits)
    queues: dict[str, QueueSettings] = field(default_factory=dict)
    changes: tuple[str, ...] = ()  # the wf:version change ids the code names
    toml: str = ""  # lunaflow.toml as read (a snapshot of the code writes it back)
    # [deploys] pin_runs = true: a deploy pins the runs its code would not replay to the code
    # they ran on (runtime/platform/versions.py) instead of letting them fail.
    pin_runs: bool = False
    # [runs] retention: how long an ended run (completed or cancelled) is kept after its end
    # before the store deletes it; None keeps it for ever (``retention = "forever"``).
    retention_s: float | None = DEFAULT_RETENTION_S

    @property
    def texts(self) -> list[str]:
        """Every script's and module's source, for what the code names by a pattern."""
        return list(self.scripts.values()) + [text for _, text in self.modules.values()]

    def queue_settings(self, name: str) -> QueueSettings:
        return self.queues.get(name, QueueSettings())

    @cached_property
    def digest(self) -> str:
        """The code's version: a hash of every script, module and the settings. A run records
        the version it started on; a run pinned to one runs on it (``runtime/platform/versions.py``)."""
        whole = json.dumps(
            {"scripts": self.scripts, "modules": self.modules, "toml": self.toml}, sort_keys=True
        )
        return hashlib.sha256(whole.encode("utf-8")).hexdigest()[:16]

    def snapshot(self, folder: Path) -> None:
        """Write the code (scripts, modules, settings) to ``folder``, which ``read`` loads
        back as the same version: the code a pinned run needs outlives the project's files."""
        partial = folder.with_name(folder.name + ".new")
        partial.mkdir(parents=True, exist_ok=True)
        for name, text in self.scripts.items():
            (partial / name).write_text(text, encoding="utf-8")
        for rel, text in self.modules.values():
            target = partial / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        if self.toml:
            (partial / "lunaflow.toml").write_text(self.toml, encoding="utf-8")
        (partial / SNAPSHOT_NAME).write_text(self.name, encoding="utf-8")
        partial.replace(folder)

    @classmethod
    def read(cls, root: str | Path) -> ProjectSource:
        root = Path(root).resolve()
        if not root.is_dir():
            raise NoProjectFolder(
                f"project folder {root} does not exist; a project is a folder of .lua scripts"
            )
        settings: dict[str, Any] = {}
        toml_path = root / "lunaflow.toml"
        toml = ""
        if toml_path.exists():
            toml = toml_path.read_text(encoding="utf-8")
            try:
                settings = tomllib.loads(toml)
            except tomllib.TOMLDecodeError as e:
                raise ProjectLoadError(f"lunaflow.toml in {root} is not valid TOML: {e}") from e
            _only_known(root, settings)
        scripts = {p.name: p.read_text(encoding="utf-8") for p in sorted(root.glob("*.lua"))}
        modules: dict[str, tuple[str, str]] = {}
        for p in sorted(root.rglob("*.lua")):
            rel = p.relative_to(root)
            if len(rel.parts) == 1 or any(part.startswith(".") for part in rel.parts):
                continue
            if rel.parts[0] == "tests":
                continue
            dotted = ".".join((*rel.parts[:-1], rel.stem))
            modules[dotted] = (rel.as_posix(), p.read_text(encoding="utf-8"))
        limits_cfg = settings.get("limits", {})
        cpu_seconds = limits_cfg.get("cpu_seconds", DEFAULT_CPU_SECONDS)
        if isinstance(cpu_seconds, bool) or not isinstance(cpu_seconds, int | float) or not cpu_seconds > 0:
            raise ProjectLoadError(
                f"lunaflow.toml in {root}: limits.cpu_seconds must be a number of seconds above 0 "
                f"(got {cpu_seconds!r}); write, for example, cpu_seconds = 60"
            )
        limits = Limits(
            memory_bytes=MiB
            * _whole_limit(root, limits_cfg, "memory_mb", DEFAULT_MEMORY_BYTES // MiB, 256, MAX_MEMORY_MB),
            instructions=_whole_limit(
                root, limits_cfg, "instructions", DEFAULT_INSTRUCTIONS, 200_000_000, MAX_INSTRUCTIONS
            ),
            cpu_seconds=float(cpu_seconds),
        )
        snapshot_of = root / SNAPSHOT_NAME  # a snapshot keeps its project's name
        default_name = snapshot_of.read_text(encoding="utf-8") if snapshot_of.is_file() else root.name
        name = str(settings.get("name", default_name))
        queues = {
            qname: _queue_settings(root, qname, q) for qname, q in (settings.get("queues") or {}).items()
        }
        texts = list(scripts.values()) + [text for _, text in modules.values()]
        changes = tuple(sorted({m for text in texts for m in _VERSION.findall(text)}))
        deploys = settings.get("deploys", {})
        pin_runs = deploys.get("pin_runs", False) if isinstance(deploys, dict) else None
        if not isinstance(pin_runs, bool):
            raise ProjectLoadError(
                f"lunaflow.toml in {root}: [deploys] must be a table whose pin_runs is true or false "
                f"(got {deploys!r}); write [deploys] pin_runs = true to keep runs on the code they need"
            )
        retention_s = _retention(root, settings.get("runs", {}))
        return cls(root, name, scripts, modules, limits, queues, changes, toml, pin_runs, retention_s)


def _retention(root: Path, table: Any) -> float | None:
    """``[runs] retention``: a duration of at least a day, or ``"forever"``."""
    where = f"lunaflow.toml in {root}: [runs] retention"
    example = 'write, for example, retention = "30d" (or "forever" to keep ended runs)'
    if not isinstance(table, dict):
        raise ProjectLoadError(f"lunaflow.toml in {root}: [runs] must be a table (got {table!r}); {example}")
    value = table.get("retention", None)
    if value is None:
        return DEFAULT_RETENTION_S
    if value == "forever":
        return None
    try:
        retention_s = parse_ms(value, "[runs] retention") / 1000
    except InvalidInput as e:
        raise ProjectLoadError(f"{where} is not a duration ({e}); {example}") from None
    if retention_s < MIN_RETENTION_S:
        raise ProjectLoadError(
            f"{where} is {value!r}, under the least of 1d: a schedule's tick may be delivered again "
            f"up to a day later, and joins the run it started only while that run is kept; {example}"
        )
    return retention_s


def _queue_settings(root: Path, name: str, table: Any) -> QueueSettings:
    """``[queues.<name>]``: bounded by what SQS can honour, so a project loads alike everywhere."""
    where = f"lunaflow.toml in {root}: queues.{name}"
    if not isinstance(table, dict):
        raise ProjectLoadError(
            f'{where} must be a table, like [queues.{name}] attempts = 3 retry_delay = "30s"'
        )
    attempts = table.get("attempts", QueueSettings.attempts)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= MAX_ATTEMPTS:
        raise ProjectLoadError(
            f"{where}.attempts must be a whole number from 1 to {MAX_ATTEMPTS}, the deliveries of a "
            f"message before it goes to the dead-letter store (got {attempts!r})"
        )
    retry = table.get("retry_delay", "30s")
    retry_s = parse_ms(retry, f"queues.{name}.retry_delay") / 1000
    if retry_s > MAX_RETRY_DELAY_S:
        raise ProjectLoadError(
            f"{where}.retry_delay is over the limit of 12h, the longest SQS holds a message back "
            f"(got {retry!r})"
        )
    return QueueSettings(attempts=attempts, retry_delay_s=retry_s)


@dataclass(frozen=True)
class Declaration:
    kind: str  # workflow | object | queue | fetch
    name: str
    script: str


def load(source: ProjectSource, sandbox: Sandbox) -> list[Declaration]:
    """Run every script's top level in ``sandbox``; refuse the project on the first error."""

    def module_source(name: str) -> tuple[str | None, str]:
        path = name.replace(".", "/") + ".lua"
        found = source.modules.get(name)
        return (found[1], found[0]) if found else (None, path)

    sandbox.register("module_source", module_source)
    for script, text in source.scripts.items():
        try:
            ok, err = sandbox.engine.load_script(script, text, source.limits.instructions)
        except LuaMemoryError:
            ok, err = False, "not enough memory"
        if not ok:
            raise ProjectLoadError(
                f"project {source.name}: script {script} was refused: {sandbox.explain(str(err))}"
            )
    return [
        Declaration(str(d["kind"]), str(d["name"]), str(d["script"]))
        for d in sandbox.engine.declarations().values()
    ]
