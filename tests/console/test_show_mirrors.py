"""`lunaflow show` in the terminal mirrors the web console's timeline.

Issue: "`lunaflow show` in the terminal mirrors the same timeline".
SPEC 4: the console "shows one run's journal as a timeline (each step's attempts with
times, errors and step ids; waits; signals; timers)" and "exists as: a CLI ... a web page
served by `lunaflow dev` at `/_console`".

Runs of tests/projects/console_demo's "review" workflow are built with LocalPlatform on a
data folder (a sleep its timer ends, an await a signal ends or that times out, a step whose
first attempt fails, a step that fails for good), the folder is closed, and then read twice
as a user would: ``lunaflow show RUN_ID`` (runtime.cli.main) and GET
``/_console/runs/RUN_ID`` (runtime.console.page over the same folder). What each shows is
compared with what the journal recorded, in order: every attempt (number, outcome, step id,
start time), every attempt's error, every wait's resolution and the run's error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console

from runtime import cli
from runtime.console import page as console_page
from runtime.core.clock import SystemClock
from runtime.core.journal import Entry, Kind
from runtime.platform.runs import Runs
from runtime.store.sqlite import STORE_FILE, SQLiteStore
from runtime.testing import LocalPlatform

from . import PROJECT, Html, Tag


def when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S")


@dataclass(frozen=True)
class Expected:
    attempts: list[tuple[int, str, str, str]]  # (attempt, outcome, step id, started at)
    errors: list[str]  # each failed attempt's error, in order
    resolutions: list[str]  # each wait's resolution, in order
    error: str | None  # the run's


def expected(entries: list[Entry], run_error: str | None) -> Expected:
    """What the journal recorded, read straight from its entries."""
    attempts: list[tuple[int, str, str, str]] = []
    errors, resolutions = [], []
    for e in entries:
        if e.kind == Kind.STEP_INTENT:
            attempts.append((int(e.data["attempt"]), "running", str(e.data["step_id"]), when(e.at)))
        elif e.kind in (Kind.STEP_RESULT, Kind.STEP_FAILED):
            n, _, sid, at = attempts[-1]
            attempts[-1] = (n, "ok" if e.kind == Kind.STEP_RESULT else "failed", sid, at)
            if e.kind == Kind.STEP_FAILED:
                errors.append(str(e.data["error"]))
        elif e.kind == Kind.WAIT_DONE:
            by = e.data.get("by")
            if by == "signal":
                payload = json.dumps(e.data.get("payload"), ensure_ascii=False, separators=(",", ":"))
                resolutions.append(f"signal '{e.data['signal']}' {payload}")
            else:
                resolutions.append("timer fired" if by == "timer" else "timed out")
    return Expected(attempts, errors, resolutions, run_error)


@dataclass
class Views:
    show: str  # `lunaflow show` as printed
    page: Html  # the /_console run page
    expected: Expected


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ "approved": signalled after its sleep; "unanswered": its await times out."""
    folder = tmp_path_factory.mktemp("show")
    with LocalPlatform(PROJECT, data_dir=folder) as p:
        p.start("review", None, id="approved")
        p.start("review", None, id="unanswered")
        p.advance("1h")
        assert p.signal("approved", "approved", {"by": "ada", "note": "ok → go"})
        p.advance("24h")  # "unanswered" times out
        p.advance("10s")  # past both backoffs
        for run_id in ("approved", "unanswered"):
            assert p.get(run_id).status == "failed", p.get(run_id)
    return folder


@pytest.fixture
def views(
    data: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str], Views]]:
    # A wide terminal, so that rich does not wrap a cell in the middle of a step id.
    monkeypatch.setattr(cli.output, "out", Console(highlight=False, soft_wrap=True, width=400))
    monkeypatch.setattr(cli.output, "err", Console(stderr=True, highlight=False, soft_wrap=True, width=400))
    runs = Runs(SQLiteStore(data / STORE_FILE), SystemClock())

    def read(run_id: str) -> Views:
        capsys.readouterr()
        code = cli.main(["show", run_id, "--data", str(data), "--project", str(PROJECT)])
        shown = capsys.readouterr()
        assert code == 0, shown.err
        response = console_page.render_console(runs, "GET", f"/_console/runs/{run_id}", {}, poke=lambda: None)
        assert response.status_code == 200
        run = runs.get(run_id)
        return Views(shown.out, Html(response.body), expected(runs.journal(run_id), run.error))

    yield read
    runs.store.close()


# How each view writes an attempt, a wait's resolution and an attempt's error.
SHOW_ATTEMPT = re.compile(
    r"│\s*│ (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) │\s*│ attempt (\d+) (\w+)"
    r"(?: took [\d.]+(?:ms|s|m\d\ds|h\d\dm))?  step id (\S+)"
)
PAGE_ATTEMPT = re.compile(r"^attempt (\d+): ([a-z ]+?)(?:, took [\d.]+ (?:ms|s|min|h|d)[^·]*)? · step id ")
RESOLUTION = re.compile(r"→ (.+?) at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d")  # (the page adds " UTC")
SHOW_ERROR = re.compile(r"^│.*│\s+error: (.+?)\s+│$", re.M)


def show_attempts(text: str) -> list[tuple[int, str, str, str]]:
    return [(int(n), outcome, sid, at) for at, n, outcome, sid in SHOW_ATTEMPT.findall(text)]


def page_rows(page: Html) -> list[list[Tag]]:
    """Each table row of the page: the elements inside it (its cells and their content)."""
    out: list[list[Tag]] = []
    current: list[Tag] | None = None
    for tag in page.tags:
        if tag.name == "tr":
            current = []
            out.append(current)
        elif tag.name in ("table", "h1", "h2", "div", "p"):
            current = None  # not inside a row
        elif current is not None:
            current.append(tag)
    return out


def cells(row: list[Tag]) -> list[str]:
    return [" ".join(t.text.split()) for t in row if t.name in ("td", "th")]


def page_attempts(page: Html) -> list[tuple[int, str, str, str]]:
    out = []
    for row in page_rows(page):
        texts = cells(row)
        m = PAGE_ATTEMPT.search(texts[-1]) if len(texts) == 4 else None
        if m:
            [step_id] = [t.text for t in row if t.name == "code"]
            assert texts[1].endswith(" UTC"), texts[1]  # times carry their zone
            out.append((int(m.group(1)), m.group(2), step_id, texts[1].removesuffix(" UTC")))
    return out


@pytest.mark.parametrize("run_id", ["approved", "unanswered"])
def test_show_and_page_list_the_same_attempts_with_step_ids_and_times(
    views: Callable[[str], Views], run_id: str
) -> None:
    """Each step's attempts with times and step ids, in journal order, in both views."""
    v = views(run_id)
    assert len(v.expected.attempts) == 4  # file: failed, ok; publish: failed, failed
    assert show_attempts(v.show) == v.expected.attempts, v.show
    assert page_attempts(v.page) == v.expected.attempts, v.page.text


@pytest.mark.parametrize("run_id", ["approved", "unanswered"])
def test_show_and_page_give_the_same_errors(views: Callable[[str], Views], run_id: str) -> None:
    """Each failed attempt's error, in order, and the run's error, in both views."""
    v = views(run_id)
    assert SHOW_ERROR.findall(v.show) == v.expected.errors, v.show
    spans = [
        " ".join(t.text.split()) for t in v.page.tags if t.name == "span" and t.attrs.get("class") == "err"
    ]
    assert spans == v.expected.errors
    assert v.expected.error and v.expected.error.startswith("step 'publish' failed after 2 attempts: ")
    assert f"error {v.expected.error}" in v.show
    assert f"error {v.expected.error}" in v.page.text


@pytest.mark.parametrize(
    ("run_id", "resolutions"),
    [
        ("approved", ["timer fired", 'signal \'approved\' {"by":"ada","note":"ok → go"}']),
        ("unanswered", ["timer fired", "timed out"]),
    ],
)
def test_show_and_page_give_the_same_wait_resolutions(
    views: Callable[[str], Views], run_id: str, resolutions: list[str]
) -> None:
    """Each wait and how it resolved (timer, signal with its payload, timeout), in both."""
    v = views(run_id)
    assert v.expected.resolutions == resolutions
    assert RESOLUTION.findall(v.show) == resolutions, v.show
    assert RESOLUTION.findall(" ".join(v.page.text.split())) == resolutions, v.page.text


def test_show_and_page_list_the_same_timeline_items_in_order(views: Callable[[str], Views]) -> None:
    """The timeline's rows (start, sleep, await, each step, the resume-free failure) carry
    the same sequence numbers and titles in both views."""
    v = views("approved")
    titles = ["started", "sleep", "await 'approved'", "step 'file'", "step 'publish'"]
    show_rows = [
        (cells[0], cells[2])
        for cells in (
            [c.strip() for c in line.strip().strip("│").split("│")]
            for line in v.show.splitlines()
            if line.startswith("│")
        )
        if len(cells) == 4 and cells[0].isdigit()
    ]
    page_items = [(c[0], c[2]) for c in map(cells, page_rows(v.page)) if len(c) == 4 and c[0].isdigit()]
    assert [t for _, t in show_rows] == titles, v.show
    assert page_items == show_rows


def test_signals_and_their_payloads_appear_in_both(views: Callable[[str], Views]) -> None:
    """SPEC 4 lists signals in the timeline view: the consumed signal, its name and payload."""
    v = views("approved")
    payload = '{"by": "ada", "note": "ok → go"}'
    assert re.search(
        r"│ 1\s+│ \S+ \S+ │ approved │ consumed \(entry \d+\)\s+│ " + re.escape(payload), v.show
    ), v.show
    signals = [c for c in map(cells, page_rows(v.page)) if len(c) == 5 and c[0].isdigit()]
    assert [(c[0], c[2], c[4]) for c in signals] == [("1", "approved", '{"by":"ada","note":"ok → go"}')]
    assert re.fullmatch(r"consumed \(entry \d+\)", signals[0][3])
