"""Issue 18, point 1: long runs stay readable. The run page's timeline (runtime/console/
chart.py) for runs built with LocalPlatform on its fake clock: a wait of days is drawn
shortened and says so, thousands of journal entries draw a bounded number of shapes and
say so, more step names than lanes share the last lane and say so."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.console import chart, render
from runtime.testing import LocalPlatform

from . import Html

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "console_long"


@pytest.fixture
def p(tmp_path: Path) -> Iterator[LocalPlatform]:
    with LocalPlatform(PROJECT, data_dir=tmp_path / "data") as platform:
        yield platform


def shapes(page: Html) -> list[tuple[str, str, float, float]]:
    """(lane, class, x, width) of each drawn shape."""
    return [
        (
            t.attrs["data-lane"],
            t.attrs.get("class", ""),
            float(t.attrs.get("x", 0)),
            float(t.attrs.get("width", 0)),
        )
        for t in page.tags
        if "data-lane" in t.attrs
    ]


def test_a_wait_of_three_days_is_drawn_shortened_and_labelled(p: LocalPlatform) -> None:
    p.start("patient", None, id="patient-1")
    p.advance("20s")
    p.advance("3d")
    assert p.signal("patient-1", "answer", "yes")
    assert p.get("patient-1").status == "completed"
    page = Html(render.run_page(p.platform, render.LocalActions(), "patient-1"))
    drawn = shapes(page)
    [wait] = [s for s in drawn if s[0] == "await 'answer'"]
    before = [s for s in drawn if s[0] == "step 'before'"]
    after = [s for s in drawn if s[0] == "step 'after'"]
    [sleep] = [s for s in drawn if s[0] == "sleep"]
    # In order: the first step, the 20 s sleep drawn to scale, the wait of three days drawn
    # shortened (narrower than the sleep), then the last step.
    assert before and after and before[0][2] <= sleep[2] <= wait[2] <= after[0][2]
    assert wait[3] < sleep[3] and sleep[3] > chart.PLOT_W / 2
    assert "⋯ 3 d ⋯" in page.text
    assert "1 quiet stretch longer than 30 s drawn shortened" in page.text
    assert "waited 3 d" in page.text


def test_thousands_of_entries_draw_a_bounded_number_of_shapes_and_say_so(p: LocalPlatform) -> None:
    p.start("busy", {"n": 2500}, id="busy-1")
    assert p.get("busy-1").status == "completed"
    assert len(p.journal("busy-1")) > 5000
    page = Html(render.run_page(p.platform, render.LocalActions(), "busy-1"))
    drawn = shapes(page)
    assert len(drawn) == chart.MAX_SHAPES
    assert {lane for lane, *_ in drawn} == {"step 'tick'"}
    assert (
        f"the first {chart.MAX_SHAPES:,} of 2,500 shapes are drawn; the journal below lists everything, "
        "a page at a time" in page.text
    )
    rows = [t for t in page.tags if t.name == "td" and t.attrs.get("class") == "att"]
    assert len(rows) == render.JOURNAL_PAGE - 1  # the newest page: the start, 199 steps, the end


def test_more_step_names_than_lanes_share_the_last_lane(p: LocalPlatform) -> None:
    p.start("many", {"n": chart.MAX_LANES + 6}, id="many-1")
    page = Html(render.run_page(p.platform, render.LocalActions(), "many-1"))
    lanes = list(dict.fromkeys(lane for lane, *_ in shapes(page)))
    assert len(lanes) == chart.MAX_LANES + 1
    assert lanes[-1] == "other steps and waits"
    assert f"lanes past the first {chart.MAX_LANES} are drawn together" in page.text


def test_the_axis_marks_offsets_from_the_start(p: LocalPlatform) -> None:
    p.start("patient", None, id="patient-2")
    p.advance("20s")
    p.advance("90s")
    p.signal("patient-2", "answer", 1)
    texts = [
        t.text
        for t in Html(render.run_page(p.platform, render.LocalActions(), "patient-2")).tags
        if t.name == "text"
    ]
    assert "start" in texts
    assert any(re.fullmatch(r"⋯ 1 min 30 s ⋯", t) for t in texts), texts


def _axis_labels(svg: str) -> list[tuple[float, float, str]]:
    """The axis row's labels as (left, right, text), at 6 px a character (11 px text)."""
    out = []
    for x, anchor, text in re.findall(
        rf"<text x='([\d.]+)' y='{chart.TOP - 8}' text-anchor='(\w+)'>([^<]*)</text>", svg
    ):
        w = len(text) * 6.0
        left = float(x) if anchor == "start" else float(x) - w if anchor == "end" else float(x) - w / 2
        out.append((left, left + w, text))
    return sorted(out)


@pytest.mark.parametrize("waits", [["3d"], ["20s", "3d"], ["2m", "5h", "40s", "3d"]])
def test_axis_labels_never_overlap_on_a_run_with_a_long_wait(p: LocalPlatform, waits: list[str]) -> None:
    """Before: the tick labels beside a shortened stretch were drawn over its length."""
    p.start("patient", None, id="patient-1")
    for wait in waits:
        p.advance(wait)
    assert p.signal("patient-1", "answer", "yes")
    svg = render.run_page(p.platform, render.LocalActions(), "patient-1")
    labels = _axis_labels(svg)
    assert any(t.startswith("⋯") for *_, t in labels) and any(t == "start" for *_, t in labels)
    for (_, right, a), (left, _, b) in zip(labels, labels[1:], strict=False):
        assert right <= left, f"{a!r} overlaps {b!r}: {labels}"
