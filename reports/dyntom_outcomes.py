"""What the DynToM tables read, as arrays: each run's packed outcomes and the question bank.

A DynToM report compares runs on the questions every selected run answered, per
sample, per stage (the bootstrap) and per question (the compositional analysis), so
no fixed set of counts per run can serve every selection. Instead each run's
predictions are packed once into :class:`~reports.models.PackedRun`: question
id, sample, correctness and parse status per prediction, in prediction id order (the
order the bootstrap numbers stages in), about 12 bytes an answer before compression.
The tables then filter and count these arrays with numpy.

When packing happens and when a packed copy is current is ``reports.run_packs``'
business, shared with CharToM-QA's packs.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from django.core.cache import cache
from django.db.models import Count, Max

from benchmarks.models import DynToMQuestion, DynToMStage
from metrics.dyntom import QUESTION_TYPE_CODES
from modeling.models import Prediction
from reports.selectors import run_prediction_counts

from .models import DynToMQuestionBankSnapshot
from .run_packs import run_packs

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

    def first_sample(self) -> RunOutcomes:
        """The answers of sample 0 alone, still in prediction id order."""
        keep = self.sample == 0
        return RunOutcomes(
            question=self.question[keep],
            sample=self.sample[keep],
            correct=self.correct[keep],
            parsed=self.parsed[keep],
        )


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


def run_outcomes(
    run_ids: Sequence[int], counts: dict[int, dict[str, int]] | None = None
) -> dict[int, RunOutcomes]:
    """Each run's packed outcomes, packing (and storing) any that are missing or stale.

    ``counts`` is ``selectors.run_prediction_counts`` of these runs when the caller has it.
    """
    if counts is None:
        counts = run_prediction_counts(run_ids=run_ids)
    return {
        run_id: _EMPTY if data is None else _unpack(data)
        for run_id, data in run_packs(run_ids, counts, _pack).items()
    }


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
