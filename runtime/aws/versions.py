"""Runs pinned to the code they need, on AWS (issue 29.2; ``runtime/platform/versions.py``
says what a pin is). A pin is an attribute of the run's item (``pin``: the version), read by
the worker at each activation of the run; each version's code is one object in the values
bucket, ``code/<version>.json`` (its scripts, modules and settings), written by the deploy
gate for every version it lets through, so the code a later deploy pins runs to is there
to load. A worker meeting a pinned run loads that version's code (once per container) and
advances the run on it: one function serves every version, so wakes need no routing."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from runtime.aws.contract import CODE_PREFIX
from runtime.engine.project import SNAPSHOT_NAME, ProjectSource
from runtime.store.blobs import Blobs
from runtime.store.dynamodb import DynamoDBStore


def code_key(version: str) -> str:
    return f"{CODE_PREFIX}{version}.json"


class RunItemPins:
    """Pins as the run items' ``pin`` attribute (they cannot be listed without a scan)."""

    def __init__(self, store: DynamoDBStore) -> None:
        self.store = store

    def get(self, run_id: str) -> str | None:
        return self.store.pin_of(run_id)

    def set(self, pins: dict[str, str | None]) -> None:
        for run_id, version in pins.items():
            self.store.set_pin(run_id, version)

    def all(self) -> dict[str, str] | None:
        return None


class BucketSnapshots:
    """Each version's code as one object of the values bucket, unpacked into the container's
    temporary folder to be loaded."""

    def __init__(self, blobs: Blobs, folder: Path | None = None) -> None:
        self.blobs = blobs
        self.folder = folder or Path(tempfile.gettempdir()) / "lunaflow-code"

    def save(self, source: ProjectSource) -> None:
        if self.blobs.find(code_key(source.digest)) is not None:
            return  # written once: a version's code never changes
        body = {
            "name": source.name,
            "scripts": source.scripts,
            "modules": source.modules,
            "toml": source.toml,
        }
        self.blobs.put_at(code_key(source.digest), json.dumps(body, sort_keys=True))

    def has(self, version: str) -> bool:
        return self.blobs.find(code_key(version)) is not None

    def load(self, version: str) -> ProjectSource | None:
        text = self.blobs.find(code_key(version))
        if text is None:
            return None
        body = json.loads(text)
        root = self.folder / version
        if not root.is_dir():
            partial = self.folder / f"{version}.new"
            partial.mkdir(parents=True, exist_ok=True)
            for name, script in body["scripts"].items():
                (partial / name).write_text(script, encoding="utf-8")
            for rel, module in body["modules"].values():
                target = partial / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(module, encoding="utf-8")
            if body.get("toml"):
                (partial / "lunaflow.toml").write_text(body["toml"], encoding="utf-8")
            (partial / SNAPSHOT_NAME).write_text(body["name"], encoding="utf-8")
            partial.replace(root)
        return ProjectSource.read(root)
