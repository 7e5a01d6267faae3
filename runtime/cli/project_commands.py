"""The commands on a project's code: ``dev``, ``check``, ``record``, ``test``, ``new`` and
``deploy``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.text import Text

from runtime.cli import output
from runtime.cli.common import STACK_HELP, Subparsers, Usage, _aws, _done, _open_runs, _read_only_platform
from runtime.cli.output import EXIT_OK, EXIT_REFUSED, WHOLE, WRAPS, _emit, _print_table, _status
from runtime.core.durations import parse_ms
from runtime.dev.server import RUN_WORKERS, DevServer, NotAProject, ServeError, check_project, data_folder
from runtime.dev.terminal import NORMAL, QUIET, VERBOSE, Terminal
from runtime.errors import InvalidInput
from runtime.platform.faults import tick_fault, with_faults
from runtime.platform.why import STUCK_AFTER_S
from runtime.store.sqlite import STORE_FILE


def cmd_dev(args: argparse.Namespace) -> int:
    try:
        check_project(args.project)
    except NotAProject as e:
        raise Usage(str(e)) from None
    level = QUIET if args.quiet else VERBOSE if args.verbose else NORMAL
    terminal = Terminal(sys.stdout, level=level)
    logging.basicConfig(level=logging.INFO, handlers=[terminal.handler()], force=True)
    try:
        server = DevServer(
            args.project,
            data=args.data,
            host=args.host,
            port=args.port,
            workers=args.workers,
            stuck_after_s=args.stuck_after,
            observer=with_faults(terminal, os.environ),
            say=terminal.note,
            reload=not args.no_reload,
            allow_hosts=args.allow_host,
            tick_fault=tick_fault(os.environ),
        )
    except ServeError as e:
        output.err.print(f"lunaflow dev: {e}")
        return EXIT_REFUSED
    server.serve_until_signalled()
    return EXIT_OK


def cmd_record(args: argparse.Namespace) -> int:
    """Record a run's journal as a golden of the project (tests/golden/), which `lunaflow
    test` and `lunaflow check` replay on the project's code from then on."""
    from runtime.dev.golden import write_golden

    try:
        check_project(args.project)
    except NotAProject as e:
        raise Usage(str(e)) from None
    runs = _open_runs(args, read_only=True)
    try:
        run = runs.get(args.run_id)
        entries = runs.journal(run.id)
    finally:
        runs.store.close()
    path = write_golden(args.project, run, entries, name=args.name)
    value = {"run": run.id, "workflow": run.workflow, "status": run.status, "entries": len(entries)}
    return _done(
        args,
        {**value, "golden": str(path)},
        f"recorded run {run.id} ({run.workflow}, {run.status}, {len(entries)} journal entries) in {path}; "
        f"`lunaflow test {args.project}` and `lunaflow check {args.project}` replay it",
    )


def cmd_check(args: argparse.Namespace) -> int:
    """Replay in-flight runs and goldens on the project's code. Read-only: the store and the
    databases are opened without writing, the code's migrations are reported, not applied."""
    from runtime.dev.check import check_runs
    from runtime.dev.golden import golden_files, load_project, replay_goldens
    from runtime.services.local import pending_migrations

    goldens = replay_goldens(args.project)
    if args.aws:
        from runtime.aws.database import pending_migrations as aws_pending

        runtime = _aws(args, read_only=True)
        worker = runtime.platform.worker
        pending = aws_pending(runtime.databases, worker.declarations, worker.project_root, worker.source.name)
        return _report_check(args, check_runs(worker, runtime.store), goldens, pending)
    data = data_folder(args.project, args.data)
    if not (data / STORE_FILE).exists():
        if golden_files(args.project):
            return _report_check(args, None, goldens)
        load_project(args.project)  # nothing to replay, but code that cannot load is still refused
        raise Usage(
            f"no lunaflow data in {data} and no golden journals in {args.project}/tests/golden: there "
            "are no runs to check; the project loads (pass --data DIR to point elsewhere; "
            "`lunaflow record RUN_ID` records a golden)"
        )
    platform = _read_only_platform(args, data)
    try:
        worker = platform.worker
        migrations = pending_migrations(data, worker.declarations, worker.project_root, worker.source.name)
        verdicts = check_runs(worker, platform.store)
    finally:
        platform.close()
    return _report_check(args, verdicts, goldens, migrations)


def _report_check(
    args: argparse.Namespace,
    verdicts: list[Any] | None,
    goldens: list[Any],
    migrations: dict[str, list[str]] | None = None,
) -> int:
    """The verdicts on in-flight runs (None: no data folder to read) and on golden journals,
    and the migrations the code would apply to the data folder's databases."""
    diverging = [v for v in verdicts or [] if v.diverges]
    failing = [g for g in goldens if not g.passed]
    migrations = migrations or {}
    if args.json:
        # Golden journals and pending migrations join the list only when there are some, so
        # the JSON of a project without them is what it was.
        _emit(
            [v.__dict__ for v in verdicts or []]
            + [{**g.__dict__, "golden": g.file} for g in goldens]
            + [{"database": db, "would_apply": files} for db, files in sorted(migrations.items())]
        )
    else:
        for db, files in sorted(migrations.items()):
            output.out.print(
                Text(
                    f"database '{db}': would apply {', '.join(files)} (not applied by check; they apply "
                    "when this code is served: `lunaflow dev`, or a deploy)"
                )
            )
        if verdicts is not None and not verdicts:
            output.out.print(
                Text("no runs are in flight, so none can diverge; only new runs will use this code")
            )
        elif verdicts is not None:
            rows = [
                [
                    Text(v.run_id),
                    Text(v.workflow),
                    _status(v.status),
                    Text(v.message, style="red" if v.diverges else ""),
                ]
                for v in verdicts
            ]
            _print_table(
                f"{len(verdicts)} in-flight run(s), {len(diverging)} would diverge",
                [("run", WHOLE), ("workflow", WHOLE), ("status", WHOLE), ("verdict", WRAPS)],
                rows,
            )
        if goldens:
            rows = [
                [
                    Text(g.file),
                    Text(g.run_id),
                    Text(g.workflow),
                    Text(g.status),
                    Text(g.message, style="" if g.passed else "red"),
                ]
                for g in goldens
            ]
            _print_table(
                f"{len(goldens)} golden journal(s), {len(failing)} would not replay",
                [
                    ("golden", WHOLE),
                    ("run", WHOLE),
                    ("workflow", WHOLE),
                    ("recorded", WHOLE),
                    ("verdict", WRAPS),
                ],
                rows,
            )
    return EXIT_REFUSED if diverging or failing else EXIT_OK


def cmd_test(args: argparse.Namespace) -> int:
    from runtime.dev.luatest import run_tests

    project = Path(args.project)
    if not (project / "tests").is_dir():
        raise Usage(f"{project} has no tests/ folder; write tests/*_test.lua (lunaflow new scaffolds one)")
    report = run_tests(project, pattern=args.k, out=sys.stdout)
    if not report.outcomes:
        # Exit 1 with "0 passed, 0 failed" and no reason looked like a crash.
        chosen = f"matches -k {args.k!r}" if args.k else "is there"
        output.err.print(
            Text(
                f'no test {chosen} in {project}: a test is a test "name" (function(p) ... end) in '
                "tests/*_test.lua, or a golden journal in tests/golden/; check the pattern, or write one"
            )
        )
    return EXIT_REFUSED if report.failed or not report.outcomes else EXIT_OK


def cmd_new(args: argparse.Namespace) -> int:
    from runtime.dev.scaffold import scaffold

    created = scaffold(Path(args.name))
    for path in created:
        output.out.print(Text(f"created {path}"))
    output.out.print(Text(f"next: lunaflow test {args.name} && lunaflow dev {args.name}"))
    return EXIT_OK


def cmd_deploy(args: argparse.Namespace) -> int:
    """Check in-flight runs against the new code, then `npx cdk deploy`; refuse on divergence."""
    import subprocess

    args.json = False
    args.aws = args.data is None  # the deployed stack's runs, unless a local folder is named
    verdict = cmd_check(args)
    if verdict != EXIT_OK and not args.force:
        output.err.print(
            "lunaflow deploy: refused — the new code would make in-flight runs diverge, or golden "
            "journals fail to replay (listed above). "
            'Keep the old step names, branch with wf:version("change-id"), or pass --force to deploy anyway'
        )
        return EXIT_REFUSED
    command = ["npx", "cdk", "deploy", "-c", f"project={args.project}"]
    if args.stack:
        command += ["-c", f"stack={args.stack}"]
    if args.force:
        # The gate inside cdk deploy replays the runs again; --force lets it pass too, and its
        # DeployGateReport output names the runs the deploy breaks.
        command += ["-c", "force=true"]
    if args.dry_run:
        output.out.print(Text("would run: " + " ".join(command)))
        return EXIT_OK
    return subprocess.call(command)


def _run_workers(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError(f"--workers takes a whole number from 1 to 64 (got {text!r})")
    return int(text)


def _stuck_after(text: str) -> float:
    try:
        ms = parse_ms(text)
    except InvalidInput as e:
        raise argparse.ArgumentTypeError(f"--stuck-after: {e}") from None
    if ms < 1000:
        raise argparse.ArgumentTypeError(f"--stuck-after takes a duration of at least 1s (got {text!r})")
    return ms / 1000


def _port(text: str) -> int:
    """A TCP port: bind() refused one past 65535 with a traceback, after the data folder was made."""
    if not text.strip().isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"--port takes a whole number from 0 to 65535 (got {text!r})")
    return int(text)


def add_commands(sub: Subparsers, console: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """The subcommands of this module, on the parser ``main`` builds."""
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
