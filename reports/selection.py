"""What a report compares: its runs and human studies, and whether excluded participants
count. Read from a query string by the report page, its downloads and the API alike,
and written back as one canonical query, so a selection is a URL a researcher can share.

Query parameters (the API documents the same):
- ``work``: the generic benchmark's report covers one named benchmark, the work with
  this id (required there, refused elsewhere; one this workspace does not read is
  ``WorkNotFound``, a 404 like any object of another workspace);
- ``runs``: run ids, comma-separated or repeated; ``none`` for no run; absent: every run;
- ``studies``: study ids the same way; absent: ``selectors.report_studies``' default
  (every study but drafts and closed studies without a counted answer);
- ``include_excluded``: ``1`` counts excluded participants (default ``0``);
- ``samples``: how a run with several samples per item (an Inspect log's epochs, a
  run asked for ``samples > 1``) is scored: ``mean`` over its samples (the default)
  or its ``first`` sample only (``SAMPLES``);
- ``picked``: sent by the page's form, whose unticked boxes send nothing: with it, an
  empty list means none rather than the default.

A study selection equal to the default is written as the default (no parameter), so a
report job, which keeps only runs, is not refused for a selection that changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import QueryDict
from django.utils.http import urlencode

from benchmarks.models import Benchmark
from common.request_params import BadNumber, number_list, parse_number

from . import selectors
from .report_types import SAMPLES, SAMPLES_MEAN

NONE = "none"
TRUE = ("1", "true", "on", "yes")
FALSE = ("", "0", "false", "off", "no")


class BadSelection(ValueError):
    """A selection a report cannot be built for; ``field`` names the query parameter."""

    status = 400

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class WorkNotFound(BadSelection):
    """``work`` names no generic benchmark this workspace reads: not found, not a bad
    request (another workspace's work answers as an unknown id does)."""

    status = 404


@dataclass(frozen=True)
class ReportSelection:
    run_ids: list[int] | None = None
    study_ids: list[int] | None = None
    include_excluded: bool = False
    # The generic benchmark's work (one named benchmark); None for the built-in ones.
    work_id: int | None = None
    # A run's several samples per item: their mean, or the first sample only.
    samples: str = SAMPLES_MEAN

    def params(self) -> dict[str, str]:
        """The non-default parts as query parameters (the work first: it names the report)."""
        params = {}
        if self.work_id is not None:
            params["work"] = str(self.work_id)
        for name, ids in (("runs", self.run_ids), ("studies", self.study_ids)):
            if ids is not None:
                params[name] = ",".join(map(str, ids)) or NONE
        if self.include_excluded:
            params["include_excluded"] = "1"
        if self.samples != SAMPLES_MEAN:
            params["samples"] = self.samples
        return params

    def query(self) -> str:
        """``?runs=…&studies=…&include_excluded=1&samples=first``, or "" for the default
        selection."""
        params = self.params()
        return "?" + urlencode(params) if params else ""

    def build_kwargs(self) -> dict[str, Any]:
        """The keyword arguments ``build_report`` and the services take for it."""
        return {
            "run_ids": self.run_ids,
            "study_ids": self.study_ids,
            "include_excluded": self.include_excluded,
            "work_id": self.work_id,
            "samples": self.samples,
        }


def _ids(query: QueryDict, name: str, *, picked: bool) -> list[int] | None:
    values = [v.strip() for v in query.getlist(name) if v.strip()]
    if values == [NONE]:
        return []
    if not values:
        return [] if picked else None
    ids: set[int] = set()
    for value in values:
        try:
            ids.update(number_list(value, name=name))
        except BadNumber as exc:
            raise BadSelection(
                name, f"a comma-separated list of ids, e.g. 3,5, or '{NONE}' ({exc})"
            ) from None
    return sorted(ids)


def _include_excluded(raw: str | None) -> bool:
    """``include_excluded`` as a bool (BadSelection naming it for anything else)."""
    value = (raw or "").strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise BadSelection("include_excluded", f"expected 1 or 0, got {value[:24]!a}")


def _samples(raw: str | None) -> str:
    """``samples`` as one of ``SAMPLES`` (BadSelection naming it for anything else)."""
    value = (raw or "").strip().lower()
    if not value:
        return SAMPLES_MEAN
    if value in SAMPLES:
        return value
    raise BadSelection("samples", f"expected {' or '.join(SAMPLES)}, got {value[:24]!a}")


def work_from_query(query: QueryDict, *, benchmark: str) -> int | None:
    """The ``work`` a query names, checked: required for the generic benchmark and
    refused for the others (``BadSelection``), one this workspace reads
    (``WorkNotFound``)."""
    raw = (query.get("work") or "").strip()
    if benchmark != Benchmark.GENERIC:
        if raw:
            raise BadSelection("work", f"a {benchmark} report covers the whole benchmark")
        return None
    if not raw:
        raise BadSelection("work", "a generic report covers one named benchmark: ?work=<id>")
    try:
        work_id = parse_number(raw, name="work")
    except BadNumber as exc:
        raise BadSelection("work", f"a work id ({exc})") from None
    if selectors.generic_work(work_id) is None:
        raise WorkNotFound("work", f"no generic benchmark with work id {work_id}")
    return work_id


def selection_from_query(query: QueryDict, *, benchmark: str) -> ReportSelection:
    """The selection a query asks for, checked against the benchmark's runs and studies
    and written canonically (the default studies as ``None``). Raises ``BadSelection``."""
    return selection_and_studies(query, benchmark=benchmark)[0]


def selection_and_studies(
    query: QueryDict, *, benchmark: str
) -> tuple[ReportSelection, list[dict[str, Any]]]:
    """``selection_from_query`` and the ``selectors.study_choices`` it read (the page
    lists them), from one read."""
    picked = "picked" in query
    work_id = work_from_query(query, benchmark=benchmark)
    include_excluded = _include_excluded(query.get("include_excluded"))
    samples = _samples(query.get("samples"))
    run_ids = _ids(query, "runs", picked=picked)
    study_ids = _ids(query, "studies", picked=picked)
    if run_ids is not None:
        try:
            selectors.report_runs(benchmark, run_ids=run_ids, work_id=work_id)
        except ValueError as exc:
            raise BadSelection("runs", str(exc)) from None
    choices = selectors.study_choices(benchmark, include_excluded=include_excluded, work_id=work_id)
    if study_ids is not None:
        missing = sorted(set(study_ids) - {s["id"] for s in choices})
        if missing:
            where = f" on work {work_id}" if work_id is not None else ""
            raise BadSelection(
                "studies",
                f"no {benchmark} study with id {', '.join(map(str, missing))}{where}",
            )
        if study_ids == [s["id"] for s in choices if s["default"]]:
            study_ids = None
    return ReportSelection(run_ids, study_ids, include_excluded, work_id, samples), choices
