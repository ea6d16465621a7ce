"""Server-side rendering of a report's charts as SVG and PNG bytes.

Charts are drawn with matplotlib's object-oriented API only (``Figure`` + its own
canvas): pyplot keeps a global "current figure" that request threads and Celery
workers would share, and it may pick an interactive backend. The Agg backend is
chosen explicitly before anything can import pyplot, so a server without a display
never tries to open one.

A :class:`~reports.report_types.Chart` names its table and columns; the numbers come
from that table, so the picture always matches the HTML table and the exports.

Layout (issue 16: titles ran into legends, x labels into each other, font sizes varied
from chart to chart, and charts were cut at 390 px):

- every chart of a layout has the same width (``WIDE_IN`` or ``NARROW_IN``) and grows in
  height only, and every text uses one of three sizes (``TITLE_PT``, ``TEXT_PT``,
  ``NOTE_PT``), so charts shown at their natural size have the same type size;
- the title is the figure's, the legend sits below the plot in as many columns as fit,
  and notes ("Error bars: …") go under the title: constrained layout keeps them apart;
- category labels are wrapped to the width of their slot; if they still collide after
  drawing, they are slanted; many or long categories make horizontal bars instead;
- the "narrow" layout (phones, ``?layout=narrow``) always draws horizontal bars, so a
  chart is readable at 390 px instead of being scaled down or cut; the SVG keeps its
  ``viewBox`` and the page scales it with ``max-width: 100%``.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Sequence
from itertools import pairwise
from typing import Literal

import matplotlib

matplotlib.use("Agg")  # no display; must precede any pyplot import anywhere in the process
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, PercentFormatter
from matplotlib.transforms import Bbox

from .report_types import Cell, Chart, Report, Table

# An SVG's clip-path and glyph ids are hashes salted with a fresh uuid4 unless a salt is
# set: a fixed one makes the same numbers give the same bytes in every process.
matplotlib.rcParams["svg.hashsalt"] = "tomlab-reports"

ImageFormat = Literal["svg", "png"]
IMAGE_FORMATS: tuple[ImageFormat, ...] = ("svg", "png")
Layout = Literal["wide", "narrow"]
LAYOUTS: tuple[Layout, ...] = ("wide", "narrow")
CONTENT_TYPES: dict[str, str] = {"svg": "image/svg+xml", "png": "image/png"}
PNG_DPI = 200  # sharp enough to paste into a paper

# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
GRID = "#e3e6ea"
MISSING = "\u2013"  # en dash: a missing value, distinct from a minus sign
TEXT = "#1d232b"
MUTED = "#5b6573"
# One type scale for every chart (points): title, every other text, notes.
TITLE_PT = 12
TEXT_PT = 9.5
NOTE_PT = 8.5
FONT_SIZES = (TITLE_PT, TEXT_PT, NOTE_PT)
# Figure widths in inches: 7.5 in is 720 CSS px (a report column); 4 in is 384 px, a
# phone's width, so the narrow picture is shown at about its natural size there.
WIDE_IN = 7.5
NARROW_IN = 4.0
CHAR_IN = TEXT_PT * 0.55 / 72  # mean width of a character of label text, in inches
SLANTED_CHARS = 22  # a slanted tick label is cut to this many characters


def render_chart(report: Report, key: str, fmt: ImageFormat, *, layout: Layout = "wide") -> bytes:
    """The chart ``key`` of ``report`` as SVG or PNG bytes; KeyError if there is no such chart."""
    chart = chart_by_key(report, key)
    return render(chart, report.table(chart.table), fmt, layout=layout)


def chart_by_key(report: Report, key: str) -> Chart:
    for chart in report.charts:
        if chart.key == key:
            return chart
    raise KeyError(f"report {report.benchmark!r} has no chart {key!r}")


def render(chart: Chart, table: Table, fmt: ImageFormat, *, layout: Layout = "wide") -> bytes:
    """Draw ``chart`` from ``table`` and encode it."""
    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"unknown image format {fmt!r}")
    return _encode(build_figure(chart, table, layout=layout), fmt, title=chart.title)


def build_figure(chart: Chart, table: Table, *, layout: Layout = "wide") -> Figure:
    """The chart as a matplotlib Figure, laid out (and drawn once) for ``layout``."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown chart layout {layout!r}")
    if chart.kind not in ("bar", "heatmap", "line"):
        raise ValueError(f"unknown chart kind {chart.kind!r}")
    width = WIDE_IN if layout == "wide" else NARROW_IN
    if not table.rows or not _has_values(chart, table):
        return _empty(chart, width)
    if chart.kind == "bar":
        return _bar(chart, table, width, narrow=layout == "narrow")
    if chart.kind == "heatmap":
        return _heatmap(chart, table, width)
    return _line(chart, table, width)


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
    # Whole words only: "gpt-4o-\nmini" reads worse than a label that needs a slant
    # (or, when too long even for that, horizontal bars).
    lines = textwrap.wrap(str(text), width=width, break_long_words=False, break_on_hyphens=False)
    return "\n".join(lines) or str(text)


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


def _caption(ax: Axes, text: str) -> None:
    # Under the figure title, above the plot: constrained layout stacks the two, and a
    # note there never meets the legend below the plot.
    ax.set_title(text, loc="left", fontsize=NOTE_PT, color=MUTED, pad=6)


def _series_label(name: str) -> str:
    # "Accuracy %" reads better in a legend without the unit the axis already shows.
    return name.rstrip().removesuffix("%").rstrip() or name


def _new_figure(width: float, height: float) -> tuple[Figure, Axes]:
    # layout="constrained" makes room for wrapped tick labels and outside legends.
    figure = Figure(figsize=(width, height), layout="constrained", facecolor="white")
    FigureCanvasAgg(figure)  # its own canvas: text extents are measured while laying out
    ax = figure.add_subplot()
    ax.tick_params(colors=TEXT, labelsize=TEXT_PT)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    for side in ("left", "bottom"):
        ax.spines[side].set_color("#9aa3ae")
    return figure, ax


def _title(figure: Figure, ax: Axes, chart: Chart) -> None:
    # A figure title (not an axes title): constrained layout puts it above the axes and
    # the note, and the legend is below the plot, so the two never meet.
    # Bold title characters are wider than label text: ~0.65 em.
    per_char_in = TITLE_PT * 0.65 / 72
    figure.suptitle(
        _label(chart.title, int(figure.get_figwidth() / per_char_in)),
        x=0.01,
        ha="left",
        fontsize=TITLE_PT,
        fontweight="bold",
        color=TEXT,
    )


def _axis_label(axis, text: str) -> None:
    axis.set_label_text(text, color=MUTED, fontsize=TEXT_PT)


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
    """Below the plot, centred, in as many columns as the figure's width holds."""
    if count <= 1:
        return
    handles, labels = ax.get_legend_handles_labels()
    widest = max(len(label) for label in labels) + 5  # the swatch and the gap
    columns = max(1, min(count, int(figure.get_figwidth() / (widest * CHAR_IN))))
    figure.legend(
        handles,
        labels,
        loc="outside lower center",
        ncols=columns,
        frameon=False,
        fontsize=TEXT_PT,
        columnspacing=1.2,
        handlelength=1.6,
    )


def _overlaps(boxes: list[Bbox]) -> bool:
    ordered = sorted((b for b in boxes if b.width > 0), key=lambda b: b.x0)
    return any(a.x1 > b.x0 + 0.5 for a, b in pairwise(ordered))


def _slant_if_crowded(figure: Figure, ax: Axes, names: Sequence[str]) -> None:
    """Draw once; if the x tick labels collide, slant them 40 degrees (and lay out again).
    ``names`` are the labels unwrapped."""
    figure.draw_without_rendering()
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    labels = [t for t in ax.get_xticklabels() if t.get_text()]
    if _overlaps([t.get_window_extent(renderer) for t in labels]):
        # Slanted, a label is one line (wrapped lines would cross their neighbours); a
        # long one is shortened: the table above the chart has it whole. Set through
        # set_xticks: a tick's Text is rebuilt from the axis formatter at each draw.
        shortened = []
        for name in names:
            one_line = " ".join(str(name).split())
            if len(one_line) > SLANTED_CHARS:
                one_line = one_line[: SLANTED_CHARS - 1].rstrip() + "\u2026"
            shortened.append(one_line)
        ax.set_xticks(ax.get_xticks(), shortened, rotation=40, ha="right", rotation_mode="anchor")
        figure.draw_without_rendering()


# --- chart kinds --------------------------------------------------------------------------


def _bar(chart: Chart, table: Table, width: float, *, narrow: bool) -> Figure:
    categories = [str(c) if c is not None else MISSING for c in _column(table, chart.x)]
    series = chart.series or [c for c in table.columns if c != chart.x][:1]
    n_cat, n_ser = len(categories), len(series)
    # Slot of one category along the x axis (the plot is ~80% of the figure), in characters.
    slot_chars = int(0.8 * width / max(1, n_cat) / CHAR_IN)
    longest_word = max((len(w) for c in categories for w in c.split()), default=0)
    wrapped = [_label(c, max(4, slot_chars - 1)) for c in categories]
    # Many groups, or names that would need more than three lines or a slant even when
    # wrapped, read better as horizontal bars: one labelled row per category, first on
    # top. A phone always gets those.
    horizontal = (
        narrow
        or n_cat > 8
        or n_cat * n_ser > 24
        or longest_word > 2 * slot_chars
        or any(label.count("\n") > 2 for label in wrapped)
    )
    if horizontal:
        labels = [_label(c, 16 if narrow else 28) for c in categories]
        legend_rows = 0.3 * math.ceil(n_ser / (2 if narrow else 3)) if n_ser > 1 else 0
        # Each row as tall as its bars or its wrapped label, whichever needs more.
        bars_in = 0.22 * max(1.0, 0.55 * n_ser)
        line_in = TEXT_PT * 1.35 / 72
        rows_in = sum(max(bars_in, (label.count("\n") + 1) * line_in) for label in labels)
        height = min(24.0, max(3.0, 1.5 + legend_rows + rows_in))
        figure, ax = _new_figure(width, height)
    else:
        figure, ax = _new_figure(width, 4.6)
        labels = wrapped
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
        ax.set_xticks(range(n_cat), labels)
        ax.set_xlim(-0.6, n_cat - 0.4)
    value_axis.grid(True, color=GRID, zorder=0)
    ax.set_axisbelow(True)
    if chart.x and not (horizontal and narrow):  # on a phone the row labels say enough
        _axis_label(category_axis, chart.x)
    percent = _is_percent(series)
    value_label = chart.y_label or (_series_label(series[0]) + (" (%)" if percent else ""))
    _axis_label(value_axis, value_label if n_ser == 1 or chart.y_label else "")
    if percent:
        _percent_axis(ax, all_values, horizontal=horizontal)
    _title(figure, ax, chart)
    _legend(figure, ax, n_ser)
    if has_errors:
        _caption(ax, "Error bars: 95% confidence interval")
    if not horizontal:
        _slant_if_crowded(figure, ax, categories)
    return figure


def _heatmap(chart: Chart, table: Table, width: float) -> Figure:
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

    narrow = width < WIDE_IN
    figure, ax = _new_figure(width, min(11.0, 2.6 + (0.45 if narrow else 0.55) * len(row_labels)))
    image = ax.imshow(
        values,  # NaN cells are masked and drawn in the "bad" grey
        cmap=colormap,
        vmin=vmin,
        vmax=vmax,
        aspect="auto",
    )
    slot_chars = int(0.7 * width / max(1, len(col_names)) / CHAR_IN)
    ax.set_xticks(
        range(len(col_names)),
        [_label(_series_label(c) if percent else c, max(6, slot_chars)) for c in col_names],
    )
    ax.set_yticks(range(len(row_labels)), [_label(r, 14 if narrow else 20) for r in row_labels])
    for side in ("left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.tick_params(length=0)
    # Cell numbers in the note size: a busy matrix stays legible without a second scale.
    fontsize = TEXT_PT if len(col_names) <= 6 and not narrow else NOTE_PT
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
    colorbar.ax.tick_params(labelsize=NOTE_PT)
    label = chart.y_label or ("Spearman correlation" if correlation else "")
    if label:
        colorbar.set_label(label, color=MUTED, fontsize=TEXT_PT)
    if percent:
        colorbar.ax.yaxis.set_major_formatter(PercentFormatter(xmax=100, decimals=0))
    _title(figure, ax, chart)
    _slant_if_crowded(figure, ax, [_series_label(c) if percent else c for c in col_names])
    return figure


def _line(chart: Chart, table: Table, width: float) -> Figure:
    xs_raw = [_number(v) for v in _column(table, chart.x)]
    series = chart.series or [c for c in table.columns if c != chart.x][:1]
    legend_rows = 0.3 * math.ceil(len(series) / (2 if width < WIDE_IN else 3))
    figure, ax = _new_figure(width, 4.2 + (legend_rows if len(series) > 1 else 0))
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
    _axis_label(ax.xaxis, chart.x or "")
    percent = _is_percent(series)
    _axis_label(ax.yaxis, chart.y_label or (_series_label(series[0]) + (" (%)" if percent else "")))
    if percent:
        _percent_axis(ax, all_values)
    _title(figure, ax, chart)
    _legend(figure, ax, len(series))
    if has_band:
        _caption(ax, "Shaded band: 95% confidence interval")
    return figure


def _empty(chart: Chart, width: float) -> Figure:
    figure, ax = _new_figure(width, 2.4)
    ax.set_axis_off()
    ax.text(0.5, 0.45, "No data yet", ha="center", va="center", fontsize=TITLE_PT, color=MUTED)
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
