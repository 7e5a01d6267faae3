"""Runs pinned to the code they need (issue 29.2).

A deploy (``Platform.install``: ``lunaflow dev``'s reload, a harness's ``deploy``; the AWS
deploy gate) replays every in-flight run on the new code first. A run the new code would not
replay is not left to fail at its next wake: it is **pinned** to the code it ran on until
then (that code's version, ``ProjectSource.digest``), and every later activation of it runs
on that code, kept loaded beside the current one. Runs the new code replays move to it, as
before. A pinned run moves to the current code only when asked (``lunaflow migrate RUN_ID``,
which replays it first); when it ends, its pin is dropped, and a version no pin needs any
more is unloaded (retired).

Two things must outlive the process for that: the pins, and each pinned version's code (the
project's files have changed, and a restarted ``lunaflow dev`` must still run the old code).
Locally the pins are a file beside the store (``pins.json``, rewritten whole through a
rename) and each version's code a snapshot folder (``code/<version>/``) that
``ProjectSource.read`` loads back as the same version.

A pinned version's code is one Lua state, lent to one activation at a time: runs pinned to
old code advance one after another, the current code's as many at once as the platform's
workers allow.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from runtime.engine.project import ProjectSource
from runtime.engine.worker import Worker

log = logging.getLogger("lunaflow.versions")

PINS_FILE = "pins.json"
CODE_DIR = "code"


class Pins(Protocol):
    """Where the pins live: run id -> the code version it runs on."""

    def get(self, run_id: str) -> str | None: ...

    def set(self, pins: dict[str, str | None]) -> None:
        """Pin (a version) or unpin (None) each run named."""

    def all(self) -> dict[str, str] | None:
        """Every pin, where they can be listed cheaply (None: they cannot; nothing retires
        then but with the process)."""


class Snapshots(Protocol):
    """Where each pinned version's code lives."""

    def save(self, source: ProjectSource) -> None: ...

    def load(self, version: str) -> ProjectSource | None: ...


class PinFile:
    """``pins.json`` in a data folder (``{"pins": {run id: version}}``), read again whenever
    it changed, so a ``lunaflow migrate`` from another process reaches a running server."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / PINS_FILE
        self._lock = threading.Lock()
        self._seen: tuple[float, int] | None = None
        self._pins: dict[str, str] = {}

    def get(self, run_id: str) -> str | None:
        return self.all().get(run_id)

    def all(self) -> dict[str, str]:
        with self._lock:
            try:
                st = self.path.stat()
            except FileNotFoundError:
                self._seen, self._pins = None, {}
                return {}
            stamp = (st.st_mtime, st.st_size)
            if stamp != self._seen:
                found = json.loads(self.path.read_text(encoding="utf-8")).get("pins", {})
                self._pins = {str(k): str(v) for k, v in found.items()}
                self._seen = stamp
            return dict(self._pins)

    def set(self, pins: dict[str, str | None]) -> None:
        with self._lock:
            try:
                current = json.loads(self.path.read_text(encoding="utf-8")).get("pins", {})
            except FileNotFoundError:
                current = {}
            for run_id, version in pins.items():
                if version is None:
                    current.pop(run_id, None)
                else:
                    current[run_id] = version
            temp = self.path.with_name(f".{PINS_FILE}.{os.getpid()}.{threading.get_ident()}")
            temp.write_text(json.dumps({"pins": current}, sort_keys=True), encoding="utf-8")
            os.replace(temp, self.path)
            self._seen = None


class SnapshotFolder:
    """``code/<version>/`` in a data folder: the files of each version a pin needs."""

    def __init__(self, data_dir: Path) -> None:
        self.root = Path(data_dir) / CODE_DIR

    def save(self, source: ProjectSource) -> None:
        folder = self.root / source.digest
        if not folder.is_dir():
            source.snapshot(folder)

    def load(self, version: str) -> ProjectSource | None:
        folder = self.root / version
        return ProjectSource.read(folder) if folder.is_dir() else None


class Versions:
    """The pins of one platform and the old code they need, loaded on demand."""

    def __init__(
        self, pins: Pins, snapshots: Snapshots, make_worker: Callable[[ProjectSource], Worker]
    ) -> None:
        self.pins = pins
        self.snapshots = snapshots
        self._make_worker = make_worker
        self._kept: dict[str, Worker] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def pinned(self, run_id: str) -> str | None:
        return self.pins.get(run_id)

    def pin(self, runs: dict[str, str], keep: Worker | None = None) -> None:
        """Pin each run to its version; ``keep``, the worker of that code if at hand (its
        code is saved first, so a pin never names code that cannot be loaded)."""
        if not runs:
            return
        if keep is not None:
            self.snapshots.save(keep.source)
            with self._guard:
                self._kept.setdefault(keep.source.digest, keep)
        self.pins.set(dict(runs))

    def unpin(self, *run_ids: str) -> None:
        if run_ids:
            self.pins.set({r: None for r in run_ids})
        self.retire()

    def retire(self) -> None:
        """Unload the versions no pin needs any more."""
        listed = self.pins.all()
        if listed is None:
            return
        needed = set(listed.values())
        with self._guard:
            for version in [v for v in self._kept if v not in needed]:
                del self._kept[version]
                log.info("code version %s retired: no run is pinned to it", version)

    @contextmanager
    def lend(self, version: str) -> Iterator[Worker | None]:
        """The worker of ``version`` (loaded from its snapshot if need be), to one activation
        at a time; None when its code is nowhere to be found."""
        with self._guard:
            lock = self._locks.setdefault(version, threading.Lock())
        with lock:
            with self._guard:
                worker = self._kept.get(version)
            if worker is None or worker.code.tainted:
                source = self.snapshots.load(version)
                if source is None:
                    yield None
                    return
                worker = self._make_worker(source)
                with self._guard:
                    self._kept[version] = worker
            yield worker
