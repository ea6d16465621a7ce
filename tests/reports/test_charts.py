"""Server-side charts: valid SVG and PNG for every kind, from Report objects built here."""

from __future__ import annotations

import itertools
import math
import struct
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import matplotlib
import pytest

from reports import charts
from reports.report_types import Chart, Report, Table

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ROOT = Path(__file__).resolve().parents[2]


def png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(PNG_MAGIC)
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    return width, height


def svg_root(data: bytes) -> ET.Element:
    assert data.startswith(b"<?xml") or data.startswith(b"<svg")
    root = ET.fromstring(data)  # well-formed XML, or this raises
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return root


@pytest.fixture
def report() -> Report:
    accuracy = Table(
        key="accuracy",
        title="Accuracy",
        columns=["System", "Overall %", "CI low %", "CI high %", "Human %", "H low %", "H high %"],
        rows=[
            ["#1 vanilla", 61.5, 55.0, 68.2, 80.0, 75.0, 85.0],
            ["#2 chain of thought with a long name", 48.25, 40.0, 56.5, 80.0, None, None],
            ["#3 empty", None, None, None, None, None, None],
        ],
    )
    correlation = Table(
        key="correlation",
        title="Correlation",
        columns=["State", "belief", "emotion", "intention"],
        rows=[
            ["belief", 1.0, 0.42, -0.37],
            ["emotion", 0.42, 1.0, None],
            ["intention", -0.37, None, 1.0],
        ],
    )
    states = Table(
        key="states",
        title="Accuracy by state",
        columns=["State", "U %", "T %"],
        rows=[["belief", 71.0, 44.5], ["emotion", 65.25, 38.0]],
    )
    span = Table(
        key="time-span",
        title="Time span",
        columns=["Span", "Span start", "#1 vanilla %", "#2 cot %"],
        rows=[["1-2", 1, 62.0, 58.0], ["2-3", 2, 41.0, 44.0], ["3-4", 3, 55.5, None]],
    )
    empty = Table(key="empty", title="Nothing", columns=["x", "y %"], rows=[])
    return Report(
        benchmark="dyntom",
        title="DynToM report",
        tables=[accuracy, correlation, states, span, empty],
        charts=[
            Chart(
                key="accuracy",
                title="Overall accuracy (95% CI)",
                kind="bar",
                table="accuracy",
                x="System",
                series=["Overall %", "Human %"],
                error_low=["CI low %", "H low %"],
                error_high=["CI high %", "H high %"],
                y_label="accuracy (%)",
            ),
            Chart(
                key="correlation",
                title="Spearman correlations",
                kind="heatmap",
                table="correlation",
            ),
            Chart(key="states", title="Accuracy by state and type", kind="heatmap", table="states"),
            Chart(
                key="time-span",
                title="Transformation accuracy by time span",
                kind="line",
                table="time-span",
                x="Span start",
                series=["#1 vanilla %", "#2 cot %"],
            ),
            Chart(
                key="empty", title="No runs yet", kind="bar", table="empty", x="x", series=["y %"]
            ),
        ],
    )


def test_agg_backend_is_selected():
    assert matplotlib.get_backend().lower() == "agg"


@pytest.mark.parametrize("key", ["accuracy", "correlation", "states", "time-span", "empty"])
def test_every_chart_renders_as_svg_and_png(report, key):
    chart = charts.chart_by_key(report, key)
    svg = charts.render_chart(report, key, "svg")
    svg_root(svg)
    assert chart.title.encode() in svg
    png = charts.render_chart(report, key, "png")
    width, height = png_size(png)
    assert width > 800 and height > 400  # 200 dpi, several inches each way


def test_bar_chart_has_percent_axis_and_legend(report):
    svg = charts.render_chart(report, "accuracy", "svg").decode()
    # matplotlib writes each text as a comment before its glyphs.
    for text in ("100%", "40%", "0%", "accuracy (%)", "Overall", "Human", "Error bars: 95%"):
        assert f"<!-- {text}" in svg, text
    assert "Overall %" not in svg  # the legend drops the unit the axis shows


def test_interval_ends_become_error_distances():
    below, above = charts.interval_errors(
        [61.5, 48.0, 30.0, 10.0], [55.0, math.nan, 31.0, 4.0], [68.5, 50.0, 40.0, math.nan]
    )
    assert below[0] == pytest.approx(6.5) and above[0] == pytest.approx(7.0)
    assert math.isnan(below[1]) and above[1] == pytest.approx(2.0)
    assert below[2] == 0.0  # a low end above the value (rounding) is no bar, not a negative one
    assert below[3] == pytest.approx(6.0) and math.isnan(above[3])


def test_correlation_heatmap_annotates_cells_on_a_fixed_scale(report):
    svg = charts.render_chart(report, "correlation", "svg").decode()
    for text in ("0.42", "-0.37", "1.00", charts.MISSING, "Spearman", "belief", "intention"):
        assert f"<!-- {text}" in svg, text
    # The colour bar spans -1..1 whatever the data (ticks -1.00 and 1.00 are drawn).
    assert "<!-- \u22121.00 -->" in svg and "<!-- 1.00 -->" in svg


def test_percent_heatmap_uses_a_percent_scale(report):
    svg = charts.render_chart(report, "states", "svg").decode()
    assert "<!-- 71.0 -->" in svg and "<!-- 44.5 -->" in svg
    assert "<!-- 100% -->" in svg  # colour bar in percent, to 100


def test_line_chart_uses_integer_x_ticks(report):
    svg = charts.render_chart(report, "time-span", "svg").decode()
    assert "<!-- Span start -->" in svg
    assert "<!-- 2 -->" in svg
    assert "<!-- 2.5 -->" not in svg
    assert "<!-- #1 vanilla -->" in svg


def test_empty_table_says_so(report):
    assert b"<!-- No data yet -->" in charts.render_chart(report, "empty", "svg")


def test_unknown_chart_kind_and_format_are_errors(report):
    with pytest.raises(KeyError):
        charts.render_chart(report, "nosuch", "svg")
    with pytest.raises(ValueError):
        charts.render_chart(report, "accuracy", "gif")  # type: ignore[arg-type]
    bad = Chart(key="bad", title="Bad", kind="pie", table="accuracy")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        charts.render(bad, report.table("accuracy"), "svg")
    missing = Chart(key="m", title="M", kind="bar", table="accuracy", x="System", series=["Nope %"])
    with pytest.raises(KeyError):
        charts.render(missing, report.table("accuracy"), "svg")


def test_rendering_in_threads_gives_the_same_pictures(report):
    # The object-oriented API shares no "current figure": threads cannot draw into
    # each other's charts.
    keys = ["accuracy", "correlation", "time-span", "states"] * 3
    expected = {key: charts.render_chart(report, key, "png") for key in set(keys)}
    results: dict[int, bytes] = {}

    def draw(index: int, key: str) -> None:
        results[index] = charts.render_chart(report, key, "png")

    threads = [threading.Thread(target=draw, args=(i, k)) for i, k in enumerate(keys)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [results[i] for i in range(len(keys))] == [expected[k] for k in keys]


def test_rows_without_a_number_say_no_data_instead_of_empty_axes():
    """Issue 16: time per scene of a study nobody answered drew a -0.04..0.04 s axis."""
    table = Table(
        key="time",
        title="Time per scene",
        columns=["Speakers", "Median s"],
        rows=[[2, None], [3, None]],
    )
    chart = Chart(key="time", title="Time", kind="line", table="time", x="Speakers")
    blank = charts.render(chart, table, "svg")
    assert b"<!-- No data yet -->" in blank
    table.rows[1][1] = 12.5
    assert b"<!-- No data yet -->" not in charts.render(chart, table, "svg")


# --- layout (issue 16: titles over legends, x labels over each other, font sizes that
# varied, charts cut at 390 px) ----------------------------------------------------------


def _drawn(chart: Chart, table: Table, layout: charts.Layout = "wide"):
    figure = charts.build_figure(chart, table, layout=layout)
    figure.draw_without_rendering()
    return figure, figure.canvas.get_renderer()


def _texts(figure) -> list:
    return [t for t in figure.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text()]


def _crowded() -> tuple[Chart, Table]:
    names = [f"Condition{i}-variant" for i in range(8)]  # one word each: cannot wrap
    table = Table(
        key="crowded",
        title="Crowded",
        columns=["Condition", "Accuracy %"],
        rows=[[n, 40.0 + i] for i, n in enumerate(names)],
    )
    chart = Chart(
        key="crowded", title="Accuracy", kind="bar", table="crowded", x="Condition",
        series=["Accuracy %"],
    )  # fmt: skip
    return chart, table


@pytest.mark.parametrize("layout", ["wide", "narrow"])
def test_every_chart_of_a_layout_has_one_width_and_a_view_box(report, layout):
    width_pt = 72 * (charts.WIDE_IN if layout == "wide" else charts.NARROW_IN)
    for chart in report.charts:
        root = svg_root(charts.render_chart(report, chart.key, "svg", layout=layout))
        # The page scales the SVG by its viewBox (max-width: 100%), never crops it.
        assert root.get("width") == f"{width_pt:g}pt", chart.key
        view_box = [float(v) for v in root.get("viewBox").split()]
        assert view_box[:3] == [0, 0, width_pt] and view_box[3] > 0


def test_one_type_scale_in_every_chart(report):
    chart, table = _crowded()
    figures = [_drawn(c, report.table(c.table))[0] for c in report.charts]
    figures.append(_drawn(chart, table)[0])
    sizes = {t.get_fontsize() for figure in figures for t in _texts(figure)}
    assert sizes <= set(charts.FONT_SIZES), sizes


@pytest.mark.parametrize("layout", ["wide", "narrow"])
@pytest.mark.parametrize("key", ["accuracy", "time-span"])
def test_legend_sits_below_the_plot_clear_of_the_title(report, key, layout):
    chart = charts.chart_by_key(report, key)
    figure, renderer = _drawn(chart, report.table(chart.table), layout)
    (legend,) = figure.legends
    legend_box = legend.get_window_extent(renderer)
    axes_box = figure.axes[0].get_tightbbox(renderer)
    title_box = figure._suptitle.get_window_extent(renderer)
    assert legend_box.y1 <= axes_box.y0 + 1  # below the plot and its tick labels
    assert not legend_box.overlaps(title_box) and title_box.y0 >= axes_box.y1 - 1
    assert legend_box.x0 >= 0 and legend_box.x1 <= figure.bbox.width  # not cut off


def test_crowded_x_labels_are_slanted_and_never_overlap():
    chart, table = _crowded()
    figure, renderer = _drawn(chart, table)
    labels = [t for t in figure.axes[0].get_xticklabels() if t.get_text()]
    assert len(labels) == 8 and {t.get_rotation() for t in labels} == {40.0}
    # Slanted labels are parallel: they are clear of each other when the distance
    # between neighbouring ticks, across the slant, exceeds a line of text.
    ticks = sorted(figure.axes[0].transData.transform((x, 0))[0] for x in range(8))
    line_px = charts.TEXT_PT * 1.2 * figure.dpi / 72
    spacing = min(b - a for a, b in itertools.pairwise(ticks))
    assert len("Condition0-variant") * charts.CHAR_IN * figure.dpi > spacing  # level: collide
    assert min(b - a for a, b in itertools.pairwise(ticks)) * math.sin(math.radians(40)) > line_px
    boxes = [t.get_window_extent(renderer) for t in labels]
    assert all(box.x0 >= 0 and box.y0 >= 0 for box in boxes)  # none cut at the edge


def test_wrapped_labels_stay_level_when_they_fit(report):
    chart = charts.chart_by_key(report, "accuracy")
    figure, _renderer = _drawn(chart, report.table("accuracy"))
    labels = [t for t in figure.axes[0].get_xticklabels() if t.get_text()]
    assert {t.get_rotation() for t in labels} == {0.0}
    assert any("\n" in t.get_text() for t in labels)  # the long name is wrapped instead


def test_narrow_layout_draws_horizontal_bars_with_every_label(report):
    chart = charts.chart_by_key(report, "accuracy")
    figure, renderer = _drawn(chart, report.table("accuracy"), "narrow")
    ax = figure.axes[0]
    rows = [t.get_text().replace("\n", " ") for t in ax.get_yticklabels()]
    assert rows == [r[0] for r in report.table("accuracy").rows]
    boxes = [t.get_window_extent(renderer) for t in ax.get_yticklabels()]
    assert all(box.x0 >= 0 for box in boxes)  # long names wrapped, not cut at the edge
    ordered = sorted(boxes, key=lambda b: b.y0)
    assert all(a.y1 <= b.y0 + 0.5 for a, b in itertools.pairwise(ordered))


def test_the_same_numbers_give_the_same_svg_bytes_in_another_process():
    """Cached and diffed drawings need it: matplotlib salts an SVG's ids with a fresh uuid
    unless a salt is set (reports.charts sets one)."""
    code = (
        "import hashlib, sys\n"
        "from reports import charts\n"
        "from reports.report_types import Chart, Report, Table\n"
        "table = Table(key='t', title='T', columns=['System', 'Overall %'],\n"
        "              rows=[['#1 a', 61.5], ['#2 b', 48.25]])\n"
        "chart = Chart(key='c', title='C', kind='bar', table='t', x='System',\n"
        "              series=['Overall %'])\n"
        "report = Report(benchmark='b', title='B', tables=[table], charts=[chart])\n"
        "print(hashlib.sha256(charts.render_chart(report, 'c', 'svg')).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
        ).stdout.strip()
        for _ in range(2)
    }
    assert len(digests) == 1 and len(next(iter(digests))) == 64
