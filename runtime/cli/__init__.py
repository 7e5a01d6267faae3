"""The ``lunaflow`` command: ``dev``, ``check`` and the console (SPEC section 4).

Console commands work on a data folder (``PROJECT/.lunaflow`` by default), beside a
running ``lunaflow dev`` or without one. Exit codes: 0 done; 1 refused or failed (the
reason on stderr; for ``check``, a run would diverge); 2 bad usage; 3 ``signal`` reached
an ended run and was set aside.

Everything printed that came from users (run ids, step names, errors, payloads) is text:
the rich consoles have markup off, and styles are applied with ``Text`` spans only.

The commands live in ``runtime.cli``'s modules (``runs_commands``, ``stack_commands``,
``project_commands``); what they share in ``common`` and ``output``. Here: the parser and
``main``, which turns what must never reach the user as a traceback into a line.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path

from runtime import __version__
from runtime.cli import output, project_commands, runs_commands, stack_commands
from runtime.cli.common import Usage, console_parser
from runtime.cli.output import EXIT_OK, EXIT_REFUSED, EXIT_USAGE, stdout
from runtime.dev.server import data_folder
from runtime.errors import (
    LunaflowError,
    NoProjectFolder,
    NoSuchRun,
)
from runtime.store.base import RunFilter
from runtime.store.sqlite import STORE_FILE, SQLiteStore


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lunaflow", description="Durable workflows written in Lua.")
    parser.add_argument("--version", action="version", version=f"lunaflow {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def console(name: str, help: str) -> argparse.ArgumentParser:
        return console_parser(sub, name, help)

    # In this order in `lunaflow --help`: a project's code, its runs, what runs beside them.
    project_commands.add_commands(sub, console)
    runs_commands.add_commands(sub, console)
    stack_commands.add_commands(sub, console)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command's exit code. The ``lunaflow`` script pip installs calls this, so what
    must never reach the user as a traceback is caught here."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
        stdout.flush()
        return code
    except BrokenPipeError:
        # The reader went away (`lunaflow runs --json | head`): nothing left to say to it.
        # Later writes (the interpreter's last flush) go nowhere instead of failing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except (Usage, NoProjectFolder) as e:  # a folder that is none is bad usage, whichever command
        output.err.print(f"lunaflow {args.command}: {e}")
        return EXIT_USAGE
    except NoSuchRun as e:
        output.err.print(f"lunaflow {args.command}: {e}; {_where_runs_are(args, e.run_id)}")
        return EXIT_REFUSED
    except LunaflowError as e:
        output.err.print(f"lunaflow {args.command}: {e}")
        return EXIT_REFUSED
    except sqlite3.DatabaseError as e:  # a data file other than the store's (kv, queues)
        folder = data_folder(getattr(args, "project", "."), getattr(args, "data", None))
        output.err.print(
            f"lunaflow {args.command}: a data file in {folder} cannot be read ({e}); lunaflow reads its "
            "SQLite files only whole — move the damaged file away, or put back a backup"
        )
        return EXIT_REFUSED


def _where_runs_are(args: argparse.Namespace, run_id: str) -> str:
    """The hint after ``no run 'x'``: the runs whose id begins with it (an id typed short), or
    where the command looked and how to list what is there."""
    if getattr(args, "aws", False):
        from runtime.aws.contract import stack_name

        stack = getattr(args, "stack", None) or stack_name(Path(args.project).resolve().name)
        return f"the runs of stack '{stack}' are listed by `lunaflow runs --aws`"
    folder = data_folder(getattr(args, "project", "."), getattr(args, "data", None))
    begun = _ids_beginning(folder, run_id)
    if begun:
        more = ", ..." if len(begun) > SUGGESTED else ""
        return f"runs whose id begins with '{run_id}': {', '.join(begun[:SUGGESTED])}{more}"
    return f"the runs in {folder} are listed by `lunaflow runs` (another project's data: --data DIR)"


SUGGESTED = 3


def _ids_beginning(folder: Path, prefix: str) -> list[str]:
    """Up to ``SUGGESTED`` + 1 ids of the data folder's runs that begin with ``prefix``, newest
    first (none when the store cannot be read: the hint is then the general one)."""
    store_file = folder / STORE_FILE
    if not prefix or not store_file.exists():
        return []
    try:
        store = SQLiteStore(store_file, read_only=True)
        try:
            found = store.search_runs(RunFilter(id_prefix=prefix), status=None, offset=0, limit=SUGGESTED + 1)
        finally:
            store.close()
    except (LunaflowError, sqlite3.Error, OSError):
        return []
    return [r.id for r in found]


def entry() -> None:
    sys.exit(main())
