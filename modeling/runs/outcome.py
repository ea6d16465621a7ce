"""What a run's predictions say about how it ended, and the status label every place shows.

A run whose calls all came back may still have produced nothing: a model that answers
every prompt in prose the parser cannot read. :func:`run_outcome` is the one rule that
decides such a run's final status from its predictions (the engine, trained baselines
and prediction imports all call it); :func:`run_status_label` is the one label the run
list, the run page, the API and the admin show, so "succeeded" is never said of a run
whose answers could not be read without saying how many.

"Unparseable" means any parse status but ``ok`` (refused and missing answers too), as
the reports count it: none of them is an answer the model can be scored on.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, IntegerField, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce

from ..models import Prediction, Run

# Listed rather than "not ok" so that (run, parse_status) index lookups find only these
# rows: most predictions of most runs are ok, and a list page counts for 50 runs.
NOT_PARSED = tuple(s for s in Prediction.ParseStatus.values if s != Prediction.ParseStatus.OK)
_NOT_PARSED = Q(parse_status__in=NOT_PARSED)

# Run.error of a run that failed by this rule starts with it (the label reads it back).
NO_PARSEABLE_REPLY = "no parseable reply"

# The warning badge colour: a success with answers missing is not a plain success.
WARNING = "warning"


def unparseable_count() -> Coalesce:
    """Per run, its unparseable predictions: an expression for ``annotate(unparseable=…)``."""
    counted = (
        Prediction.objects.filter(_NOT_PARSED, run=OuterRef("pk"))
        .order_by()
        .values("run")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


@dataclass(frozen=True)
class ParseCounts:
    predictions: int
    unparseable: int

    @property
    def none_parsed(self) -> bool:
        """There were answers to read and not one of them could be read."""
        return self.predictions > 0 and self.unparseable == self.predictions


def run_parse_counts(*, run_id: int) -> ParseCounts:
    """How many predictions a run has and how many of them are unparseable (one query)."""
    counts = Prediction.objects.filter(run_id=run_id).aggregate(
        predictions=Count("pk"), unparseable=Count("pk", filter=_NOT_PARSED)
    )
    return ParseCounts(counts["predictions"], counts["unparseable"])


def run_outcome(*, run_id: int, counts: ParseCounts | None = None) -> tuple[str, str]:
    """The status and error of a run that ran to the end: ``(status, error)``.

    Failed when it has predictions and none could be parsed; succeeded otherwise (with
    unparseable answers the label says how many). A run without predictions (a direct-
    call run, a pipeline that only prepares) has nothing to judge and succeeds.
    ``counts``: the run's, when the caller read them already (the engine, with the run).
    """
    if counts is None:
        counts = run_parse_counts(run_id=run_id)
    if counts.none_parsed:
        return Run.Status.FAILED, (
            f"{NO_PARSEABLE_REPLY}: none of the {counts.predictions} answers could be read; "
            "the first reply is shown on the run page"
        )
    return Run.Status.SUCCEEDED, ""


@dataclass(frozen=True)
class RunStatusLabel:
    text: str
    # The badge colour: a Run.Status value, or WARNING.
    tone: str
    unparseable: int = 0

    @property
    def no_parseable_reply(self) -> bool:
        return self.text == f"failed: {NO_PARSEABLE_REPLY}"

    def __str__(self) -> str:
        return self.text


def run_status_label(*, run: Run, unparseable: int | None = None) -> RunStatusLabel:
    """What to call ``run``'s status: "succeeded with 3 unparseable", "failed: no
    parseable reply", or the plain status.

    ``unparseable`` defaults to the ``unparseable`` annotation (:func:`unparseable_count`)
    that ``selectors.run_list`` adds; a run without it is counted with one query.
    """
    if run.status == Run.Status.SUCCEEDED:
        if unparseable is None:
            unparseable = getattr(run, "unparseable", None)
        if unparseable is None:
            unparseable = run_parse_counts(run_id=run.pk).unparseable
        if unparseable:
            return RunStatusLabel(f"succeeded with {unparseable} unparseable", WARNING, unparseable)
    elif run.status == Run.Status.FAILED and run.error.startswith(NO_PARSEABLE_REPLY):
        return RunStatusLabel(f"failed: {NO_PARSEABLE_REPLY}", Run.Status.FAILED)
    return RunStatusLabel(run.get_status_display(), run.status)


def run_first_reply(*, run: Run) -> str:
    """The raw reply behind the run's first prediction ("" if none): what the model said
    when nothing it said could be parsed."""
    first = (
        Prediction.objects.filter(run=run)
        .select_related("call")
        .only("raw_output", "call_id", "call__raw_output")
        .order_by("pk")
        .first()
    )
    return first.reply if first is not None else ""
