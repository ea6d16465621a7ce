"""Per-rater quality at a glance: agreement with the other raters and with the gold,
time per scene with speed outliers, and attention checks. One query for the answers
(masked-speaker guesses, or a mapped benchmark's picks), the arithmetic in plain Python.

Only test items count toward accuracy, agreement and time: practice answers are never
scored here, attention checks only count as checks passed or failed. Whether a rater
is excluded is the ledger's stored state (``studies.participation.ledger``), which
applies the study's rule with :func:`below_share` and :func:`cohort_median` from here.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from statistics import median

from django.db.models import BooleanField, CharField, Q, Value
from django.db.models.functions import Cast

from .models import Assignment, ChoiceAnswer, Guess, Participant, Study, StudyItem

# A rater whose median time per scene is under this share of the study's median (of
# the raters' medians) is flagged as too fast to have read the scenes.
FAST_SHARE = 0.33
QUALITY_COLUMNS = [
    "participant_id",
    "participant",
    "platform_participant",
    "scenes",
    "accuracy",
    "agreement",
    "median_s",
    "too_fast",
    "attention_checks",
    "attention_failed",
    "excluded",
    "withdrawn",
    # From the participant ledger (studies.participation.ledger), the page's one source.
    "status",
    "status_at",
    "exclusion_source",
    "exclusion_reason",
]


@dataclass
class RaterQuality:
    participant: Participant
    scenes: int = 0
    accuracy: float | None = None  # share of test answers equal to the gold
    agreement: float | None = None  # share of pairs with another rater that agree
    median_s: float | None = None
    too_fast: bool = False
    attention_checks: int = 0
    attention_failed: int = 0

    @property
    def excluded(self) -> bool:
        return self.participant.excluded_at is not None

    def row(self) -> dict:
        p = self.participant
        return {
            "participant_id": p.pk,
            "participant": str(p),
            "platform_participant": (p.platform_ids or {}).get("participant", ""),
            "scenes": self.scenes,
            "accuracy": _round(self.accuracy),
            "agreement": _round(self.agreement),
            "median_s": _round(self.median_s, 1),
            "too_fast": self.too_fast,
            "attention_checks": self.attention_checks,
            "attention_failed": self.attention_failed,
            "excluded": self.excluded,
            "withdrawn": p.withdrawn_at is not None,
        }


def _round(value: float | None, digits: int = 3) -> float | str:
    return "" if value is None else round(value, digits)


def cohort_median(medians: list[float]) -> float | None:
    """The typical rater's time: the median of the raters' own medians (two at least)."""
    return median(medians) if len(medians) >= 2 else None


def below_share(value: float | None, typical: float | None, share: float) -> bool:
    """Whether ``value`` is under ``share`` of the ``typical`` time (False without both)."""
    return value is not None and typical is not None and value < share * typical


def study_quality(
    study: Study, participants: list[Participant] | None = None, *, checks_only: bool = False
) -> list[RaterQuality]:
    """One row per participant who submitted anything, in invitation order.

    ``participants``: the study's participants when the caller has them already (the
    study page does), so the whole table costs one query. ``checks_only``: read the
    attention checks' answers only (the exclusion rule without a time share needs no
    more, and runs as participants answer).
    """
    if participants is None:
        participants = list(Participant.objects.filter(study=study).order_by("created_at", "pk"))
    participants = {p.pk: p for p in participants if p.data_withdrawn_at is None}
    rows = {pid: RaterQuality(participant=p) for pid, p in participants.items()}
    # A mapped benchmark's study answers with picks (one per item), every other kind
    # with masked-speaker guesses: the same columns either way, one query.
    model = ChoiceAnswer if study.benchmark == "generic" else Guess
    guesses = model.objects.filter(
        assignment__participant__study=study,
        assignment__status=Assignment.Status.SUBMITTED,
    )
    if checks_only:
        guesses = guesses.filter(assignment__study_item__role=StudyItem.Role.ATTENTION)
    if model is ChoiceAnswer:
        # A bank item's picks, and the picks of the attention checks the researcher
        # wrote (no bank item: ``StudyItem.instructed``), which count as checks only.
        written = Q(mc_item__isnull=True, assignment__study_item__role=StudyItem.Role.ATTENTION)
        guesses = guesses.filter(Q(mc_item__isnull=False) | written).values_list(
            "assignment__participant_id",
            "assignment_id",
            "assignment__study_item__role",
            "mc_item_id",
            Cast("option", CharField()),
            Value(False, output_field=BooleanField()),
            "correct",
            "assignment__total_ms",
        )
    else:
        guesses = guesses.values_list(
            "assignment__participant_id",
            "assignment_id",
            "assignment__study_item__role",
            "instance_id",
            "answer",
            "cant_tell",
            "correct",
            "assignment__total_ms",
        )
    # item (masked speaker or multiple-choice item) -> participant -> answer
    answers: dict[int, dict[int, str]] = defaultdict(dict)
    right: dict[int, list[bool]] = defaultdict(list)
    attention: dict[int, dict[int, bool]] = defaultdict(dict)  # participant -> assignment -> ok
    times: dict[int, dict[int, int]] = defaultdict(dict)  # participant -> assignment -> ms
    for pid, aid, role, instance_id, answer, cant_tell, correct, ms in guesses:
        if pid not in rows:
            continue
        if role == StudyItem.Role.ATTENTION:
            attention[pid][aid] = attention[pid].get(aid, True) and bool(correct)
        elif role == StudyItem.Role.TEST:
            right[pid].append(bool(correct))
            if ms is not None:
                times[pid][aid] = ms
            if not cant_tell:
                answers[instance_id][pid] = answer.casefold()
    agree: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for by_rater in answers.values():
        for pid, answer in by_rater.items():
            for other, theirs in by_rater.items():
                if other != pid:
                    agree[pid][0] += answer == theirs
                    agree[pid][1] += 1
    for pid, row in rows.items():
        row.scenes = len(times[pid])
        if right[pid]:
            row.accuracy = sum(right[pid]) / len(right[pid])
        if agree[pid][1]:
            row.agreement = agree[pid][0] / agree[pid][1]
        if times[pid]:
            row.median_s = median(times[pid].values()) / 1000
        row.attention_checks = len(attention[pid])
        row.attention_failed = sum(not ok for ok in attention[pid].values())
    typical = cohort_median([r.median_s for r in rows.values() if r.median_s is not None])
    for row in rows.values():
        row.too_fast = below_share(row.median_s, typical, FAST_SHARE)
    return [r for r in rows.values() if r.scenes or r.attention_checks]
