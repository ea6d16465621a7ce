"""Read queries on model runs, for the run pages, the admin and the API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import (
    Avg,
    Count,
    F,
    FloatField,
    Func,
    IntegerField,
    Q,
    QuerySet,
    TextField,
    Value,
)
from django.db.models.functions import Cast, Coalesce, Concat, NullIf

from metrics import accuracy_vs_chance

from ..models import Backend, MentalStateRecord, Prediction, PromptTemplate, Run, RunCall
from .outcome import unparseable_count


def run_list() -> QuerySet[Run]:
    """Runs, newest first, with what a list row shows (backend name, template version,
    and ``unparseable``, the count :func:`~modeling.runs.outcome.run_status_label` reads)."""
    return (
        Run.objects.select_related("backend", "template")
        .annotate(unparseable=unparseable_count())
        .order_by("-created_at", "-pk")
    )


def run_calls(*, run: Run) -> QuerySet[RunCall]:
    """A run's calls in the order the engine created them (raw outputs left out)."""
    return RunCall.objects.filter(run=run).defer("raw_output").order_by("pk")


class JSONArrayLength(Func):
    """The length of a JSON array column (PostgreSQL jsonb / SQLite JSON1); NULL if none."""

    function = "json_array_length"
    output_field = IntegerField()

    def as_postgresql(self, compiler, connection, **extra_context):
        return super().as_sql(compiler, connection, function="jsonb_array_length", **extra_context)


@dataclass(frozen=True)
class PredictionSummary:
    """Predictions of a run by parse status, and accuracy over all of them."""

    total: int
    correct: int
    by_status: dict[str, int]
    # Expected accuracy of guessing uniformly among each item's options (1/#candidates
    # for a masked speaker, 1/#options for a multiple-choice question); None if unknown.
    chance: float | None = None

    @property
    def accuracy(self) -> float | None:
        # Unparseable, refused and missing answers stay in the denominator: they are wrong.
        return self.correct / self.total if self.total else None

    @property
    def standing(self) -> str | None:
        """ "above", "near" or "below" chance (95% interval), for the accuracy's colour."""
        return accuracy_vs_chance(self.correct, self.total, self.chance)

    @property
    def rows(self) -> list[tuple[str, str, int]]:
        """(value, label, count) per parse status, in the model's order."""
        return [
            (value, label, self.by_status[value]) for value, label in Prediction.ParseStatus.choices
        ]


# CharToM-QA's multiple-choice method: the reference answer among its misleading choices.
_MULTIPLE_CHOICE_QA = "multichoice"


def _options_per_item(run: Run):
    """How many options each prediction's item offered, as an SQL expression."""
    counts = [
        NullIf(JSONArrayLength("dyntom_question__options"), 0),
        NullIf(JSONArrayLength("speaker_instance__candidates"), 0),
    ]
    if run.method == _MULTIPLE_CHOICE_QA:
        counts.append(JSONArrayLength("qa_item__misleading_choices") + 1)
    return Coalesce(*counts, output_field=IntegerField())


def run_prediction_summary(*, run: Run) -> PredictionSummary:
    """Count a run's predictions by parse status and correctness, with the chance level
    of its items (mean of 1/#options, as ``metrics.chance_baseline``), in one
    aggregate query."""
    counts = Prediction.objects.filter(run=run).aggregate(
        total=Count("pk"),
        correct=Count("pk", filter=Q(correct=True)),
        chance=Avg(Value(1.0) / Cast(_options_per_item(run), FloatField())),
        **{
            status: Count("pk", filter=Q(parse_status=status))
            for status in Prediction.ParseStatus.values
        },
    )
    return PredictionSummary(
        total=counts["total"],
        correct=counts["correct"],
        by_status={status: counts[status] for status in Prediction.ParseStatus.values},
        chance=counts["chance"],
    )


def prompt_template_list() -> QuerySet[PromptTemplate]:
    """Every template version, grouped by name (newest version first), with its run count."""
    return PromptTemplate.objects.annotate(run_count=Count("runs")).order_by("name", "-version")


def prompt_template_versions(*, template: PromptTemplate) -> QuerySet[PromptTemplate]:
    """All versions of ``template``'s name, newest first."""
    return (
        PromptTemplate.objects.filter(name=template.name)
        .only("pk", "name", "version", "is_active", "created_at")
        .order_by("-version")
    )


def backend_list() -> QuerySet[Backend]:
    return Backend.objects.order_by("name")


def run_predictions(*, run: Run) -> QuerySet[Prediction]:
    """A run's predictions with their item's natural keys as annotations.

    Annotations rather than select_related: a DynToM stage row carries large JSON
    (profiles, trajectory), which a page of predictions must not load per row.
    """
    return (
        Prediction.objects.filter(run=run)
        .annotate(
            work_key=Coalesce(
                F("dyntom_question__stage__work__key"),
                F("qa_item__work__key"),
                F("speaker_instance__scene__work__key"),
            ),
            reply_text=Coalesce(
                NullIf(F("raw_output"), Value("")),
                F("call__raw_output"),
                Value(""),
                output_field=TextField(),
            ),
            item_key=Coalesce(
                F("dyntom_question__key"),
                F("qa_item__natural_key"),
                Concat(
                    F("speaker_instance__scene__source_id"),
                    Value(" "),
                    F("speaker_instance__code"),
                ),
            ),
        )
        .order_by("pk")
    )


def run_mental_states(*, run: Run, character_id: int | None = None):
    """A run's stage-1 records (ToMPro, character memory), by work, character and scene."""
    records = MentalStateRecord.objects.filter(run=run).select_related("character__work", "scene")
    if character_id is not None:
        records = records.filter(character_id=character_id)
    return records.order_by(
        "character__work__key", "character__position", "character__name", "scene__position", "pk"
    )


def run_mental_state_characters(*, run: Run) -> list[dict[str, Any]]:
    """The characters a run has records for, with how many (for the page's filter)."""
    return list(
        MentalStateRecord.objects.filter(run=run)
        .values("character_id", "character__name", "character__work__title")
        .annotate(records=Count("pk"))
        .order_by("character__work__title", "character__name")
    )
