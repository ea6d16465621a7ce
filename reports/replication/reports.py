"""The report JSON a package carries, and how it is compared after an import.

A package holds the report of its study's benchmark over the package's runs and its
study alone (``manage.py report BENCHMARK --runs … --study ID --format json``), seed
0, twice: excluded participants left out (``report.json``) and counted
(``report-include-excluded.json``). It is built the way the package's study reads
once imported: participants under their package ids, the study closed, the runs
marked imported (``package_view``), so nobody's name or label reaches the package and
an import builds the same report.

Left out of the packaged report: the CharToM-QA construction tables (note checks,
their review by adjudication, qualification, Table 7), which report annotation work on
the whole bank, not the study or its runs, and would name annotators.

Database ids differ between installs, so comparison (``report_normalise``) writes the
package's ids instead: run ``#12 name`` becomes ``#R1 name`` and the study's id
``S``; a generic benchmark's report drops its work's id (its key, in ``facts.work``,
names it). Every other cell, note, fact and chart must be equal.

A generic study's report is that of its benchmark (the study's work): the report of
one named benchmark, as on the report page.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.db import transaction

from benchmarks.models import Benchmark
from modeling.models import Run
from reports.tables import build_report, report_json
from studies.models import Participant, Study, StudyWork

SEED = 0
# file name -> include_excluded
REPORT_FILES = {"report.json": False, "report-include-excluded.json": True}
DROPPED_TABLES: dict[str, frozenset[str]] = {
    "chartom-qa": frozenset(
        {
            "note-checks",
            "note-check-agreement",
            "check-review",
            "checks-by-annotator",
            "qualification",
            "table-7",
        }
    ),
}


def report_build(
    benchmark: str, *, run_ids: Sequence[int], study_id: int, include_excluded: bool
) -> dict[str, Any]:
    """The report JSON of the package's runs and study, construction tables left out."""
    data = report_json(
        build_report(
            benchmark,
            run_ids=list(run_ids),
            study_ids=[study_id],
            seed=SEED,
            include_excluded=include_excluded,
            work_id=study_work_id(study_id) if benchmark == Benchmark.GENERIC else None,
        )
    )
    dropped = DROPPED_TABLES.get(benchmark, frozenset())
    data["tables"] = [t for t in data["tables"] if t["key"] not in dropped]
    data["charts"] = [c for c in data["charts"] if c["table"] not in dropped]
    return data


def study_work_id(study_id: int) -> int:
    """A generic study's benchmark: its (first) work. ``ValueError`` for none."""
    work_id = (
        StudyWork.objects.filter(study_id=study_id)
        .order_by("position", "pk")
        .values_list("work_id", flat=True)
        .first()
    )
    if work_id is None:
        raise ValueError(f"study {study_id} names no benchmark of its own (no study work)")
    return work_id


def reports_build(benchmark: str, *, run_ids: Sequence[int], study_id: int) -> dict[str, Any]:
    """Every packaged report, by file name."""
    return {
        name: report_build(
            benchmark, run_ids=run_ids, study_id=study_id, include_excluded=include_excluded
        )
        for name, include_excluded in REPORT_FILES.items()
    }


class _Rollback(Exception):
    pass


@contextmanager
def package_view(
    *, study: Study, pseudonyms: dict[int, str], run_ids: Sequence[int]
) -> Iterator[None]:
    """Inside: the study reads as its package imports it (participants labelled with
    their package ids, the study closed, the runs imported). Everything is rolled back
    on leaving, whatever the body did (it must only read)."""
    try:
        with transaction.atomic():
            for pk, pseudonym in pseudonyms.items():
                Participant.objects.filter(pk=pk).update(label=pseudonym)
            Study.objects.filter(pk=study.pk).update(status=Study.Status.CLOSED)
            Run.objects.filter(pk__in=list(run_ids)).update(imported=True)
            yield
            raise _Rollback
    except _Rollback:
        pass


def report_normalise(data: Any, *, runs: dict[int, tuple[str, str]], study: tuple[int, str]) -> Any:
    """``data`` with database ids replaced by package ids.

    ``runs``: run id -> (package id, name); ``study``: (study id, package id). Run
    labels ``#<id> <name>`` anywhere in a string (columns, row labels, chart series),
    the ``Run`` column of the runs table, the ``ID`` column of the human-studies table
    and a study label's ``(#<id>)``.
    """
    replacements = [(f"#{pk} {name}", f"#{ref} {name}") for pk, (ref, name) in runs.items()]
    # Longest first: "#1 a" must not rewrite the start of "#1 ab".
    replacements.sort(key=lambda pair: -len(pair[0]))
    study_id, study_ref = study
    run_refs = {pk: ref for pk, (ref, _) in runs.items()}
    study_label = re.compile(rf"\(#{study_id}\)")

    def text(value: str) -> str:
        for old, new in replacements:
            value = value.replace(old, new)
        return study_label.sub(f"(#{study_ref})", value)

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return text(value)
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {text(k): walk(v) for k, v in value.items()}
        return value

    result = walk(data)
    if isinstance(result, dict) and isinstance(result.get("facts"), dict):
        result["facts"].pop("work_id", None)
    for table in result.get("tables", []) if isinstance(result, dict) else []:
        for row in table.get("rows", []):
            if table["key"] == "runs" and row.get("Run") in run_refs:
                row["Run"] = run_refs[row["Run"]]
            if table["key"] == "human-studies" and row.get("ID") == study_id:
                row["ID"] = study_ref
    return result


def report_differences(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Where two normalised reports differ (empty: equal), at most 20 places."""
    out: list[str] = []
    _diff(expected, actual, path or "report", out)
    return out[:20]


def _diff(a: Any, b: Any, path: str, out: list[str]) -> None:
    if len(out) >= 20:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                out.append(f"{path}.{key}: only in the {'package' if key in a else 'import'}")
            else:
                _diff(a[key], b[key], f"{path}.{key}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} entries in the package, {len(b)} here")
        for n, (x, y) in enumerate(zip(a, b, strict=False)):
            _diff(x, y, f"{path}[{n}]", out)
    elif a != b or type(a) is not type(b):
        out.append(f"{path}: {a!r} in the package, {b!r} here")
