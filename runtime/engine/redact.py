"""Secrets kept out of what the platform writes and shows.

Every value the platform hands to Lua as a secret is remembered here, and text bound for
the journal, a run's error, a log line, a dead letter or a handler's error log passes
through ``Redactor.text`` first: the value becomes ``[secret 'name']``. The journal holds
the redacted error, so the console, the CLI and the DynamoDB table never see the value.

What it cannot catch: a value derived from a secret (its base64, a hash, a slice), and a
secret shorter than ``MIN_CHARS`` (replacing every "abc" would garble every message). Values
a run records on purpose (a step's result, a run's result) are kept as recorded: replay
must hand back what the body returned.
"""

from __future__ import annotations

import json
import threading
from typing import Any

MIN_CHARS = 4


def marker(name: str) -> str:
    return f"[secret '{name}']"


class Redactor:
    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._known: dict[str, str] = {}  # a form of the value as text may carry it -> marker
        self._order: tuple[tuple[str, str], ...] = ()  # longest first, replaced whole

    def add(self, name: str, value: str) -> None:
        """A secret's value was handed out: from now on it is redacted."""
        if len(value) < MIN_CHARS or value in self._known:
            return
        shown = marker(name)
        # The value as it is, and as JSON text quotes it (a log line's fields, an error that
        # quotes an encoded value).
        forms = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
        with self._guard:
            for form in forms:
                self._known.setdefault(form, shown)
            self._order = tuple(sorted(self._known.items(), key=lambda kv: -len(kv[0])))

    def text(self, text: str) -> str:
        for value, shown in self._order:
            if value in text:
                text = text.replace(value, shown)
        return text

    def value(self, value: Any) -> Any:
        """A JSON-like value with every string (keys too) redacted."""
        if not self._order:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        return value
