"""The shapes a report is made of, shared by the table builders, pages, exports and API.

A :class:`Report` is plain data: titled tables of JSON-able cells and chart specs that
point at tables. Builders (``reports/tables/``) fill it from the database; the page,
the CSV/XLSX/JSON exports, the API and the ``report`` command only render it, so every
surface shows the same numbers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Cell = str | int | float | bool | None

# How a run with several samples per item (an Inspect log's epochs, a run asked for
# ``samples > 1``) is scored: the mean over its samples, or its first sample only.
SAMPLES_MEAN = "mean"
SAMPLES_FIRST = "first"
SAMPLES = (SAMPLES_MEAN, SAMPLES_FIRST)


@dataclass
class Table:
    """One table: ``rows`` are lists aligned with ``columns``.

    ``key`` is a stable slug (file names, API keys, anchors). Percentages are stored as
    numbers in percent (e.g. ``26.49``) in columns whose name ends in ``%``.
    ``note`` says what the numbers cover (e.g. "items both answered: 412").
    ``no_interval`` names the rows (by their first cell) whose intervals are empty
    because they rest on one unit, with why: ``{"#3 A": "one stage: no interval"}``
    (``reports.tables.single_unit_rows``); the page's dash carries it as its tooltip.
    ``alert`` is a sentence of the note a reader must not miss (a run in a common set
    at 0% because none of its replies parsed): the page shows it above the table, out
    of the note's fold.
    """

    key: str
    title: str
    columns: list[str]
    rows: list[list[Cell]]
    note: str = ""
    no_interval: dict[str, str] = field(default_factory=dict)
    alert: str = ""

    def records(self) -> list[dict[str, Cell]]:
        """Rows as dicts keyed by column name (JSON exports, the API)."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


@dataclass
class Chart:
    """What to draw from a table; rendered server-side by ``reports.charts``.

    ``kind``: ``bar`` (``x`` categories, one bar per ``series`` column, optional error
    columns ``error_low``/``error_high`` giving the interval ends), ``heatmap`` (the
    table is a matrix: first column row labels, the others values) or ``line``
    (``x`` numeric, one line per ``series`` column).
    """

    key: str
    title: str
    kind: Literal["bar", "heatmap", "line"]
    table: str  # Table.key
    x: str = ""
    series: list[str] = field(default_factory=list)
    error_low: list[str] = field(default_factory=list)
    error_high: list[str] = field(default_factory=list)
    y_label: str = ""


@dataclass
class Report:
    """Everything one report shows, for one benchmark (and optionally a study or runs)."""

    benchmark: str
    title: str
    tables: list[Table] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    # Summary facts shown above the tables: {"runs": 3, "items": 1719, ...}
    facts: dict[str, Any] = field(default_factory=dict)

    def table(self, key: str) -> Table:
        for table in self.tables:
            if table.key == key:
                return table
        raise KeyError(f"report {self.benchmark!r} has no table {key!r}")

    def as_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "title": self.title,
            "facts": self.facts,
            "tables": [
                {
                    "key": t.key,
                    "title": t.title,
                    "note": t.note,
                    "columns": t.columns,
                    "rows": t.records(),
                    # Only where a row rests on one unit: other tables keep their shape.
                    **({"no_interval": t.no_interval} if t.no_interval else {}),
                    **({"alert": t.alert} if t.alert else {}),
                }
                for t in self.tables
            ],
            "charts": [asdict(c) for c in self.charts],
        }
