"""A replication package as an HTTP download: the study page's button and the API.

The zip is written to a temporary file which is unlinked at once and streamed from the
open handle, so a large package never sits in memory and nothing is left on disk.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass

from django.http import FileResponse
from django.utils.text import slugify

from common.request_params import number_list
from studies.models import Study

from .exporting import package_export


class BadOptions(ValueError):
    """A download option that cannot be read (``field`` names it)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class PackageOptions:
    with_items: bool = False
    runs: str | tuple[int, ...] = "all"
    with_platform_ids: bool = False

    def query(self) -> str:
        """The options as the download URL's query string."""
        parts = []
        if self.with_items:
            parts.append("with_items=1")
        if self.runs != "all":
            parts.append("runs=" + ",".join(map(str, self.runs)))
        if self.with_platform_ids:
            parts.append("with_platform_ids=1")
        return ("?" + "&".join(parts)) if parts else ""


_TRUE = {"1", "true", "on", "yes"}
_FALSE = {"", "0", "false", "off", "no"}


def _flag(params: Mapping[str, str], name: str) -> bool:
    value = str(params.get(name, "")).strip().lower()
    if value not in _TRUE | _FALSE:
        raise BadOptions(name, f"{name}: give 1 or 0, not {value!r}")
    return value in _TRUE


def options_from_query(params: Mapping[str, str]) -> PackageOptions:
    """``with_items``, ``runs`` (``all`` or ``3,5``) and ``with_platform_ids``."""
    runs_text = str(params.get("runs", "all")).strip() or "all"
    if runs_text == "all":
        runs: str | tuple[int, ...] = "all"
    else:
        try:
            # Bounded digits (common.request_params): int() took 10**30, which overflowed
            # SQLite's INTEGER in the runs query (a 500).
            runs = tuple(sorted(set(number_list(runs_text, name="runs"))))
        except ValueError:
            raise BadOptions(
                "runs", f"runs: {runs_text!r} is neither 'all' nor ids like 3,5"
            ) from None
        if not runs:
            raise BadOptions("runs", "runs: give 'all' or run ids like 3,5")
    return PackageOptions(
        with_items=_flag(params, "with_items"),
        runs=runs,
        with_platform_ids=_flag(params, "with_platform_ids"),
    )


def package_file_response(study: Study, options: PackageOptions) -> FileResponse:
    """The package as an attachment; ``ExportRefused`` propagates (a bad run id…)."""
    handle, name = tempfile.mkstemp(prefix="tomlab-package-", suffix=".zip")
    os.close(handle)
    try:
        package_export(
            study,
            name,
            with_items=options.with_items,
            runs=list(options.runs) if options.runs != "all" else "all",
            with_platform_ids=options.with_platform_ids,
        )
        stream = open(name, "rb")  # noqa: SIM115 - FileResponse closes it
    finally:
        os.unlink(name)
    filename = f"study-{study.pk}-{slugify(study.name)[:60] or 'package'}.zip"
    return FileResponse(
        stream, as_attachment=True, filename=filename, content_type="application/zip"
    )
