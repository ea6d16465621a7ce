"""What every harness import shares: one transaction, the refusal (or setting aside) of
samples that are not ours, and the result a page, the API and the command print.

The readers (:mod:`.inspect_import`, :mod:`.lmeval_import`) turn a harness's output into
:class:`~modeling.runs.prediction_import.PredictionLine` records, one per sample and
epoch, and hand them to :func:`~modeling.runs.prediction_import.import_lines`: the same
item lookup, scoring against the item bank's gold and upsert as a predictions file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.importers.base import ImportDataError, ImportReport, ProgressCallback
from benchmarks.uploads import UploadOutcome
from modeling.runs.prediction_import import RunSummary

# Sample ids named in an error or kept on a run: enough to recognise the task.
UNKNOWN_SHOWN = 20
UNKNOWN_KEPT = 1000

INSPECT_ORIGIN, LM_EVAL_ORIGIN = "inspect", "lm-eval"


@dataclass
class HarnessImportResult:
    runs: list[RunSummary]
    report: ImportReport
    # Sample ids (as strings) that name no item here, set aside at the researcher's word.
    unknown: list[str] = field(default_factory=list)

    def notes(self) -> list[str]:
        notes = [
            f"run {s.run.name!r} ({s.run.benchmark}, {s.run.model}): "
            f"{'new' if s.created else 'existing'}"
            + (f"; correct {s.correct}/{s.scored}" if s.scored else "")
            + "".join(
                f", {n} {status}" for status, n in sorted(s.by_status.items()) if status != "ok"
            )
            for s in self.runs
        ]
        if self.unknown:
            notes.append(
                f"{len(self.unknown)} sample(s) with ids that are no item here were set "
                f"aside: {', '.join(self.unknown[:UNKNOWN_SHOWN])}"
            )
        return notes


def upload_outcome(result: HarnessImportResult, progress: ProgressCallback) -> UploadOutcome:
    """What an upload of harness results reports: its runs, notes and counts. The imports
    report no progress as they go: every prediction is counted at the end."""
    progress(sum(sum(s.predictions.values()) for s in result.runs))
    return UploadOutcome(
        report=result.report,
        notes=result.notes(),
        refs={"runs": [s.run.pk for s in result.runs]},
    )


def unknown_refusal(path: Path, ids: list[Any], *, what: str = "sample") -> ImportDataError:
    """The error for samples whose ids are not item keys of this server."""
    shown = ", ".join(repr(i) for i in ids[:UNKNOWN_SHOWN])
    more = f" and {len(ids) - UNKNOWN_SHOWN} more" if len(ids) > UNKNOWN_SHOWN else ""
    return ImportDataError(
        f"{len(ids)} {what}(s) name no item of this server: {shown}{more}. Export the task "
        "from ToMLab (its ids are item keys), or import with keep_unknown to set them aside",
        path=path,
        field="id",
    )
