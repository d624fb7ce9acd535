"""Charts as geometry computed in Python: histograms, per-suite pass-rate bars, series.

The page draws them as inline SVG from these numbers (template `_charts.html.j2`), so a report
needs no charting library and no script to show them. Each chart has axes: a y axis with its
top value (a count of trials, or 100% for rates) and zero, ticks and a title under the x axis,
and each non-empty bar its count written above it. Every bar also carries its own label, so a
screen reader or a hover names the bin and its count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

WIDTH, HEIGHT = 340, 172
# Room around the plot: the y axis's labels on the left, the ticks and the x axis's title under.
_TOP, _BOTTOM, _LEFT, _RIGHT = 14, 36, 40, 6
PLOT_HEIGHT = HEIGHT - _TOP - _BOTTOM


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str  # what the bar stands for and its value, e.g. "0.9 to 1.0: 40 trials"
    tick: str  # the short label drawn under it
    value: str = ""  # drawn above the bar (its count); empty for an empty bar

    @property
    def middle(self) -> float:
        return round(self.x + self.width / 2, 2)


@dataclass(frozen=True)
class Chart:
    key: str  # unique within a page, for ids
    title: str
    description: str
    bars: list[Bar] = field(default_factory=list)
    x_title: str = ""
    y_top: str = ""  # the y axis's label at the top of the plot
    y_title: str = "trials"
    width: int = WIDTH
    height: int = HEIGHT
    left: int = _LEFT
    top: int = _TOP
    baseline: float = HEIGHT - _BOTTOM

    @property
    def empty(self) -> bool:
        return not self.bars


def _number(value: float, unit: str) -> str:
    if unit == "":
        return f"{value:.2g}" if abs(value) < 10 else f"{value:,.0f}"
    if abs(value) >= 10_000:
        return f"{value / 1000:,.0f}k{unit}"
    return f"{value:,.0f}{unit}"


def _slots(count: int) -> float:
    return (WIDTH - _LEFT - _RIGHT) / count


def _bars(counts: Sequence[int], labels: Sequence[str], ticks: Sequence[str]) -> list[Bar]:
    slot = _slots(len(counts))
    tallest = max(counts) or 1
    bars = []
    for index, count in enumerate(counts):
        height = PLOT_HEIGHT * count / tallest
        bars.append(
            Bar(
                x=round(_LEFT + index * slot + 1, 2),
                y=round(HEIGHT - _BOTTOM - height, 2),
                width=round(max(slot - 2, 1), 2),
                height=round(height, 2),
                label=labels[index],
                tick=ticks[index],
                value=f"{count:,}" if count else "",
            )
        )
    return bars


def histogram(
    key: str,
    title: str,
    values: Sequence[float],
    *,
    unit: str = "",
    x_title: str = "",
    bins: int = 10,
    low: float | None = None,
    high: float | None = None,
) -> Chart:
    """Equal-width bins from `low` to `high` (default: the values' range)."""
    if not values:
        return Chart(key, title, f"{title}: no values", x_title=x_title)
    start = min(values) if low is None else low
    stop = max(values) if high is None else high
    if stop <= start:
        stop = start + 1
    width = (stop - start) / bins
    counts = [0] * bins
    for value in values:
        index = min(int((value - start) / width), bins - 1) if width else 0
        counts[max(index, 0)] += 1
    edges = [start + i * width for i in range(bins + 1)]
    labels = [
        f"{_number(edges[i], unit)} to {_number(edges[i + 1], unit)}: {counts[i]:,} trial"
        + ("" if counts[i] == 1 else "s")
        for i in range(bins)
    ]
    ticks = [_number(edges[i], unit) if i % max(1, bins // 5) == 0 else "" for i in range(bins)]
    description = (
        f"{len(values):,} trials from {_number(start, unit)} to {_number(stop, unit)}, "
        f"in {bins} bins; the fullest holds {max(counts):,}"
    )
    return Chart(
        key,
        title,
        description,
        _bars(counts, labels, ticks),
        x_title=x_title,
        y_top=f"{max(counts):,}",
    )


def rate_bars(key: str, title: str, rates: dict[str, float | None]) -> Chart:
    """One bar per name, its height the rate (0–1); names without a rate show as 0."""
    if not rates:
        return Chart(key, title, f"{title}: no suites", x_title="suite")
    names = list(rates)
    values = [_rate(rates[n]) for n in names]
    slot = _slots(len(names))
    bars = [
        Bar(
            x=round(_LEFT + i * slot + 1, 2),
            y=round(HEIGHT - _BOTTOM - PLOT_HEIGHT * value, 2),
            width=round(max(slot - 2, 1), 2),
            height=round(PLOT_HEIGHT * value, 2),
            label=f"{name}: "
            + ("no counted trials" if rates[name] is None else f"{value:.1%} passed"),
            tick=name if len(name) <= 9 else name[:8] + "…",
            value="—" if rates[name] is None else f"{value:.0%}",
        )
        for i, (name, value) in enumerate(zip(names, values, strict=True))
    ]
    described = ", ".join(b.label for b in bars)
    return Chart(
        key, title, f"{title}: {described}", bars, x_title="suite", y_top="100%", y_title="passed"
    )


def _rate(value: float | None) -> float:
    return 0.0 if value is None or math.isnan(value) else min(max(value, 0.0), 1.0)


def series(
    key: str,
    title: str,
    points: Sequence[tuple[str, str, float | None]],
    *,
    value_text: str = "{:,.0f}",
    rate: bool = False,
    x_title: str = "eval (oldest first)",
    y_title: str = "",
) -> Chart:
    """One bar per point `(tick, label, value)` in order, e.g. one per eval along the history;
    with `rate` the y axis runs from 0 to 100%, else from 0 to the largest value."""
    if not points:
        return Chart(key, title, f"{title}: no evals", x_title=x_title, y_title=y_title)
    values = [
        _rate(v) if rate else (v if v is not None and not math.isnan(v) else 0.0)
        for _, _, v in points
    ]
    top = 1.0 if rate else (max(values) or 1.0)
    slot = _slots(len(points))
    every = max(1, math.ceil(len(points) / 8))  # at most ~8 ticks fit under the plot
    bars = []
    for i, ((tick, label, raw), value) in enumerate(zip(points, values, strict=True)):
        shown = "—" if raw is None else (f"{value:.0%}" if rate else value_text.format(value))
        bars.append(
            Bar(
                x=round(_LEFT + i * slot + 1, 2),
                y=round(HEIGHT - _BOTTOM - PLOT_HEIGHT * value / top, 2),
                width=round(max(slot - 2, 1), 2),
                height=round(PLOT_HEIGHT * value / top, 2),
                label=f"{label}: {shown}",
                tick=tick if i % every == 0 else "",
                value=shown if len(points) <= 12 else "",
            )
        )
    described = ", ".join(b.label for b in bars)
    y_top = "100%" if rate else value_text.format(top)
    return Chart(
        key, title, f"{title}: {described}", bars, x_title=x_title, y_top=y_top, y_title=y_title
    )
