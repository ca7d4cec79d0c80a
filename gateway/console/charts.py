"""Charts as server-rendered SVG, each with the data table that says the same in text.

Pure: values in, markup out. Every label is escaped here (a provider or stage name is
data, and data is hostile); the result is `Markup` so templates insert it as it is.
The content security policy forbids `style=` attributes, so the SVG carries only
presentation attributes (`fill`, `stroke`) and classes the console's stylesheet
colours. Screen readers get `role="img"` with a `<title>` and a `<desc>`, and the table
beside it. No `xmlns`: an SVG inside an HTML page is in the SVG namespace without
one, and the console's pages carry no absolute URL at all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

# The drawing's box, in SVG user units (it scales to its container).
WIDTH = 720
HEIGHT = 240
# The top margin holds the threshold's legend, so bars never cover its label.
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 12, 30, 36
#: With many bars, every n-th is labelled so the labels do not overlap.
_MAX_LABELS = 12
# Above the tallest of values and threshold, so neither touches the top edge.
_HEADROOM = 1.1


@dataclass(frozen=True)
class Bar:
    """One bar: its axis label, its value and the longer text of its tooltip and row."""

    label: str
    value: float
    detail: str = ""


@dataclass(frozen=True)
class Threshold:
    """A horizontal line drawn across the chart at `value`, named by `label`."""

    value: float
    label: str


@dataclass(frozen=True)
class Chart:
    svg: Markup
    table: Markup


def _num(value: float) -> str:
    """A figure as shown: whole numbers without a point, others to one decimal."""
    if math.isfinite(value) and value == int(value):
        return str(int(value))
    return f"{value:.1f}"


def _coord(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def value_range(values: Sequence[float], threshold: float | None) -> tuple[float, float]:
    """The y axis: always from at most 0 to at least 0, wide enough for every value and
    the threshold, with some headroom; (0, 1) when all is zero (or there is nothing),
    so there is never a division by zero."""
    low = min([0.0, *values])
    high = max([0.0, *values, *([threshold] if threshold is not None else [])])
    if threshold is not None:
        low = min(low, threshold)
    if low == high:
        return 0.0, 1.0
    return low * (_HEADROOM if low < 0 else 1), high * (_HEADROOM if high > 0 else 1)


def bar_chart(
    bars: Sequence[Bar],
    *,
    chart_id: str,
    title: str,
    description: str = "",
    threshold: Threshold | None = None,
    value_heading: str = "Value",
    label_heading: str = "Label",
    detail_heading: str = "",
) -> Chart:
    """A bar chart (negative values below the zero line, classed `negative`) and its
    table. `chart_id` makes the ids of the title and description unique on the page."""
    return Chart(
        _svg(bars, chart_id, title, description, threshold),
        _table(bars, title, threshold, label_heading, value_heading, detail_heading),
    )


def _svg(
    bars: Sequence[Bar],
    chart_id: str,
    title: str,
    description: str,
    threshold: Threshold | None,
) -> Markup:
    ident = escape(chart_id)
    parts = [
        f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'aria-labelledby="{ident}-title {ident}-desc">',
        f'<title id="{ident}-title">{escape(title)}</title>',
        f'<desc id="{ident}-desc">{escape(description or title)}</desc>',
    ]
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    if not bars:
        parts.append(
            f'<text class="chart-empty" x="{WIDTH // 2}" y="{HEIGHT // 2}" '
            f'text-anchor="middle">No data</text></svg>'
        )
        return Markup("".join(parts))  # noqa: S704 - every piece above is escaped
    low, high = value_range([b.value for b in bars], threshold.value if threshold else None)

    def y_of(value: float) -> float:
        return _TOP + (high - value) / (high - low) * plot_h

    zero_y = y_of(0.0)
    slot = plot_w / len(bars)
    every = max(1, math.ceil(len(bars) / _MAX_LABELS))
    parts.append(
        f'<line class="chart-axis" x1="{_LEFT}" y1="{_coord(zero_y)}" '
        f'x2="{WIDTH - _RIGHT}" y2="{_coord(zero_y)}" stroke="currentColor"/>'
    )
    # Ticks at zero and at the extreme values (the threshold line has its own label).
    values = [b.value for b in bars]
    for tick in sorted({min(0.0, *values), 0.0, max(0.0, *values)}):
        parts.append(
            f'<text class="chart-tick" x="{_LEFT - 6}" y="{_coord(y_of(tick) + 4)}" '
            f'text-anchor="end">{escape(_num(round(tick, 1)))}</text>'
        )
    for i, bar in enumerate(bars):
        top, bottom = sorted((y_of(bar.value), zero_y))
        x = _LEFT + i * slot + slot * 0.1
        kind = "negative" if bar.value < 0 else "positive"
        tip = f"{bar.label}: {_num(bar.value)}" + (f" ({bar.detail})" if bar.detail else "")
        parts.append(
            f'<rect class="chart-bar {kind}" x="{_coord(x)}" y="{_coord(top)}" '
            f'width="{_coord(slot * 0.8)}" height="{_coord(bottom - top)}">'
            f"<title>{escape(tip)}</title></rect>"
        )
        if i % every == 0:
            parts.append(
                f'<text class="chart-label" x="{_coord(x + slot * 0.4)}" '
                f'y="{HEIGHT - _BOTTOM + 16}" text-anchor="middle">{escape(bar.label)}</text>'
            )
    if threshold is not None:
        ty = _coord(y_of(threshold.value))
        parts.append(
            f'<line class="chart-threshold" x1="{_LEFT}" y1="{ty}" x2="{WIDTH - _RIGHT}" '
            f'y2="{ty}" stroke="currentColor" stroke-dasharray="6 4"/>'
            f'<line class="chart-threshold-key" x1="{WIDTH - _RIGHT - 28}" y1="11" '
            f'x2="{WIDTH - _RIGHT}" y2="11" stroke="currentColor" stroke-dasharray="6 4"/>'
            f'<text class="chart-threshold-label" x="{WIDTH - _RIGHT - 34}" y="15" '
            f'text-anchor="end">{escape(threshold.label)}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - every piece above is escaped


def _table(
    bars: Sequence[Bar],
    title: str,
    threshold: Threshold | None,
    label_heading: str,
    value_heading: str,
    detail_heading: str,
) -> Markup:
    head = [label_heading, value_heading] + ([detail_heading] if detail_heading else [])
    parts = [
        f'<table class="chart-data"><caption>{escape(title)}</caption><thead><tr>',
        *(f'<th scope="col">{escape(h)}</th>' for h in head),
        "</tr></thead><tbody>",
    ]
    if not bars:
        parts.append(f'<tr><td colspan="{len(head)}">No data</td></tr>')
    for bar in bars:
        over = threshold is not None and bar.value > threshold.value
        row_class = ' class="over-threshold"' if over else ""
        parts.append(
            f"<tr{row_class}>"
            f'<th scope="row">{escape(bar.label)}</th><td>{escape(_num(bar.value))}</td>'
            + (f"<td>{escape(bar.detail)}</td>" if detail_heading else "")
            + "</tr>"
        )
    parts.append("</tbody>")
    if threshold is not None:
        parts.append(
            f'<tfoot><tr><th scope="row">Alert threshold</th>'
            f'<td colspan="{len(head) - 1}">{escape(threshold.label)}</td></tr></tfoot>'
        )
    parts.append("</table>")
    return Markup("".join(parts))  # noqa: S704 - every piece above is escaped
