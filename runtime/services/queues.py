"""``queue "name"``: messages with delayed sends, retries with a visibility delay, and a
dead-letter store for messages that used up their attempts."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runtime.core.durations import parse_ms
from runtime.services.base import QueueRunner, ServiceError
from runtime.services.keys import options

SCHEMA = """
CREATE TABLE IF NOT EXISTS queue_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL, body TEXT NOT NULL, sent_at REAL NOT NULL, available_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0, state TEXT NOT NULL DEFAULT 'ready', last_error TEXT
);
CREATE INDEX IF NOT EXISTS queue_ready ON queue_messages (state, available_at);
"""

MAX_DELAY_S = 15 * 60  # the same bound as SQS per-message delay, so code behaves alike on AWS
MAX_ATTEMPTS = 1000  # a queue's attempts: SQS's largest maxReceiveCount
MAX_RETRY_DELAY_S = 12 * 60 * 60  # a queue's retry_delay: SQS's longest visibility timeout
BATCH = 10


@dataclass(frozen=True)
class QueueSettings:
    attempts: int = 3
    retry_delay_s: float = 30.0


class Queues:
    def __init__(
        self,
        db: Callable[[], sqlite3.Connection],
        now: Callable[[], float],
        settings: Callable[[str], QueueSettings],
    ) -> None:
        self._db = db
        self._now = now
        self._settings = settings

    def call(self, name: str, method: str, args: list[Any]) -> list[Any]:
        if method != "send":
            raise ServiceError(f"queue '{name}' has no method '{method}'; use send")
        body = args[0] if args else None
        opts = options(
            args[1] if len(args) > 1 else None, ("delay",), f"queue '{name}':send", '{ delay = "30s" }'
        )
        delay = 0.0
        if opts.get("delay") is not None:
            delay = parse_ms(opts["delay"], f"the delay of queue '{name}':send") / 1000
            if delay > MAX_DELAY_S:
                raise ServiceError(
                    f"queue '{name}':send delay {opts['delay']} is over the limit of 15m; "
                    "for longer waits start a workflow and wf:sleep"
                )
        now = self._now()
        cur = self._db().execute(
            "INSERT INTO queue_messages (queue, body, sent_at, available_at) VALUES (?,?,?,?)",
            (name, json.dumps(body, separators=(",", ":")), now, now + delay),
        )
        return [str(cur.lastrowid)]

    def run_due(self, runner: QueueRunner) -> int:
        """Deliver every due message whose queue has a handler, a batch at a time."""
        calls = 0
        while True:
            now = self._now()
            rows = (
                self._db()
                .execute(
                    "SELECT id, queue, body, attempts FROM queue_messages "
                    "WHERE state = 'ready' AND available_at <= ? "
                    "ORDER BY available_at, id LIMIT ?",
                    (now, BATCH),
                )
                .fetchall()
            )
            rows = [r for r in rows if runner.has_queue_handler(r[1])]
            if not rows:
                return calls
            for msg_id, queue, body, attempts in rows:
                attempt = attempts + 1
                error = runner.call_queue_handler(
                    queue, {"id": str(msg_id), "body": json.loads(body), "attempts": attempt}
                )
                calls += 1
                if error is None:
                    self._db().execute("DELETE FROM queue_messages WHERE id = ?", (msg_id,))
                    continue
                settings = self._settings(queue)
                if attempt >= settings.attempts:
                    self._db().execute(
                        "UPDATE queue_messages SET attempts = ?, state = 'dead', last_error = ? WHERE id = ?",
                        (attempt, error, msg_id),
                    )
                else:
                    self._db().execute(
                        "UPDATE queue_messages SET attempts = ?, available_at = ?, last_error = ? "
                        "WHERE id = ?",
                        (attempt, self._now() + settings.retry_delay_s, error, msg_id),
                    )

    def next_due(self, runner: QueueRunner) -> float | None:
        """The next ready message's due time, among queues that have a handler: a message
        nobody handles waits without holding up the rest."""
        ready = self._db().execute("SELECT DISTINCT queue FROM queue_messages WHERE state = 'ready'")
        handled = [q for (q,) in ready if runner.has_queue_handler(q)]
        if not handled:
            return None
        marks = ",".join("?" * len(handled))
        row = (
            self._db()
            .execute(
                f"SELECT MIN(available_at) FROM queue_messages WHERE state = 'ready' AND queue IN ({marks})",
                handled,
            )
            .fetchone()
        )
        return None if row[0] is None else float(row[0])

    def dead_letters(self, queue: str | None = None) -> list[dict[str, Any]]:
        rows = (
            self._db()
            .execute(
                "SELECT id, queue, body, attempts, last_error FROM queue_messages WHERE state = 'dead' "
                "AND (? IS NULL OR queue = ?) ORDER BY id",
                (queue, queue),
            )
            .fetchall()
        )
        return [
            {"id": str(r[0]), "queue": r[1], "body": json.loads(r[2]), "attempts": r[3], "error": r[4]}
            for r in rows
        ]
