"""What the ``lunaflow`` commands print: standard output as they write it (a closed pipe
and a refused write said as such), the consoles, the exit codes, and the run tables.

Everything printed that came from users (run ids, step names, errors, payloads) is text:
the rich consoles have markup off, and styles are applied with ``Text`` spans only.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from runtime.errors import LunaflowError
from runtime.store.base import UNREADABLE_RUN, RunRecord

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_SET_ASIDE = 0, 1, 2, 3


class OutputFailed(LunaflowError):
    """Standard output refused a write (`lunaflow runs > /dev/full`)."""


class _Stdout:
    """Standard output as the command writes it: whichever ``sys.stdout`` is current (a test
    may swap it), its failures named as the output's. A closed pipe stays a
    ``BrokenPipeError``: ``main`` answers that one (the reader went away)."""

    def write(self, text: str) -> int:
        try:
            return sys.stdout.write(text)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise OutputFailed(f"the output could not be written ({e.strerror or e})") from e

    def flush(self) -> None:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise OutputFailed(f"the output could not be written ({e.strerror or e})") from e

    def __getattr__(self, name: str) -> Any:  # isatty, encoding, fileno: rich asks
        return getattr(sys.stdout, name)


class _Output(Console):
    def on_broken_pipe(self) -> None:
        # rich's own answer is exit 1, which fails `set -o pipefail; lunaflow runs | head`:
        # ``main`` answers the reader's going away instead (nothing left to say, exit 0).
        self.quiet = True
        raise BrokenPipeError()


stdout = _Stdout()


out = _Output(file=stdout, highlight=False, soft_wrap=True, markup=False, emoji=False)  # type: ignore[arg-type]


err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)


def _when(at: float | None) -> str:
    if at is None:
        return ""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _emit(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2, default=str), file=stdout)


def _run_dict(run: RunRecord) -> dict[str, Any]:
    return run.summary()


def _current(r: Any) -> Text:
    """What a run is on; for a run the store could list but not read (a value missing from
    its bucket), why, so the broken run is marked rather than shown as healthy."""
    if r.error and r.error.startswith(UNREADABLE_RUN):
        return Text(r.error, style="red")
    return Text((r.current_step or "") if r.status not in ("completed", "cancelled") else "")


WHOLE, WRAPS = True, False


MIN_WRAPPED = 8  # the narrowest a column that wraps is made


def _print_table(
    title: str | None, columns: Sequence[tuple[str, bool]], rows: Sequence[Sequence[Text]]
) -> None:
    """A table whose ``WHOLE`` columns (ids, names, statuses) are never cut or wrapped, so
    two runs never look alike and an id can be copied, and whose other columns wrap. When
    the whole columns do not fit the terminal with room for the others, each row becomes a
    block of lines instead."""
    widths = [
        max([len(head), *(row[i].cell_len for row in rows)]) if whole else MIN_WRAPPED
        for i, (head, whole) in enumerate(columns)
    ]
    if sum(widths) + 3 * len(columns) + 1 <= out.width:  # a cell's padding and border
        table = Table(title=title)
        for (head, whole), width in zip(columns, widths, strict=True):
            if whole:
                table.add_column(head, no_wrap=True, min_width=width)
            else:
                table.add_column(head, overflow="fold")
        for row in rows:
            table.add_row(*row)
        out.print(table)
        return
    if title:
        out.print(Text(title), style="italic")
    for row in rows:
        _print_block(columns, row)


def _print_block(columns: Sequence[tuple[str, bool]], row: Sequence[Text]) -> None:
    """One row as lines: its first cell alone, the other whole cells on a line when they fit
    (each on its own otherwise, never cut), then each other cell, wrapped, with its name."""
    out.print(Text(row[0].plain, style="bold"), no_wrap=True, overflow="ignore", crop=False)
    whole = [cell for (_, w), cell in zip(columns[1:], row[1:], strict=True) if w and cell.plain]
    line = Text("  ") + Text(" · ").join(whole)
    for part in [line] if line.cell_len <= out.width else [Text("  ") + cell for cell in whole]:
        out.print(part, no_wrap=True, overflow="ignore", crop=False)
    for (head, w), cell in zip(columns[1:], row[1:], strict=True):
        if not w and cell.plain:
            for line in (Text(f"{head}: ") + cell).wrap(out, max(out.width - 2, MIN_WRAPPED)):
                line.rstrip()
                out.print(Text("  ") + line, no_wrap=True, overflow="ignore", crop=False)


_STATUS_STYLES = {
    "failed": "red",
    "completed": "green",
    "cancelled": "dim",
    "awaiting": "yellow",
    "sleeping": "cyan",
}


def _status(status: str) -> Text:
    return Text(status, style=_STATUS_STYLES.get(status, ""))
