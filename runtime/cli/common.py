"""What the console commands share: where their runs are (a data folder, or ``--aws`` the
deployed stack), the code they check against, and the parsing of their arguments."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.text import Text

from runtime.cli import output
from runtime.cli.output import EXIT_OK, EXIT_SET_ASIDE, _emit, _run_dict
from runtime.core import values
from runtime.core.clock import SystemClock
from runtime.core.journal import ENDED
from runtime.dev.server import NotAProject, check_project, data_folder
from runtime.errors import (
    LunaflowError,
)
from runtime.platform.faults import with_faults
from runtime.platform.runs import Runs
from runtime.store.base import RunRecord
from runtime.store.sqlite import STORE_FILE, SQLiteStore

STACK_HELP = "the stack name (default: lunaflow-<project folder>; a folder my_shop: lunaflow-my-shop)"


class Usage(Exception):
    """A command line that cannot be carried out as given."""


def _aws(args: argparse.Namespace, *, read_only: bool = False) -> Any:
    """The deployed stack's AwsRuntime (``--aws``), found through its CloudFormation outputs;
    ``read_only`` for commands that change nothing (no migration, no secret pin).
    A missing region or missing credentials is the user's setup, said in one line (botocore
    raises them from deep inside the first client or request)."""
    import boto3
    from botocore.exceptions import BotoCoreError, NoCredentialsError, NoRegionError

    from runtime.aws.contract import stack_name
    from runtime.aws.runtime import AwsRuntime, Clients
    from runtime.aws.stack import config_from_stack

    stack = args.stack or stack_name(Path(args.project).resolve().name)
    try:
        session = boto3.session.Session()
        config = config_from_stack(session.client("cloudformation"), stack, args.project)
        return AwsRuntime(
            config, Clients.from_session(session), read_only=read_only, observer=with_faults(None, os.environ)
        )
    except NoRegionError:
        raise LunaflowError(
            f"no AWS region is set, so stack '{stack}' cannot be found (--aws works on the stack "
            "`npx cdk deploy` made in your account); set AWS_REGION (or AWS_DEFAULT_REGION), or a "
            "region in ~/.aws/config with `aws configure`"
        ) from None
    except NoCredentialsError:
        raise LunaflowError(
            f"no AWS credentials were found, so stack '{stack}' cannot be read (--aws signs its "
            "requests as you); run `aws configure`, or set AWS_PROFILE, or AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY"
        ) from None
    except BotoCoreError as e:
        raise LunaflowError(
            f"AWS could not be reached for stack '{stack}' ({e}); check the network and the region"
        ) from None


def _open_runs(args: argparse.Namespace, *, read_only: bool = False) -> Runs:
    """The runs of the data folder or (``--aws``) the stack; ``read_only`` for commands that
    only read (the store is then neither migrated nor written)."""
    if getattr(args, "aws", False):
        runs: Runs = _aws(args, read_only=read_only).platform
        return runs
    data = data_folder(args.project, args.data)
    if not (data / STORE_FILE).exists():
        raise Usage(
            f"no lunaflow data in {data}; run `lunaflow dev {args.project}` first, or point at the folder "
            "with --data DIR (or at the project with --project PATH)"
        )
    store = SQLiteStore(data / STORE_FILE, read_only=read_only)
    if not read_only:  # a command that may end runs (cancel) records their expiry
        store.retention_s = _retention_of(args.project)
    return Runs(store, SystemClock(), observer=with_faults(None, os.environ))


def _retention_of(project: str) -> float | None:
    """The project's ``[runs] retention``, for the runs a command ends (``lunaflow cancel``);
    None, so the ended runs are kept, when the project cannot be read."""
    from runtime.engine.project import ProjectSource

    try:
        return ProjectSource.read(project).retention_s
    except (LunaflowError, OSError, UnicodeError) as e:
        # Said, not silent: a run this command ends is then kept until deleted by hand.
        output.err.print(
            Text(
                f"note: the project cannot be read ({e}), so its [runs] retention is not known: a run "
                "this command ends is kept; name the project with -p PATH to have it deleted in time"
            )
        )
        return None


def _moment(text: str, flag: str) -> float:
    """``2026-11-01``, ``2026-11-01T09:30`` or ``2026-11-01T09:30:00Z``: UTC, epoch seconds."""
    import datetime as dt

    cleaned = text.strip().removesuffix("Z")
    for shape in ("%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S"):
        try:
            return dt.datetime.strptime(cleaned, shape).replace(tzinfo=dt.UTC).timestamp()
        except ValueError:
            continue
    raise Usage(f"{flag} {text!r} is not a time; write 2026-11-01 or 2026-11-01T09:30 (UTC)")


def _code_for_check(args: argparse.Namespace) -> tuple[Any, Callable[[], None]]:
    """The project's current code in a worker that replays without writing (as ``lunaflow
    check`` loads it), and how to close it."""
    if args.aws:
        rt = _aws(args, read_only=True)
        return rt.platform.worker, lambda: None
    platform = _read_only_platform(args, data_folder(args.project, args.data))
    return platform.worker, platform.close


def _read_only_platform(args: argparse.Namespace, data: Path) -> Any:
    """The project's code on the data folder's store, both opened read-only: nothing is
    migrated, applied or written (``lunaflow check``, a repair's preview)."""
    from runtime.platform.platform import Platform

    clock = SystemClock()
    store = SQLiteStore(data / STORE_FILE, read_only=True, clock=clock)
    try:
        return Platform(args.project, store, clock, read_only=True)
    except BaseException:
        store.close()
        raise


def _started(args: argparse.Namespace, run: RunRecord, text: str, joined: bool | None = None) -> int:
    """What a start prints; with ``--signal``, whether the signal was delivered or, the run
    having ended, set aside (exit 3, as ``lunaflow signal`` says it). ``joined``: whether the
    id named a run that existed (None: not known, on AWS)."""
    said = _run_dict(run) if joined is None else {**_run_dict(run), "joined": joined}
    if args.signal is None:
        return _done(args, said, text)
    delivered = run.status not in ENDED
    if args.json:
        _emit({**said, "signal": args.signal, "delivered": delivered})
    elif delivered:
        output.out.print(Text(f"{text}; signal '{args.signal}' delivered"))
    else:
        ended = f"run {run.id} of {run.workflow} has ended ({run.status})"
        output.out.print(Text(f"{ended}; signal '{args.signal}' was set aside"))
    return EXIT_OK if delivered else EXIT_SET_ASIDE


def _local_data(args: argparse.Namespace) -> Path:
    """The data folder a command that writes settings (a secret, a schedule's pause) writes
    to: the project's own only for a project folder that is one (a mistyped -p made a folder
    and a data folder in it), and said when the folder holds no data yet (a mistyped --data
    made a folder no server reads, and the command said nothing)."""
    if args.data is None:
        try:
            check_project(args.project)
        except NotAProject as e:
            raise Usage(str(e)) from None
    data = data_folder(args.project, args.data)
    if not (data / STORE_FILE).exists():
        output.err.print(
            Text(
                f"note: {data} holds no lunaflow data yet; it is made now, and a `lunaflow dev` "
                "serving that folder (its project's .lunaflow, or the same --data) will read it"
            )
        )
    return data


def _done(args: argparse.Namespace, value: Any, text: str) -> int:
    if args.json:
        _emit(value)
    else:
        output.out.print(Text(text))
    return EXIT_OK


def _json_arg(text: str | None, what: str) -> Any:
    """A JSON argument. Text that cannot be read as JSON (malformed, nested too deep for the
    parser, an integer past Python's digit limit) is bad usage; a value the platform then
    refuses (too big, too deep to keep) is a refusal, as from any other client."""
    if text is None:
        return None
    example = 'quote it for the shell, e.g. \'{"by": "ada"}\''
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise Usage(f"{what} is not valid JSON ({e}); {example}") from None
    except RecursionError:
        raise Usage(
            f"{what} is nested too deeply to read; keep values under {values.MAX_DEPTH} levels"
        ) from None
    except ValueError as e:  # an integer literal past Python's digit limit
        raise Usage(f"{what} holds a number too long to read ({e}); send big numbers as strings") from None
    return value


Subparsers = Any  # argparse's _SubParsersAction, a private name


def console_parser(sub: Subparsers, name: str, help: str) -> argparse.ArgumentParser:
    """A console command's parser: the project, its data folder or the stack, JSON output."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=help)
    p.add_argument(
        "--project",
        "-p",
        default=os.environ.get("LUNAFLOW_PROJECT", "."),
        help="the project folder (default: $LUNAFLOW_PROJECT or .)",
    )
    p.add_argument("--data", help="the data folder (default: PROJECT/.lunaflow)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--aws", action="store_true", help="work on the deployed stack instead of a data folder")
    p.add_argument("--stack", help="with --aws: " + STACK_HELP)
    return p
