"""A run drawn to scale: server-rendered SVG, the same on the local page and in CloudWatch
custom widgets (which allow SVG and show ``<title>`` as a tooltip).

One lane per step name and per kind of wait, a lane for signals. Each attempt is a bar
coloured by its outcome; the backoff before a retry is a dashed span; a sleep or wait is a
span coloured by what ended it (a signal, its timer, its timeout, the run's cancel) with a
tick at its due time; each signal is a mark where it arrived. Every shape has a title with
its step id, times, duration and error.

Time runs left to right, piecewise linear: a stretch longer than ``IDLE_S`` in which
nothing starts or ends (a wait of three days) is drawn shortened, marked, and labelled with
its real length, so a run with a long wait stays readable. A run with more shapes than
``MAX_SHAPES`` draws the first ones and says so; the journal below the chart has them all.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from runtime.console.html import Zone, duration, e, plural
from runtime.console.timeline import Item
from runtime.store.base import RunRecord, SignalRecord

IDLE_S = 30.0  # a quiet stretch longer than this is drawn shortened
MAX_LANES = 24
MAX_SHAPES = 2000
LABEL_W = 170  # the lane names' column
PLOT_W = 880
LANE_H = 22
TOP = 26  # the axis
BAR_H = 12


@dataclass
class _Shape:
    lane: str
    start: float
    end: float | None  # None: a mark
    css: str
    title: str
    dashed: bool = False


@dataclass
class _Lanes:
    names: list[str] = field(default_factory=list)
    overflow: str = "other steps and waits"

    def lane(self, name: str) -> str:
        if name in self.names:
            return name
        if len(self.names) < MAX_LANES:
            self.names.append(name)
            return name
        if self.overflow not in self.names:
            self.names.append(self.overflow)
        return self.overflow


class Scale:
    """Epoch seconds to x, piecewise linear over the moments shapes start and end: a
    stretch longer than IDLE_S between two moments gets a fixed share of the width."""

    def __init__(self, moments: list[float], width: float) -> None:
        points = sorted(set(moments)) or [0.0]
        gaps = [b - a for a, b in zip(points, points[1:], strict=False)]
        visible = sum(g for g in gaps if g <= IDLE_S)
        long_gaps = [g for g in gaps if g > IDLE_S]
        # Each shortened stretch is drawn as a share of what is drawn to scale; together
        # they take at most half the width.
        if visible <= 0:
            visible = float(max(1, len(long_gaps)))
        shortened = visible * min(0.12, 1.0 / max(1, len(long_gaps)))
        self.points = points
        self.breaks: list[tuple[float, float]] = []  # (start, end) of each shortened stretch
        xs = [0.0]
        for a, g in zip(points, gaps, strict=False):
            if g > IDLE_S:
                self.breaks.append((a, a + g))
                xs.append(xs[-1] + shortened)
            else:
                xs.append(xs[-1] + g)
        total = xs[-1] or 1.0
        self.xs = [x / total * width for x in xs]
        self.width = width

    def x(self, at: float) -> float:
        pts = self.points
        if at <= pts[0]:
            return 0.0
        if at >= pts[-1]:
            return self.xs[-1]
        i = bisect.bisect_right(pts, at) - 1
        a, b = pts[i], pts[i + 1]
        return self.xs[i] + (self.xs[i + 1] - self.xs[i]) * (at - a) / (b - a)


def draw(
    run: RunRecord,
    items: list[Item],
    signals: list[SignalRecord],
    *,
    zone: Zone,
    now: float,
) -> str:
    """The run's timeline as an SVG figure, with its legend and what was shortened."""
    live = run.status not in ("completed", "cancelled", "failed")
    end_of_run = now if live else run.updated_at
    shapes: list[_Shape] = []
    lanes = _Lanes()
    for item in items:
        if item.kind == "step":
            lane = lanes.lane(item.title)
            for i, a in enumerate(item.attempts):
                end = a.ended_at if a.ended_at is not None else max(end_of_run, a.started_at)
                lines = [
                    f"{item.title} attempt {a.attempt}: {a.outcome}",
                    f"step id {a.step_id}",
                    f"started {zone.when(a.started_at)}",
                ]
                if a.ended_at is not None:
                    lines.append(f"ended {zone.when(a.ended_at)}, took {duration(a.took)}")
                else:
                    lines.append(f"still running after {duration(end - a.started_at)}")
                if a.error:
                    lines.append(f"error: {a.error}")
                shapes.append(
                    _Shape(lane, a.started_at, end, "o-" + a.outcome.replace(" ", "-"), "\n".join(lines))
                )
                if a.retry_at is not None and a.ended_at is not None:
                    nxt = item.attempts[i + 1].started_at if i + 1 < len(item.attempts) else None
                    until = a.retry_at if nxt is None else min(a.retry_at, nxt)
                    if not live and nxt is None:
                        until = min(until, end_of_run)
                    shapes.append(
                        _Shape(
                            lane,
                            a.ended_at,
                            max(until, a.ended_at),
                            "backoff",
                            f"backoff before attempt {a.attempt + 1} of {item.title}: "
                            f"{duration(a.retry_at - a.ended_at)}, due {zone.when(a.retry_at)}",
                            dashed=True,
                        )
                    )
        elif item.kind == "wait":
            lane = lanes.lane(item.title)
            end = item.resolved_at if item.resolved_at is not None else max(end_of_run, item.at)
            how = {
                "signal": f"ended by signal '{item.signal}'",
                "timer": "ended by its timer",
                "timeout": "timed out",
                "cancel": "ended by the run's cancel",
                "child": "ended by the child's end",
            }.get(item.ended_by or "", "still waiting")
            lines = [f"{item.title}: {how}", f"from {zone.when(item.at)}"]
            if item.due_at is not None:
                lines.append(
                    ("wakes" if item.name == "sleep" else "times out") + f" {zone.when(item.due_at)}"
                )
            if item.resolved_at is not None:
                lines.append(f"ended {zone.when(item.resolved_at)}, waited {duration(item.waited)}")
            else:
                lines.append(f"waiting for {duration(end - item.at)} so far")
            css = "w-" + (item.ended_by or "waiting")
            shapes.append(_Shape(lane, item.at, end, css, "\n".join(lines)))
            if item.due_at is not None and item.resolved_at is None:
                shapes.append(
                    _Shape(lane, item.due_at, None, "due", f"{item.title} due {zone.when(item.due_at)}")
                )
    if signals:
        lane = "signals"
        lanes.names.append(lane)
        for s in signals:
            state = {
                "consumed": f"consumed by journal entry {s.consumed_seq}",
                "pending": "pending: not consumed yet",
                "set_aside": "set aside: it arrived after the run ended, or was never waited for",
            }.get(s.state, s.state)
            shapes.append(
                _Shape(
                    lane,
                    s.at,
                    None,
                    "sig-" + s.state,
                    f"signal '{s.name}' arrived {zone.when(s.at)}\n{state}",
                )
            )
    total = len(shapes)
    shapes = shapes[:MAX_SHAPES]
    start = run.created_at
    moments = [start, end_of_run]
    for sh in shapes:
        moments.append(sh.start)
        if sh.end is not None:
            moments.append(sh.end)
    scale = Scale(moments, PLOT_W)
    height = TOP + LANE_H * max(1, len(lanes.names)) + 8
    out = [
        f"<svg xmlns='http://www.w3.org/2000/svg' role='img' viewBox='0 0 {LABEL_W + PLOT_W + 20} {height}' "
        f"width='{LABEL_W + PLOT_W + 20}' height='{height}' aria-label='timeline of run {e(run.id)}'>"
    ]
    for i, name in enumerate(lanes.names):
        y = TOP + i * LANE_H
        if i % 2 == 0:
            out.append(
                f"<rect x='0' y='{y}' width='{LABEL_W + PLOT_W + 20}' height='{LANE_H}' fill='#f6f8fa'/>"
            )
        label = name if len(name) <= 26 else name[:25] + "…"
        out.append(f"<text class='lane' x='6' y='{y + 15}'><title>{e(name)}</title>{e(label)}</text>")
    x0 = LABEL_W
    for lo, hi in scale.breaks:
        xa, xb = x0 + scale.x(lo), x0 + scale.x(hi)
        out.append(
            f"<rect class='gap' x='{xa:.1f}' y='{TOP - 4}' width='{max(1.0, xb - xa):.1f}' "
            f"height='{height - TOP}'><title>nothing happened for {e(duration(hi - lo))} (drawn shortened)</title></rect>"
        )
        out.append(
            f"<text x='{(xa + xb) / 2:.1f}' y='{TOP - 8}' text-anchor='middle'>⋯ {e(duration(hi - lo))} ⋯</text>"
        )
    out.append(_ticks(scale, start, x0))
    for sh in shapes:
        y = TOP + lanes.names.index(sh.lane) * LANE_H
        x = x0 + scale.x(sh.start)
        # data-lane names the shape's lane for whoever reads the SVG (tests, tools).
        common = f"data-lane='{e(sh.lane)}'><title>{e(sh.title)}</title>"
        if sh.end is None:
            if sh.css == "due":
                out.append(
                    f"<path class='due' d='M{x:.1f} {y + 3}v{LANE_H - 6}' stroke='#57606a' stroke-width='2' {common}</path>"
                )
            else:
                cy = y + LANE_H / 2
                fill = "#0969da" if sh.css == "sig-consumed" else "#fff"
                out.append(
                    f"<path class='mark {e(sh.css)}' d='M{x:.1f} {cy - 6}l6 6l-6 6l-6-6z' "
                    f"fill='{fill}' stroke='#0969da' stroke-width='1.5' {common}</path>"
                )
            continue
        w = max(4.0 if sh.css.startswith("o-") else 2.0, x0 + scale.x(sh.end) - x)
        if sh.dashed:
            out.append(
                f"<rect class='{e(sh.css)}' x='{x:.1f}' y='{y + LANE_H / 2 - 3}' width='{w:.1f}' height='6' {common}</rect>"
            )
        else:
            h = BAR_H if sh.css.startswith("o-") else BAR_H - 4
            out.append(
                f"<rect class='shape {e(sh.css)}' x='{x:.1f}' y='{y + (LANE_H - h) / 2}' width='{w:.1f}' "
                f"height='{h}' rx='2' {common}</rect>"
            )
    out.append("</svg>")
    notes = []
    if scale.breaks:
        notes.append(
            f"{plural(len(scale.breaks), 'quiet stretch', 'quiet stretches')} longer than {duration(IDLE_S)} "
            "drawn shortened (⋯, with their real length)"
        )
    if total > MAX_SHAPES:
        notes.append(
            f"the first {MAX_SHAPES:,} of {total:,} shapes are drawn; the journal below lists everything"
        )
    if len(lanes.names) > MAX_LANES:
        notes.append(f"lanes past the first {MAX_LANES} are drawn together as “{lanes.overflow}”")
    caption = (
        f"<p class='muted'>Time runs from {e(zone.when(start))}; " + "; ".join(notes) + ".</p>"
        if notes
        else ""
    )
    return f"<div class='timeline'><div class='chart'>{''.join(out)}</div>{_legend()}{caption}</div>"


def _ticks(scale: Scale, start: float, x0: float) -> str:
    """A few moments along the axis, as offsets from the run's start."""
    out = [f"<path d='M{x0} {TOP - 2}h{PLOT_W}' stroke='#d0d7de'/>"]
    last_x = -100.0
    for at in scale.points:
        x = x0 + scale.x(at)
        if x - last_x < 70 or any(a < at < b for a, b in scale.breaks):
            continue
        last_x = x
        out.append(f"<path d='M{x:.1f} {TOP - 4}v4' stroke='#8c959f'/>")
        label = "start" if at == start else "+" + duration(at - start)
        out.append(
            f"<text x='{x:.1f}' y='{TOP - 8}' text-anchor='{'start' if at == start else 'middle'}'>{e(label)}</text>"
        )
    return "".join(out)


def _legend() -> str:
    keys = [
        ("o-ok", "attempt ok"),
        ("o-failed", "failed"),
        ("o-timed-out", "timed out"),
        ("o-interrupted", "interrupted"),
        ("o-cancelled", "cut by cancel"),
        ("o-running", "running"),
        ("w-signal", "wait ended by a signal"),
        ("w-timer", "sleep ended by its timer"),
        ("w-timeout", "wait timed out"),
        ("w-cancel", "ended by cancel"),
        ("w-waiting", "waiting"),
    ]
    spans = "".join(f"<span><i class='sw {css}'></i>{e(text)}</span>" for css, text in keys)
    return (
        f"<div class='legend'>{spans}<span>- - backoff before a retry</span>"
        "<span>◆ signal (filled: consumed)</span><span>| due time</span></div>"
    )
