"""Test stand-ins: services, object methods and outbound HTTP answered by a test instead of
the real thing (the harnesses' ``services=``, ``objects=`` and ``http=``, ``lunaflow test``'s
stubs).

``StandinServices`` wraps a platform's real services: a call with a stand-in goes to it, any
other to the real service. The platform never knows; it only sees ``Services``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from runtime.services.base import ObjectRunner, QueueRunner, Services

# A stand-in for a kind of service: (name, method, args) -> values.
ServiceFn = Callable[[str, str, list[Any]], list[Any]]
# A stand-in for object classes: (class, key, method, args) -> values.
ObjectFn = Callable[[str, str, str, list[Any]], list[Any]]
# A stand-in for outbound HTTP: (request spec, body) -> {status, headers, body}.
HttpFn = Callable[[dict[str, Any], bytes | None], dict[str, Any]]


class NotStubbed(Exception):
    """Raised by an ``objects=`` stand-in for a call it leaves to the real object."""


class StandinServices:
    def __init__(
        self,
        real: Services,
        *,
        services: dict[str, ServiceFn] | None = None,
        objects: ObjectFn | None = None,
        http: HttpFn | None = None,
    ) -> None:
        self.real = real
        self.standins = dict(services or {})
        self.objects = objects
        self.http_standin = http

    def declare(self, kind: str, name: str, opts: Any, project_root: Path) -> None:
        if kind not in self.standins:
            self.real.declare(kind, name, opts, project_root)

    def call(self, kind: str, name: str, method: str, args: list[Any]) -> list[Any]:
        standin = self.standins.get(kind)
        if standin is not None:
            return list(standin(name, method, args))
        return self.real.call(kind, name, method, args)

    def call_object(
        self, runner: ObjectRunner, cls: str, key: str, method: str, args: list[Any]
    ) -> list[Any]:
        if self.objects is not None:
            try:
                return list(self.objects(cls, key, method, args))
            except NotStubbed:
                pass  # this call goes to the real object
        return self.real.call_object(runner, cls, key, method, args)

    def http(self, spec: dict[str, Any], data: bytes | None) -> dict[str, Any]:
        if self.http_standin is not None:
            return self.http_standin(spec, data)
        return self.real.http(spec, data)

    def run_due(self, runner: QueueRunner) -> int:
        return self.real.run_due(runner)

    def next_due(self, runner: QueueRunner) -> float | None:
        return self.real.next_due(runner)

    def close(self) -> None:
        self.real.close()
