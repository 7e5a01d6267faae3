"""Issue 17, point 2: a terminal that tells you what happened.

A real ``lunaflow dev`` on tests/projects/events; runs are started through its fetch route
(``/start?wf=NAME&id=ID``) and the server's output is read back. Each test asserts that
one line carries the named facts (run id, step name, step id, error, the kind of event).
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import cli, worktree_env
from tests.support.devserver import ANSI, PROJECTS, ROOT, SERVING, DevServer, Servers, wait_for

EVENTS = PROJECTS / "events"
PRELUDE_FRAME = '[string "<python>"]'


def _line_no(marker: str) -> int:
    for i, line in enumerate((EVENTS / "main.lua").read_text().splitlines(), 1):
        if marker in line:
            return i
    raise AssertionError(marker)


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    s = Servers(tmp_path_factory.mktemp("terminal"))
    try:
        yield s.start(EVENTS)
    finally:
        s.close()


def _start(dev: DevServer, wf: str, run_id: str) -> None:
    r = dev.request("POST", f"/start?wf={wf}&id={run_id}", "")
    assert r.status == 201, r


def _line_with(dev: DevServer, since: tuple[int, int], *needles: str, ci: bool = False) -> str:
    """Wait (bounded) for one output line holding every needle."""

    def find() -> str | None:
        for line in dev.lines_since(since):
            hay = line.lower() if ci else line
            if all((n.lower() if ci else n) in hay for n in needles):
                return line
        return None

    try:
        return str(wait_for(f"a line with {needles}", find, 5.0))
    except AssertionError:
        got = "\n".join(dev.lines_since(since))[-3000:]
        raise AssertionError(
            f"no output line holds all of {needles!r}; lines printed since:\n{got}"
        ) from None


def test_failed_attempt_prints_run_id_step_name_step_id_and_error(dev: DevServer) -> None:
    """A step attempt that fails prints one line naming the run id, the step name, the step
    id (``<run>/<step>/<pass>/<attempt>``) and the error text."""
    since = dev.mark()
    _start(dev, "flaky", "t2-attempt")
    dev.wait_status("t2-attempt", {"failed"})
    _line_with(dev, since, "t2-attempt", "boom", "t2-attempt/boom/1/1", "kaboom-t2-attempt")
    _line_with(dev, since, "t2-attempt", "boom", "t2-attempt/boom/1/2", "kaboom-t2-attempt")


def test_scheduled_retry_is_printed(dev: DevServer) -> None:
    """A retry being scheduled prints a line with the run id, the step name and "retry"."""
    since = dev.mark()
    _start(dev, "flaky", "t2-retry")
    dev.wait_status("t2-retry", {"failed"})
    _line_with(dev, since, "t2-retry", "boom", "retr", ci=True)


def test_run_failing_after_its_last_attempt_is_printed(dev: DevServer) -> None:
    """A run that fails (step attempts exhausted) prints a line with the run id and the
    run's error ("step 'boom' failed after 2 attempts")."""
    since = dev.mark()
    _start(dev, "flaky", "t2-runfail")
    run = dev.wait_status("t2-runfail", {"failed"})
    assert "failed after 2 attempts" in run["error"]
    _line_with(dev, since, "t2-runfail", "failed after 2 attempts")


def test_run_completing_is_printed(dev: DevServer) -> None:
    """A run that completes prints a line with its run id and "complete"."""
    since = dev.mark()
    _start(dev, "good", "t2-complete")
    dev.wait_status("t2-complete", {"completed"})
    _line_with(dev, since, "t2-complete", "complete", ci=True)


def test_run_cancelled_is_printed(dev: DevServer) -> None:
    """A run cancelled (here by the project's own route, in the server process) prints a
    line with its run id and "cancel"."""
    _start(dev, "waiter", "t2-cancel")
    dev.wait_status("t2-cancel", {"awaiting"})
    since = dev.mark()
    r = dev.request("POST", "/cancel?wf=waiter&id=t2-cancel", "")
    assert r.status == 202, r
    dev.wait_status("t2-cancel", {"cancelled"})
    _line_with(dev, since, "t2-cancel", "cancel", ci=True)


def test_a_cancel_from_the_cli_is_printed_by_the_running_server(dev: DevServer) -> None:
    """Issue 24 §6. ``lunaflow cancel`` (another process, on the server's data folder)
    cancels an awaiting run; the server's terminal says so, once. Before: only the CLI said
    it, and the server printed nothing."""
    _start(dev, "waiter", "t2-cli-cancel")
    dev.wait_status("t2-cli-cancel", {"awaiting"})
    since = dev.mark()
    done = dev.cli("cancel", "t2-cli-cancel")
    assert done.code == 0, str(done)
    _line_with(dev, since, "t2-cli-cancel", "cancelled")
    time.sleep(1.5)  # a second report would come within the server's next polls
    said = [line for line in dev.lines_since(since) if "t2-cli-cancel" in line]
    assert len(said) == 1, said


def test_a_start_from_the_cli_is_printed_by_the_running_server_once_before_its_end(dev: DevServer) -> None:
    """``lunaflow start`` (another process, on the server's data folder) starts a run the
    server then advances: its terminal prints the start, once, before the run's end, as the
    README's quickstart says ("starts, completions and cancels are one line each"). Before:
    the end and the logs of such a run were printed, its start never."""
    since = dev.mark()
    done = dev.cli("start", "waiter", "--id", "t2-cli-start")
    assert done.code == 0, str(done)
    started = _line_with(dev, since, "t2-cli-start", "started (waiter)")
    dev.wait_status("t2-cli-start", {"awaiting"})
    dev.request("POST", "/cancel?wf=waiter&id=t2-cli-start", "")
    ended = _line_with(dev, since, "t2-cli-start", "cancelled")
    time.sleep(1.5)  # a second report would come within the server's next polls
    said = [line for line in dev.lines_since(since) if "t2-cli-start" in line and "started" in line]
    assert said == [started]
    lines = dev.lines_since(since)
    assert lines.index(started) < lines.index(ended)


def test_a_start_by_the_server_itself_is_printed_once(dev: DevServer) -> None:
    since = dev.mark()
    _start(dev, "waiter", "t2-own-start")
    dev.wait_status("t2-own-start", {"awaiting"})
    time.sleep(1.5)  # the server's polls would find the start again by now
    said = [line for line in dev.lines_since(since) if "t2-own-start" in line and "started" in line]
    assert len(said) == 1, said


def test_a_cancel_from_a_second_server_is_printed_by_the_first(dev: DevServer, servers: Servers) -> None:
    """A second ``lunaflow dev`` on the same data folder cancels a run through the project's
    route: both servers print the cancel (the second as its own event, the first from the
    data folder)."""
    _start(dev, "waiter", "t2-second-cancel")
    dev.wait_status("t2-second-cancel", {"awaiting"})
    second = servers.start(EVENTS, dev.data, ["--no-reload"])
    since, since_second = dev.mark(), second.mark()
    r = second.request("POST", "/cancel?wf=waiter&id=t2-second-cancel", "")
    assert r.status == 202, r
    _line_with(dev, since, "t2-second-cancel", "cancelled")
    _line_with(second, since_second, "t2-second-cancel", "cancelled")


def test_log_lines_from_run_code_carry_the_run_id(dev: DevServer) -> None:
    """A ``log.info`` line said by run code is printed with the run id on it."""
    since = dev.mark()
    _start(dev, "logger", "t2-logger")
    dev.wait_status("t2-logger", {"completed"})
    _line_with(dev, since, "hello-from-run-code", "t2-logger")


def test_traceback_of_a_failed_run_shows_user_frames_not_the_prelude(dev: DevServer) -> None:
    """The traceback printed for an error raised in the workflow function names the user's
    frame (main.lua:<line>) and no frame of the prelude ([string "<python>"]:N)."""
    since = dev.mark()
    _start(dev, "crasher", "t2-crash")
    dev.wait_status("t2-crash", {"failed"})
    _line_with(dev, since, "t2-crash", f"main.lua:{_line_no('CRASH-LINE')}")
    _line_with(dev, since, "stack traceback")  # the rest of the traceback, on a loaded machine too
    printed = "\n".join(dev.lines_since(since))
    assert PRELUDE_FRAME not in printed, f"prelude frames in the printed traceback:\n{printed}"


def test_os_date_refused_in_a_step_names_the_users_line(dev: DevServer) -> None:
    """``return os.date(...)`` in a step body (a tail call) is refused with an error naming
    the user's file:line, not ``[string "<python>"]:1257``."""
    _start(dev, "dates", "t2-date")
    run = dev.wait_status("t2-date", {"failed"})
    assert "os.date is refused" in run["error"]
    assert PRELUDE_FRAME not in run["error"], run["error"]
    assert f"main.lua:{_line_no('DATE-LINE')}" in run["error"], run["error"]


def test_quiet_option_is_offered() -> None:
    """ "quiet options for those who want less": ``lunaflow dev --help`` offers --quiet."""
    d = cli("dev", "--help")
    assert d.code == 0, str(d)
    assert "--quiet" in d.out, d.out


def test_quiet_prints_failures_but_not_completions(servers: Servers, tmp_path: Path) -> None:
    """With ``--quiet`` a failed run is still reported; a completed one and run code's
    ``log.info`` lines are not."""
    dev = servers.start(EVENTS, tmp_path / "quiet-data", ["--quiet"])
    since = dev.mark()
    _start(dev, "good", "q-good")
    _start(dev, "logger", "q-logger")
    _start(dev, "flaky", "q-flaky")
    dev.wait_status("q-flaky", {"failed"})
    dev.wait_status("q-good", {"completed"})
    dev.wait_status("q-logger", {"completed"})
    _line_with(dev, since, "q-flaky", "failed after 2 attempts")
    printed = "\n".join(dev.lines_since(since))
    assert "q-good" not in printed and "hello-from-run-code" not in printed, printed


def test_event_lines_are_coloured_on_a_tty(tmp_path: Path) -> None:
    """When the terminal is a TTY, the event lines are coloured (ANSI escapes on the line
    that reports the failed attempt)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runtime.cli",
            "dev",
            str(EVENTS),
            "--data",
            str(tmp_path / "d"),
            "--port",
            "0",
        ],
        cwd=ROOT,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=worktree_env({"TERM": "xterm-256color", "COLUMNS": "200"}),
        close_fds=True,
    )
    os.close(slave)
    buf = b""

    def pump(until: float) -> None:
        nonlocal buf
        while time.monotonic() < until:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                buf += chunk

    try:
        deadline = time.monotonic() + 30
        port = None
        while time.monotonic() < deadline and port is None:
            pump(time.monotonic() + 0.2)
            m = SERVING.search(ANSI.sub("", buf.decode("utf-8", "replace")))
            port = int(m.group(1)) if m else None
            assert proc.poll() is None, buf.decode("utf-8", "replace")
        assert port, buf.decode("utf-8", "replace")
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/start?wf=flaky&id=t2-tty", data=b"", method="POST"
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 201
        end = time.monotonic() + 8
        lines: list[str] = []
        while time.monotonic() < end and not any(ANSI.search(ln) for ln in lines):
            pump(time.monotonic() + 0.2)
            text = buf.decode("utf-8", "replace")
            lines = [ln for ln in text.splitlines() if "t2-tty" in ln and "boom" in ln]
        assert lines, (
            f"no line names run t2-tty and step boom on the TTY:\n{buf.decode('utf-8', 'replace')[-3000:]}"
        )
        assert any(ANSI.search(ln) for ln in lines), f"event lines are not coloured on a TTY: {lines!r}"
    finally:
        proc.kill()
        proc.wait(timeout=10)
        os.close(master)


def test_no_colour_codes_when_not_a_tty(dev: DevServer) -> None:
    """With the output redirected to files, no ANSI escapes are printed."""
    since = dev.mark()
    _start(dev, "flaky", "t2-notty")
    dev.wait_status("t2-notty", {"failed"})
    _line_with(dev, since, "t2-notty", "failed after")
    printed = "\n".join(dev.lines_since(since))
    assert printed and not ANSI.search(printed), printed


@pytest.mark.parametrize(
    "seconds, shown",
    [
        (0.0, "0ms"),
        (0.045, "45ms"),
        (0.0994, "99ms"),
        (0.0996, "0.1s"),
        (0.9996, "1.0s"),
        (0.96, "1.0s"),
        (1.0, "1.0s"),
        (59.94, "59.9s"),
        (59.96, "1m00s"),
        (125.0, "2m05s"),
        (3599.6, "1h00m"),
        (12000.0, "3h20m"),
    ],
)
def test_one_duration_format(seconds: float, shown: str) -> None:
    """Issue 24 §6: every duration the terminal prints goes through one formatter, which
    picks its unit after rounding: a retry due in 0.9996 s is ``(in 1.0s)`` as the README
    shows, not ``(in 1000ms)``."""
    from runtime.dev.terminal import duration

    assert duration(seconds) == shown
