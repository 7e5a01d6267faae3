"""What ``lunaflow dev`` prints: one line per run event, coloured by kind on a terminal.

The engine reports events through the ``Observer`` seam (runtime/engine/observe.py); this
observer turns each into a line naming the run, the step, the step id and the error, so a
failing attempt, a scheduled retry, a failed, cancelled or completed run shows up where the
developer is looking. Log lines said by run code carry their run id, and the server's own
log records are printed in the same stream, in order.

Verbosity: ``quiet`` keeps failures only (failed attempts, failed runs, warnings and
errors); the default adds starts, retries, completions, cancels and ``log.info`` lines;
``verbose`` adds every attempt that succeeded and every wait a signal resolved.

Everything printed that came from users (run ids, step names, errors, log messages) is
written as text: there is no markup to interpret, and control characters are escaped so a
run id cannot move the cursor or recolour the terminal.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import IO

from runtime.core.values import compact

QUIET, NORMAL, VERBOSE = 0, 1, 2
MAX_CANCELS_KEPT = 100_000  # cancels (and starts) remembered, so each is printed once

_COLOURS = {
    "failed": "31",  # red
    "error": "1;31",  # bold red
    "retry": "33",  # yellow
    "warn": "33",
    "completed": "32",  # green
    "cancelled": "35",  # magenta
    "started": "36",  # cyan
    "ok": "2",  # dim
    "signal": "34",  # blue
    "info": "",
    "note": "1",  # bold
}
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F)}


def plain(text: object) -> str:
    """User text made safe to print: control characters (an escape sequence in a run id)
    shown as ``\\xNN`` instead of acting on the terminal."""
    return str(text).translate(_CONTROL)


def colour_wanted(stream: IO[str]) -> bool:
    """Colour on a terminal, unless NO_COLOR is set (https://no-color.org) or TERM is dumb."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Terminal:
    """An ``Observer`` that prints, and a logging handler for the same stream."""

    def __init__(
        self, stream: IO[str] | None = None, *, level: int = NORMAL, colour: bool | None = None
    ) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.level = level
        self.colour = colour_wanted(self.stream) if colour is None else colour
        self._lock = threading.Lock()
        self._cancelled: dict[str, None] = {}  # run ids whose cancel was printed, oldest first
        self._started: dict[str, None] = {}  # run ids whose start was printed, oldest first

    # --- writing -----------------------------------------------------------------------

    def _paint(self, kind: str, text: str) -> str:
        code = _COLOURS.get(kind, "")
        return f"\x1b[{code}m{text}\x1b[0m" if self.colour and code else text

    def write(self, kind: str, text: str, detail: str | None = None) -> None:
        """One line: the time, then ``text`` coloured by ``kind``; ``detail`` (a traceback)
        follows indented, uncoloured."""
        stamp = time.strftime("%H:%M:%S")
        lines = [f"{stamp} {self._paint(kind, text)}"]
        if detail:
            lines += ["    " + plain(line.expandtabs(4)) for line in detail.splitlines() if line.strip()]
        with self._lock:
            try:
                self.stream.write("\n".join(lines) + "\n")
                self.stream.flush()
            except (BrokenPipeError, ValueError):  # the reader went away; the server goes on
                pass

    def note(self, text: str) -> None:
        """A line from the server itself (reloads, addresses), printed at every level."""
        with self._lock:
            try:
                self.stream.write(self._paint("note", "lunaflow dev:") + " " + text + "\n")
                self.stream.flush()
            except (BrokenPipeError, ValueError):
                pass

    def _run(self, kind: str, run_id: str, text: str, detail: str | None = None) -> None:
        self.write(kind, f"run {plain(run_id)}  {text}", detail)

    # --- the Observer ------------------------------------------------------------------

    def _first(self, said: dict[str, None], run_id: str) -> bool:
        """Whether this is the first time the event is said of the run: a start or a cancel
        this process made is reported by the engine, and found again among those of every
        process on the data folder."""
        with self._lock:
            if run_id in said:
                return False
            said[run_id] = None
            while len(said) > MAX_CANCELS_KEPT:
                del said[next(iter(said))]
            return True

    def started(self, run_id: str, workflow: str) -> None:
        if self._first(self._started, run_id) and self.level >= NORMAL:
            self._run("started", run_id, f"started ({plain(workflow)})")

    def activation(self, run_id: str, workflow: str) -> None:
        pass

    def activation_ended(self, run_id: str, workflow: str) -> None:
        pass

    def step_started(self, run_id: str, workflow: str, step: str, attempt: int) -> None:
        pass

    def step(
        self,
        run_id: str,
        workflow: str,
        step: str,
        attempt: int,
        ok: bool,
        *,
        step_id: str = "",
        error: str | None = None,
    ) -> None:
        if ok:
            if self.level >= VERBOSE:
                self._run(
                    "ok", run_id, f"step '{plain(step)}' attempt {attempt} ok  (step id {plain(step_id)})"
                )
            return
        self._run(
            "failed",
            run_id,
            f"step '{plain(step)}' attempt {attempt} failed  (step id {plain(step_id)}): {plain(error)}",
        )

    def retry(
        self, run_id: str, workflow: str, step: str, *, attempt: int = 0, retry_at: float | None = None
    ) -> None:
        if self.level < NORMAL:
            return
        when = ""
        if retry_at is not None:
            wait = max(0.0, retry_at - time.time())
            when = f" at {time.strftime('%H:%M:%S', time.localtime(retry_at))} (in {duration(wait)})"
        self._run("retry", run_id, f"step '{plain(step)}' retries: attempt {attempt}{when}")

    def signal_resumed(self, run_id: str, workflow: str, latency_s: float) -> None:
        if self.level >= VERBOSE:
            self._run("signal", run_id, f"resumed by a signal {duration(latency_s)} after it arrived")

    def ended(
        self,
        run_id: str,
        workflow: str,
        status: str,
        *,
        error: str | None = None,
        traceback: str | None = None,
    ) -> None:
        if status == "failed":
            self._run("error", run_id, f"failed: {plain(error)}", traceback)
        elif self.level >= NORMAL:
            self._run("completed", run_id, "completed")

    def continued(self, run_id: str, workflow: str, generation: int) -> None:
        if self.level >= NORMAL:
            self._run("continued", run_id, f"continued as new: generation {generation}")

    def cancelled(self, run_id: str, workflow: str) -> None:
        if self._first(self._cancelled, run_id) and self.level >= NORMAL:
            self._run("cancelled", run_id, "cancelled")

    # --- logging -----------------------------------------------------------------------

    def handler(self) -> logging.Handler:
        return _Handler(self)


class _Handler(logging.Handler):
    """Log records in the terminal's stream: run code's lines with their run id, the
    server's own with their logger name. Records the observer already reported (a failed
    run's traceback) are skipped."""

    def __init__(self, terminal: Terminal) -> None:
        super().__init__()
        self.terminal = terminal

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if getattr(record, "observed", False):
                return
            t = self.terminal
            kind = (
                "error"
                if record.levelno >= logging.ERROR
                else "warn"
                if record.levelno >= logging.WARNING
                else "info"
            )
            if kind == "info" and t.level < NORMAL:
                return
            message = record.getMessage()
            detail = None
            if record.exc_info:
                detail = logging.Formatter().formatException(record.exc_info)
            head, _, rest = message.partition("\n")
            if rest:
                detail = rest + ("\n" + detail if detail else "")
            if record.name == "lunaflow.lua":
                level = {"info": "info", "warn": "warn", "error": "error"}[kind]
                run = getattr(record, "run", None)
                who = f"run {plain(run)}  " if run else ""
                t.write(kind, f"{who}log {level}  {plain(head)}", detail)
            else:
                t.write(kind, f"{record.levelname} {record.name}: {plain(head)}", detail)
        except Exception:  # a log line must never take the server down
            self.handleError(record)


def duration(seconds: float) -> str:
    """A duration as the terminal prints every one (retries, signal latency, limits, an
    attempt's time): under 0.1 s in milliseconds (``45ms``), under a minute in seconds with
    one decimal (``1.0s``), then in the units run code writes durations in (``2m05s``,
    ``3h20m``). The unit is chosen after rounding, so 0.9996 s is ``1.0s``, never
    ``1000ms``."""
    s = max(0.0, seconds)
    ms = round(s * 1000)
    if ms < 100:
        return f"{ms}ms"
    if round(s, 1) < 60:
        return f"{s:.1f}s"
    whole = round(s)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    minutes = round(s / 60)
    return f"{minutes // 60}h{minutes % 60:02d}m"


__all__ = ["NORMAL", "QUIET", "VERBOSE", "Terminal", "compact", "duration", "plain"]
