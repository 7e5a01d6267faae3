"""The contract between the platform and a set of services."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from runtime.errors import LunaflowError, ProjectLoadError


class ServiceError(LunaflowError):
    """A service call failed in a way the caller should see (bad SQL, a refused value...)."""


@dataclass(frozen=True)
class Declaration:
    """What a script's top level declared for its services (``database "name" {...}``,
    ``object "Name"``): a worker keeps them while its code loads, and the platform hands
    them to ``Services.declare`` only once the code is accepted, so a refused load (or a
    read-only one) migrates nothing."""

    kind: str
    name: str
    opts: Any
    where: str = ""  # the script and line, e.g. "main.lua:6"

    def refused(self, project: str, e: Exception) -> ProjectLoadError:
        """The load error for a declaration its service refused, worded as a refusal while
        the script ran is (``project p: script main.lua was refused: main.lua:2: ...``)."""
        if not self.where:
            return ProjectLoadError(f"project {project} was refused: {e}")
        script = self.where.rsplit(":", 1)[0]
        return ProjectLoadError(f"project {project}: script {script} was refused: {self.where}: {e}")


class ObjectRunner(Protocol):
    """Runs an object's Lua method in a worker's Lua state."""

    def call_object(
        self, cls: str, key: str, method: str, state: Any, args: list[Any]
    ) -> tuple[list[Any], Any]:
        """Returns ``(results, new_state)``; raises ServiceError when the method raised."""


class QueueRunner(Protocol):
    def call_queue_handler(self, queue: str, message: dict[str, Any]) -> str | None:
        """Runs ``on "queue"``'s handler; returns None on success or the error message."""

    def has_queue_handler(self, queue: str) -> bool: ...


class Services(Protocol):
    def declare(self, kind: str, name: str, opts: Any, project_root: Path) -> None:
        """A script of accepted code declared ``database "name" {...}`` and the like: open
        it and apply its pending migrations."""

    def call(self, kind: str, name: str, method: str, args: list[Any]) -> list[Any]:
        """``kv "ns":get(...)``, ``database "db":exec(...)``, ``queue "q":send(...)``."""

    def call_object(
        self, runner: ObjectRunner, cls: str, key: str, method: str, args: list[Any]
    ) -> list[Any]:
        """Call one key's method, serialized per key, persisting its state afterwards."""

    def http(self, spec: dict[str, Any], data: bytes | None) -> dict[str, Any]:
        """``http.request``: the response as ``{status, headers, body}``."""

    def run_due(self, runner: QueueRunner) -> int:
        """Deliver due queue messages; returns how many handler calls were made."""

    def next_due(self, runner: QueueRunner) -> float | None:
        """Epoch seconds of the next queued message with a handler that will fall due, if any."""

    def close(self) -> None: ...
