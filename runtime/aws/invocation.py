"""What one Lambda invocation of the worker can give a run, and the deploy-time check that a
project's steps ask for no more.

The worker runs up to ``WORKER_TIMEOUT_S`` (Lambda's 15 minutes). It starts no new work in
its last ``SAFETY_S`` (saving and the next wake need time), so one invocation gives a step
at most about 14m40s, less what its replay took: a step's ``timeout`` may be at most
``LONGEST_STEP_MS`` (14 minutes), which a fresh invocation always has. A step with a longer
timeout could never start; ``lunaflow`` refuses it when the stack is synthesized (the
timeouts written in the scripts) and, for a timeout computed at run time, fails the run
with the same words. A step without a timeout gets what is left of its invocation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from runtime.aws.contract import WORKER_TIMEOUT_S
from runtime.core.durations import parse_ms
from runtime.engine.project import ProjectSource
from runtime.errors import InvalidInput

SAFETY_S = 20.0  # stop starting new work this long before the invocation's end
SAVE_S = 5.0  # a step attempt ends this long before it, so its outcome can be saved
LONGEST_STEP_MS = 14 * 60_000  # the longest timeout a step may have on AWS
REPLAY_ALLOWANCE_S = WORKER_TIMEOUT_S - SAFETY_S - LONGEST_STEP_MS / 1000  # 40 s to reach the step

# wf:step("name", { ... timeout = "20m" ... }: the options table of a step written out.
_STEP = re.compile(r"""[:.]step\s*\(\s*(["'])((?:(?!\1).)*)\1\s*,\s*\{""")
_TIMEOUT = re.compile(r"""\btimeout\s*=\s*(?:(["'])((?:(?!\1).)*)\1|(\d+(?:\.\d+)?))""")


@dataclass(frozen=True)
class StepTimeout:
    script: str
    line: int
    step: str
    timeout_ms: int


def _table_end(text: str, start: int) -> int:
    """Where the Lua table opened at ``start`` closes (strings and nesting skipped)."""
    depth, i, quote = 0, start, ""
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(text)


def step_timeouts(project: str | Path) -> list[StepTimeout]:
    """Every step timeout written as a literal in the project's scripts and modules."""
    source = ProjectSource.read(project)
    texts = dict(source.scripts) | {name: text for name, (_, text) in source.modules.items()}
    found: list[StepTimeout] = []
    for script, text in texts.items():
        for match in _STEP.finditer(text):
            options = text[match.end() - 1 : _table_end(text, match.end() - 1) + 1]
            timeout = _TIMEOUT.search(options)
            if timeout is None:
                continue
            literal = timeout.group(2) if timeout.group(2) is not None else float(timeout.group(3))
            try:
                ms = parse_ms(literal, f"the timeout of step '{match.group(2)}'")
            except InvalidInput:
                continue  # refused at run time with its own message
            line = text.count("\n", 0, match.start()) + 1
            found.append(StepTimeout(script, line, match.group(2), ms))
    return found


def too_long(project: str | Path) -> list[str]:
    """The refusals for steps whose timeout one invocation cannot give."""
    return [
        f"{t.script}:{t.line}: step '{t.step}' has timeout {t.timeout_ms}ms, more than the "
        f"{LONGEST_STEP_MS}ms (14m) a step may run on AWS, where one Lambda invocation runs at most "
        f"{WORKER_TIMEOUT_S // 60} minutes; lower the timeout, or split the step into steps that each fit"
        for t in step_timeouts(project)
        if t.timeout_ms > LONGEST_STEP_MS
    ]
