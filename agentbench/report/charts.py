"""Charts as geometry computed in Python: histograms and per-suite pass-rate bars.

The page draws them as inline SVG from these numbers (template `_charts.html.j2`), so a report
needs no charting library and no script to show them. Every bar carries its own label, so a
screen reader or a hover names the bin and its count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

WIDTH, HEIGHT = 320, 150
_TOP, _BOTTOM, _LEFT = 10, 24, 8  # room for the axis labels under the plot


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str  # what the bar stands for and its value, e.g. "0.9–1.0: 40 trials"
    tick: str  # the short label drawn under it


@dataclass(frozen=True)
class Chart:
    key: str  # unique within a page, for ids
    title: str
    description: str
    bars: list[Bar] = field(default_factory=list)
    width: int = WIDTH
    height: int = HEIGHT
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


def _bars(counts: Sequence[int], labels: Sequence[str], ticks: Sequence[str]) -> list[Bar]:
    plot_height = HEIGHT - _TOP - _BOTTOM
    slot = (WIDTH - 2 * _LEFT) / len(counts)
    tallest = max(counts) or 1
    bars = []
    for index, count in enumerate(counts):
        height = plot_height * count / tallest
        bars.append(
            Bar(
                x=round(_LEFT + index * slot + 1, 2),
                y=round(HEIGHT - _BOTTOM - height, 2),
                width=round(max(slot - 2, 1), 2),
                height=round(height, 2),
                label=labels[index],
                tick=ticks[index],
            )
        )
    return bars


def histogram(
    key: str,
    title: str,
    values: Sequence[float],
    *,
    unit: str = "",
    bins: int = 10,
    low: float | None = None,
    high: float | None = None,
) -> Chart:
    """Equal-width bins from `low` to `high` (default: the values' range)."""
    if not values:
        return Chart(key, title, f"{title}: no values")
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
    return Chart(key, title, description, _bars(counts, labels, ticks))


def rate_bars(key: str, title: str, rates: dict[str, float | None]) -> Chart:
    """One bar per name, its height the rate (0–1); names without a rate show as 0."""
    if not rates:
        return Chart(key, title, f"{title}: no suites")
    names = list(rates)
    values = [rates[n] if rates[n] is not None and not math.isnan(rates[n]) else 0.0 for n in names]
    plot_height = HEIGHT - _TOP - _BOTTOM
    slot = (WIDTH - 2 * _LEFT) / len(names)
    bars = [
        Bar(
            x=round(_LEFT + i * slot + 1, 2),
            y=round(HEIGHT - _BOTTOM - plot_height * value, 2),
            width=round(max(slot - 2, 1), 2),
            height=round(plot_height * value, 2),
            label=f"{name}: "
            + ("no counted trials" if rates[name] is None else f"{value:.1%} passed"),
            tick=name if len(name) <= 14 else name[:13] + "…",
        )
        for i, (name, value) in enumerate(zip(names, values, strict=True))
    ]
    described = ", ".join(b.label for b in bars)
    return Chart(key, title, f"{title}: {described}", bars)
