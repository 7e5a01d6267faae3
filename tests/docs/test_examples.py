"""Issue 21: every example in the README and docs/*.md is run or checked, and a change to
one fails the suite.

The examples themselves are pytest items (``python -m pytest README.md docs/``; the root
conftest.py hands the files to Sybil, tests/support/docs.py says how each kind of block runs).
This module checks the wiring, that every block is marked as something the suite knows, and,
by mutating real examples and running them through the same machinery, that a changed
output, a broken snippet or an undeclared name fails.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.cli import ROOT, worktree_env
from tests.support.docs import Block, compile_lua, fenced_blocks, offline_problems, sybil

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _all_blocks() -> list[tuple[Path, Block]]:
    return [(doc, b) for doc in DOCS for b in fenced_blocks(doc)]


def run_examples(text: str, tmp_path: Path, name: str = "doc.md") -> list[tuple[Block, str | None]]:
    """Run a markdown text's examples in order, as the suite does; each block with the error
    it raised, or None."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    document = sybil().parse(path)
    results: list[tuple[Block, str | None]] = []
    try:
        for example in document.examples():
            try:
                example.evaluate()
                results.append((example.parsed, None))
            except Exception as e:  # the failure a pytest item would report
                results.append((example.parsed, f"{type(e).__name__}: {e}"))
    finally:
        run = document.namespace.pop("docrun", None)
        if run is not None:
            run.close()
    return results


def _failures(results: list[tuple[Block, str | None]]) -> list[str]:
    return [f"line {b.line}: {err}" for b, err in results if err]


def _block_text(doc: Path, block: Block) -> str:
    """The whole fenced block (fences included) as it stands in the document."""
    lines = doc.read_text(encoding="utf-8").splitlines(keepends=True)
    end = block.line + block.text.count("\n")
    return "".join(lines[block.line - 1 : end + 1])


# --- the wiring and the marks --------------------------------------------------------------


def test_pytest_collects_the_docs_examples() -> None:
    """pyproject.toml's testpaths name the README and docs/, and pytest collects one item per
    block that is not output or a diagram."""
    testpaths = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"][
        "ini_options"
    ]["testpaths"]
    assert {"tests", "README.md", "docs"} <= set(testpaths)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "README.md", "docs"],
        cwd=ROOT,
        env=worktree_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    items = [line for line in done.stdout.splitlines() if "::line:" in line]
    expected = [(doc, b) for doc, b in _all_blocks() if b.role != "text"]
    assert len(items) == len(expected), done.stdout[-2000:]
    assert any(i.startswith("README.md::line:") for i in items)


def test_every_block_is_marked_as_something_the_suite_knows() -> None:
    problems = [f"{d.relative_to(ROOT)}:{b.line}: {b.problem()}" for d, b in _all_blocks() if b.problem()]
    assert not problems, "\n".join(problems)


def test_every_complete_script_is_run_by_a_lua_test_after_it() -> None:
    """A complete script (a ``lua`` block not marked fragment or test) is followed by a ``lua
    test`` block, visible or in an HTML comment, before the next script: loading alone is
    not running."""
    alone = []
    for doc in DOCS:
        pending: Block | None = None
        for b in fenced_blocks(doc):
            if b.lang != "lua":
                continue
            if b.role == "script":
                if pending is not None:
                    alone.append(f"{doc.relative_to(ROOT)}:{pending.line}")
                pending = b
            elif b.role == "test" and "project" not in b.options:
                pending = None
        if pending is not None:
            alone.append(f"{doc.relative_to(ROOT)}:{pending.line}")
    assert not alone, "scripts no test runs: " + ", ".join(alone)


def test_the_docs_show_complete_scripts_and_tests_not_only_fragments() -> None:
    """The marks are not a way out: each kind of example is there and runs."""
    roles: dict[str, int] = {}
    for _, b in _all_blocks():
        roles[f"{b.lang} {b.role}"] = roles.get(f"{b.lang} {b.role}", 0) + 1
    assert roles.get("lua script", 0) >= 8, roles
    assert roles.get("lua test", 0) >= 8, roles
    assert roles.get("sh run", 0) >= 3, roles
    # The LocalPlatform listing and the AwsPlatform example test of docs/reference.md.
    assert roles.get("python run", 0) == 2, roles


# --- a changed example fails ----------------------------------------------------------------


def test_a_changed_expected_output_in_the_readme_fails(tmp_path: Path) -> None:
    """The README up to its quickstart, run as written, passes; with one expected output
    changed, that command fails against the real server."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    cut = readme.index("A sale nobody pays becomes void after 72 hours")
    original = readme[:cut]
    (tmp_path / "a").mkdir()
    assert not _failures(run_examples(original, tmp_path / "a", "README.md"))

    wanted = '# -> {"run":"pay-lot-42","sale":"lot-42"}'
    assert wanted in original
    (tmp_path / "b").mkdir()
    results = run_examples(
        original.replace(wanted, wanted.replace("pay-lot-42", "pay-lot-24")), tmp_path / "b"
    )
    failures = _failures(results)
    assert len(failures) == 1, failures
    assert 'expected: {"run":"pay-lot-24","sale":"lot-42"}' in failures[0], failures[0]


def test_the_readme_script_without_its_declarations_fails(tmp_path: Path) -> None:
    """Issue 21, point 1: without ``local Account = objects "Account"`` the top example's
    notify step fails (attempt to call a nil value) and the run sleeps before a retry instead
    of awaiting payment: its tests fail."""
    readme = ROOT / "README.md"
    script = next(b for b in fenced_blocks(readme) if b.lang == "lua" and b.role == "script")
    test = next(b for b in fenced_blocks(readme) if b.lang == "lua" and b.role == "test")
    assert 'local Account = objects "Account"' in script.text
    text = _block_text(readme, script) + "\n<!-- invisible-code-block: lua test\n" + test.text + "-->\n"
    assert not _failures(run_examples(text, tmp_path))
    broken = text.replace('local Account = objects "Account"\n', "")
    failures = _failures(run_examples(broken, tmp_path))
    assert len(failures) == 1 and 'expected "awaiting", got "sleeping"' in failures[0], failures


def test_a_changed_lua_test_and_a_broken_fragment_in_the_reference_fail(tmp_path: Path) -> None:
    reference = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    # Three changes in one run of the reference (a run of it takes a quarter of a minute):
    # a fragment that no longer compiles, a Lua test's expectation and a harness block's
    # assertion. Each block runs on its own (a fragment is compiled and nothing else, a test
    # gets its own platform), so each change fails its own block and no other.
    changes = [
        ("local status = run:status()", "local status = run:status("),
        (
            'assert_eq(p:get("sale-lot-1").result, { outcome = "settled" })',
            'assert_eq(p:get("sale-lot-1").result, { outcome = "void" })',
        ),
        (
            'assert p.get("sale-lot-44").status == "awaiting"',
            'assert p.get("sale-lot-44").status == "sleeping"',
        ),
    ]
    changed = reference
    for old, new in changes:
        assert reference.count(old) >= 1, old
        changed = changed.replace(old, new, 1)
    blocks = fenced_blocks(reference)
    [fragment, lua_test, harness] = [next(b for b in blocks if old in b.text) for old, _ in changes]
    assert fragment.role == "fragment" and compile_lua(fragment.text, "reference.md") is None, fragment
    assert len({fragment.line, lua_test.line, harness.line}) == 3

    failures = [(b.line, err) for b, err in run_examples(changed, tmp_path) if err]
    by_line = dict(failures)
    changed_lines = sorted([fragment.line, lua_test.line, harness.line])
    assert len(failures) == 3 and sorted(by_line) == changed_lines, failures
    assert "a Lua fragment that does not compile" in by_line[fragment.line], failures
    assert 'expected {"outcome":"void"}, got {"outcome":"settled"}' in by_line[lua_test.line], failures
    assert by_line[harness.line].startswith("AssertionError"), failures


def test_marks_the_suite_does_not_know_and_scripts_no_test_runs_fail(tmp_path: Path) -> None:
    failures = _failures(run_examples("```lua fragmnet\nlocal x = 1\n```\n", tmp_path))
    assert failures and "marks ['fragmnet']" in failures[0], failures
    failures = _failures(run_examples("```rust\nfn main() {}\n```\n", tmp_path))
    assert failures and "language 'rust'" in failures[0], failures
    two = '```lua\nworkflow "a" (function(wf) end)\n```\n\n```lua\nworkflow "b" (function(wf) end)\n```\n'
    failures = _failures(run_examples(two, tmp_path))
    assert failures and "is not run by any `lua test` block" in failures[0], failures


def test_commands_that_cannot_run_here_are_checked_offline() -> None:
    ok = Block("sh", "sh aws", "lunaflow runs --aws -p examples/auction\nnpx cdk deploy\n", 1)
    assert offline_problems(ok) == []
    bad = Block(
        "sh",
        "sh aws",
        "lunaflow runs --aws --colour\n"
        "python3 -m pip install -e '.[nope]'\n"
        "python3 bench/nothing.py\n"
        "if then\n",
        1,
    )
    problems = "\n".join(offline_problems(bad))
    assert "bash cannot read it" in problems
    assert (
        "`lunaflow runs --aws --colour` does not parse" in problems and "unrecognized arguments" in problems
    )
    assert "no extra ['nope']" in problems
    assert "bench/nothing.py is not in the repository" in problems


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_no_lua_block_calls_a_name_it_never_declares(doc: Path) -> None:
    """The names the README, reference and migration guide once used undeclared (Account,
    Payments, sales) are declared in every complete script that uses them."""
    for b in fenced_blocks(doc):
        if b.lang != "lua" or b.role != "script":
            continue
        for name, declared in (
            ("Account", r'objects "Account"'),
            ("Payments", r'objects "Payments"'),
            ("sales:", r'database "sales"'),
        ):
            if re.search(rf"\b{re.escape(name)}", b.text) and 'object "' + name not in b.text:
                assert re.search(declared, b.text), f"{doc.name}:{b.line} uses {name} undeclared"
