"""Documentation that runs: fenced blocks read from a markdown file, shell blocks run in
order against a real ``lunaflow dev``, each command's output compared with the ``# ->``
lines written under it.

A command block is read the way a person reads it: a line starting with ``#`` is a
comment, except ``# -> TEXT``, which is what the command above it prints (several such
lines are joined with newlines). A trailing ``# comment`` after a command is not part of
it. Expected output is compared as JSON when both sides parse as JSON, otherwise as text;
``...`` in an expected string matches anything (an id, a time). A command expected to
fail says so with ``# -> exit N: TEXT`` (TEXT is what it prints on stderr).

``Session`` runs commands one after another in a folder, with an environment whose
``lunaflow`` is this checkout's, rewriting what differs between the document and the test
(the port). A read-only command (``curl`` without a body, ``lunaflow runs/show/check``)
whose output does not match yet is retried for a few seconds, as a person typing is slower
than a script; a command that changes something runs once.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.cli import worktree_env

COMMAND_S = 60.0  # bound on one command
RETRY_S = 6.0  # how long a read-only command is retried until its output matches

_FENCE = re.compile(r"^(```+|~~~+)[ \t]*([^\n`]*)\n(.*?)^\1[ \t]*$", re.M | re.S)
_EXIT = re.compile(r"^exit (\d+)(?::\s?(.*))?$", re.S)


@dataclass(frozen=True)
class Block:
    """One fenced block: its info string's first word, its text, the line it starts on."""

    lang: str
    info: str
    text: str
    line: int


def fenced_blocks(source: str | Path) -> list[Block]:
    """Every fenced block of a markdown text (or file), in document order."""
    text = source.read_text(encoding="utf-8") if isinstance(source, Path) else source
    blocks = []
    for m in _FENCE.finditer(text):
        info = m.group(2).strip()
        line = text.count("\n", 0, m.start()) + 1
        blocks.append(Block(info.split()[0] if info else "", info, m.group(3), line))
    return blocks


def shell_blocks(source: str | Path) -> list[Block]:
    return [b for b in fenced_blocks(source) if b.lang in ("sh", "bash", "shell", "console")]


@dataclass
class Command:
    text: str  # the shell command, its trailing comment removed
    line: int  # where it is in the document
    expected: list[str] = field(default_factory=list)  # its "# -> ..." lines

    @property
    def expected_exit(self) -> int:
        m = _EXIT.match("\n".join(self.expected))
        return int(m.group(1)) if m else 0

    @property
    def expected_output(self) -> str | None:
        """What it prints (stdout; stderr for an expected failure), or None if unsaid."""
        if not self.expected:
            return None
        joined = "\n".join(self.expected)
        m = _EXIT.match(joined)
        return (m.group(2) or None) if m else joined


def strip_comment(line: str) -> str:
    """The line without a trailing shell comment (quote-aware)."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def commands(block: Block) -> list[Command]:
    out: list[Command] = []
    for offset, raw in enumerate(block.text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        m = re.match(r"#\s*->\s?(.*)$", line)
        if m:
            if not out:
                raise AssertionError(
                    f"line {block.line + offset}: an expected output before any command: {raw!r}"
                )
            out[-1].expected.append(m.group(1))
        elif not line.startswith("#"):
            out.append(Command(strip_comment(line), block.line + offset))
    return out


def text_matches(expected: str, actual: str) -> bool:
    pattern = re.escape(expected).replace(re.escape("..."), ".*?")
    return re.fullmatch(pattern, actual, flags=re.S) is not None


def value_matches(expected: Any, actual: Any) -> bool:
    """JSON values compared exactly, except that ``...`` in an expected string matches
    anything and a key ``"..."`` in an expected object stands for any further keys."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return False
        keys = set(expected) - {"..."}
        if "..." not in expected and keys != set(actual):
            return False
        return keys <= set(actual) and all(value_matches(expected[k], actual[k]) for k in keys)
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(value_matches(e, a) for e, a in zip(expected, actual, strict=True))
        )
    if isinstance(expected, str) and isinstance(actual, str):
        return text_matches(expected, actual)
    return bool(expected == actual and type(expected) is type(actual))


def output_matches(expected: str, actual: str) -> bool:
    expected, actual = expected.strip(), actual.strip()
    try:
        return value_matches(json.loads(expected), json.loads(actual))
    except json.JSONDecodeError:
        return text_matches(expected, actual)


def read_only(command: str) -> bool:
    if command.startswith("curl"):
        return not re.search(r"-X\s*(POST|PUT|DELETE|PATCH)|\s-d\s|--data", command)
    return bool(re.match(r"lunaflow (runs|show|check)\b", command))


@dataclass
class Ran:
    command: Command
    code: int
    out: str
    err: str

    def __str__(self) -> str:
        return f"$ {self.command.text}\n{self.out}{self.err}[exit {self.code}]"


class Session:
    """Runs documented commands in sequence in ``cwd``; ``rewrite`` turns the document's
    command into the one to run (e.g. its port). ``check`` raises with a transcript."""

    def __init__(
        self, cwd: Path, *, rewrite: Callable[[str], str] = lambda c: c, retry_s: float = RETRY_S
    ) -> None:
        self.cwd = cwd
        self.rewrite = rewrite
        self.retry_s = retry_s
        self.transcript: list[Ran] = []

    def _once(self, command: Command) -> Ran:
        proc = subprocess.run(
            ["bash", "-c", self.rewrite(command.text)],
            cwd=self.cwd,
            capture_output=True,
            text=True,
            timeout=COMMAND_S,
            env=worktree_env(),
            stdin=subprocess.DEVNULL,
        )
        return Ran(command, proc.returncode, proc.stdout, proc.stderr)

    @staticmethod
    def ok(ran: Ran) -> bool:
        c = ran.command
        if ran.code != c.expected_exit:
            return False
        want = c.expected_output
        if want is None:
            return True
        return output_matches(want, ran.err if c.expected_exit else ran.out)

    def run(self, command: Command) -> Ran:
        deadline = time.monotonic() + (self.retry_s if read_only(command.text) else 0)
        while True:
            ran = self._once(command)
            if self.ok(ran) or time.monotonic() >= deadline:
                break
            time.sleep(0.3)
        self.transcript.append(ran)
        return ran

    def check(self, commands: Iterable[Command], where: str) -> None:
        for command in commands:
            ran = self.run(command)
            if self.ok(ran):
                continue
            tail = "\n".join(str(r) for r in self.transcript)[-2500:]
            raise AssertionError(
                f"{where}:{command.line}: `{command.text}` "
                f"exited {ran.code} (expected {command.expected_exit})"
                + (f"\nexpected: {command.expected_output}" if command.expected_output else "")
                + f"\n--- transcript (tail) ---\n{tail}"
            )
