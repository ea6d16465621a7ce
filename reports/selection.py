"""What a report compares: its runs and human studies, and whether excluded participants
count. Read from a query string by the report page, its downloads and the API alike,
and written back as one canonical query, so a selection is a URL a researcher can share.

Query parameters (the API documents the same):
- ``runs``: run ids, comma-separated or repeated; ``none`` for no run; absent: every run;
- ``studies``: study ids the same way; absent: ``selectors.report_studies``' default
  (every study but drafts and closed studies without a counted answer);
- ``include_excluded``: ``1`` counts excluded participants (default ``0``);
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

from common.request_params import BadNumber, number_list

from . import selectors

NONE = "none"
TRUE = ("1", "true", "on", "yes")
FALSE = ("", "0", "false", "off", "no")


class BadSelection(ValueError):
    """A selection a report cannot be built for; ``field`` names the query parameter."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ReportSelection:
    run_ids: list[int] | None = None
    study_ids: list[int] | None = None
    include_excluded: bool = False

    def params(self) -> dict[str, str]:
        """The non-default parts as query parameters."""
        params = {}
        for name, ids in (("runs", self.run_ids), ("studies", self.study_ids)):
            if ids is not None:
                params[name] = ",".join(map(str, ids)) or NONE
        if self.include_excluded:
            params["include_excluded"] = "1"
        return params

    def query(self) -> str:
        """``?runs=…&studies=…&include_excluded=1``, or "" for the default selection."""
        params = self.params()
        return "?" + urlencode(params) if params else ""

    def build_kwargs(self) -> dict[str, Any]:
        """The keyword arguments ``build_report`` and the services take for it."""
        return {
            "run_ids": self.run_ids,
            "study_ids": self.study_ids,
            "include_excluded": self.include_excluded,
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
    include_excluded = _include_excluded(query.get("include_excluded"))
    run_ids = _ids(query, "runs", picked=picked)
    study_ids = _ids(query, "studies", picked=picked)
    if run_ids is not None:
        try:
            selectors.report_runs(benchmark, run_ids=run_ids)
        except ValueError as exc:
            raise BadSelection("runs", str(exc)) from None
    choices = selectors.study_choices(benchmark, include_excluded=include_excluded)
    if study_ids is not None:
        missing = sorted(set(study_ids) - {s["id"] for s in choices})
        if missing:
            raise BadSelection(
                "studies", f"no {benchmark} study with id {', '.join(map(str, missing))}"
            )
        if study_ids == [s["id"] for s in choices if s["default"]]:
            study_ids = None
    return ReportSelection(run_ids, study_ids, include_excluded), choices
