"""Server-side rendering of a report's charts as SVG and PNG bytes.

Charts are drawn with matplotlib's object-oriented API only (``Figure`` + its own
canvas): pyplot keeps a global "current figure" that request threads and Celery
workers would share, and it may pick an interactive backend. The Agg backend is
chosen explicitly before anything can import pyplot, so a server without a display
never tries to open one.

A :class:`~reports.report_types.Chart` names its table and columns; the numbers come
from that table, so the picture always matches the HTML table and the exports.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Sequence
from typing import Literal

import matplotlib

matplotlib.use("Agg")  # no display; must precede any pyplot import anywhere in the process

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, PercentFormatter

from .report_types import Cell, Chart, Report, Table

ImageFormat = Literal["svg", "png"]
IMAGE_FORMATS: tuple[ImageFormat, ...] = ("svg", "png")
CONTENT_TYPES: dict[str, str] = {"svg": "image/svg+xml", "png": "image/png"}
PNG_DPI = 200  # sharp enough to paste into a paper

# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
GRID = "#e3e6ea"
MISSING = "\u2013"  # en dash: a missing value, distinct from a minus sign
TEXT = "#1d232b"
MUTED = "#5b6573"


def render_chart(report: Report, key: str, fmt: ImageFormat) -> bytes:
    """The chart ``key`` of ``report`` as SVG or PNG bytes; KeyError if there is no such chart."""
    chart = chart_by_key(report, key)
    return render(chart, report.table(chart.table), fmt)


def chart_by_key(report: Report, key: str) -> Chart:
    for chart in report.charts:
        if chart.key == key:
            return chart
    raise KeyError(f"report {report.benchmark!r} has no chart {key!r}")


def render(chart: Chart, table: Table, fmt: ImageFormat) -> bytes:
    """Draw ``chart`` from ``table`` and encode it."""
    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"unknown image format {fmt!r}")
    if chart.kind not in ("bar", "heatmap", "line"):
        raise ValueError(f"unknown chart kind {chart.kind!r}")
    if not table.rows or not _has_values(chart, table):
        figure = _empty(chart)
    elif chart.kind == "bar":
        figure = _bar(chart, table)
    elif chart.kind == "heatmap":
        figure = _heatmap(chart, table)
    elif chart.kind == "line":
        figure = _line(chart, table)
    else:
        raise ValueError(f"unknown chart kind {chart.kind!r}")
    return _encode(figure, fmt, title=chart.title)


# --- helpers ------------------------------------------------------------------------------


def _has_values(chart: Chart, table: Table) -> bool:
    """Whether any cell the chart would draw holds a number: rows of blanks (a study with
    no answers yet) get "No data yet", not axes around nothing (-0.04 to 0.04 s)."""
    if chart.kind == "heatmap":
        columns = table.columns[1:]
    else:
        columns = chart.series or [c for c in table.columns if c != chart.x][:1]
    return any(not math.isnan(_number(value)) for name in columns for value in _column(table, name))


def _number(value: Cell) -> float:
    """A cell as a float; missing and non-numeric cells are NaN (matplotlib skips them)."""
    if isinstance(value, bool) or value is None:
        return math.nan
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _column(table: Table, name: str) -> list[Cell]:
    try:
        index = table.columns.index(name)
    except ValueError:
        raise KeyError(f"table {table.key!r} has no column {name!r}") from None
    return [row[index] for row in table.rows]


def _is_percent(columns: Sequence[str]) -> bool:
    return bool(columns) and all(c.rstrip().endswith("%") for c in columns)


def _label(text: object, width: int) -> str:
    return "\n".join(textwrap.wrap(str(text), width=width)) or str(text)


def interval_errors(
    values: Sequence[float], lows: Sequence[float], highs: Sequence[float]
) -> tuple[list[float], list[float]]:
    """Interval ends as matplotlib's ``yerr``: distances below and above each value.

    A missing end (NaN) gives NaN, so no error bar is drawn rather than a zero-length
    one; an end on the wrong side of its value (rounding) gives 0.
    """

    def distance(upper: float, lower: float) -> float:
        gap = upper - lower
        return math.nan if math.isnan(gap) else max(0.0, gap)

    below = [distance(v, lo) for v, lo in zip(values, lows, strict=True)]
    above = [distance(hi, v) for v, hi in zip(values, highs, strict=True)]
    return below, above


def _caption(figure: Figure, text: str) -> None:
    # Below the axes, right-aligned: constrained layout reserves the room for it.
    figure.supxlabel(text, x=0.99, ha="right", fontsize=8, color=MUTED)


def _series_label(name: str) -> str:
    # "Accuracy %" reads better in a legend without the unit the axis already shows.
    return name.rstrip().removesuffix("%").rstrip() or name


def _new_figure(width: float, height: float) -> tuple[Figure, Axes]:
    # layout="constrained" makes room for wrapped tick labels and outside legends.
    figure = Figure(figsize=(width, height), layout="constrained", facecolor="white")
    ax = figure.add_subplot()
    ax.tick_params(colors=TEXT, labelsize=9)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    for side in ("left", "bottom"):
        ax.spines[side].set_color("#9aa3ae")
    return figure, ax


def _title(figure: Figure, ax: Axes, chart: Chart) -> None:
    # A figure title (not an axes title): constrained layout puts it above the axes
    # *and* the outside legend, so a long title never runs into the legend.
    width_in = figure.get_figwidth()
    figure.suptitle(
        _label(chart.title, max(30, int(width_in * 9))),
        x=0.01,
        ha="left",
        fontsize=12,
        fontweight="bold",
        color=TEXT,
    )


def _percent_axis(ax: Axes, values: Sequence[float], *, horizontal: bool = False) -> None:
    axis = ax.xaxis if horizontal else ax.yaxis
    axis.set_major_formatter(PercentFormatter(xmax=100, decimals=0))
    finite = [v for v in values if not math.isnan(v)]
    # Percent charts start at 0 and show the whole scale unless something exceeds it.
    top = max([100.0, *finite]) if finite else 100.0
    limits = (0, top * 1.02 if top > 100 else 100)
    if horizontal:
        ax.set_xlim(*limits)
    else:
        ax.set_ylim(*limits)


def _legend(figure: Figure, ax: Axes, count: int) -> None:
    if count > 1:
        figure.legend(loc="outside right upper", frameon=False, fontsize=9)


# --- chart kinds --------------------------------------------------------------------------


def _bar(chart: Chart, table: Table) -> Figure:
    categories = [str(c) if c is not None else MISSING for c in _column(table, chart.x)]
    series = chart.series or [c for c in table.columns if c != chart.x][:1]
    n_cat, n_ser = len(categories), len(series)
    # Many groups (e.g. run x mental state) do not fit side by side with readable labels:
    # lay the bars out horizontally, one labelled row per category, first on top.
    horizontal = n_cat > 8 or n_cat * n_ser > 24
    if horizontal:
        height = min(18.0, max(3.5, 1.6 + 0.2 * n_cat * max(1.0, 0.55 * n_ser)))
        figure, ax = _new_figure(8.5, height)
        labels = [_label(c, 32) for c in categories]
    else:
        width = min(14.0, max(6.0, 2.5 + 0.55 * n_cat * max(1.0, 0.7 * n_ser)))
        figure, ax = _new_figure(width, 4.6)
        # Long names are wrapped, and slanted when they still crowd.
        wrap = 12 if n_cat > 6 else 18
        labels = [_label(c, wrap) for c in categories]
        slant = any(len(c) > 2 * wrap for c in categories)
    value_axis, category_axis = (ax.xaxis, ax.yaxis) if horizontal else (ax.yaxis, ax.xaxis)

    has_errors = len(chart.error_low) == n_ser and len(chart.error_high) == n_ser
    group = 0.8
    bar_width = group / n_ser
    all_values: list[float] = []
    for i, name in enumerate(series):
        values = [_number(v) for v in _column(table, name)]
        offsets = [k - group / 2 + bar_width * (i + 0.5) for k in range(n_cat)]
        errors = None
        if has_errors:
            lows = [_number(v) for v in _column(table, chart.error_low[i])]
            highs = [_number(v) for v in _column(table, chart.error_high[i])]
            errors = list(interval_errors(values, lows, highs))
            all_values += highs
        all_values += values
        style = {
            "color": PALETTE[i % len(PALETTE)],
            "label": _series_label(name),
            "error_kw": {"ecolor": "#333333", "elinewidth": 1, "capsize": 3 if n_cat < 20 else 0},
            "zorder": 2,
        }
        if horizontal:
            ax.barh(offsets, values, height=bar_width * 0.92, xerr=errors, **style)
        else:
            ax.bar(offsets, values, width=bar_width * 0.92, yerr=errors, **style)
    if horizontal:
        ax.set_yticks(range(n_cat), labels)
        ax.set_ylim(n_cat - 0.4, -0.6)  # inverted: the table's first row on top
    else:
        ax.set_xticks(
            range(n_cat),
            labels,
            rotation=30 if slant else 0,
            ha="right" if slant else "center",
            rotation_mode="anchor",
        )
        ax.set_xlim(-0.6, n_cat - 0.4)
    value_axis.grid(True, color=GRID, zorder=0)
    ax.set_axisbelow(True)
    if chart.x:
        category_axis.set_label_text(chart.x, color=MUTED, fontsize=10)
    percent = _is_percent(series)
    value_label = chart.y_label or (_series_label(series[0]) + (" (%)" if percent else ""))
    value_axis.set_label_text(
        value_label if n_ser == 1 or chart.y_label else "", color=MUTED, fontsize=10
    )
    if percent:
        _percent_axis(ax, all_values, horizontal=horizontal)
    _title(figure, ax, chart)
    _legend(figure, ax, n_ser)
    if has_errors:
        _caption(figure, "Error bars: 95% confidence interval")
    return figure


def _heatmap(chart: Chart, table: Table) -> Figure:
    # The table is a matrix: first column the row labels, every other column a value.
    row_labels = [str(row[0]) for row in table.rows]
    col_names = chart.series or table.columns[1:]
    col_index = [table.columns.index(c) for c in col_names]
    values = [[_number(row[i]) for i in col_index] for row in table.rows]
    finite = [v for row in values for v in row if not math.isnan(v)]
    percent = _is_percent(col_names)
    # Correlations get a diverging scale fixed at -1..1 (so colours mean the same in every
    # report); anything else (e.g. accuracy % by state x type) a sequential one.
    correlation = not percent and all(-1.0 <= v <= 1.0 for v in finite)
    if correlation:
        cmap, vmin, vmax = "RdBu_r", -1.0, 1.0
    elif percent:
        cmap, vmin, vmax = "viridis", 0.0, max([100.0, *finite])
    else:
        cmap, vmin, vmax = "viridis", min(finite, default=0.0), max(finite, default=1.0)
    colormap = matplotlib.colormaps[cmap].with_extremes(bad="#eeeeee")

    size = max(len(row_labels), len(col_names))
    figure, ax = _new_figure(min(13.0, 3.5 + 0.75 * size), min(11.0, 2.8 + 0.6 * size))
    image = ax.imshow(
        values,  # NaN cells are masked and drawn in the "bad" grey
        cmap=colormap,
        vmin=vmin,
        vmax=vmax,
        aspect="auto",
    )
    ax.set_xticks(
        range(len(col_names)),
        [_label(_series_label(c) if percent else c, 14) for c in col_names],
        rotation=35 if len(col_names) > 3 else 0,
        ha="right" if len(col_names) > 3 else "center",
    )
    ax.set_yticks(range(len(row_labels)), [_label(r, 20) for r in row_labels])
    for side in ("left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.tick_params(length=0)
    fontsize = 9 if size <= 8 else 7
    for r, row in enumerate(values):
        for c, value in enumerate(row):
            if math.isnan(value):
                text, dark = MISSING, False
            else:
                text = f"{value:.1f}" if percent else f"{value:.2f}"
                # White text where the cell colour is dark.
                share = (value - vmin) / (vmax - vmin) if vmax > vmin else 0.5
                dark = abs(value) > 0.55 if correlation else share < 0.55
            ax.text(
                c, r, text, ha="center", va="center", fontsize=fontsize,
                color="white" if dark else TEXT,
            )  # fmt: skip
    colorbar = figure.colorbar(image, ax=ax, shrink=0.85, pad=0.02)
    colorbar.ax.tick_params(labelsize=8)
    label = chart.y_label or ("Spearman correlation" if correlation else "")
    if label:
        colorbar.set_label(label, color=MUTED, fontsize=9)
    if percent:
        colorbar.ax.yaxis.set_major_formatter(PercentFormatter(xmax=100, decimals=0))
    _title(figure, ax, chart)
    return figure


def _line(chart: Chart, table: Table) -> Figure:
    xs_raw = [_number(v) for v in _column(table, chart.x)]
    series = chart.series or [c for c in table.columns if c != chart.x][:1]
    figure, ax = _new_figure(7.5, 4.6)
    order = sorted((x, k) for k, x in enumerate(xs_raw) if not math.isnan(x))
    xs = [x for x, _ in order]
    has_band = len(chart.error_low) == len(series) and len(chart.error_high) == len(series)
    all_values: list[float] = []
    for i, name in enumerate(series):
        column = _column(table, name)
        ys = [_number(column[k]) for _, k in order]
        colour = PALETTE[i % len(PALETTE)]
        if has_band:
            lows = _column(table, chart.error_low[i])
            highs = _column(table, chart.error_high[i])
            low = [_number(lows[k]) for _, k in order]
            high = [_number(highs[k]) for _, k in order]
            ax.fill_between(xs, low, high, color=colour, alpha=0.15, linewidth=0, zorder=1)
            all_values += high
        ax.plot(
            xs, ys, marker="o", markersize=5, linewidth=2, color=colour,
            label=_series_label(name), zorder=3,
        )  # fmt: skip
        all_values += ys
    if all(float(x).is_integer() for x in xs):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, color=GRID, zorder=0)
    ax.set_axisbelow(True)
    ax.set_xlabel(chart.x, color=MUTED, fontsize=10)
    percent = _is_percent(series)
    y_label = chart.y_label or (_series_label(series[0]) + (" (%)" if percent else ""))
    ax.set_ylabel(y_label, color=MUTED, fontsize=10)
    if percent:
        _percent_axis(ax, all_values)
    _title(figure, ax, chart)
    _legend(figure, ax, len(series))
    if has_band:
        _caption(figure, "Shaded band: 95% confidence interval")
    return figure


def _empty(chart: Chart) -> Figure:
    figure, ax = _new_figure(6.0, 2.6)
    ax.set_axis_off()
    ax.text(0.5, 0.45, "No data yet", ha="center", va="center", fontsize=12, color=MUTED)
    _title(figure, ax, chart)
    return figure


def _encode(figure: Figure, fmt: ImageFormat, *, title: str) -> bytes:
    buffer = io.BytesIO()
    if fmt == "svg":
        # No date: the same report gives byte-identical SVGs (cacheable, diffable).
        metadata: dict[str, str | None] = {"Title": title, "Date": None}
        figure.savefig(buffer, format="svg", metadata=metadata)
    else:
        figure.savefig(buffer, format="png", dpi=PNG_DPI, metadata={"Title": title})
    return buffer.getvalue()
