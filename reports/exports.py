"""Report exports: every table as CSV (one file, or all in a zip) and as XLSX, and the
long-format rows behind the report as a streamed JSON array or a streamed tidy CSV.

The table exports render a built :class:`~reports.report_types.Report`, so they hold
exactly the numbers the page shows (percent columns in percent, CIs as two columns).
The long-format exports never build a report: they stream
``reports.selectors.long_format_rows`` straight to the response, so a 78k-row DynToM
export keeps a few rows in memory at a time.

All CSVs are written for ``pandas.read_csv`` with no options: UTF-8 without a BOM,
one header row, no index column, empty cells for missing values, booleans as
``true``/``false`` (pandas reads those as ``bool``), lists and dicts as JSON text.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from openpyxl import Workbook
from openpyxl.cell import WriteOnlyCell
from openpyxl.styles import Alignment, Font
from openpyxl.utils import get_column_letter

from common.csv_safe import csv_writer

from .report_types import Report, Table

# Stream in chunks of about this many bytes: small enough to start the download at
# once, big enough that a 78k-row export is not 78k tiny writes.
STREAM_CHUNK_BYTES = 64 * 1024
SHEET_NAME_MAX = 31  # Excel's limit
_SHEET_FORBIDDEN = re.compile(r"[\[\]:*?/\\]")


def csv_value(value: Any) -> str | int | float:
    """One cell as CSV text: ``true``/``false``, empty for None, JSON for lists/dicts."""
    if value is None:
        return ""
    if isinstance(value, bool):  # before int: bool is an int subclass
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return value
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, ensure_ascii=False, cls=DjangoJSONEncoder)
    return str(value)


# --- tables ---------------------------------------------------------------------------


def table_csv(table: Table) -> bytes:
    """One table as CSV: its columns as the header row, then its rows."""
    buffer = io.StringIO()
    writer = csv_writer(buffer, lineterminator="\n")
    writer.writerow(table.columns)
    for row in table.rows:
        writer.writerow([csv_value(v) for v in row])
    return buffer.getvalue().encode("utf-8")


def tables_zip(report: Report) -> bytes:
    """Every table as ``<key>.csv`` in one zip, with a README naming what each one is."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("README.txt", _readme(report))
        for table in report.tables:
            archive.writestr(f"{table.key}.csv", table_csv(table))
    return buffer.getvalue()


def _readme(report: Report) -> str:
    lines = [report.title, "=" * len(report.title), ""]
    lines += [f"{name}: {value}" for name, value in report.facts.items()]
    lines += ["", "Columns ending in % hold percentages (26.49 means 26.49%).", ""]
    for table in report.tables:
        lines.append(f"{table.key}.csv — {table.title}")
        if table.note:
            lines.append(f"    {table.note}")
    return "\n".join(lines) + "\n"


def sheet_names(keys: Sequence[str], *, reserved: Iterable[str] = ()) -> list[str]:
    """Excel-safe sheet names for ``keys``: at most 31 characters, none of ``[]:*?/\\``,
    unique ignoring case (Excel compares them that way), clashes numbered ``~2``, ``~3``.
    """
    taken = {name.lower() for name in reserved}
    names = []
    for key in keys:
        base = _SHEET_FORBIDDEN.sub("-", key).strip("'") or "table"
        name = base[:SHEET_NAME_MAX]
        number = 2
        while name.lower() in taken or name.lower() == "history":  # "History" is Excel's
            suffix = f"~{number}"
            name = base[: SHEET_NAME_MAX - len(suffix)] + suffix
            number += 1
        taken.add(name.lower())
        names.append(name)
    return names


ABOUT_SHEET = "About"


def report_xlsx(report: Report) -> bytes:
    """The report as a workbook: an "About" sheet (title, facts, what each sheet holds),
    then one sheet per table with the header row frozen."""
    # write_only streams rows to the file instead of keeping a cell object per value.
    workbook = Workbook(write_only=True)
    names = sheet_names([t.key for t in report.tables], reserved=[ABOUT_SHEET])
    bold = Font(bold=True)

    about = workbook.create_sheet(ABOUT_SHEET)
    about.column_dimensions["A"].width = 34
    about.column_dimensions["B"].width = 60
    about.column_dimensions["C"].width = 80
    about.append([_bold_cell(about, report.title, bold)])
    about.append([])
    for name, value in report.facts.items():
        shown = csv_value(value)
        about.append(
            [
                _text_cell(about, str(name)),
                _text_cell(about, shown) if isinstance(shown, str) else shown,
            ]
        )
    about.append([])
    about.append([_bold_cell(about, text, bold) for text in ("Sheet", "Table", "Note")])
    for sheet, table in zip(names, report.tables, strict=True):
        about.append([_text_cell(about, text) for text in (sheet, table.title, table.note)])

    for sheet, table in zip(names, report.tables, strict=True):
        worksheet = workbook.create_sheet(sheet)
        worksheet.freeze_panes = "A2"
        for index, column in enumerate(table.columns, start=1):
            width = max([len(column), *(len(str(row[index - 1])) for row in table.rows[:200])])
            worksheet.column_dimensions[get_column_letter(index)].width = min(60, width + 2)
        header = []
        for column in table.columns:
            cell = _bold_cell(worksheet, column, bold)
            cell.alignment = Alignment(wrap_text=True, vertical="top")
            header.append(cell)
        worksheet.append(header)
        formats = [_number_format(c) for c in table.columns]
        for row in table.rows:
            worksheet.append(
                [_xlsx_cell(worksheet, v, fmt) for v, fmt in zip(row, formats, strict=True)]
            )
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def _text_cell(worksheet: Any, value: str) -> WriteOnlyCell:
    """A cell that holds ``value`` as text, never as a formula.

    openpyxl turns any string that starts with "=" into a formula cell (data type
    "f"); an imported name or a rater's note must stay the text it is, so the data
    type is set back to "s" (string) after the value is bound.
    """
    cell = WriteOnlyCell(worksheet, value=value)
    cell.data_type = "s"
    return cell


def _bold_cell(worksheet: Any, value: str, font: Font) -> WriteOnlyCell:
    cell = _text_cell(worksheet, value)
    cell.font = font
    return cell


def _number_format(column: str) -> str:
    # Percent values are already in percent (26.49), so a plain one-decimal format.
    return "0.0" if column.rstrip().endswith("%") else "0.000"


def _xlsx_cell(worksheet: Any, value: Any, number_format: str) -> Any:
    if isinstance(value, float):
        cell = WriteOnlyCell(worksheet, value=value)
        cell.number_format = number_format
        return cell
    if isinstance(value, list | tuple | dict):
        return _text_cell(worksheet, json.dumps(value, ensure_ascii=False))
    if isinstance(value, str):
        return _text_cell(worksheet, value)
    return value  # None stays an empty cell; bools become Excel TRUE/FALSE


# --- long format (streamed) -----------------------------------------------------------


def _chunked(pieces: Iterable[str]) -> Iterator[bytes]:
    buffer: list[str] = []
    size = 0
    for piece in pieces:
        buffer.append(piece)
        size += len(piece)
        if size >= STREAM_CHUNK_BYTES:
            yield "".join(buffer).encode("utf-8")
            buffer, size = [], 0
    if buffer:
        yield "".join(buffer).encode("utf-8")


def long_format_json(rows: Iterable[Mapping[str, Any]]) -> Iterator[bytes]:
    """A JSON array of the rows, one object per line, written as the rows arrive.

    The result parses as one JSON document whatever the row count (``[\\n]`` for none).
    """

    def pieces() -> Iterator[str]:
        yield "["
        separator = "\n"
        for row in rows:
            yield separator + json.dumps(row, ensure_ascii=False, cls=DjangoJSONEncoder)
            separator = ",\n"
        yield "\n]\n"

    return _chunked(pieces())


class _Line:
    """A file-like whose ``write`` returns the text: the writer then yields line by line."""

    def write(self, text: str) -> str:
        return text


def tidy_csv(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> Iterator[bytes]:
    """One CSV row per long-format row, in ``columns`` order, written as the rows arrive.

    The header comes from ``columns`` (the selector's fixed list for the benchmark), not
    from the first row, so an empty export still has its header and no column is lost.
    """
    writer = csv_writer(_Line(), lineterminator="\n")

    def pieces() -> Iterator[str]:
        yield writer.writerow(columns)
        for row in rows:
            yield writer.writerow([csv_value(row.get(c)) for c in columns])

    return _chunked(pieces())
