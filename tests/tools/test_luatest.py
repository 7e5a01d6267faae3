"""`lunaflow test PROJECT`: a project's own Lua tests (tests/*_test.lua) on a fake clock.

Issue: "`lunaflow test examples/auction` runs the example's Lua tests, which cover the paid,
cancelled and timed-out paths, and a deliberately broken assertion in a test project fails
with its file and line." Output like a test runner people know: a line per failure with file
and line, a closing `N passed, N failed`, exit status 1 on failure.
runtime/dev/luatest.py: "A test file declares tests; each runs against a fresh LocalPlatform of
the project ... any error fails the test, reported with its file and line."

Projects: tests/projects/tools_luatest (every test passes; one Lua test per feature of `p`),
tests/projects/tools_luatest_fail (tests that fail on purpose, each at a line marked
`-- fails:<what>`, and test files that fail to load).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.dev.luatest import Outcome, Report, run_tests

ROOT = Path(__file__).resolve().parents[2]
PROJECTS = ROOT / "tests" / "projects"
PASSING = PROJECTS / "tools_luatest"
FAILING = PROJECTS / "tools_luatest_fail"
AUCTION = ROOT / "examples" / "auction"
TIMEOUT_S = 60


def lunaflow(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """The CLI as a real process."""
    env = {k: v for k, v in os.environ.items() if k != "LUNAFLOW_PROJECT"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, "-m", "runtime.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def declared_tests(project: Path) -> list[tuple[str, str]]:
    """(file, name) of every test("name", ...) written in the project's test files."""
    found = []
    for path in sorted((project / "tests").glob("*_test.lua")):
        for name in re.findall(r'^test\("([^"]+)"', path.read_text(encoding="utf-8"), re.M):
            found.append((path.name, name))
    return found


def marked_line(path: Path, what: str) -> int:
    """The line number of the line marked `-- fails:<what>`."""
    lines = path.read_text(encoding="utf-8").splitlines()
    hits = [i + 1 for i, line in enumerate(lines) if line.rstrip().endswith(f"-- fails:{what}")]
    assert len(hits) == 1, f"{path.name} marks '{what}' {len(hits)} times"
    return hits[0]


def by_name(report: Report) -> dict[str, Outcome]:
    return {o.name: o for o in report.outcomes}


@pytest.fixture(scope="module")
def passing() -> Report:
    return run_tests(PASSING)


@pytest.fixture(scope="module")
def failing() -> Report:
    return run_tests(FAILING)


# --- the command, as a process --------------------------------------------------------------


def test_lunaflow_test_runs_the_auction_examples_tests_and_exits_0() -> None:
    """Issue: "`lunaflow test examples/auction` runs the example's Lua tests"."""
    done = lunaflow("test", "examples/auction")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    names = [name for _, name in declared_tests(AUCTION)]
    assert len(names) >= 3
    for name in names:
        assert f"PASS sale_test.lua: {name}" in lines
    goldens = sorted((AUCTION / "tests" / "golden").glob("*.json"))
    for golden in goldens:  # replayed after the Lua tests (issue 21.2)
        assert any(line.startswith(f"PASS tests/golden/{golden.name}: golden run ") for line in lines), lines
    assert lines[-1] == f"{len(names) + len(goldens)} passed, 0 failed"


def test_a_failing_project_exits_1_with_a_fail_line_per_failure_and_the_count_last() -> None:
    """Issue: "a deliberately broken assertion in a test project fails with its file and
    line"; a line per failure, a closing `N passed, N failed`, exit status 1."""
    done = lunaflow("test", str(FAILING))
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    fails = [line for line in lines if line.startswith("FAIL ")]
    passes = [line for line in lines if line.startswith("PASS ")]
    assert lines[-1] == f"{len(passes)} passed, {len(fails)} failed"
    # Every failing test, and every file that failed to load, has its own line: one per
    # `-- fails:` marker.
    markers = sum(
        len(re.findall(r"-- fails:\w+$", p.read_text(encoding="utf-8"), re.M))
        for p in (FAILING / "tests").glob("*_test.lua")
    )
    assert len(fails) == markers
    line = marked_line(FAILING / "tests" / "fail_test.lua", "tables")
    assert (
        f'FAIL fail_test.lua:{line}: expected {{"a":1,"b":[2,4]}}, got {{"a":1,"b":[2,3]}} '
        "(fail_test.lua: assert_eq on tables that differ)"
    ) in lines


def test_a_project_whose_tests_all_pass_exits_0_with_every_test_counted() -> None:
    done = lunaflow("test", str(PASSING))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    declared = declared_tests(PASSING)
    assert [line for line in lines if line.startswith("PASS ")] == [f"PASS {f}: {n}" for f, n in declared]
    assert lines[-1] == f"{len(declared)} passed, 0 failed"


def test_dash_k_runs_only_the_tests_whose_name_contains_it() -> None:
    """cli.py: "-k: run only tests whose name contains this"."""
    done = lunaflow("test", str(PASSING), "-k", "stub")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    chosen = [(f, n) for f, n in declared_tests(PASSING) if "stub" in n]
    assert 0 < len(chosen) < len(declared_tests(PASSING))
    assert lines == [f"PASS {f}: {n}" for f, n in chosen] + [f"{len(chosen)} passed, 0 failed"]


def test_dash_k_selects_failing_tests_only_and_still_exits_1() -> None:
    done = lunaflow("test", str(FAILING), "-k", "assert_true")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    chosen = [line.split(" (fail_test.lua: ")[-1] for line in lines if "(fail_test.lua: " in line]
    assert sorted(chosen) == ["assert_true on nil)", "assert_true with a message)"]
    # A file that fails to load is reported whatever -k says: it declared no test to filter.
    assert [line.split(":")[0] for line in lines if line.startswith("FAIL load_")] == [
        "FAIL load_raises_test.lua",
        "FAIL load_syntax_test.lua",
    ]
    assert lines[-1] == "0 passed, 4 failed"


def test_dash_k_that_matches_no_test_exits_1() -> None:
    """cli.py exits 1 when nothing ran: a filter that selects nothing is not a pass."""
    done = lunaflow("test", str(PASSING), "-k", "no test is named like this")
    assert done.returncode == 1
    assert done.stdout.splitlines() == ["0 passed, 0 failed"]
    # and says why, where it said nothing and a run that found nothing looked like a crash
    assert "no test matches -k 'no test is named like this'" in done.stderr


def test_a_project_without_a_tests_folder_is_bad_usage(tmp_path: Path) -> None:
    """cli.py: exit 2 for bad usage, the reason on stderr, naming the fix."""
    (tmp_path / "main.lua").write_text('workflow "w" (function(wf) return 1 end)\n', encoding="utf-8")
    done = lunaflow("test", str(tmp_path))
    assert done.returncode == 2
    assert "has no tests/ folder" in done.stderr
    assert "tests/*_test.lua" in done.stderr


# --- the example's tests cover the paid, cancelled and timed-out paths ------------------------


def test_the_auction_tests_pass_in_process_and_name_the_paid_cancelled_and_timed_out_paths() -> None:
    report = run_tests(AUCTION)
    assert report.failed == [], [(o.name, o.error) for o in report.failed]
    names = [o.name for o in report.outcomes if not o.file.startswith("tests/golden/")]
    assert names == [n for _, n in declared_tests(AUCTION)]
    assert any("paid" in n and "settles" in n for n in names)
    assert any("cancelled" in n for n in names)
    assert any("72 hours" in n for n in names)


# Each path's test must catch a break of that path: copy the example, break one line.
BREAKS = {
    "paid": (
        "sale.lua",
        'return { outcome = "settled" }',
        'return { outcome = "paid" }',
        "a paid sale settles",
    ),
    "cancelled": (
        "sale.lua",
        '{ "paid", "cancelled" }',
        '{ "paid", "withdrawn" }',
        "a cancelled sale is void",
    ),
    "timed-out": (
        "sale.lua",
        'timeout = "72h"',
        'timeout = "96h"',
        "a sale nobody pays is void after 72 hours",
    ),
}


@pytest.mark.parametrize("path", list(BREAKS))
def test_the_auction_test_of_each_path_fails_when_that_path_breaks(path: str, tmp_path: Path) -> None:
    """Issue: the example's Lua tests "cover the paid, cancelled and timed-out paths": each
    catches a break in its path."""
    script, old, new, test_name = BREAKS[path]
    project = tmp_path / "auction"
    shutil.copytree(AUCTION, project, ignore=shutil.ignore_patterns(".lunaflow"))
    source = (project / script).read_text(encoding="utf-8")
    assert source.count(old) == 1, f"the example changed: {old!r} is not in {script} once"
    (project / script).write_text(source.replace(old, new), encoding="utf-8")
    report = run_tests(project, pattern=test_name)
    assert [o.name for o in report.outcomes] == [test_name]
    failure = report.outcomes[0].error
    assert failure is not None and re.match(r"sale_test\.lua:\d+: ", failure), failure


# --- failures: each names its file and line --------------------------------------------------


@pytest.mark.parametrize(
    ("what", "test_name", "message"),
    [
        ("tables", "assert_eq on tables that differ", 'expected {"a":1,"b":[2,4]}, got {"a":1,"b":[2,3]}'),
        ("message", "assert_eq with a message", 'the echo: expected "y", got "x"'),
        ("true", "assert_true on nil", "expected a true value, got "),
        ("true_message", "assert_true with a message", "one is not more than two"),
        ("error", "a plain error", "boom"),
        ("nil_index", "indexing nil", "attempt to index a nil value (local 'run')"),
    ],
)
def test_a_failing_test_is_reported_at_its_file_and_line(
    failing: Report, what: str, test_name: str, message: str
) -> None:
    """luatest.py: "Assertions: assert_eq(actual, expected, message), assert_true(value,
    message); any error fails the test, reported with its file and line"."""
    outcome = by_name(failing)[test_name]
    line = marked_line(FAILING / "tests" / "fail_test.lua", what)
    assert outcome.file == "fail_test.lua"
    assert outcome.error is not None
    assert outcome.error.startswith(f"fail_test.lua:{line}: {message}"), outcome.error


def test_a_refused_platform_call_is_reported_at_the_tests_line(failing: Report) -> None:
    """luatest.py: "any error fails the test, reported with its file and line" — p:get of a
    run that does not exist is an error in the test at the line that called it."""
    outcome = by_name(failing)["a refused platform call"]
    line = marked_line(FAILING / "tests" / "fail_test.lua", "platform")
    assert outcome.error == f"fail_test.lua:{line}: no run 'no-such-run'"


def test_a_refused_platform_call_fails_the_test_with_the_platforms_message(failing: Report) -> None:
    outcome = by_name(failing)["a refused platform call"]
    assert outcome.error is not None and "no run 'no-such-run'" in outcome.error


def test_passing_and_failing_tests_are_told_apart(failing: Report) -> None:
    outcomes = by_name(failing)
    assert outcomes["a passing test among failing ones"].error is None
    assert outcomes["a file after a broken one runs"].error is None
    assert {o.name for o in failing.passed} == {
        "a passing test among failing ones",
        "a file after a broken one runs",
    }


@pytest.mark.parametrize(
    ("file", "what"), [("load_syntax_test.lua", "syntax"), ("load_raises_test.lua", "load_raises")]
)
def test_a_test_file_that_fails_to_load_is_one_failure_at_its_file_and_line(
    failing: Report, file: str, what: str
) -> None:
    """A file that does not parse, or raises while it loads, fails as a whole, with the line;
    the tests it declared do not run, and the files after it still do."""
    line = marked_line(FAILING / "tests" / file, what)
    mine = [o for o in failing.outcomes if o.file == file]
    assert len(mine) == 1
    assert mine[0].name == "(loading the file)"
    assert mine[0].error is not None and mine[0].error.startswith(f"{file}:{line}: "), mine[0].error
    assert not {"never runs", "never runs either"} & {o.name for o in failing.outcomes}


def test_run_tests_writes_the_same_lines_the_command_prints(failing: Report) -> None:
    import io

    out = io.StringIO()
    report = run_tests(FAILING, out=out)
    lines = out.getvalue().splitlines()
    assert lines[-1] == f"{len(report.passed)} passed, {len(report.failed)} failed"
    assert len(lines) == len(report.outcomes) + 1
    assert sum(line.startswith("FAIL ") for line in lines) == len(report.failed)


def test_run_tests_with_a_pattern_runs_only_matching_tests() -> None:
    report = run_tests(PASSING, pattern="journal")
    assert [o.name for o in report.outcomes] == [n for _, n in declared_tests(PASSING) if "journal" in n]
    assert report.outcomes and report.failed == []


# --- what `p` does (each Lua test in tools_luatest proves one feature) -------------------------


def test_every_declared_test_of_the_passing_project_runs_and_passes(passing: Report) -> None:
    assert [(o.file, o.name) for o in passing.outcomes] == declared_tests(PASSING)
    assert passing.failed == [], [(o.name, o.error) for o in passing.failed]


def passed(report: Report, *names: str) -> None:
    outcomes = by_name(report)
    for name in names:
        assert name in outcomes, f"no test named {name!r} ran"
        assert outcomes[name].error is None, f"{name}: {outcomes[name].error}"


def test_p_advance_fires_due_timers(passing: Report) -> None:
    """SPEC 5: "advance moves the fake clock, fires due timers in order, runs until idle"."""
    passed(passing, "advance fires a due timer, and not a minute before", "advance fires an await's timeout")


def test_p_journal_lists_a_runs_entries(passing: Report) -> None:
    passed(passing, "journal lists a run's entries in order with kind, name and data")


def test_p_runs_lists_and_filters_runs(passing: Report) -> None:
    passed(passing, "runs lists runs, filtered by status and workflow")


def test_p_signal_cancel_and_resume(passing: Report) -> None:
    passed(
        passing,
        "a signal to an ended run is set aside: p:signal returns false",
        "cancel ends a run; resume retries a failed one",
    )


def test_assert_eq_compares_tables_by_value(passing: Report) -> None:
    passed(passing, "assert_eq compares tables by value, whatever order their keys were written in")


def test_p_stub_http_answers_an_objects_http_calls(passing: Report) -> None:
    """luatest.py: "stub_http(fn(request))" — an object calling http gets the stub's answer."""
    passed(
        passing,
        "an object calling http gets the stub's answer",
        "a step that calls an object that calls http records the stub's answer",
        "http with no stub fails the call, naming p:stub_http",
    )


def test_p_stub_object_replaces_one_method(passing: Report) -> None:
    """luatest.py: "stub_object(class, method, fn(key, ...))"."""
    passed(
        passing,
        "a stubbed object method answers instead of the object, with the key and arguments",
        "only the stubbed method is replaced: other objects stay real",
    )


def test_each_test_gets_a_fresh_platform(passing: Report) -> None:
    """luatest.py: "each runs against a fresh LocalPlatform of the project": runs, object
    state, stubs and the clock of one test are not seen by the next."""
    passed(
        passing,
        "a first test leaves runs, object state, a stub and a moved clock behind",
        "the next test starts on a fresh platform",
    )


# --- a test that never ends -------------------------------------------------------------------


@pytest.fixture(scope="module")
def spinning(tmp_path_factory: pytest.TempPathFactory) -> Report:
    project = tmp_path_factory.mktemp("spin")
    (project / "tests").mkdir()
    (project / "main.lua").write_text('workflow "w" (function(wf) return 1 end)\n', encoding="utf-8")
    (project / "lunaflow.toml").write_text("[limits]\ninstructions = 1000000\n", encoding="utf-8")
    (project / "tests" / "spin_test.lua").write_text(
        'test("spins", function(p)\n    while true do end\nend)\n'
        'test("after", function(p) assert_eq(p:start("w").result, 1) end)\n',
        encoding="utf-8",
    )
    return run_tests(project)


def test_a_test_that_never_ends_fails_on_the_instruction_budget_and_the_next_runs(spinning: Report) -> None:
    """SPEC 6: "instructions per call are bounded; past the bound the call fails with a clear
    error" — a runaway test fails instead of hanging the runner."""
    outcomes = by_name(spinning)
    assert outcomes["spins"].error is not None and "budget" in outcomes["spins"].error
    assert outcomes["after"].error is None


def test_a_test_runs_under_the_projects_instruction_limit(spinning: Report) -> None:
    """The budget error says "raise limits.instructions in lunaflow.toml": the test runner
    must honour that setting for the advice to work."""
    error = by_name(spinning)["spins"].error
    assert error is not None and "budget of 1000000 Lua instructions" in error, error


BIG_ANSWER_TEST = """
test("many big results come back", function(p)
  for i = 1, 30 do p:start("big", nil, { id = "big-" .. i }) end
  local all = p:runs()
  assert_eq(#all, 30)
  local more = {}
  for i = 1, 10 do more[i] = all[i].result .. "y" end
end)

test("a later test still runs", function(p)
  assert_eq(p:start("big", nil, { id = "one" }).status, "completed")
end)
"""


def test_a_host_call_from_a_lua_test_lifts_and_arms_the_memory_limit(tmp_path: Path) -> None:
    """Issue 24 §6. ``p:runs()`` hands a Lua test 6 MB of results under a 4 MiB limit. As
    at every other entry into Lua, the limit is lifted while Python builds the answer and
    armed again after, so the test fails on its next allocation with the memory error and
    the next test runs. Before: the limit stayed armed while Python built the tables, and
    ``lunaflow test`` froze (an allocation failed with Python holding the state)."""
    project = tmp_path / "proj"
    (project / "tests").mkdir(parents=True)
    (project / "lunaflow.toml").write_text("[limits]\nmemory_mb = 4\n", encoding="utf-8")
    (project / "main.lua").write_text(
        'workflow "big" (function(wf) return string.rep("x", 200000) end)\n', encoding="utf-8"
    )
    (project / "tests" / "big_test.lua").write_text(BIG_ANSWER_TEST, encoding="utf-8")
    try:
        done = lunaflow("test", str(project))
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"lunaflow test froze on a big answer (no exit in {TIMEOUT_S} s)") from e
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "FAIL call stopped: it ran out of memory (the Lua state's limit is 4 MiB)" in done.stdout, (
        done.stdout
    )
    assert "PASS big_test.lua: a later test still runs" in done.stdout, done.stdout
    assert "1 passed, 1 failed" in done.stdout, done.stdout
