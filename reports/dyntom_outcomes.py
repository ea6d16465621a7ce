"""What the DynToM tables read, as arrays: each run's packed outcomes and the question bank.

A DynToM report compares runs on the questions every selected run answered, per
sample, per stage (the bootstrap) and per question (the compositional analysis), so
no fixed set of counts per run can serve every selection. Instead each run's
predictions are packed once into :class:`~reports.models.DynToMRunOutcomes`: question
id, sample, correctness and parse status per prediction, in prediction id order (the
order the bootstrap numbers stages in), about 12 bytes an answer before compression.
The tables then filter and count these arrays with numpy.

Packing happens when a run finishes or its predictions are imported (``reports.hooks``)
and, for anything those missed, on first use: :func:`run_outcomes` compares each stored
copy's fingerprint (count and highest id of the run's predictions) with the database
and packs again where they differ. Predictions changed in place (a re-import with other
answers) keep count and ids, so their writer sends ``modeling.runs.signals.predictions_changed``
and :func:`dyntom_outcomes_invalidate` marks the copy stale first.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from django.core.cache import cache
from django.db.models import Count, F, Max
from django.utils import timezone

from benchmarks.models import Benchmark, DynToMQuestion, DynToMStage
from metrics.dyntom import QUESTION_TYPE_CODES
from modeling.models import Prediction, Run
from reports.selectors import run_prediction_counts

from .models import DynToMQuestionBankSnapshot, DynToMRunOutcomes

_PACKED = np.dtype([("question", "<i8"), ("sample", "<i2"), ("correct", "i1"), ("parsed", "?")])


@dataclass(frozen=True)
class RunOutcomes:
    """One run's DynToM predictions in prediction id order, as parallel arrays.

    ``correct`` is 1, 0 or -1 (stored as null); ``parsed`` is ``parse_status == "ok"``.
    """

    question: np.ndarray
    sample: np.ndarray
    correct: np.ndarray
    parsed: np.ndarray

    def __len__(self) -> int:
        return len(self.question)


def _unpack(data: bytes) -> RunOutcomes:
    packed = np.frombuffer(zlib.decompress(data), dtype=_PACKED)
    return RunOutcomes(
        question=packed["question"].astype(np.int64),
        sample=packed["sample"].astype(np.int64),
        correct=packed["correct"].astype(np.int64),
        parsed=packed["parsed"].copy(),
    )


_EMPTY = RunOutcomes(*(np.zeros(0, dtype=t) for t in (np.int64, np.int64, np.int64, bool)))


def _pack(run_id: int) -> tuple[int, int, bytes]:
    """(count, highest id, packed arrays) of the run's predictions, read in one query.

    Count and id cover every prediction of the run, as ``run_prediction_counts`` does,
    so the fingerprints compare; a DynToM run's predictions all name a question.
    """
    rows = list(
        Prediction.objects.filter(run_id=run_id)
        .order_by("pk")
        .values_list("pk", "dyntom_question_id", "sample_index", "correct", "parse_status")
    )
    packed = np.array(
        [
            (question, sample, -1 if correct is None else int(correct), status == "ok")
            for _, question, sample, correct, status in rows
            if question is not None
        ],
        dtype=_PACKED,
    )
    last = rows[-1][0] if rows else 0
    return len(rows), last, zlib.compress(packed.tobytes(), 1)


def _store(run_id: int, generation: int | None, n: int, last: int, data: bytes) -> None:
    # Only over the generation we started from: an invalidation while we packed wins.
    if generation is None:
        DynToMRunOutcomes.objects.bulk_create(
            [DynToMRunOutcomes(run_id=run_id, predictions=n, last_prediction=last, data=data)],
            ignore_conflicts=True,
        )
    else:
        DynToMRunOutcomes.objects.filter(run_id=run_id, generation=generation).update(
            predictions=n, last_prediction=last, data=data, packed_at=timezone.now()
        )


def run_outcomes(
    run_ids: Sequence[int], counts: dict[int, dict[str, int]] | None = None
) -> dict[int, RunOutcomes]:
    """Each run's packed outcomes, packing (and storing) any that are missing or stale.

    ``counts`` is ``selectors.run_prediction_counts`` of these runs when the caller has
    it. Safe when two requests pack the same run at once: both store the same arrays,
    and a copy invalidated meanwhile is not overwritten with what was read before.
    """
    if counts is None:
        counts = run_prediction_counts(run_ids=run_ids)
    stored = {row.run_id: row for row in DynToMRunOutcomes.objects.filter(run_id__in=list(run_ids))}
    result: dict[int, RunOutcomes] = {}
    for run_id in run_ids:
        row = stored.get(run_id)
        current = counts.get(run_id, {"predictions": 0, "last_prediction": 0})
        n, last = current["predictions"], current["last_prediction"]
        if n == 0:
            result[run_id] = _EMPTY
        elif row is not None and (row.predictions, row.last_prediction) == (n, last):
            result[run_id] = _unpack(bytes(row.data))
        else:
            n, last, data = _pack(run_id)
            _store(run_id, None if row is None else row.generation, n, last, data)
            result[run_id] = _unpack(data)
    return result


def unpacked_predictions(counts: dict[int, dict[str, int]]) -> int:
    """How many predictions of the runs in ``counts`` (``run_prediction_counts``) have
    no current packed copy: the work a report would do first."""
    fresh = {
        run_id
        for run_id, n, last in DynToMRunOutcomes.objects.filter(
            run_id__in=list(counts)
        ).values_list("run_id", "predictions", "last_prediction")
        if (n, last) == (counts[run_id]["predictions"], counts[run_id]["last_prediction"])
    }
    return sum(c["predictions"] for run_id, c in counts.items() if run_id not in fresh)


def dyntom_run_ids(run_ids: Iterable[int]) -> list[int]:
    """The DynToM runs among ``run_ids``: the only runs that are packed."""
    return list(
        Run.objects.filter(pk__in=list(run_ids), benchmark=Benchmark.DYNTOM).values_list(
            "pk", flat=True
        )
    )


def dyntom_outcomes_invalidate(*, run_ids: Iterable[int]) -> None:
    """Mark the packed copies of these runs stale (their predictions changed in place).

    Leaves a placeholder row for a run not packed yet, so a build that started before
    the change cannot store what it read.
    """
    ids = dyntom_run_ids(run_ids)
    if not ids:
        return
    DynToMRunOutcomes.objects.bulk_create(
        [DynToMRunOutcomes(run_id=run_id) for run_id in ids], ignore_conflicts=True
    )
    DynToMRunOutcomes.objects.filter(run_id__in=ids).update(
        predictions=None, data=b"", generation=F("generation") + 1
    )


def dyntom_outcomes_refresh(*, run_ids: Iterable[int]) -> None:
    """Pack the DynToM runs among ``run_ids`` now (a run finished, predictions imported)."""
    if ids := dyntom_run_ids(run_ids):
        run_outcomes(ids)


# -- the question bank -------------------------------------------------------------------


@dataclass(frozen=True)
class QuestionBank:
    """Every DynToM question's attributes as arrays, in question id order.

    ``question_type`` indexes :data:`~metrics.dyntom.QUESTION_TYPE_CODES` (-1 for
    another type), ``mental_state`` indexes ``labels``; scenario numbers and counts are
    -1 where the question has none.
    """

    ids: np.ndarray
    question_type: np.ndarray
    mental_state: np.ndarray
    scenario_from: np.ndarray
    scenario_to: np.ndarray
    stage: np.ndarray
    scenario_count: np.ndarray
    labels: list[str]

    def positions(self, question_ids: np.ndarray) -> np.ndarray:
        """Each question id's row in the bank (every predicted question is in it)."""
        return np.searchsorted(self.ids, question_ids)


# Seconds a question bank stays cached (its key already changes with an import).
BANK_CACHE_SECONDS = 24 * 3600


def question_bank() -> QuestionBank:
    """The DynToM questions' attributes, read once per state of the bank.

    The fingerprint holds the questions' count, highest id and latest change and the
    stages' latest change (the importer and the admin stamp ``updated_at``), so a
    re-import that edits a question or a stage's scenario count is read afresh. Kept
    in the cache and, for a cold cache, as one packed row in the database.
    """
    state = DynToMQuestion.objects.aggregate(
        n=Count("pk"), last=Max("pk"), changed=Max("updated_at")
    )
    state["stages"] = DynToMStage.objects.aggregate(changed=Max("updated_at"))["changed"]
    fingerprint = hashlib.sha1(repr(sorted(state.items())).encode()).hexdigest()
    key = f"reports:dyntom-bank:v1:{fingerprint}"
    bank = cache.get(key)
    if bank is None:
        bank = _bank_snapshot(fingerprint)
        cache.set(key, bank, BANK_CACHE_SECONDS)
    return bank


def _bank_snapshot(fingerprint: str) -> QuestionBank:
    snapshot = DynToMQuestionBankSnapshot.objects.filter(fingerprint=fingerprint).first()
    if snapshot is not None:
        columns = np.frombuffer(zlib.decompress(bytes(snapshot.arrays)), dtype=np.int64)
        return QuestionBank(*columns.reshape(7, -1).copy(), labels=snapshot.labels)
    bank = _read_question_bank()
    columns = np.stack(
        [
            bank.ids,
            bank.question_type,
            bank.mental_state,
            bank.scenario_from,
            bank.scenario_to,
            bank.stage,
            bank.scenario_count,
        ]
    )
    DynToMQuestionBankSnapshot.objects.exclude(fingerprint=fingerprint).delete()
    DynToMQuestionBankSnapshot.objects.bulk_create(
        [
            DynToMQuestionBankSnapshot(
                fingerprint=fingerprint,
                arrays=zlib.compress(columns.tobytes(), 1),
                labels=bank.labels,
            )
        ],
        ignore_conflicts=True,
    )
    return bank


def _read_question_bank() -> QuestionBank:
    rows = list(
        DynToMQuestion.objects.order_by("pk").values_list(
            "pk",
            "question_type",
            "mental_state",
            "scenario_from",
            "scenario_to",
            "stage_id",
            "stage__scenario_count",
        )
    )
    labels: dict[str, int] = {}

    def column(index: int) -> np.ndarray:
        return np.array([-1 if r[index] is None else r[index] for r in rows], dtype=np.int64)

    return QuestionBank(
        ids=column(0),
        question_type=np.array(
            [QUESTION_TYPE_CODES.index(r[1]) if r[1] in QUESTION_TYPE_CODES else -1 for r in rows],
            dtype=np.int64,
        ),
        mental_state=np.array(
            [labels.setdefault(r[2] or "", len(labels)) for r in rows], dtype=np.int64
        ),
        labels=list(labels),
        scenario_from=column(3),
        scenario_to=column(4),
        stage=column(5),
        scenario_count=column(6),
    )
