"""Read queries for reports: runs, predictions with their item attributes, annotations.

Every function returns plain dicts built with ``values()`` over the joins it needs (or,
where a report reads 100,000 rows, tuples of the few columns it needs), so a report of
any size costs a fixed handful of queries (no per-row lookups) and the table builders
stay free of the ORM. Prediction streams use ``iterator()`` so a DynToM run of 78k
answers is never held as model instances.

``long_format_rows`` is the tidy export: one flat dict per model prediction, human
guess or imported annotation with every item attribute a researcher may want to group by.

Human study responses (``studies``) are read the same way: ``report_studies`` picks the
studies, ``human_guess_rows`` their answers. Withdrawn participants are left out at the
query, so no report, table or export ever counts them; excluded participants
(``Participant.excluded_at``) too unless the caller passes ``include_excluded=True``.
Only test items count: practice scenes and attention checks never do.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import islice
from typing import Any

from django.db.models import Count, F, Max, OuterRef, Q, QuerySet, Subquery, Sum, TextField
from django.db.models.functions import Cast, Coalesce

from benchmarks.models import (
    Benchmark,
    DynToMQuestion,
    MCItem,
    QAItem,
    Scene,
    SpeakerAnnotation,
    SpeakerInstance,
    Work,
)
from metrics.tvshowguess import dependence_type, evidence_types, reasoning_type
from modeling.baselines.data import history_counts
from modeling.models import Prediction, Run
from reports.report_types import SAMPLES_FIRST, SAMPLES_MEAN
from studies.choice import allocation
from studies.counting import counted_participants
from studies.models import (
    Assignment,
    ChoiceAnswer,
    Guess,
    Participant,
    StratumTally,
    Study,
    StudyItem,
    StudyWork,
)

SPEAKER_BENCHMARKS = (Benchmark.TOM_IN_AMC.value, Benchmark.TVSHOWGUESS.value)
CHUNK = 2000

# Per scene study, what one request has read of its answers and participants (see
# ``shared_reads``); None outside such a block.
_SHARED: ContextVar[dict[str, dict[int, Any]] | None] = ContextVar("reports_shared", default=None)


@contextmanager
def shared_reads() -> Iterator[None]:
    """Within the block, scene studies' answer counts and participant figures are read
    once: the selection's study choices, the cache fingerprint, the report's studies
    and the packs' fingerprints each scanned every guess (joined to its scene response
    and participant) before; now one grouped query serves them all (a report request
    at 100,000 answers read them four times).

    For one request only: the figures are those of the moment they were read.
    """
    token = _SHARED.set({"answers": {}, "people": {}})
    try:
        yield
    finally:
        _SHARED.reset(token)


def _benchmark(benchmark: str) -> str:
    if benchmark not in Benchmark.values:
        raise ValueError(f"unknown benchmark {benchmark!r}; expected one of {Benchmark.values}")
    return benchmark


def report_runs(
    benchmark: str,
    *,
    run_ids: Sequence[int] | None = None,
    counts: bool | Mapping[int, dict[str, int]] = False,
    work_id: int | None = None,
) -> list[dict[str, Any]]:
    """The runs a report covers, oldest first: every run of the benchmark by default.

    ``work_id`` (a generic benchmark's work) keeps the runs with a prediction on one of
    its items (:func:`generic_work_runs`).

    With ``counts`` each run also carries ``predictions``, ``unparseable``,
    ``last_prediction`` and ``last_sample`` (:func:`run_prediction_counts`, read here
    for ``True``, or the caller's; 0 for a run without any).
    Raises ``ValueError`` naming the ids that are not runs of this benchmark, so a typo
    in ``--runs`` or ``?runs=`` is an error rather than a silently smaller report.
    """
    runs = Run.objects.filter(benchmark=_benchmark(benchmark))
    if work_id is not None:
        runs = runs.filter(pk__in=generic_work_runs(work_id))
    if run_ids is not None:
        runs = runs.filter(pk__in=list(run_ids))
    rows = list(
        runs.order_by("pk").values(
            "id",
            "name",
            "model",
            "method",
            "params",
            "imported",
            "status",
            template_name=F("template__name"),
            template_version=F("template__version"),
        )
    )
    if run_ids is not None:
        missing = sorted(set(run_ids) - {r["id"] for r in rows})
        if missing:
            where = f" on work {work_id}" if work_id is not None else ""
            raise ValueError(f"no {benchmark} run with id {', '.join(map(str, missing))}{where}")
    if counts:
        per_run = (
            run_prediction_counts(run_ids=[r["id"] for r in rows]) if counts is True else counts
        )
        empty = {"predictions": 0, "unparseable": 0, "last_prediction": 0, "last_sample": 0}
        for row in rows:
            row.update(per_run.get(row["id"], empty))
    return rows


def _predictions(run_ids: Iterable[int], sample_index: int | None = None):
    """The runs' predictions by run then id (of one ``sample_index`` when given)."""
    predictions = Prediction.objects.filter(run_id__in=list(run_ids))
    if sample_index is not None:
        predictions = predictions.filter(sample_index=sample_index)
    return predictions.order_by("run_id", "pk")


PREDICTION_FIELDS = ("id", "run_id", "sample_index", "parse_status", "parsed_answer", "correct")


def _prediction_values(
    predictions: QuerySet, *fields: str, **related: F
) -> Iterator[dict[str, Any]]:
    """Stream ``predictions`` as dicts: ``PREDICTION_FIELDS``, the prompt's version and
    model, then the benchmark's own ``fields`` and ``related`` values."""
    values = predictions.values(*PREDICTION_FIELDS, *fields, "template_version", "model", **related)
    return values.iterator(chunk_size=CHUNK)


def _speaker_item_values(prefix: str) -> tuple[tuple[str, ...], dict[str, F]]:
    """A masked speaker's attributes, under the same names in every row the speaker
    tables read: the instance's own fields (``prefix`` "") or read through ``prefix``,
    the path to a ``SpeakerInstance`` ("speaker_instance__", "instance__")."""
    own = ("code", "candidates", "scene_id")
    related = {
        "gold": "gold_character__name",
        "scene_key": "scene__source_id",
        "work_id": "scene__work_id",
        "work_key": "scene__work__key",
        "genres": "scene__work__genres",
    }
    if not prefix:
        return own, {name: F(path) for name, path in related.items()}
    paths = {name: name for name in own} | related
    return (), {name: F(prefix + path) for name, path in paths.items()}


def dyntom_prediction_rows(
    run_ids: Iterable[int],
    *,
    question_ids: Iterable[int] | None = None,
    sample_index: int | None = None,
) -> Iterator[dict[str, Any]]:
    """DynToM predictions with question type, mental state, span and stage size
    (only on ``question_ids`` and of ``sample_index`` when given)."""
    predictions = _predictions(run_ids, sample_index).filter(dyntom_question__isnull=False)
    if question_ids is not None:
        predictions = predictions.filter(dyntom_question_id__in=list(question_ids))
    return _prediction_values(
        predictions,
        question_id=F("dyntom_question_id"),
        question_key=F("dyntom_question__key"),
        question_type=F("dyntom_question__question_type"),
        mental_state=F("dyntom_question__mental_state"),
        scenario_from=F("dyntom_question__scenario_from"),
        scenario_to=F("dyntom_question__scenario_to"),
        gold=F("dyntom_question__gold_letter"),
        stage_id=F("dyntom_question__stage_id"),
        scenario_count=F("dyntom_question__stage__scenario_count"),
        work_key=F("dyntom_question__stage__work__key"),
    )


def chartom_prediction_rows(
    run_ids: Iterable[int], *, sample_index: int | None = None
) -> Iterator[dict[str, Any]]:
    """CharToM-QA predictions with dimension, directness and the judge's details (of
    ``sample_index`` when given)."""
    return _prediction_values(
        _predictions(run_ids, sample_index).filter(qa_item__isnull=False),
        "details",
        item_id=F("qa_item_id"),
        item_key=F("qa_item__natural_key"),
        dimension=F("qa_item__dimension"),
        directness=F("qa_item__directness"),
        work_key=F("qa_item__work__key"),
        character=F("qa_item__character__name"),
    )


def chartom_pack_rows(run_id: int) -> Iterator[dict[str, Any]]:
    """Every prediction of one CharToM-QA run in id order, as its pack reads them
    (``reports.chartom_answers``): id, question, sample, parse status, correctness and
    ``details``; predictions without a question included, so the rows' count and last
    id fingerprint the run as ``run_prediction_counts`` does.

    Read whole through a client-side cursor (see :func:`_client_side_rows`), with
    ``details`` as text decoded a chunk of rows at a time.
    """
    rows = _client_side_rows(
        Prediction.objects.filter(run_id=run_id)
        .order_by("pk")
        .values(
            "id",
            "qa_item_id",
            "sample_index",
            "parse_status",
            "correct",
            details_json=Cast("details", TextField()),
        )
    )
    return _json_decoded(rows, "details_json", "details")


def chartom_item_labels() -> dict[int, tuple[str, str | None]]:
    """``(dimension, directness)`` of every CharToM-QA question by id, read at each
    report build: an edited question is grouped by its new labels at once."""
    return {
        pk: (dimension, directness)
        for pk, dimension, directness in QAItem.objects.filter(
            work__benchmark=Benchmark.CHARTOM_QA
        ).values_list("pk", "dimension", "directness")
    }


def _json_decoded(
    rows: Iterator[dict[str, Any]], source: str, target: str, chunk_size: int = 10 * CHUNK
) -> Iterator[dict[str, Any]]:
    """``rows`` with the JSON text under ``source`` decoded into ``target``, as a
    ``JSONField`` decodes it (SQL NULL is ``None``; text that is not JSON stays text).

    One ``json.loads`` per chunk of rows, over their texts joined into one array:
    at 100,000 small ``details`` objects, one call per row cost about twice as much
    (the decoder's per-call work, and Django's converter around it).
    """
    while chunk := list(islice(rows, chunk_size)):
        texts = [row.pop(source) for row in chunk]
        try:
            values = json.loads("[" + ",".join("null" if t is None else t for t in texts) + "]")
        except ValueError:
            values = []
        # The column holds valid JSON (jsonb; SQLite's JSON_VALID check), so this only
        # guards against text that is not: each is then read on its own, as the field does.
        if len(values) != len(texts):
            values = [_json_value(text) for text in texts]
        for row, value in zip(chunk, values, strict=True):
            row[target] = value
        yield from chunk


def _json_value(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _scene_speaker_count(scene_ref: str) -> Subquery:
    """How many masked speakers the scene has (the papers' "#speakers")."""
    return Subquery(
        SpeakerInstance.objects.filter(scene_id=OuterRef(scene_ref))
        .order_by()
        .values("scene_id")
        .annotate(n=Count("pk"))
        .values("n")[:1]
    )


def speaker_prediction_rows(
    run_ids: Iterable[int], *, sample_index: int | None = None
) -> Iterator[dict[str, Any]]:
    """ToM-in-AMC / TVShowGuess predictions with scene, work, genres and scene size (of
    ``sample_index`` when given)."""
    _, item = _speaker_item_values("speaker_instance__")
    return _prediction_values(
        _predictions(run_ids, sample_index)
        .filter(speaker_instance__isnull=False)
        .annotate(speakers=_scene_speaker_count("speaker_instance__scene_id")),
        "speakers",
        instance_id=F("speaker_instance_id"),
        **item,
    )


def speaker_prediction_outcomes(
    run_ids: Iterable[int],
) -> Iterator[tuple[int, int, str, int, bool | None]]:
    """``(run_id, sample_index, parse_status, instance_id, correct)`` per speaker
    prediction of the runs, in ``speaker_prediction_rows``' order: all the report
    tables read (they take the scene, genres and size from ``speaker_item_rows``)."""
    return (
        _predictions(run_ids)
        .filter(speaker_instance__isnull=False)
        .values_list("run_id", "sample_index", "parse_status", "speaker_instance_id", "correct")
        .iterator(chunk_size=CHUNK)
    )


def speaker_item_rows(benchmark: str) -> list[dict[str, Any]]:
    """Every masked speaker of the benchmark (the baselines are computed over all of them)."""
    own, item = _speaker_item_values("")
    return list(
        SpeakerInstance.objects.filter(scene__work__benchmark=_benchmark(benchmark))
        .annotate(speakers=_scene_speaker_count("scene_id"))
        .order_by("scene__work_id", "scene__position", "code")
        .values("id", "speakers", *own, **item)
    )


def character_frequencies(benchmark: str) -> tuple[dict[tuple[int, str], int], set[int]]:
    """How often each character is a masked speaker, for the Majority row.

    Counted on a work's history scenes exactly as ``train_baseline majority`` counts
    them (``modeling.baselines.data.history_counts``: the release's ``char_map``, or a
    screenplay import's history masked the way the baselines mask it), never on the
    evaluated scenes, whose answers that would leak. Only a work with no history part
    at all (TVShowGuess) falls back to its gold answers; those work ids come back as
    the second value so the table can say its baseline is optimistic there.
    """
    counts, with_history = history_counts(benchmark=_benchmark(benchmark))
    golds = (
        SpeakerInstance.objects.filter(scene__work__benchmark=benchmark)
        .exclude(scene__work_id__in=with_history)
        .values("scene__work_id", "gold_character__name")
        .annotate(n=Count("pk"))
        .order_by()
    )
    fallback: set[int] = set()
    for row in golds:
        fallback.add(row["scene__work_id"])
        key = (row["scene__work_id"], row["gold_character__name"])
        counts[key] = counts.get(key, 0) + row["n"]
    return counts, fallback


def speaker_annotation_rows(benchmark: str) -> list[dict[str, Any]]:
    """Imported human annotations (TVShowGuess ``friends.tsv``) of the benchmark's works."""
    return list(
        SpeakerAnnotation.objects.filter(work__benchmark=_benchmark(benchmark))
        .order_by("work_id", "source", "row_number")
        .values(
            "id",
            "source",
            "row_number",
            "scene_source_id",
            "code",
            "instance_id",
            "need_history",
            "facts_from_memory",
            "guessed_name",
            "evidence_groups",
            work_key=F("work__key"),
        )
    )


# -- human studies -----------------------------------------------------------------


def report_studies(
    benchmark: str,
    *,
    study_ids: Sequence[int] | None = None,
    include_excluded: bool = False,
    work_id: int | None = None,
) -> list[dict[str, Any]]:
    """The human studies a report covers (of one generic work with ``work_id``), oldest
    first, each with its participant counts (``participant_count`` invited or joined,
    ``withdrawn_count`` of them, left out of every number, and ``excluded_count``, not
    withdrawn but excluded) and ``counted_answers`` (the answers a report reads from it
    with ``include_excluded``).

    By default (``study_ids`` None) the studies ``study_choices`` ticks: neither drafts
    nor closed studies without a counted answer. Raises ``ValueError`` naming the ids
    that are not studies of this benchmark, as ``report_runs`` does for runs.
    """
    rows = study_choices(benchmark, include_excluded=include_excluded, work_id=work_id)
    if study_ids is None:
        return [s for s in rows if s["default"]]
    wanted = set(study_ids)
    missing = sorted(wanted - {s["id"] for s in rows})
    if missing:
        where = f" on work {work_id}" if work_id is not None else ""
        raise ValueError(f"no {benchmark} study with id {', '.join(map(str, missing))}{where}")
    return [s for s in rows if s["id"] in wanted]


def study_choices(
    benchmark: str, *, include_excluded: bool = False, work_id: int | None = None
) -> list[dict[str, Any]]:
    """Every study of the benchmark (of one generic work with ``work_id``:
    :func:`generic_work_studies`), oldest first, as ``report_studies`` rows plus
    ``default``: whether a report covers it when no studies are picked.

    A draft has no answers and may never run, and a closed study without a counted
    answer never will have one: neither is a system to compare by default (an empty
    study beside a run would only add an empty row).
    """
    studies = Study.objects.filter(benchmark=_benchmark(benchmark))
    if work_id is not None:
        studies = studies.filter(pk__in=generic_work_studies(work_id))
    rows = list(
        studies.order_by("pk")
        .annotate(
            participant_count=Count("participants", distinct=True),
            withdrawn_count=Count(
                "participants",
                filter=Q(participants__withdrawn_at__isnull=False),
                distinct=True,
            ),
            excluded_count=Count(
                "participants",
                filter=Q(
                    participants__withdrawn_at__isnull=True,
                    participants__excluded_at__isnull=False,
                ),
                distinct=True,
            ),
        )
        .values(
            "id",
            "name",
            "status",
            "imported",
            "overlap",
            "perturb_names",
            "tags",
            "participant_count",
            "withdrawn_count",
            "excluded_count",
        )
    )
    answers = counted_answer_counts(
        benchmark, [s["id"] for s in rows], include_excluded=include_excluded, work_id=work_id
    )
    for row in rows:
        row["counted_answers"] = answers.get(row["id"], 0)
        row["default"] = row["status"] != Study.Status.DRAFT and not (
            row["status"] == Study.Status.CLOSED and not row["counted_answers"]
        )
    return rows


def excluded_count(studies: Iterable[Mapping[str, Any]]) -> int:
    """Excluded (not withdrawn) participants of ``study_choices`` rows: the number the
    report's switch, its facts and its notes give."""
    return sum(s["excluded_count"] for s in studies)


def counted_answer_counts(
    benchmark: str,
    study_ids: Iterable[int],
    *,
    include_excluded: bool = False,
    work_id: int | None = None,
) -> dict[int, int]:
    """Per study: the answers a report counts (masked-speaker guesses, or final
    multiple-choice picks; a generic benchmark's first picks on ``work_id``'s items),
    one aggregate query; studies without any are absent."""
    ids = list(study_ids)
    if not ids:
        return {}
    if benchmark in SPEAKER_BENCHMARKS:
        column = 2 if include_excluded else 0
        stats = _scene_answer_stats(ids)
        return {pk: stats[pk][column] for pk in ids if stats[pk][column]}
    if benchmark == Benchmark.GENERIC:
        answers = _generic_choice_answers(ids, work_id, include_excluded=include_excluded)
    else:
        answers = _choice_answers(ids, include_excluded=include_excluded)
    study = "assignment__participant__study_id"
    rows = answers.order_by().values(study).annotate(n=Count("pk")).values_list(study, "n")
    return dict(rows)


def _counted_participants(prefix: str, include_excluded: bool) -> Q:
    """Responses (reached through ``prefix``) whose participant and item count: not
    withdrawn, not excluded unless ``include_excluded``, and a test item (practice
    scenes and attention checks are not answers to the benchmark). The participant
    rule is the studies' own (``studies.counting``), so a study page's progress counts
    what its report counts."""
    return counted_participants(prefix, include_excluded=include_excluded) & Q(
        **{f"{prefix}study_item__role": StudyItem.Role.TEST}
    )


def _counted_responses(
    study_ids: Iterable[int], prefix: str = "", *, include_excluded: bool = False
) -> Q:
    """Scene responses (assignments, reached through ``prefix``) whose answers count:
    the studies' counted participants' (``_counted_participants``) finished scenes.

    A scene counts once submitted (its answers are final and scored); an imported
    study's responses count as they are, since they were never submitted here.
    """
    return (
        Q(**{f"{prefix}participant__study_id__in": list(study_ids)})
        & _counted_participants(prefix, include_excluded)
        & (
            Q(**{f"{prefix}status": Assignment.Status.SUBMITTED})
            | Q(**{f"{prefix}participant__study__imported": True})
        )
    )


def _human_guesses(study_ids: Iterable[int], *, include_excluded: bool = False):
    """Guesses of the studies' counted scene responses (``_counted_responses``)."""
    return Guess.objects.filter(
        _counted_responses(study_ids, "assignment__", include_excluded=include_excluded)
    )


# The order of human answers everywhere (tables, exports): by study, rater, the rater's
# works and scenes in the order they were given, then the speakers of a scene. The
# bootstraps draw scenes in this order, so the report depends on it; the guess id only
# settles ties, which a real study does not have.
HUMAN_ORDER = (
    "assignment__participant__study_id",
    "assignment__participant_id",
    "assignment__session__started_at",
    "assignment__position",
    "instance__code",
    "id",
)


def human_guess_rows(
    study_ids: Iterable[int], *, include_excluded: bool = False
) -> Iterator[dict[str, Any]]:
    """One row per human answer: the rater's scene response and the item's attributes.

    ``participant_id`` identifies the rater (never the invite token); ``seen``,
    ``history_needed``, ``total_ms``, ``active_ms`` and ``version`` belong to the scene
    response (``assignment_id``), ``answer``, ``correct`` (``None`` in imported
    studies), ``tags`` and ``evidence`` to the answer.
    """
    return (
        _human_guesses(study_ids, include_excluded=include_excluded)
        .annotate(speakers=_scene_speaker_count("instance__scene_id"))
        .order_by(*HUMAN_ORDER)
        .values(
            "id",
            "answer",
            "correct",
            "tags",
            "evidence",
            "speakers",
            "instance_id",
            "assignment_id",
            study_id=F("assignment__participant__study_id"),
            participant_id=F("assignment__participant_id"),
            seen=F("assignment__seen"),
            history_needed=F("assignment__history_needed"),
            total_ms=F("assignment__total_ms"),
            active_ms=F("assignment__active_ms"),
            version=F("assignment__version"),
            submitted_at=F("assignment__submitted_at"),
            **_speaker_item_values("instance__")[1],
        )
        .iterator(chunk_size=CHUNK)
    )


def _client_side_rows(queryset: QuerySet, chunk_size: int = 10 * CHUNK) -> Iterator[Any]:
    """A ``values`` or ``values_list`` queryset's rows, fetched ``chunk_size`` at a time
    through a client-side cursor: ``queryset.iterator()`` without its server-side cursor.

    PostgreSQL plans a cursor for its first rows (``cursor_tuple_fraction`` 0.1), so
    the server-side cursor of ``iterator()`` got nested loops over indexes where the
    whole result wants hash joins: 0.77 s against 0.40 s for 100,000 human answers,
    0.27 s against 0.06 s for their 36,000 scene responses. The client-side result
    sits in the driver's compact buffer; Python rows are made a chunk at a time.
    """
    # The queryset's own row class (dicts for values(), tuples for values_list()).
    return iter(queryset._iterable_class(queryset, chunked_fetch=False, chunk_size=chunk_size))


def human_answer_columns(
    study_ids: Iterable[int], *, include_excluded: bool = False
) -> Iterator[tuple[int, int, int, str, bool | None, str | None]]:
    """``(study_id, assignment_id, instance_id, answer, correct, tags)`` per counted
    human answer, in ``human_guess_rows``' order: what the report tables read.

    ``tags`` comes as its JSON text: a study's answers carry a handful of distinct tag
    lists, so the caller decodes each distinct text once instead of 100,000 times.
    Item attributes come from ``speaker_item_rows``, the scene response's from
    ``human_response_rows``.
    """
    rows = (
        _human_guesses(study_ids, include_excluded=include_excluded)
        .order_by(*HUMAN_ORDER)
        .values_list(
            "assignment__participant__study_id",
            "assignment_id",
            "instance_id",
            "answer",
            "correct",
            Cast("tags", TextField()),
        )
    )
    return _client_side_rows(rows)


def human_response_rows(
    study_ids: Iterable[int], *, include_excluded: bool = False
) -> Iterator[tuple[int, int, bool, bool | None, int | None, int, Any]]:
    """``(assignment_id, participant_id, seen, history_needed, total_ms, active_ms,
    instructions_version)`` per counted scene response of the studies (unordered; one
    per ``human_answer_columns`` assignment, plus any that has no answer)."""
    return _client_side_rows(
        Assignment.objects.filter(_counted_responses(study_ids, include_excluded=include_excluded))
        .order_by()
        .values_list(
            "id",
            "participant_id",
            "seen",
            "history_needed",
            "total_ms",
            "active_ms",
            "version__instructions_version",
        )
    )


def human_response_size(
    benchmark: str, *, study_ids: Sequence[int] | None = None, work_id: int | None = None
) -> dict[str, Any]:
    """How many human answers a report would read, and when they last changed.

    For cache fingerprints: a new answer, a submitted scene, a withdrawal, an exclusion
    or its reversal changes it (every answer is counted, excluded or not). CharToM-QA's
    and DynToM's are their studies' picks (count and highest id). A generic
    benchmark's are its work's counted first picks (count and highest id: a pick is
    final once its assignment is submitted, which adds it to the count).
    """
    studies = Study.objects.filter(benchmark=_benchmark(benchmark))
    if work_id is not None:
        studies = studies.filter(pk__in=generic_work_studies(work_id))
    if study_ids is not None:
        studies = studies.filter(pk__in=list(study_ids))
    ids = list(studies.values_list("pk", flat=True))
    if benchmark == Benchmark.GENERIC:
        size = _generic_choice_answers(ids, work_id, include_excluded=True).aggregate(
            human_answers=Count("pk"), last_human_answer=Max("pk")
        )
    elif benchmark in (Benchmark.CHARTOM_QA, Benchmark.DYNTOM):
        # Multiple-choice picks, not scene guesses: an assignment becomes final with a
        # new pick (a revision, a stage's last question), which moves count and id.
        size = ChoiceAnswer.objects.filter(assignment__participant__study_id__in=ids).aggregate(
            human_answers=Count("pk"), last_human_answer=Max("pk")
        )
    else:
        # Every answer counted, excluded or not: the studies' figures summed.
        sizes = scene_study_sizes(ids)
        size = _summed(sizes.values(), ("human_answers", "withdrawn", "excluded", "excluded_ids"))
        for name, latest in (
            ("last_human_answer", "last_human_answer"),
            ("last_excluded", "last_excluded"),
        ):
            times = [s[latest] for s in sizes.values() if s[latest] is not None]
            size[name] = max(times, default=None)
        size["studies"] = len(ids)
        return size
    excluded = Q(excluded_at__isnull=False)
    # Count, id sum and latest time of the excluded: excluding one participant and
    # keeping another in changes the sum, even where the count stays.
    size.update(
        Participant.objects.filter(study_id__in=ids).aggregate(
            withdrawn=Count("pk", filter=Q(withdrawn_at__isnull=False)),
            excluded=Count("pk", filter=excluded),
            excluded_ids=Sum("pk", filter=excluded),
            last_excluded=Max("excluded_at"),
        )
    )
    size["studies"] = len(ids)
    return size


def scene_study_sizes(study_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """Per scene study: ``human_response_size``'s figures of that study alone (its
    counted answers' count and latest change, withdrawals, exclusions, their id sum and
    latest time), in two grouped queries; a study with no participant has its zeros.

    What a packed study's fingerprint reads (``reports.study_packs``).
    """
    ids = list(study_ids)
    answers = _scene_answer_stats(ids)
    people = _scene_study_people(ids)
    return {
        pk: {"human_answers": answers[pk][2], "last_human_answer": answers[pk][1], **people[pk]}
        for pk in ids
    }


def _summed(rows: Iterable[Mapping[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """Sums of ``names`` over ``rows``; a sum of nothing but None is None (as SQL's)."""
    total: dict[str, Any] = dict.fromkeys(names)
    for row in rows:
        for name in names:
            if row[name] is not None:
                total[name] = (total[name] or 0) + row[name]
    total.update({name: total[name] or 0 for name in names if name != "excluded_ids"})
    return total


def _scene_answer_stats(study_ids: list[int]) -> dict[int, tuple[int, Any, int]]:
    """Per scene study: ``(counted answers, latest change of any, every answer)``: the
    answers a report counts (excluded participants left out), and all of them counted
    or not. One grouped query, shared within ``shared_reads``; a study without answers
    has ``(0, None, 0)``."""
    shared = _SHARED.get()
    memo = shared["answers"] if shared is not None else {}
    missing = [pk for pk in study_ids if pk not in memo]
    if missing:
        # From the counted scene responses, their guesses joined: the workspace scope
        # then filters the 35,000 responses of a study at scale, not its 100,000
        # guesses (PostgreSQL planned the guesses' scope subquery as a loop over every
        # response: 170 ms against 55 for the same figures).
        study = "participant__study_id"
        found = {
            row[0]: row[1:]
            for row in Assignment.objects.filter(_counted_responses(missing, include_excluded=True))
            .order_by()
            .values(study)
            .annotate(
                counted=Count("guesses", filter=Q(participant__excluded_at__isnull=True)),
                last=Max("guesses__updated_at"),
                n=Count("guesses"),
            )
            .values_list(study, "counted", "last", "n")
        }
        memo.update((pk, found.get(pk, (0, None, 0))) for pk in missing)
    return {pk: memo[pk] for pk in study_ids}


def _scene_study_people(study_ids: list[int]) -> dict[int, dict[str, Any]]:
    """Per study: withdrawn and excluded participants, the excluded ids' sum and latest
    exclusion (one grouped query, shared within ``shared_reads``)."""
    shared = _SHARED.get()
    memo = shared["people"] if shared is not None else {}
    missing = [pk for pk in study_ids if pk not in memo]
    if missing:
        excluded = Q(excluded_at__isnull=False)
        found = {
            row.pop("study_id"): row
            for row in Participant.objects.filter(study_id__in=missing)
            .order_by()
            .values("study_id")
            .annotate(
                withdrawn=Count("pk", filter=Q(withdrawn_at__isnull=False)),
                excluded=Count("pk", filter=excluded),
                excluded_ids=Sum("pk", filter=excluded),
                last_excluded=Max("excluded_at"),
            )
        }
        nobody = {"withdrawn": 0, "excluded": 0, "excluded_ids": None, "last_excluded": None}
        memo.update((pk, found.get(pk, nobody)) for pk in missing)
    return {pk: memo[pk] for pk in study_ids}


def item_counts(benchmark: str, *, work_id: int | None = None) -> dict[str, int]:
    """How many items the benchmark holds, by kind (one aggregate query per kind); a
    generic benchmark's report counts its one work's items (``work_id``)."""
    _benchmark(benchmark)
    if benchmark == Benchmark.GENERIC:
        items = MCItem.objects.filter(work__benchmark=benchmark)
        if work_id is not None:
            return {"items": items.filter(work_id=work_id).count()}
        return {"works": Work.objects.filter(benchmark=benchmark).count(), "items": items.count()}
    works = Work.objects.filter(benchmark=benchmark).count()
    if benchmark == Benchmark.DYNTOM:
        items = DynToMQuestion.objects.filter(stage__work__benchmark=benchmark).count()
        return {"works": works, "questions": items}
    if benchmark == Benchmark.CHARTOM_QA:
        return {
            "works": works,
            "questions": QAItem.objects.filter(work__benchmark=benchmark).count(),
        }
    counts = SpeakerInstance.objects.filter(scene__work__benchmark=benchmark).aggregate(
        instances=Count("pk"), scenes=Count("scene_id", distinct=True)
    )
    annotations = SpeakerAnnotation.objects.filter(work__benchmark=benchmark).count()
    result = {"works": works, "scenes": counts["scenes"], "instances": counts["instances"]}
    if annotations:
        result["annotations"] = annotations
    return result


def run_prediction_counts(
    *, benchmark: str | None = None, run_ids: Iterable[int] | None = None
) -> dict[int, dict[str, int]]:
    """Per run of ``benchmark`` (or of ``run_ids``): its predictions, how many could not
    be parsed, the highest prediction id and the highest sample index (above 0: the run
    has several samples, which a report may average or not), in one pass over the
    predictions.

    Runs without predictions are absent. Count and highest id change with every insert
    or delete, so together they fingerprint a run's predictions.
    """
    predictions = Prediction.objects.all()
    if benchmark is not None:
        # By id, not by joining the run: PostgreSQL then reads only these runs'
        # predictions (a join on the benchmark scanned the whole table).
        ids = Run.objects.filter(benchmark=_benchmark(benchmark)).values_list("pk", flat=True)
        predictions = predictions.filter(run_id__in=list(ids))
    if run_ids is not None:
        predictions = predictions.filter(run_id__in=list(run_ids))
    rows = (
        predictions.order_by()
        .values("run_id")
        .annotate(
            predictions=Count("pk"),
            unparseable=Count("pk", filter=~Q(parse_status=Prediction.ParseStatus.OK)),
            last_prediction=Max("pk"),
            last_sample=Max("sample_index"),
        )
    )
    return {r.pop("run_id"): r for r in rows}


def scene_counts(benchmark: str) -> int:
    return Scene.objects.filter(work__benchmark=_benchmark(benchmark)).count()


# -- generic multiple-choice benchmarks --------------------------------------------
# Each researcher-named benchmark is one Work (benchmark "generic", kind item set) with
# its MCItems; its report covers that one work: the runs with a prediction on its
# items and the studies with a study item (or a study work) on it.

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def option_letter(index: int | None) -> str:
    """The key people and models see for a 0-based option index (A, B, …)."""
    if index is None or index < 0:
        return ""
    return LETTERS[index] if index < len(LETTERS) else str(index + 1)


def generic_works() -> list[dict[str, Any]]:
    """Every named generic benchmark this workspace reads, by name then key: ``id``,
    ``key``, ``title``, ``version``, ``extra``, ``items`` and ``runs`` (runs with a
    prediction on one of its items). One query (the index shows it beside the others)."""
    runs = (
        Prediction.objects.filter(mc_item__work_id=OuterRef("pk"))
        .order_by()
        .values("mc_item__work_id")
        .annotate(n=Count("run_id", distinct=True))
        .values("n")[:1]
    )
    items = (
        MCItem.objects.filter(work_id=OuterRef("pk"))
        .order_by()
        .values("work_id")
        .annotate(n=Count("pk"))
        .values("n")[:1]
    )
    rows = list(
        Work.objects.filter(benchmark=Benchmark.GENERIC)
        .annotate(items=Coalesce(Subquery(items), 0), runs=Coalesce(Subquery(runs), 0))
        .order_by("title", "key", "pk")
        .values("id", "key", "title", "extra", "items", "runs")
    )
    for row in rows:
        row["version"] = str((row["extra"] or {}).get("version", ""))
    return rows


def generic_work(work_id: int) -> dict[str, Any] | None:
    """One named generic benchmark as ``generic_works`` rows have it (without the
    counts), or ``None`` when this workspace reads no such work."""
    row = (
        Work.objects.filter(benchmark=Benchmark.GENERIC, pk=work_id)
        .values("id", "key", "title", "extra")
        .first()
    )
    if row is not None:
        row["extra"] = row["extra"] or {}
        row["version"] = str(row["extra"].get("version", ""))
    return row


def generic_work_label(work: Mapping[str, Any]) -> str:
    """How pages and titles name a generic benchmark: its name and version."""
    version = work.get("version") or ""
    return f"{work['title']} v{version}" if version else str(work["title"])


def generic_work_runs(work_id: int) -> QuerySet:
    """Ids of the runs with a prediction on one of the work's items (a subquery)."""
    return Prediction.objects.filter(mc_item__work_id=work_id).order_by().values("run_id")


def generic_work_studies(work_id: int) -> QuerySet:
    """Ids of the studies with a study item on one of the work's items, or the work
    among their works (a draft before its items are sampled), as a subquery."""
    items = StudyItem.objects.filter(mc_item__work_id=work_id).order_by().values("study_id")
    works = StudyWork.objects.filter(work_id=work_id).order_by().values("study_id")
    return Study.objects.filter(Q(pk__in=items) | Q(pk__in=works)).order_by().values("pk")


def generic_category_fields(work: Mapping[str, Any], categories: Iterable[Mapping]) -> list[str]:
    """The work's category fields: those its mapping names (``extra["category_fields"]``)
    in that order, then any other key its items' ``categories`` carry, sorted."""
    named = [str(f) for f in (work.get("extra") or {}).get("category_fields") or []]
    found: set[str] = set()
    for item in categories:
        found.update(str(k) for k in (item or {}))
    return list(dict.fromkeys(named)) + sorted(found - set(named))


def generic_item_rows(work_id: int) -> list[dict[str, Any]]:
    """The work's items in their order: ``id``, ``item_id``, ``position``, ``texts``,
    ``answers`` (0-based correct options) and ``categories``."""
    return list(
        MCItem.objects.filter(work_id=work_id)
        .order_by("position", "pk")
        .values("id", "item_id", "position", "texts", "answers", "categories")
    )


def generic_study_designs(study_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """How each generic study allocated its answers (issue 50), for the studies whose
    settings name a stratum field: ``text`` (the design in words), ``field``,
    ``design``, ``items`` (its test items' MCItem ids, in order) and ``model`` (MCItem id
    -> the named runs' accuracy fixed at go-live, for a ``widest`` design)."""
    designs: dict[int, dict[str, Any]] = {}
    for study in Study.objects.filter(pk__in=list(study_ids)).order_by("pk"):
        spec = allocation.study_allocation(study)
        if not spec.stratum_field:
            continue
        tests = list(
            StudyItem.objects.filter(study=study, role=StudyItem.Role.TEST)
            .order_by("position", "pk")
            .values_list("pk", "mc_item_id")
        )
        mc_of = dict(tests)
        model = {
            mc_of[int(pk)]: value
            for row in StratumTally.objects.filter(study=study).order_by("key")
            for pk, value in (row.model or {}).items()
            if int(pk) in mc_of
        }
        designs[study.pk] = {
            "text": allocation.design_text(study),
            "field": spec.stratum_field,
            "design": spec.design,
            "items": [mc for _, mc in tests],
            "model": model,
        }
    return designs


def generic_study_languages(study_ids: Iterable[int]) -> list[str]:
    """The languages the studies asked their items in, oldest study first, once each."""
    samplings = Study.objects.filter(pk__in=list(study_ids)).order_by("pk")
    languages = [(s or {}).get("language") for s in samplings.values_list("sampling", flat=True)]
    return list(dict.fromkeys(lang for lang in languages if lang))


def generic_prediction_rows(
    run_ids: Iterable[int], work_id: int, *, sample_index: int | None = None
) -> Iterator[dict[str, Any]]:
    """The runs' predictions on the work's items (of ``sample_index`` when given), by run
    then id: ``PREDICTION_FIELDS``, the prompt's version and model, and ``item_id`` (the
    MCItem's id)."""
    return _prediction_values(
        _predictions(run_ids, sample_index).filter(mc_item__work_id=work_id),
        item_id=F("mc_item_id"),
    )


def _generic_choice_answers(
    study_ids: Iterable[int], work_id: int | None, *, include_excluded: bool = False
) -> QuerySet:
    """First picks on a generic work's items (every generic work's without ``work_id``)
    of the studies' counted participants' submitted assignments (``_choice_answers``)."""
    answers = _choice_answers(study_ids, include_excluded=include_excluded).filter(
        mc_item__isnull=False, round=ChoiceAnswer.Round.FIRST
    )
    if work_id is not None:
        answers = answers.filter(mc_item__work_id=work_id)
    return answers


def generic_choice_rows(
    study_ids: Iterable[int], work_id: int, *, include_excluded: bool = False
) -> list[dict[str, Any]]:
    """Final first picks of the studies on the work's items, one row per pick in id
    order: ``study_id``, ``participant_id``, ``participant`` (the label), ``item_id``
    (the MCItem's id), ``option`` (0-based, in the item's own order), ``correct`` (as
    stored) and ``ms``. Withdrawn participants, practice and attention items and
    unsubmitted assignments are left out, excluded participants too unless
    ``include_excluded``."""
    return list(
        _generic_choice_answers(study_ids, work_id, include_excluded=include_excluded)
        .order_by("pk")
        .values(
            "id",
            "option",
            "correct",
            "ms",
            item_id=F("mc_item_id"),
            participant_id=F("assignment__participant_id"),
            participant=F("assignment__participant__label"),
            study_id=F("assignment__participant__study_id"),
        )
    )


# -- long format -------------------------------------------------------------------

COMMON_COLUMNS = [
    "source",
    "run_id",
    "run_name",
    "model",
    "method",
    "template_version",
    "sample_index",
    "work",
]
# Human study answers (empty on model rows): the rater is a participant id, never the
# invite token; times are per scene response, in seconds.
HUMAN_COLUMNS = [
    "study_id",
    "study",
    "participant",
    "seen",
    "history_needed",
    "tags",
    "rater_note",
    "total_s",
    "active_s",
    "instructions_version",
    "version",
]
LONG_FORMAT_COLUMNS: dict[str, list[str]] = {
    Benchmark.DYNTOM.value: [
        *COMMON_COLUMNS,
        "question",
        "question_type",
        "mental_state",
        "scenario_from",
        "scenario_to",
        "scenario_count",
        "gold",
        "answer",
        "correct",
        "parse_status",
    ],
    Benchmark.CHARTOM_QA.value: [
        *COMMON_COLUMNS,
        "item",
        "character",
        "dimension",
        "directness",
        "task",
        "bonus_points_included",
        "bonus_points_total",
        "defects",
        "rouge_l",
        "bertscore_f1",
        "gold",
        "answer",
        "correct",
        "parse_status",
    ],
    **{
        benchmark: [
            *COMMON_COLUMNS,
            "genres",
            "scene",
            "code",
            "speakers_in_scene",
            "candidates_count",
            "gold",
            "answer",
            "correct",
            "parse_status",
            "dependence",
            "reasoning",
            "evidence",
            *HUMAN_COLUMNS,
        ]
        for benchmark in SPEAKER_BENCHMARKS
    },
}
# A generic benchmark's rows: its work's category fields go between ``position`` and
# ``options`` (``long_format_columns`` reads them); ``answer`` is an option letter for
# people and the parsed answer for models.
GENERIC_ITEM_COLUMNS = [*COMMON_COLUMNS, "item", "position"]
GENERIC_ANSWER_COLUMNS = [
    "options",
    "gold",
    "answer",
    "correct",
    "parse_status",
    "study_id",
    "study",
    "participant",
    "response_s",
]


def long_format_columns(benchmark: str, *, work_id: int | None = None) -> list[str]:
    """The keys every ``long_format_rows`` dict of the benchmark has, in CSV order
    (a generic benchmark's depend on its work's category fields)."""
    if _benchmark(benchmark) == Benchmark.GENERIC:
        return [
            *GENERIC_ITEM_COLUMNS,
            *_generic_category_columns(work_id).values(),
            *GENERIC_ANSWER_COLUMNS,
        ]
    return list(LONG_FORMAT_COLUMNS[benchmark])


def _generic_category_columns(work_id: int | None) -> dict[str, str]:
    """Category field -> its long-format column: the field's own name, or
    ``category_<name>`` where that is already a column."""
    work = generic_work(work_id) if work_id is not None else None
    if work is None:
        return {}
    categories = MCItem.objects.filter(work_id=work_id).values_list("categories", flat=True)
    fixed = {*GENERIC_ITEM_COLUMNS, *GENERIC_ANSWER_COLUMNS}
    return {
        field: f"category_{field}" if field in fixed else field
        for field in generic_category_fields(work, categories)
    }


def generic_pick_correct(option: int | None, answers: Sequence[int] | None) -> bool:
    """Whether a person's pick is one of the item's correct options: the gold the report
    shows (its letters, the majority pick beside it) is the one it scores against."""
    return option is not None and option in (answers or [])


def _annotation_labels(row: dict[str, Any]) -> dict[str, str | None]:
    groups = row["evidence_groups"] or []
    return {
        "dependence": dependence_type(row["need_history"], row["facts_from_memory"]),
        "reasoning": reasoning_type(groups),
        "evidence": "; ".join(evidence_types(groups)),
    }


def long_format_rows(
    benchmark: str,
    *,
    run_ids: Sequence[int] | None = None,
    study_ids: Sequence[int] | None = None,
    include_excluded: bool = False,
    work_id: int | None = None,
    samples: str = SAMPLES_MEAN,
) -> Iterator[dict[str, Any]]:
    """One flat dict per prediction (``source`` "model") or human answer ("human").

    A generic benchmark's rows are its one work's (``work_id``):
    :func:`generic_long_format_rows`. With ``samples="first"`` (the report's selection)
    only each run's first sample is a row; by default every sample is.

    Keys are ``long_format_columns(benchmark)``. Predictions of the selected runs stream
    in run order; then, for the speaker benchmarks, every answer in the selected human
    studies (default: ``report_studies``'; withdrawn participants left out, excluded
    ones too unless ``include_excluded``), then
    the imported TVShowGuess annotations, scored against the gold speaker when the
    annotator wrote a name.
    """
    if benchmark == Benchmark.GENERIC:
        if work_id is None:
            raise ValueError("a generic benchmark's rows are one work's: give its id")
        yield from generic_long_format_rows(
            work_id,
            run_ids=run_ids,
            study_ids=study_ids,
            include_excluded=include_excluded,
            samples=samples,
        )
        return
    columns = long_format_columns(benchmark)
    sample_index = 0 if samples == SAMPLES_FIRST else None
    runs = {r["id"]: r for r in report_runs(benchmark, run_ids=run_ids)}
    studies = (
        {
            s["id"]: s
            for s in report_studies(
                benchmark, study_ids=study_ids, include_excluded=include_excluded
            )
        }
        if benchmark in SPEAKER_BENCHMARKS or study_ids is not None
        else {}
    )

    def flat(values: dict[str, Any]) -> dict[str, Any]:
        return {c: values.get(c) for c in columns}

    def model_fields(p: dict[str, Any]) -> dict[str, Any]:
        run = runs[p["run_id"]]
        return {
            "source": "model",
            "run_id": run["id"],
            "run_name": run["name"],
            "model": p["model"] or run["model"],
            "method": run["method"],
            "template_version": p["template_version"],
            "sample_index": p["sample_index"],
            "work": p["work_key"],
            "answer": p["parsed_answer"],
            "correct": p["correct"],
            "parse_status": p["parse_status"],
        }

    if benchmark == Benchmark.DYNTOM:
        for p in dyntom_prediction_rows(runs, sample_index=sample_index):
            yield flat(
                {
                    **model_fields(p),
                    "question": p["question_key"],
                    "question_type": p["question_type"],
                    "mental_state": p["mental_state"],
                    "scenario_from": p["scenario_from"],
                    "scenario_to": p["scenario_to"],
                    "scenario_count": p["scenario_count"],
                    "gold": p["gold"],
                }
            )
        return
    if benchmark == Benchmark.CHARTOM_QA:
        for p in chartom_prediction_rows(runs, sample_index=sample_index):
            details = p["details"] or {}
            included = details.get("bonus_points_included")
            defects = details.get("defects")
            yield flat(
                {
                    **model_fields(p),
                    "item": p["item_key"],
                    "character": p["character"],
                    "dimension": p["dimension"],
                    "directness": p["directness"],
                    "task": details.get("task") or runs[p["run_id"]]["method"],
                    "bonus_points_included": len(included) if included is not None else None,
                    "bonus_points_total": details.get("bonus_points_total"),
                    "defects": len(defects) if defects is not None else None,
                    # Table 7's text metrics, once score_text_similarity has run.
                    "rouge_l": details.get("rouge_l"),
                    "bertscore_f1": details.get("bertscore_f1"),
                    "gold": details.get("gold_letter"),
                }
            )
        return
    annotations = speaker_annotation_rows(benchmark)
    by_instance = {a["instance_id"]: a for a in annotations if a["instance_id"]}
    for p in speaker_prediction_rows(runs, sample_index=sample_index):
        annotation = by_instance.get(p["instance_id"])
        yield flat(
            {
                **model_fields(p),
                **_speaker_fields(p),
                **(_annotation_labels(annotation) if annotation else {}),
            }
        )
    guesses = human_guess_rows(studies, include_excluded=include_excluded) if studies else ()
    for g in guesses:
        annotation = by_instance.get(g["instance_id"])
        yield flat(
            {
                **_speaker_fields(g),
                **(_annotation_labels(annotation) if annotation else {}),
                **_human_fields(g, studies[g["study_id"]]),
            }
        )
    items = {i["id"]: i for i in speaker_item_rows(benchmark)}
    for a in annotations:
        item = items.get(a["instance_id"])
        answer = a["guessed_name"] or None
        yield flat(
            {
                "source": "human",
                "run_name": a["source"],
                "method": "annotation",
                "work": a["work_key"],
                "scene": a["scene_source_id"],
                "code": a["code"],
                **(_speaker_fields(item) if item else {}),
                "answer": answer,
                "correct": (answer.lower() == item["gold"].lower()) if item and answer else None,
                **_annotation_labels(a),
            }
        )


def _speaker_fields(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "work": row["work_key"],
        "genres": "; ".join(row["genres"] or []),
        "scene": row["scene_key"],
        "code": row["code"],
        "speakers_in_scene": row["speakers"],
        "candidates_count": len(row["candidates"] or []),
        "gold": row["gold"],
    }


def _seconds(ms: int | None) -> float | None:
    return None if ms is None else round(ms / 1000, 3)


def _human_fields(guess: dict[str, Any], study: dict[str, Any]) -> dict[str, Any]:
    version = guess["version"] or {}
    return {
        "source": "human",
        "method": "imported study" if study["imported"] else "study",
        "answer": guess["answer"] or None,
        "correct": guess["correct"],
        "study_id": study["id"],
        "study": study["name"],
        "participant": guess["participant_id"],
        "seen": guess["seen"],
        "history_needed": guess["history_needed"],
        "tags": list(guess["tags"] or []),
        "rater_note": guess["evidence"] or None,
        "total_s": _seconds(guess["total_ms"]),
        "active_s": _seconds(guess["active_ms"]) if guess["total_ms"] is not None else None,
        "instructions_version": version.get("instructions_version"),
        "version": version or None,
    }


def _choice_answers(study_ids: Iterable[int], *, include_excluded: bool = False):
    """Final picks of the studies' counted participants' submitted assignments (a
    CharToM-QA question is final after its revision, a DynToM stage once every
    question is answered)."""
    return ChoiceAnswer.objects.filter(
        _counted_participants("assignment__", include_excluded),
        assignment__participant__study_id__in=list(study_ids),
        assignment__status=Assignment.Status.SUBMITTED,
    )


def human_choice_rows(
    study_ids: Iterable[int], *, include_excluded: bool = False
) -> Iterator[dict[str, Any]]:
    """Final picks of multiple-choice studies (CharToM-QA, DynToM), one row per pick.

    Only counted participants' submitted assignments count (``_choice_answers``:
    withdrawn participants, practice and attention items left out, excluded
    participants too unless ``include_excluded``). ``seen``: the participant had read
    the book.
    """
    return (
        _choice_answers(study_ids, include_excluded=include_excluded)
        .order_by("pk")
        .values(
            "round",
            "option",
            "correct",
            "ms",
            "qa_item_id",
            "question_id",
            participant_id=F("assignment__participant_id"),
            participant=F("assignment__participant__label"),
            study_id=F("assignment__participant__study_id"),
            seen=F("assignment__seen"),
            dimension=F("qa_item__dimension"),
            directness=F("qa_item__directness"),
            question_type=F("question__question_type"),
            mental_state=F("question__mental_state"),
            stage_id=F("question__stage_id"),
        )
        .iterator(chunk_size=CHUNK)
    )


def generic_long_format_rows(
    work_id: int,
    *,
    run_ids: Sequence[int] | None = None,
    study_ids: Sequence[int] | None = None,
    include_excluded: bool = False,
    samples: str = SAMPLES_MEAN,
) -> Iterator[dict[str, Any]]:
    """A generic benchmark's long format: every prediction of the selected runs on the
    work's items (their first samples only with ``samples="first"``), then every counted
    first pick of the selected studies (default: ``report_studies``'), each with the
    item's id, position, categories, option count and gold letters."""
    benchmark = Benchmark.GENERIC.value
    work = generic_work(work_id)
    if work is None:
        raise ValueError(f"no generic benchmark with work id {work_id}")
    columns = long_format_columns(benchmark, work_id=work_id)
    category_columns = _generic_category_columns(work_id)
    runs = {r["id"]: r for r in report_runs(benchmark, run_ids=run_ids, work_id=work_id)}
    studies = {
        s["id"]: s
        for s in report_studies(
            benchmark, study_ids=study_ids, include_excluded=include_excluded, work_id=work_id
        )
    }
    items = {}
    for item in generic_item_rows(work_id):
        texts = next(iter((item["texts"] or {}).values()), {})
        categories = item["categories"] or {}
        items[item["id"]] = {
            "work": work["key"],
            "item": item["item_id"],
            "position": item["position"],
            **{column: categories.get(field) for field, column in category_columns.items()},
            "options": len(texts.get("options") or []),
            "gold": ", ".join(option_letter(a) for a in item["answers"] or []),
            "answers": item["answers"] or [],
        }

    def flat(values: dict[str, Any]) -> dict[str, Any]:
        return {c: values.get(c) for c in columns}

    sample_index = 0 if samples == SAMPLES_FIRST else None
    for p in generic_prediction_rows(runs, work_id, sample_index=sample_index):
        run = runs[p["run_id"]]
        yield flat(
            {
                **items[p["item_id"]],
                "source": "model",
                "run_id": run["id"],
                "run_name": run["name"],
                "model": p["model"] or run["model"],
                "method": run["method"],
                "template_version": p["template_version"],
                "sample_index": p["sample_index"],
                "answer": p["parsed_answer"],
                "correct": p["correct"],
                "parse_status": p["parse_status"],
            }
        )
    picks = (
        generic_choice_rows(studies, work_id, include_excluded=include_excluded) if studies else []
    )
    for pick in picks:
        item = items[pick["item_id"]]
        study = studies[pick["study_id"]]
        yield flat(
            {
                **item,
                "source": "human",
                "method": "imported study" if study["imported"] else "study",
                "answer": option_letter(pick["option"]),
                "correct": generic_pick_correct(pick["option"], item["answers"]),
                "study_id": study["id"],
                "study": study["name"],
                "participant": pick["participant_id"],
                "response_s": _seconds(pick["ms"]),
            }
        )
