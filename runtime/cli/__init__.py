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
from runtime.cli import output
from runtime.cli.common import STACK_HELP, Usage, _port, _positive, _run_workers, _stuck_after
from runtime.cli.output import EXIT_OK, EXIT_REFUSED, EXIT_USAGE, stdout
from runtime.cli.project_commands import cmd_check, cmd_deploy, cmd_dev, cmd_new, cmd_record, cmd_test
from runtime.cli.runs_commands import (
    cmd_cancel,
    cmd_migrate,
    cmd_resume,
    cmd_retry,
    cmd_runs,
    cmd_show,
    cmd_signal,
    cmd_start,
)
from runtime.cli.stack_commands import cmd_limits, cmd_schedule, cmd_schedules, cmd_secret_set
from runtime.core.journal import Status
from runtime.dev.server import RUN_WORKERS, data_folder
from runtime.errors import (
    LunaflowError,
    NoProjectFolder,
    NoSuchRun,
)
from runtime.platform.why import STUCK_AFTER_S


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lunaflow", description="Durable workflows written in Lua.")
    parser.add_argument("--version", action="version", version=f"lunaflow {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def console(name: str, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.add_argument(
            "--project",
            "-p",
            default=os.environ.get("LUNAFLOW_PROJECT", "."),
            help="the project folder (default: $LUNAFLOW_PROJECT or .)",
        )
        p.add_argument("--data", help="the data folder (default: PROJECT/.lunaflow)")
        p.add_argument("--json", action="store_true", help="print JSON instead of tables")
        p.add_argument(
            "--aws", action="store_true", help="work on the deployed stack instead of a data folder"
        )
        p.add_argument("--stack", help="with --aws: " + STACK_HELP)
        return p

    p = sub.add_parser("dev", help="serve a project locally: fetch routes, runs, timers, /_console")
    p.add_argument("project")
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8787, help="0 to 65535; 0 picks a free one")
    p.add_argument("--data", help="the data folder (default: PROJECT/.lunaflow)")
    p.add_argument("--no-reload", action="store_true", help="do not reload the project when its files change")
    p.add_argument(
        "--workers",
        type=_run_workers,
        default=RUN_WORKERS,
        help=f"runs advanced at once, a Lua state each (1-64, default {RUN_WORKERS})",
    )
    p.add_argument(
        "--stuck-after",
        type=_stuck_after,
        default=STUCK_AFTER_S,
        help="warn of a run woken this long ago and not taken by a worker (a duration; default 5m)",
    )
    loud = p.add_mutually_exclusive_group()
    loud.add_argument(
        "-q", "--quiet", action="store_true", help="print failures only (failed attempts and runs, warnings)"
    )
    loud.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also print every step attempt that succeeded and signals",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="serve requests for this Host name too (loopback names always are); repeatable",
    )
    p.set_defaults(func=cmd_dev)

    p = sub.add_parser(
        "check",
        help="replay in-flight runs and golden journals against the current code; list those that diverge",
    )
    p.add_argument("project")
    p.add_argument("--data", help="the data folder (default: PROJECT/.lunaflow)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--aws", action="store_true", help="check the deployed stack's runs against this code")
    p.add_argument("--stack", help="with --aws: " + STACK_HELP)
    p.set_defaults(func=cmd_check)

    p = console("record", "record a run's journal as a golden of the project (tests/golden/)")
    p.add_argument("run_id")
    p.add_argument("--name", help="the golden's file name, without .json (default: the run id)")
    p.set_defaults(func=cmd_record)

    p = sub.add_parser(
        "test",
        help="run the project's Lua tests (tests/*_test.lua) on a fake clock and replay its golden journals",
    )
    p.add_argument("project")
    p.add_argument("-k", help="run only tests whose name contains this")
    p.set_defaults(func=cmd_test)

    p = sub.add_parser(
        "new", help="scaffold a project: a workflow, a route, a migration, a test, editor types"
    )
    p.add_argument("name")
    p.set_defaults(func=cmd_new)

    p = sub.add_parser("deploy", help="check in-flight runs against the new code, then cdk deploy")
    p.add_argument("project")
    p.add_argument("--stack", help=STACK_HELP)
    p.add_argument("--data", help="check a local data folder instead of the deployed stack")
    p.add_argument("--force", action="store_true", help="deploy even if in-flight runs would diverge")
    p.add_argument(
        "--dry-run", action="store_true", help="check, then print the deploy command instead of running it"
    )
    p.set_defaults(func=cmd_deploy, aws=None)

    p = console("runs", "list runs, newest first")
    p.add_argument(
        "--status", choices=["running", "sleeping", "awaiting", "failed", "completed", "cancelled"]
    )
    p.add_argument("--workflow")
    p.add_argument("--limit", type=_positive, default=100, help="at most this many runs (default 100)")
    p.add_argument(
        "--where",
        action="append",
        metavar="KEY=VALUE",
        help="runs whose published value (wf:set) matches: month=7, state=paid, 'month>=3'; repeatable",
    )
    p.set_defaults(func=cmd_runs)

    p = console("show", "one run's journal as a timeline")
    p.add_argument("run_id")
    p.set_defaults(func=cmd_show)

    def repair(name: str, help: str) -> argparse.ArgumentParser:
        p = console(name, help)
        p.add_argument("run_id", nargs="?", help="the run; or select runs with the options below")
        p.add_argument("--status", choices=[s.value for s in Status], help="select runs of this status")
        p.add_argument("--workflow", help="select runs of this workflow")
        p.add_argument("--since", help="select runs started at or after (UTC: 2026-11-01, 2026-11-01T09:30)")
        p.add_argument("--until", help="select runs started before (UTC)")
        p.add_argument("--where", action="append", help="select runs by a value they published: KEY=VALUE")
        p.add_argument("--dry-run", action="store_true", help="show what would be done (the default)")
        p.add_argument("--yes", action="store_true", help="act on every run the preview lists")
        return p

    p = console("migrate", "move a run pinned to older code to the current code, once it replays the run")
    p.add_argument("run_id")
    p.set_defaults(func=cmd_migrate)

    p = repair("resume", "resume a failed run, or every selected failed run the code replays")
    p.set_defaults(func=cmd_resume)

    p = repair("retry", "run a step's next attempt now, skipping its backoff (one run, or a selection)")
    p.set_defaults(func=cmd_retry)

    p = repair("cancel", "cancel a run and the runs it started (one run, or a selection)")
    p.set_defaults(func=cmd_cancel)

    p = console("signal", "send a signal to a run")
    p.add_argument("run_id")
    p.add_argument("name")
    p.add_argument("payload", nargs="?", help="JSON")
    p.set_defaults(func=cmd_signal)

    p = console("start", "start a run (or join the run with that id)")
    p.add_argument("workflow")
    p.add_argument("input", nargs="?", help="JSON")
    p.add_argument("--id", help="the run id (default: a fresh UUID)")
    p.add_argument(
        "--timeout", help='bound the run in time, e.g. "30d" (default: the workflow\'s own, or none)'
    )
    p.add_argument(
        "--signal",
        metavar="NAME",
        help="signal-with-start: deliver this signal too, written with the run in one write "
        "(or sent to the run with that id)",
    )
    p.add_argument("--payload", metavar="JSON", help="the signal's payload")
    p.set_defaults(func=cmd_start)

    p = console("schedules", "list the project's schedules: state, next tick, last run")
    p.set_defaults(func=cmd_schedules)

    p = console("limits", "flow control: runs holding and waiting for each key's slots; set a limit")
    p.add_argument("action", nargs="?", choices=["list", "set", "clear"], default="list")
    p.add_argument("name", nargs="?", help="a key (sync/acme), every key of a limit (sync/*) or rate:BUCKET")
    p.add_argument("value", nargs="?", help="a number of slots, or a rate like 10/s")
    p.set_defaults(func=cmd_limits)

    p = console("schedule", "pause or resume a schedule, or trigger a tick now")
    p.add_argument("action", choices=["pause", "resume", "trigger"])
    p.add_argument("name")
    p.set_defaults(func=cmd_schedule)

    p = console("secret", "manage secrets")
    secret_sub = p.add_subparsers(dest="secret_command", required=True)
    s = secret_sub.add_parser("set", help="add a new version of a secret (runs already pinned keep theirs)")
    s.add_argument("name")
    s.add_argument("value")
    s.add_argument("--project", "-p", default=os.environ.get("LUNAFLOW_PROJECT", "."))
    s.add_argument("--data")
    s.add_argument("--json", action="store_true")
    s.add_argument("--aws", action="store_true", help="set it in the deployed stack's Secrets Manager")
    s.add_argument("--stack")
    s.set_defaults(func=cmd_secret_set)
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
        output.err.print(f"lunaflow {args.command}: {e}; {_where_runs_are(args)}")
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


def _where_runs_are(args: argparse.Namespace) -> str:
    """The hint after ``no run 'x'``: where the command looked, and how to list what is there."""
    if getattr(args, "aws", False):
        from runtime.aws.contract import stack_name

        stack = getattr(args, "stack", None) or stack_name(Path(args.project).resolve().name)
        return f"the runs of stack '{stack}' are listed by `lunaflow runs --aws`"
    folder = data_folder(getattr(args, "project", "."), getattr(args, "data", None))
    return f"the runs in {folder} are listed by `lunaflow runs` (another project's data: --data DIR)"


def entry() -> None:
    sys.exit(main())
