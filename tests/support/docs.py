"""Documentation that runs: every fenced block of the README and docs/*.md, read with
Sybil's markdown lexers, is an example the test suite checks (the root conftest.py hands
these files to pytest; ``python -m pytest README.md docs/reference.md`` runs one file's).

A block's info string says what it is. Its first word is the language; the words after it
mark what kind of example it is:

======================  ==============================================================
``lua``                 a complete script: written to ``main.lua`` (or ``file=NAME``) of
                        a fresh project (empty, or a copy of ``project=PATH``), which must
                        load; the next ``lua test`` block of the document runs it
``lua test``            a ``lunaflow test`` file, run against the last script's project
                        (or a copy of ``project=PATH``); every test in it must pass
``lua fragment``        a piece of a script: compiled (``load``) in a plain Lua 5.4 state
``sh``                  commands run in order in a shell, in a folder standing for the
                        repository root (``examples/`` copied), each checked against the
                        ``# ->`` lines under it; ``lunaflow dev PROJECT`` starts a real
                        server the later commands reach (the port rewritten)
``sh aws``, ``install``,  commands that need an AWS account, packages from the network, or
``bench``               minutes: checked offline (``bash -n``; each ``lunaflow`` command
                        parses with the CLI's own argument parser; pip extras and files
                        named exist)
``python``              run top to bottom (``tmp_path`` given) in that folder
``python foreign``      another SDK's code: compiled by Python
``ts foreign``          Cloudflare's code: parsed by ``node --check`` (it is plain JS)
``toml``                a ``lunaflow.toml``: read by ``ProjectSource.read``
no language, ``text``   output or a diagram: not code
======================  ==============================================================

A block can be kept out of sight in an HTML comment, ``<!-- invisible-code-block: lua test
... -->``: it runs in order like the others (a test that drives a script the page shows).

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

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lupa.lua54 as lupa
from sybil import Document, Example, Region, Sybil
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer, RawFencedCodeBlockLexer

from tests.support.cli import ROOT, worktree_env

COMMAND_S = 60.0  # bound on one command
RETRY_S = 6.0  # how long a read-only command is retried until its output matches
DOCS = ["README.md", "docs/*.md"]

_EXIT = re.compile(r"^exit (\d+)(?::\s?(.*))?$", re.S)

# language -> the words that may follow it in the info string (options are name=value)
MARKS: dict[str, set[str]] = {
    "lua": {"fragment", "test"},
    "sh": {"aws", "install", "bench"},
    "python": {"foreign"},
    "ts": {"foreign"},
    "toml": set(),
    "text": set(),
    "": set(),
}
OPTIONS = {"lua": {"project", "file"}}
OFFLINE = {"aws", "install", "bench"}
REPO_PATH = r"(bench|examples|runtime|infra|functions|tests)/[\w./-]+"  # a path a command names

_FENCED = RawFencedCodeBlockLexer(
    info_pattern=re.compile(r"(?P<info>[^\n]*)$\n", re.M), mapping={"info": "info", "source": "source"}
)
_HIDDEN = DirectiveInHTMLCommentLexer(
    directive="invisible-code-block", arguments=".+", mapping={"arguments": "info", "source": "source"}
)


@dataclass(frozen=True)
class Block:
    """One fenced (or hidden) block: its language, info string, text and the line it
    starts on."""

    lang: str
    info: str
    text: str
    line: int
    hidden: bool = False

    @property
    def words(self) -> list[str]:
        return [w for w in self.info.split()[1:] if "=" not in w]

    @property
    def options(self) -> dict[str, str]:
        return dict(w.split("=", 1) for w in self.info.split()[1:] if "=" in w)

    @property
    def role(self) -> str:
        """What the block is: "script", "test", "fragment", "run", "aws", "install", "bench",
        "foreign", "settings" or "text"."""
        if self.lang in ("", "text"):
            return "text"
        if self.lang == "toml":
            return "settings"
        words = self.words
        if words:
            return words[0]
        return {"lua": "script", "sh": "run", "python": "run"}.get(self.lang, "?")

    def problem(self) -> str | None:
        """Why the info string is not one this module knows, or None."""
        if self.lang not in MARKS:
            return f"language {self.lang!r} is not one the docs' tests know ({', '.join(sorted(MARKS))})"
        unknown = [w for w in self.words if w not in MARKS[self.lang]]
        if unknown or len(self.words) > 1:
            return f"marks {self.words} after {self.lang!r}: use one of {sorted(MARKS[self.lang])} or none"
        bad = [k for k in self.options if k not in OPTIONS.get(self.lang, set())]
        if bad:
            return f"options {bad} are not known for {self.lang!r} blocks"
        if self.lang == "ts" and self.role != "foreign":
            return "a ts block is another platform's code: mark it `ts foreign`"
        return None


def _blocks(document: Document) -> Iterator[tuple[Region, Block]]:
    text = document.text
    found = [(r, False) for r in _FENCED(document)] + [(r, True) for r in _HIDDEN(document)]
    for region, hidden in sorted(found, key=lambda f: f[0].start):
        info = str(region.lexemes["info"]).strip()
        line = text.count("\n", 0, region.start) + 1
        lang = info.split()[0] if info else ""
        yield region, Block(lang, info, str(region.lexemes["source"]), line, hidden)


def fenced_blocks(source: str | Path) -> list[Block]:
    """Every block of a markdown text (or file), in document order."""
    if isinstance(source, Path):
        document = Document(source.read_text(encoding="utf-8"), str(source))
    else:
        document = Document(source, "<text>")
    return [b for _, b in _blocks(document)]


def shell_blocks(source: str | Path) -> list[Block]:
    return [b for b in fenced_blocks(source) if b.lang == "sh"]


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


# --- checking the blocks ---------------------------------------------------------------


def compile_lua(text: str, where: str) -> str | None:
    """The Lua 5.4 compiler's complaint about ``text``, or None: ``load`` in a plain state
    (no lunaflow globals, nothing run)."""
    lua = lupa.LuaRuntime(register_eval=False, register_builtins=False)
    found = lua.eval("load")(text, "=" + where, "t")
    fn, err = found if isinstance(found, tuple) else (found, None)
    return None if fn is not None else str(err)


def parse_cli(argv: list[str]) -> str | None:
    """Why ``lunaflow ARGV`` would be refused as bad usage, or None: the CLI's own argument
    parser, run without carrying the command out."""
    import contextlib
    import io

    from runtime.cli import _parser

    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
            _parser().parse_args(argv)
    except SystemExit as e:
        return None if e.code == 0 else (said.getvalue().strip() or f"exit {e.code}")
    return None


def _extras() -> set[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return set(data["project"]["optional-dependencies"])


def offline_problems(block: Block) -> list[str]:
    """What can be checked of commands that cannot run here: the shell reads them, each
    ``lunaflow`` command parses, pip extras exist, files named under the repository
    exist."""
    problems = []
    syntax = subprocess.run(["bash", "-n", "-c", block.text], capture_output=True, text=True, timeout=10)
    if syntax.returncode:
        problems.append(f"bash cannot read it: {syntax.stderr.strip()}")
    extras = _extras()
    for command in commands(block):
        for part in re.split(r"&&|;|\|", command.text):
            try:
                words = shlex.split(part)
            except ValueError as e:
                problems.append(f"line {command.line}: {e}")
                continue
            while words and "=" in words[0] and not words[0].startswith("-"):
                words = words[1:]  # VAR=value before a command
            if not words:
                continue
            if words[0] == "lunaflow":
                refused = parse_cli(words[1:])
                if refused:
                    problems.append(f"line {command.line}: `{part.strip()}` does not parse: {refused}")
            for word in words:
                m = re.fullmatch(r"\.\[([\w,-]+)\]", word)
                if m:
                    missing = set(m.group(1).split(",")) - extras
                    if missing:
                        problems.append(f"line {command.line}: pyproject.toml has no extra {sorted(missing)}")
                elif re.fullmatch(REPO_PATH, word) and not (ROOT / word).exists():
                    problems.append(f"line {command.line}: {word} is not in the repository")
    return problems


class DocRun:
    """One document's examples, evaluated in order: a folder standing for the repository
    root (``examples/`` copied, so commands run as written), the servers its commands
    start, its shell session and the project its last script was written to."""

    def __init__(self, doc: Path) -> None:
        from tests.support.devserver import Servers

        self.doc = doc
        self.name = doc.relative_to(ROOT).as_posix() if doc.is_relative_to(ROOT) else doc.name
        self.tmp = Path(tempfile.mkdtemp(prefix="lunaflow-docs-"))
        self.root = self.tmp / "repo"
        shutil.copytree(ROOT / "examples", self.root / "examples", ignore=shutil.ignore_patterns(".lunaflow"))
        self.servers = Servers(self.tmp)
        self.port: int | None = None
        self.session = Session(self.root, rewrite=self._rewrite)
        self.project: Path | None = None
        self.untested: Block | None = None
        self.count = 0

    def close(self) -> None:
        self.servers.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def where(self, block: Block) -> str:
        return f"{self.name}:{block.line}"

    def _rewrite(self, command: str) -> str:
        if self.port is None:
            return command
        return re.sub(r"\b(localhost|127\.0\.0\.1):8787\b", f"127.0.0.1:{self.port}", command)

    def _fresh(self, base: str | None) -> Path:
        self.count += 1
        project = self.tmp / f"project{self.count}"
        if base is None:
            project.mkdir()
        else:
            shutil.copytree(ROOT / base, project, ignore=shutil.ignore_patterns(".lunaflow", "tests"))
        return project

    # --- by role -------------------------------------------------------------------------

    def evaluate(self, block: Block) -> None:
        problem = block.problem()
        if problem:
            raise AssertionError(f"{self.where(block)}: {problem}")
        getattr(self, "_" + block.lang + "_" + block.role)(block)

    def _lua_fragment(self, block: Block) -> None:
        complaint = compile_lua(block.text, self.where(block))
        if complaint:
            raise AssertionError(f"a Lua fragment that does not compile: {complaint}")

    def _lua_script(self, block: Block) -> None:
        from runtime.testing import LocalPlatform

        if self.untested is not None:
            raise AssertionError(
                f"the script at {self.where(self.untested)} is not run by any `lua test` block before "
                f"the next script ({self.where(block)})"
            )
        project = self._fresh(block.options.get("project"))
        path = project / block.options.get("file", "main.lua")
        path.write_text(block.text, encoding="utf-8")
        # No data folder given: the harness's own, its databases on the process's scratch
        # server (a cluster copied and started for each script took most of the time).
        with LocalPlatform(project):
            pass  # the project loads: every script's top level ran
        self.project, self.untested = project, block

    def _lua_test(self, block: Block) -> None:
        from runtime.dev.luatest import run_tests

        base = block.options.get("project")
        project = self._fresh(base) if base else self.project
        if project is None:
            raise AssertionError(f"{self.where(block)}: a `lua test` block with no script before it")
        tests = project / "tests"
        shutil.rmtree(tests, ignore_errors=True)
        tests.mkdir()
        (tests / "doc_test.lua").write_text(block.text, encoding="utf-8")
        report = run_tests(project)
        if not base:
            self.untested = None
        if not report.outcomes:
            raise AssertionError(f"{self.where(block)}: the block declares no test")
        failed = [
            re.sub(
                r"doc_test\.lua:(\d+)", lambda m: f"{self.name}:{block.line + int(m.group(1))}", o.error or ""
            )
            + f" ({o.name})"
            for o in report.failed
        ]
        if failed:
            raise AssertionError("Lua tests failed:\n" + "\n".join(failed))

    def _start_dev(self, project: str) -> None:
        path = self.root / project
        self.port = self.servers.start(path, path / ".lunaflow").port

    def _sh_run(self, block: Block) -> None:
        for command in commands(block):
            m = re.fullmatch(r"lunaflow dev (\S+)", command.text)
            if m:
                self._start_dev(m.group(1))
                continue
            self.session.check([command], self.name)

    def _offline(self, block: Block) -> None:
        problems = offline_problems(block)
        if problems:
            raise AssertionError(f"{self.where(block)}:\n" + "\n".join(problems))

    def _sh_install(self, block: Block) -> None:
        """Checked offline; an install that ends by serving a project (the README's first
        set-up command) starts that server here, for the blocks that talk to it."""
        self._offline(block)
        for command in commands(block):
            m = re.search(r"&&\s*lunaflow dev (\S+)$", command.text)
            if m:
                self._start_dev(m.group(1))

    _sh_aws = _sh_bench = _offline

    def _python_run(self, block: Block) -> None:
        here = os.getcwd()
        os.chdir(self.root)
        try:
            code = compile(block.text, self.where(block), "exec")
            exec(code, {"__name__": "__doc_example__", "tmp_path": self.tmp / f"python{block.line}"})
        finally:
            os.chdir(here)

    def _python_foreign(self, block: Block) -> None:
        ast.parse(block.text, self.where(block))

    def _ts_foreign(self, block: Block) -> None:
        path = self.tmp / f"block{block.line}.mjs"
        path.write_text(block.text, encoding="utf-8")
        node = shutil.which("node")
        if node is None:
            raise AssertionError("node is needed to parse the `ts foreign` blocks (it installs with the CDK)")
        done = subprocess.run([node, "--check", str(path)], capture_output=True, text=True, timeout=30)
        if done.returncode:
            raise AssertionError(f"{self.where(block)}: node cannot parse it:\n{done.stderr}")

    def _toml_settings(self, block: Block) -> None:
        from runtime.engine.project import ProjectSource

        project = self._fresh(None)
        (project / "main.lua").write_text('workflow "w" (function(wf) end)\n', encoding="utf-8")
        (project / "lunaflow.toml").write_text(block.text, encoding="utf-8")
        ProjectSource.read(project)


# --- Sybil: the examples of a document as pytest items ------------------------------------


def _run_of(example: Example) -> DocRun:
    run = example.namespace.get("docrun")
    if run is None:
        run = example.namespace["docrun"] = DocRun(Path(example.path))
    assert isinstance(run, DocRun)
    return run


def _evaluate(example: Example) -> None:
    __tracebackhide__ = True
    _run_of(example).evaluate(example.parsed)


def parse_examples(document: Document) -> Iterable[Region]:
    """Sybil's parser: every block but output and diagrams is an example."""
    for region, block in _blocks(document):
        if block.role != "text":
            yield Region(region.start, region.end, parsed=block, evaluator=_evaluate)


def _teardown(namespace: dict[str, Any]) -> None:
    run = namespace.pop("docrun", None)
    if isinstance(run, DocRun):
        run.close()


def sybil() -> Sybil:
    return Sybil(parsers=[parse_examples], patterns=DOCS, path=str(ROOT), teardown=_teardown)
