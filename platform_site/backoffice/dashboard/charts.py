"""Charts as SVG drawn on the server: a line chart of series over time and a
bar chart of labelled counts. Text takes the page's colour (currentColor)
and series differ by dash as well as by colour, so they read in dark mode
and on a black-and-white print; every text is escaped."""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

# Sizes in the units of the viewBox; the page draws each at about that many
# pixels (a line chart fills half the width, a bar chart at most BAR_WIDTH).
LINE_WIDTH = 560
LINE_HEIGHT = 240
BAR_WIDTH = 720
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 40, 44
BAR_ROW = 26
BAR_LABEL_WIDTH = 220
BAR_VALUE_WIDTH = 60
LABEL_MAX_CHARACTERS = 32
FONT = 'font-family="inherit" font-size="11"'


@dataclass(frozen=True)
class Series:
    label: str
    values: Sequence[float]
    colour: str
    dash: str = ""


@dataclass(frozen=True)
class Bar:
    label: str
    value: int
    # Shown when the pointer rests on the bar.
    note: str = ""


def line_chart(
    *,
    title: str,
    times: Sequence[datetime],
    series: Sequence[Series],
    y_label: str,
    label_every: timedelta,
    whole: bool = False,
) -> SafeString:
    """Series of equal length over `times` (UTC), labelled at the round times
    (a multiple of `label_every` since midnight), y from 0 to a round number
    (ticks on whole numbers when the values are counts)."""
    plot_width = LINE_WIDTH - LEFT - RIGHT
    plot_height = LINE_HEIGHT - TOP - BOTTOM
    top, step = _axis_top(max((max(s.values, default=0) for s in series), default=0), whole)
    count = len(times)

    def x(index: int) -> float:
        return LEFT + (plot_width * index / (count - 1) if count > 1 else plot_width / 2)

    def y(value: float) -> float:
        return TOP + plot_height * (1 - value / top)

    parts = [_open(LINE_WIDTH, LINE_HEIGHT, title)]
    for tick in range(0, round(top / step) + 1):
        value = tick * step
        parts.append(
            f'<line x1="{LEFT}" y1="{y(value):.1f}" x2="{LINE_WIDTH - RIGHT}" y2="{y(value):.1f}"'
            ' stroke="currentColor" stroke-opacity="0.2"/>'
            f'<text x="{LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end" {FONT}'
            f' fill="currentColor">{_number(value)}</text>'
        )
    every = label_every.total_seconds()
    for index, time in enumerate(times):
        if (time.hour * 3600 + time.minute * 60 + time.second) % every:
            continue
        parts.append(
            f'<line x1="{x(index):.1f}" y1="{TOP + plot_height}" x2="{x(index):.1f}"'
            f' y2="{TOP + plot_height + 4}" stroke="currentColor"/>'
            f'<text x="{x(index):.1f}" y="{TOP + plot_height + 16}" text-anchor="middle"'
            f' {FONT} fill="currentColor">{time:%H:%M}</text>'
        )
    parts.append(
        f'<line x1="{LEFT}" y1="{TOP + plot_height}" x2="{LINE_WIDTH - RIGHT}"'
        f' y2="{TOP + plot_height}" stroke="currentColor"/>'
        f'<text x="{LEFT + plot_width / 2:.0f}" y="{LINE_HEIGHT - 6}" text-anchor="middle"'
        f' {FONT} fill="currentColor">time (UTC)</text>'
        f'<text transform="translate(14 {TOP + plot_height / 2:.0f}) rotate(-90)"'
        f' text-anchor="middle" {FONT} fill="currentColor">{escape(y_label)}</text>'
    )
    legend_x = LEFT
    for line in series:
        dash = f' stroke-dasharray="{line.dash}"' if line.dash else ""
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(line.values))
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{line.colour}"'
            f' stroke-width="2" stroke-linejoin="round"{dash}/>'
            f'<line x1="{legend_x}" y1="16" x2="{legend_x + 24}" y2="16"'
            f' stroke="{line.colour}" stroke-width="2"{dash}/>'
            f'<text x="{legend_x + 30}" y="20" {FONT} fill="currentColor">'
            f"{escape(line.label)}</text>"
        )
        legend_x += 40 + 7 * len(line.label)
    parts.append("</svg>")
    return mark_safe("".join(parts))  # every text in it was escaped


def bar_chart(*, title: str, bars: Sequence[Bar], colour: str) -> SafeString:
    """Horizontal bars, longest first as given, each with its label and count."""
    height = 12 + BAR_ROW * max(len(bars), 1)
    longest = max((bar.value for bar in bars), default=0) or 1
    room = BAR_WIDTH - BAR_LABEL_WIDTH - BAR_VALUE_WIDTH
    parts = [_open(BAR_WIDTH, height, title)]
    for row, bar in enumerate(bars):
        top = 6 + row * BAR_ROW
        length = room * bar.value / longest
        note = f"<title>{escape(bar.note or bar.label)}</title>"
        parts.append(
            f"<g>{note}"
            f'<text x="{BAR_LABEL_WIDTH - 8}" y="{top + 15}" text-anchor="end" {FONT}'
            f' fill="currentColor">{escape(_shortened(bar.label))}</text>'
            f'<rect x="{BAR_LABEL_WIDTH}" y="{top + 3}" width="{length:.1f}"'
            f' height="{BAR_ROW - 8}" fill="{colour}"/>'
            f'<text x="{BAR_LABEL_WIDTH + length + 6:.1f}" y="{top + 15}" {FONT}'
            f' fill="currentColor">{bar.value}</text></g>'
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))  # every text in it was escaped


def _open(width: int, height: int, title: str) -> str:
    label = escape(title)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}"'
        f' class="dashboard-chart" role="img" aria-label="{label}"><title>{label}</title>'
    )


def _axis_top(largest: float, whole: bool) -> tuple[float, float]:
    """A round top for the y axis at or above `largest`, and its tick step
    (1, 2 or 5 times a power of ten), for two to five ticks."""
    if largest <= 0:
        return 1.0, 1.0 if whole else 0.25
    rough = largest / 4
    power = 10 ** math.floor(math.log10(rough))
    step = next(factor * power for factor in (1, 2, 5, 10) if factor * power >= rough)
    if whole:
        step = max(step, 1)
    return step * math.ceil(largest / step), step


def _number(value: float) -> str:
    return f"{value:g}" if value < 1e6 else f"{value:.3g}"


def _shortened(label: str) -> str:
    if len(label) <= LABEL_MAX_CHARACTERS:
        return label
    return label[: LABEL_MAX_CHARACTERS - 1] + "…"
