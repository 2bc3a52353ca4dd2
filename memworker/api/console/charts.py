"""Line charts as plain numbers for the templates to draw as inline SVG (no script, no
external library), and the per-minute series they draw. Pure: no I/O."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

WIDTH, HEIGHT = 640, 180
LEFT, RIGHT, TOP, BOTTOM = 48, 24, 12, 28


@dataclass(frozen=True)
class Series:
    name: str
    css: str  # the stylesheet's class for its colour: the page's CSP allows no inline style
    values: list[float | None]  # None: no figure that minute (a gap in the line)


@dataclass(frozen=True)
class Line:
    name: str
    css: str
    paths: list[str]  # SVG path data, one per run of minutes with figures
    dots: list[tuple[float, float]]  # minutes with a figure but none either side: no line to draw
    last: str
    total: float  # the sum over the hour (what a rate's chart adds up to)


@dataclass(frozen=True)
class Tick:
    at: float
    label: str


@dataclass(frozen=True)
class Chart:
    title: str
    unit: str
    width: int
    height: int
    lines: list[Line]
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    left: int
    right: int
    top: int
    bottom: int
    empty: bool
    rate: bool  # a count per minute: the legend gives the hour's sum, else the latest figure


def nice_max(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above value (1 for nothing)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if value <= step * power:
            return float(step * power)
    return float(10 * power)


def fmt(value: float) -> str:
    if value >= 100 or value == int(value):
        return f"{value:.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def line_chart(title: str, unit: str, minutes: list[datetime], series: list[Series], *, rate: bool = False) -> Chart:
    """A chart of the series over the minutes (oldest first), y from 0 to a round maximum."""
    figures = [v for s in series for v in s.values if v is not None]
    top = nice_max(max(figures, default=0.0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    n = max(len(minutes) - 1, 1)

    def x(i: int) -> float:
        return LEFT + plot_w * i / n

    def y(v: float) -> float:
        return TOP + plot_h * (1 - v / top)

    lines = []
    for s in series:
        paths: list[list[str]] = []
        current: list[str] = []
        for i, v in enumerate(s.values):
            if v is None:
                if current:
                    paths.append(current)
                current = []
            else:
                current.append(f"{x(i):.1f},{y(v):.1f}")
        if current:
            paths.append(current)
        data = ["M" + " L".join(p) for p in paths if len(p) > 1]
        dots = [(float(p[0].split(",")[0]), float(p[0].split(",")[1])) for p in paths if len(p) == 1]
        last = next((v for v in reversed(s.values) if v is not None), None)
        total = sum(v for v in s.values if v is not None)
        lines.append(Line(s.name, s.css, data, dots, "–" if last is None else fmt(last), total))
    y_ticks = [Tick(y(top * f), fmt(top * f)) for f in (0, 0.5, 1)]
    x_ticks = [Tick(x(i), minutes[i].strftime("%H:%M")) for i in range(0, len(minutes), 15)]
    if minutes:
        x_ticks.append(Tick(x(len(minutes) - 1), minutes[-1].strftime("%H:%M")))
    return Chart(title, unit, WIDTH, HEIGHT, lines, y_ticks, x_ticks, LEFT, RIGHT, TOP, BOTTOM, not any(figures), rate)


def last_hour(now: datetime) -> list[datetime]:
    """The 60 minutes up to and including now's, oldest first (UTC)."""
    current = now.astimezone(UTC).replace(second=0, microsecond=0)
    return [current - timedelta(minutes=59 - i) for i in range(60)]


def backlog(
    minutes: list[datetime], kept: dict[datetime, int], stored: dict[datetime, int], open_now: int
) -> list[int]:
    """Episodes waiting at the end of each minute, rebuilt backwards from how many wait now:
    at the end of a minute, those waiting now, less those accepted after it, plus those stored
    after it. `kept` counts accepted episodes that have not gone dead (dead letters are left
    out: nothing records when they died)."""
    out = [0] * len(minutes)
    level = open_now
    for i in range(len(minutes) - 1, -1, -1):
        out[i] = max(level, 0)
        level = level - kept.get(minutes[i], 0) + stored.get(minutes[i], 0)
    return out
