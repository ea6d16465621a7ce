"""Read queries on model runs, for the run pages, the admin and the API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import (
    Avg,
    Case,
    CharField,
    Count,
    Exists,
    F,
    FloatField,
    Func,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    TextField,
    Value,
    When,
)
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast, Chr, Coalesce, Concat, NullIf

from benchmarks.models import MCItem, Work
from metrics import accuracy_vs_chance

from ..models import (
    Backend,
    CachedResponse,
    MentalStateRecord,
    Prediction,
    PromptTemplate,
    Run,
    RunCall,
)
from .outcome import NOT_PARSED, unparseable_count
from .services import DIRECT_CALLS
from .signals import run_owner_wanted


def run_list() -> QuerySet[Run]:
    """Runs, newest first, with what a list row shows (backend name, template version,
    ``unparseable``, the count :func:`~modeling.runs.outcome.run_status_label` reads, and
    ``cached_calls``, see :func:`run_cached_calls`)."""
    return (
        Run.objects.select_related("backend", "template")
        .annotate(unparseable=unparseable_count(), cached_calls=cached_call_count())
        .order_by("-created_at", "-pk")
    )


def cached_call_count() -> Coalesce:
    """Per run, its calls answered from the cache: for ``annotate(cached_calls=…)``."""
    counted = (
        RunCall.objects.filter(run=OuterRef("pk"), from_cache=True)
        .order_by()
        .values("run")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def run_cached_calls(*, run: Run) -> int:
    """How many of ``run``'s replies came from the cache (``RunCall.from_cache``): the
    count the run page, the API and ``run_model`` show. Reads the ``cached_calls``
    annotation of :func:`run_list` when the run has it, else counts (one query)."""
    annotated = getattr(run, "cached_calls", None)
    if annotated is not None:
        return annotated
    return RunCall.objects.filter(run=run, from_cache=True).count()


# Where a run's predictions came from, as the run pages and the API name it. The
# harness importers (interop) mark their runs with selection["origin"].
ORIGIN_ENGINE = "engine"
ORIGIN_TRAINED = "trained baseline"
ORIGIN_FILE = "predictions file"
HARNESS_ORIGINS = {"inspect": "Inspect", "lm-eval": "lm-eval"}


def run_origin(run: Run) -> str:
    """Where the run came from: "engine" (our run engine), "trained baseline",
    "Inspect", "lm-eval" or "predictions file", from its kind, ``imported`` and
    ``selection["origin"]``."""
    if run.kind == Run.Kind.TRAINED:
        return ORIGIN_TRAINED
    if not run.imported:
        return ORIGIN_ENGINE
    origin = (run.selection or {}).get("origin")
    if not origin:
        return ORIGIN_FILE
    return HARNESS_ORIGINS.get(origin, str(origin))


def direct_run_owner(run: Run) -> tuple[str, str] | None:
    """The job that makes a direct-call run's calls, as (label, url); None for the
    engine's own runs, or when no app claims the run (its job was deleted)."""
    if not (run.params or {}).get(DIRECT_CALLS):
        return None
    for _receiver, owner in run_owner_wanted.send(sender=Run, run=run):
        if owner is not None:
            return owner
    return None


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
# Benchmarks imported through a field mapping (benchmarks.MCItem).
MC_BENCHMARK = "generic"


def _mc_language(run: Run) -> str | None:
    """The language a generic run's items were asked in (every language of an item has
    the same options); for an imported run, the first language of one of its items."""
    if language := run.selection.get("language"):
        return language
    texts = MCItem.objects.filter(predictions__run=run).values_list("texts", flat=True).first()
    return next(iter(texts), None) if texts else None


def _options_per_item(run: Run):
    """How many options each prediction's item offered, as an SQL expression."""
    counts = [
        NullIf(JSONArrayLength("dyntom_question__options"), 0),
        NullIf(JSONArrayLength("speaker_instance__candidates"), 0),
    ]
    if run.method == _MULTIPLE_CHOICE_QA:
        counts.append(JSONArrayLength("qa_item__misleading_choices") + 1)
    if run.benchmark == MC_BENCHMARK and (language := _mc_language(run)):
        options = KeyTransform("options", KeyTransform(language, "mc_item__texts"))
        counts.append(NullIf(JSONArrayLength(options), 0))
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


def _work_key() -> Coalesce:
    """A prediction's work key, whichever item it answers."""
    return Coalesce(
        F("dyntom_question__stage__work__key"),
        F("qa_item__work__key"),
        F("speaker_instance__scene__work__key"),
        F("mc_item__work__key"),
        output_field=CharField(),
    )


def _item_key() -> Coalesce:
    """A prediction's item key within its work, whichever item it answers."""
    return Coalesce(
        F("dyntom_question__key"),
        F("qa_item__natural_key"),
        # Before the Concat, which is never NULL (SQLite joins NULL as "").
        F("mc_item__item_id"),
        Concat(
            F("speaker_instance__scene__source_id"),
            Value(" "),
            F("speaker_instance__code"),
        ),
        output_field=CharField(),
    )


def run_predictions(*, run: Run, q: str = "") -> QuerySet[Prediction]:
    """A run's predictions with their item's natural keys as annotations; ``q`` keeps
    those whose prompt or reply holds it, as the explorer's search (:func:`_search`).

    Annotations rather than select_related: a DynToM stage row carries large JSON
    (profiles, trajectory), which a page of predictions must not load per row.
    """
    predictions = Prediction.objects.filter(run=run)
    if q:
        predictions = _search(predictions, q)
    return predictions.annotate(
        work_key=_work_key(),
        reply_text=Coalesce(
            NullIf(F("raw_output"), Value("")),
            F("call__raw_output"),
            Value(""),
            output_field=TextField(),
        ),
        item_key=_item_key(),
    ).order_by("pk")


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


# --- The prediction explorer and run comparison ------------------------------------------

# What the explorer calls a prediction: an answer from a call that failed is an error,
# one that could not be read (outcome.NOT_PARSED) unparseable, the rest correct or wrong.
PREDICTION_STATUSES = ("correct", "wrong", "unparseable", "error")

# The columns of a row, in the order the page, the CSV and the JSONL give them.
PREDICTION_COLUMNS = (
    "id",
    "item_key",
    "sample_index",
    "work",
    "kind",
    "parsed_answer",
    "gold",
    "status",
    "parse_status",
    "call_id",
    "unit_key",
)


def _prediction_status() -> Case:
    return Case(
        When(call__status=RunCall.Status.ERROR, then=Value("error")),
        When(parse_status__in=NOT_PARSED, then=Value("unparseable")),
        When(correct=True, then=Value("correct")),
        default=Value("wrong"),
        output_field=CharField(),
    )


# The explorer's text search: the longest query taken, and how many of a prompt's
# messages it reads (the pipelines send a system and a user message; a DynToM generation
# retry sends four).
SEARCH_MAX_LENGTH = 200
PROMPT_MESSAGES_SEARCHED = 6


def prediction_search_clean(q: str) -> str:
    """The search text as the explorer uses it (stripped); ValueError naming ``q`` when
    it is too long or holds a NUL byte (which PostgreSQL refuses in any text)."""
    q = (q or "").strip()
    if len(q) > SEARCH_MAX_LENGTH:
        raise ValueError(f"q: search for at most {SEARCH_MAX_LENGTH} characters")
    if "\x00" in q:
        raise ValueError("q: the search text holds a NUL byte")
    return q


def _search(predictions: QuerySet[Prediction], q: str) -> QuerySet[Prediction]:
    """Predictions whose reply or prompt contains ``q`` (case-insensitive substring).

    The reply is the prediction's own (imported runs) or its call's. The prompt is the
    messages the call sent, as its cache row stores them (keyed by the call's cache
    key, which the engine records with every reply): each message's content is read as
    text, so quotes, line breaks and non-ASCII letters match as typed. A run's rows only,
    as every explorer query; the page is paginated.
    """
    content = Q()
    for index in range(PROMPT_MESSAGES_SEARCHED):
        content |= Q(**{f"request__messages__{index}__content__icontains": q})
    sent = CachedResponse.objects.filter(content, key=OuterRef("call__cache_key"))
    return predictions.filter(
        Q(raw_output__icontains=q) | Q(call__raw_output__icontains=q) | Exists(sent)
    )


def _annotated_predictions(
    *, run: Run, work: str = "", kind: str = "", q: str = ""
) -> QuerySet[Prediction]:
    predictions = Prediction.objects.filter(run=run)
    if q:
        predictions = _search(predictions, q)
    predictions = predictions.annotate(
        item_id=Coalesce(
            F("dyntom_question_id"), F("qa_item_id"), F("speaker_instance_id"), F("mc_item_id")
        ),
        item_key=_item_key(),
        work=_work_key(),
        # DynToM's question type, CharToM-QA's dimension, a ToM-in-AMC scene's id, a
        # mapped item's first category.
        kind=Coalesce(
            F("dyntom_question__question_type"),
            F("qa_item__dimension"),
            *_mc_kind(run),
            Value(""),
            output_field=CharField(),
        ),
        gold=Coalesce(
            F("dyntom_question__gold_letter"),
            F("qa_item__answer"),
            F("speaker_instance__gold_character__name"),
            # A mapped item's (first) answer as its letter: index 0 -> "A".
            Chr(Cast(KeyTextTransform("0", "mc_item__answers"), IntegerField()) + 65),
            Value(""),
            output_field=TextField(),
        ),
        status=_prediction_status(),
        unit_key=Coalesce(F("call__unit_key"), Value(""), output_field=CharField()),
    )
    if work:
        predictions = predictions.filter(work=work)
    if kind:
        predictions = predictions.filter(kind=kind)
    return predictions


def _mc_kind(run: Run) -> list[KeyTextTransform]:
    """A generic run's "kind": its item set's first category field (e.g. the ability)."""
    if run.benchmark != MC_BENCHMARK:
        return []
    keys = run.selection.get("works") or []
    if not keys:
        return []
    extra = (
        Work.objects.filter(benchmark=MC_BENCHMARK, key=keys[0])
        .values_list("extra", flat=True)
        .first()
    )
    fields = (extra or {}).get("category_fields") or []
    return [KeyTextTransform(fields[0], "mc_item__categories")] if fields else []


# Items in the benchmark's own order (question position, scene position), not by key:
# "type_a_what_10" would otherwise come before "type_a_what_2".
_ITEM_ORDER = (
    "work",
    "dyntom_question__position",
    "qa_item__position",
    "speaker_instance__scene__position",
    "speaker_instance__code",
    "mc_item__position",
    "sample_index",
    "pk",
)


def prediction_rows(
    *, run: Run, status: str = "", work: str = "", kind: str = "", q: str = ""
) -> QuerySet[Prediction, dict[str, Any]]:
    """A run's predictions as rows of :data:`PREDICTION_COLUMNS` (plain dicts, in item
    order), filtered by status (one of :data:`PREDICTION_STATUSES`), work key, question
    type or dimension, and text in the prompt or reply (``q``, see :func:`_search`);
    "" leaves a filter off.

    The explorer page, its CSV and its JSONL all read these rows, so they cannot differ.
    One query whatever the number of rows: the item's fields are annotations, no
    per-row lookups.
    """
    if status and status not in PREDICTION_STATUSES:
        raise ValueError(f"status: choose one of {', '.join(PREDICTION_STATUSES)}")
    rows = _annotated_predictions(run=run, work=work, kind=kind, q=q)
    if status:
        rows = rows.filter(status=status)
    return rows.values(*PREDICTION_COLUMNS).order_by(*_ITEM_ORDER)


def prediction_status_counts(
    *, run: Run, work: str = "", kind: str = "", q: str = ""
) -> dict[str, int]:
    """How many of the run's predictions (within the work/kind/search filters) have each
    status, every status listed, zeros included (one query)."""
    counted = (
        _annotated_predictions(run=run, work=work, kind=kind, q=q)
        .order_by()
        .values("status")
        .annotate(n=Count("pk"))
    )
    counts = dict.fromkeys(PREDICTION_STATUSES, 0)
    counts.update({row["status"]: row["n"] for row in counted})
    return counts


def prediction_filter_choices(*, run: Run) -> dict[str, list[str]]:
    """The works and question types/dimensions a run's predictions cover, sorted."""
    predictions = _annotated_predictions(run=run).order_by()
    return {
        "works": sorted(set(predictions.values_list("work", flat=True)) - {None, ""}),
        "kinds": sorted(set(predictions.values_list("kind", flat=True)) - {None, ""}),
    }


@dataclass(frozen=True)
class PredictionDetail:
    """One prediction with what it took to make it: the messages sent, the raw reply."""

    row: dict[str, Any]
    prediction: Prediction
    reply: str
    messages: list[dict[str, Any]]


def prediction_detail(*, run: Run, prediction_id: int) -> PredictionDetail:
    """The prediction ``prediction_id`` of ``run`` (Prediction.DoesNotExist otherwise), with
    the exact prompt messages its call sent, read from the call's cache row (a prediction
    imported from elsewhere has no call, and no messages)."""
    row = prediction_rows(run=run).get(pk=prediction_id)
    prediction = Prediction.objects.select_related("call").get(pk=prediction_id)
    messages: list[dict[str, Any]] = []
    if prediction.call is not None and prediction.call.cache_key:
        request = (
            CachedResponse.objects.filter(key=prediction.call.cache_key)
            .values_list("request", flat=True)
            .first()
        )
        messages = list((request or {}).get("messages") or [])
    return PredictionDetail(
        row=row, prediction=prediction, reply=prediction.reply, messages=messages
    )


COMPARE_OUTCOMES = ("both_right", "only_a", "only_b", "both_wrong")


@dataclass(frozen=True)
class RunComparison:
    """Two runs of one benchmark matched item by item (and sample by sample)."""

    a: Run
    b: Run
    rows: list[dict[str, Any]]
    counts: dict[str, int]
    # Predictions of either run with no counterpart in the other (left out of the rows).
    unmatched: int = 0


def run_compare(*, a: Run, b: Run, only_differ: bool = False) -> RunComparison:
    """The items both runs answered, with each run's answer and status, the gold, and
    whether they differ (answer or status); counts of both right, only A, only B and
    both wrong are over every shared item, whatever ``only_differ`` leaves out.

    Raises ValueError naming the field when the runs are of different benchmarks.
    """
    if a.benchmark != b.benchmark:
        raise ValueError(
            f"b: run {b.pk} is a {b.benchmark} run and run {a.pk} a {a.benchmark} run; "
            "compare runs of the same benchmark"
        )
    columns = ("id", "item_id", "item_key", "sample_index", "work", "kind", "gold")
    fields = (*columns, "parsed_answer", "status")
    by_item = {
        (r["item_id"], r["sample_index"]): r for r in _annotated_predictions(run=b).values(*fields)
    }
    counts = dict.fromkeys(COMPARE_OUTCOMES, 0)
    rows = []
    unmatched = 0
    for ra in _annotated_predictions(run=a).values(*fields).order_by(*_ITEM_ORDER):
        rb = by_item.pop((ra["item_id"], ra["sample_index"]), None)
        if rb is None:
            unmatched += 1
            continue
        right_a, right_b = ra["status"] == "correct", rb["status"] == "correct"
        outcome = (
            ("both_right" if right_b else "only_a")
            if right_a
            else ("only_b" if right_b else "both_wrong")
        )
        counts[outcome] += 1
        differ = (ra["parsed_answer"], ra["status"]) != (rb["parsed_answer"], rb["status"])
        if only_differ and not differ:
            continue
        rows.append(
            {
                **{c: ra[c] for c in columns if c not in ("id", "item_id")},
                "a_id": ra["id"],
                "b_id": rb["id"],
                "answer_a": ra["parsed_answer"],
                "status_a": ra["status"],
                "answer_b": rb["parsed_answer"],
                "status_b": rb["status"],
                "outcome": outcome,
                "differ": differ,
            }
        )
    return RunComparison(a=a, b=b, rows=rows, counts=counts, unmatched=unmatched + len(by_item))


COMPARE_COLUMNS = (
    "item_key",
    "sample_index",
    "work",
    "kind",
    "gold",
    "answer_a",
    "status_a",
    "answer_b",
    "status_b",
    "outcome",
    "differ",
)


def runs_to_compare_with(*, run: Run) -> QuerySet[Run]:
    """The other runs of ``run``'s benchmark, newest first (the "Compare with" choices)."""
    return (
        Run.objects.filter(benchmark=run.benchmark)
        .exclude(pk=run.pk)
        .only("pk", "name", "created_at")
        .order_by("-created_at", "-pk")
    )
