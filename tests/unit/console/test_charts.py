"""The overview's SVG charts: what a reader and a screen reader get from each kind of
data, and that no label can break out of the markup."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from gateway.console.charts import HEIGHT, Bar, Chart, Threshold, bar_chart, value_range

SVG = ""  # inline in HTML: no namespace declared


def parse(markup: str) -> ET.Element:
    return ET.fromstring(str(markup))  # noqa: S314 - markup made by the code under test


def chart(bars: list[Bar], threshold: Threshold | None = None) -> Chart:
    return bar_chart(
        bars,
        chart_id="growth",
        title="Net growth per hour",
        threshold=threshold,
        label_heading="Hour",
        value_heading="Net",
        detail_heading="Opened, resolved",
    )


def rects(c: Chart) -> list[ET.Element]:
    return parse(c.svg).findall(f".//{SVG}rect")


def table_rows(c: Chart) -> list[list[str]]:
    body = parse(c.table).find("tbody")
    assert body is not None
    return [["".join(cell.itertext()) for cell in row] for row in body]


def threshold_y(c: Chart) -> float | None:
    for line in parse(c.svg).findall(f"{SVG}line"):
        if line.get("class") == "chart-threshold":
            return float(line.get("y1", "nan"))
    return None


def zero_y(c: Chart) -> float:
    axis = next(
        line for line in parse(c.svg).findall(f"{SVG}line") if line.get("class") == "chart-axis"
    )
    return float(axis.get("y1", "nan"))


ALERT = Threshold(120, "more than 10 in 5 min (120 an hour)")

# (intent, bars, threshold, bars drawn, negative bars, table rows, threshold drawn)
CASES = [
    (
        "no data: a notice in place of bars, a table that says so",
        [],
        ALERT,
        0,
        0,
        [["No data"]],
        False,
    ),
    (
        "all zero: bars of no height, no division by zero",
        [Bar("00:00", 0), Bar("01:00", 0)],
        None,
        2,
        0,
        [["00:00", "0", ""], ["01:00", "0", ""]],
        False,
    ),
    (
        "negative growth: the bar hangs below the zero line",
        [Bar("00:00", 3, "3, 0"), Bar("01:00", -5, "0, 5")],
        ALERT,
        2,
        1,
        [["00:00", "3", "3, 0"], ["01:00", "-5", "0, 5"]],
        True,
    ),
    (
        "threshold above every value: still drawn inside the chart",
        [Bar("00:00", 1), Bar("01:00", 2)],
        ALERT,
        2,
        0,
        [["00:00", "1", ""], ["01:00", "2", ""]],
        True,
    ),
]


@pytest.mark.parametrize(
    ("bars", "threshold", "drawn", "negative", "rows", "has_line"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_each_kind_of_data(
    bars: list[Bar],
    threshold: Threshold | None,
    drawn: int,
    negative: int,
    rows: list[list[str]],
    has_line: bool,
) -> None:
    c = chart(bars, threshold)
    svg = parse(c.svg)
    assert svg.get("role") == "img"
    assert svg.findtext(f"{SVG}title") == "Net growth per hour"
    assert svg.get("aria-labelledby") == "growth-title growth-desc"
    found = rects(c)
    assert len(found) == drawn
    assert sum("negative" in (r.get("class") or "") for r in found) == negative
    for r in found:
        assert float(r.get("height", "-1")) >= 0
        assert 0 <= float(r.get("y", "-1")) <= HEIGHT
    assert table_rows(c) == rows
    line = threshold_y(c)
    assert (line is not None) == has_line
    if line is not None:
        assert 0 <= line <= HEIGHT


def test_a_negative_bar_starts_at_the_zero_line_and_a_positive_one_ends_there() -> None:
    c = chart([Bar("up", 4), Bar("down", -4)])
    up, down = rects(c)
    zero = zero_y(c)
    assert float(up.get("y", "0")) + float(up.get("height", "0")) == pytest.approx(zero, abs=0.2)
    assert float(down.get("y", "0")) == pytest.approx(zero, abs=0.2)


def test_the_threshold_line_sits_above_bars_below_it_and_below_bars_above_it() -> None:
    c = chart([Bar("low", 60), Bar("high", 240)], ALERT)
    low, high = rects(c)
    line = threshold_y(c)
    assert line is not None
    assert float(low.get("y", "0")) > line > float(high.get("y", "0"))
    assert table_rows(c)[1] == ["high", "240", ""]
    assert 'class="over-threshold"' in str(c.table)


def test_hostile_labels_are_escaped_in_the_svg_and_the_table() -> None:
    hostile = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
    c = bar_chart(
        [Bar(hostile, 1, hostile)], chart_id='x" onload="y', title=hostile, detail_heading="d"
    )
    for markup in (str(c.svg), str(c.table)):
        assert "<script>" not in markup and "<img" not in markup
        parse(markup)  # still well-formed: nothing broke out of its attribute
    assert table_rows(c) == [[hostile, "1", hostile]]


def test_no_style_attribute_anywhere() -> None:
    """The content security policy forbids inline styles; presentation attributes only."""
    c = chart([Bar("a", 1), Bar("b", -1)], ALERT)
    assert not re.search(r"\sstyle=", str(c.svg) + str(c.table))


def test_many_bars_label_only_some_so_labels_do_not_overlap() -> None:
    c = chart([Bar(f"{h:02}:00", h) for h in range(24)])
    labels = [t for t in parse(c.svg).findall(f"{SVG}text") if t.get("class") == "chart-label"]
    assert 1 < len(labels) <= 12
    assert len(table_rows(c)) == 24  # the table keeps every hour


@pytest.mark.parametrize(
    ("values", "threshold", "expected"),
    [
        ([], None, (0.0, 1.0)),
        ([0, 0], None, (0.0, 1.0)),
        ([2, 5], None, (0.0, 5.5)),
        ([-4, 2], None, (-4.4, 2.2)),
        ([1, 2], 120.0, (0.0, 132.0)),
    ],
)
def test_value_range(
    values: list[float], threshold: float | None, expected: tuple[float, float]
) -> None:
    """Zero is always on the axis, and the threshold always fits."""
    assert value_range(values, threshold) == pytest.approx(expected)
