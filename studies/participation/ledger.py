"""The participant ledger: one status per participant of a study, the one source for
every count of them (the study page's tiles and participants table, ``raters.csv``,
``platform-ids.csv``, and the API), and the exclusions that leave people out of
reports and exports.

A participant's status is the first of these that holds (the precedence):

1. ``withdrawn``: withdrawn by the researcher or at their own request ("withdraw my
   data"); ``withdrawn_at``.
2. ``excluded``: left out of reports and exports by the study's rule or by a
   researcher; ``excluded_at``, with the source and the reason.
3. ``declined``: answered "I do not agree" on the consent page; ``refused_at``.
4. ``timed_out``: their open items went back to the pool after the study's idle
   timeout and they have not come back since (``released_count`` is cleared once they
   are told); the time is when their sessions were closed by the release.
5. ``finished``: done everything the study had for them, the exit questionnaire
   included; ``finished_at`` (written by ``services.participant_finish``).
6. ``no_work``: told there was nothing for them to answer, and given nothing since;
   ``no_work_at``.
7. ``on_break``: a sitting's worth of items submitted (``Study.session_cap``) with more
   to do; the time of their last answer.
8. ``in_progress``: given items (or a work) and not finished; the time of their last
   answer, else when they started.
9. ``consented``: agreed, nothing given yet; ``consented_at``.
10. ``invited``: a link exists, nothing else; ``created_at``.

The exclusion rule (:func:`exclusions_refresh`): more failed attention checks than
``Study.attention_max_failures`` (instructed-response items, a mapped benchmark's checks
or a scene study's with an instruction: ``Study.instructed_max_failures``); or, when
``Study.floor_wpm`` is set, pages read faster than that absolute floor (``screening``);
or, when ``Study.fast_exclusion_share`` is above 0, a median time per test item under
that share of the cohort's median (the median of the cohort's own medians, as
``studies.quality`` computes it). The cohort: participants not withdrawn who have at
least one timed test item (in progress or finished, excluded or not: leaving the
excluded out would move the median each time someone is excluded, and the rule would no
longer settle). A researcher's override (include or exclude, with a reason) wins over
the rule.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count, Max, Min, Q
from django.utils import timezone

from benchmarks.models import Benchmark

from .. import quality
from ..assignment import items_taken_meanwhile
from ..errors import StudyError
from ..models import Assignment, Participant, Study
from ..slots import slots_free, slots_rebalance, slots_retake
from . import screening
from .signals import participants_exclusion_changed

SCENE_BENCHMARKS = (Benchmark.TOM_IN_AMC, Benchmark.TVSHOWGUESS)

STATUSES: dict[str, str] = {
    "invited": "invited",
    "consented": "consented",
    "declined": "declined",
    "in_progress": "in progress",
    "on_break": "on a break",
    "no_work": "no work available",
    "timed_out": "timed out",
    "finished": "finished",
    "excluded": "excluded",
    "withdrawn": "withdrawn",
}
# What a researcher does with each status's submission on a recruiting platform:
# approve finished work, reject a failed attention check (the platforms' accepted
# reason), ask the rest to return theirs (no payment, no penalty); "" while it runs.
PLATFORM_ACTIONS: dict[str, str] = {
    "finished": "approve",
    "withdrawn": "return",
    "declined": "return",
    "no_work": "return",
    "timed_out": "return",
}
# The rule's reasons for failed checks start with these: the exclusions to "reject".
ATTENTION_REASON = "attention checks"
INSTRUCTED_REASON = "instructed-response items"
PLATFORM_COLUMNS = [
    "platform_participant",
    "platform_study",
    "platform_session",
    "participant_id",
    "participant",
    "status",
    "status_at",
    "excluded",
    "exclusion_source",
    "exclusion_reason",
    "suggested_action",
]


@dataclass(frozen=True)
class LedgerStatus:
    key: str  # one of STATUSES
    label: str
    at: datetime | None
    detail: str = ""  # why: the exclusion's source and reason, the no-work reason


@dataclass(frozen=True)
class LedgerRow:
    participant: Participant
    status: LedgerStatus

    @property
    def suggested_action(self) -> str:
        """approve / reject / return on the recruiting platform ("" while it runs)."""
        p = self.participant
        if self.status.key == "excluded":
            # Only a failed attention check is a reason the platforms accept to reject.
            by_checks = p.exclusion_source == Participant.ExclusionSource.RULE and (
                p.exclusion_reason.startswith((ATTENTION_REASON, INSTRUCTED_REASON))
            )
            return "reject" if by_checks else "return"
        return PLATFORM_ACTIONS.get(self.status.key, "")


def _exclusion_detail(p: Participant) -> str:
    source = "rule" if p.exclusion_source == Participant.ExclusionSource.RULE else "researcher"
    return f"{source}: {p.exclusion_reason}" if p.exclusion_reason else source


def participant_status(p: Participant) -> LedgerStatus:
    """``p``'s one status, by the module's precedence.

    ``p`` comes from :func:`ledger_participants` (its counts and times annotated), with
    its study; a bare participant counts as one who has been given nothing.
    """
    n_assigned = getattr(p, "n_assigned", 0)
    n_submitted = getattr(p, "n_submitted", 0)
    last_answer = getattr(p, "last_answer_at", None)

    def status(key: str, at: datetime | None, detail: str = "") -> LedgerStatus:
        return LedgerStatus(key=key, label=STATUSES[key], at=at, detail=detail)

    if p.withdrawn_at is not None:
        detail = "their data withdrawn at their request" if p.data_withdrawn_at else ""
        return status("withdrawn", p.withdrawn_at, detail)
    if p.excluded_at is not None:
        return status("excluded", p.excluded_at, _exclusion_detail(p))
    if p.refused_at is not None:
        return status("declined", p.refused_at)
    if p.released_count:
        return status("timed_out", getattr(p, "released_at", None) or last_answer)
    if p.finished_at is not None:
        return status("finished", p.finished_at)
    if p.no_work_at is not None and not n_assigned:
        return status("no_work", p.no_work_at, p.get_no_work_reason_display())
    cap = p.study.session_cap
    if cap and n_assigned > n_submitted and n_submitted - p.sitting_start >= cap:
        return status("on_break", last_answer)
    if n_assigned or getattr(p, "n_works", 0):
        return status("in_progress", last_answer or getattr(p, "started_at", None))
    if p.consented_at is not None:
        return status("consented", p.consented_at)
    return status("invited", p.created_at)


def ledger_participants(study: Study) -> list[Participant]:
    """The study's participants in invitation order, with what their status reads: items
    given and submitted, works started, last answer, start and release times. One query."""
    submitted = Q(assignments__status=Assignment.Status.SUBMITTED)
    return list(
        Participant.objects.filter(study=study)
        .select_related("user", "study")
        .annotate(
            n_assigned=Count("assignments", distinct=True),
            n_submitted=Count("assignments", filter=submitted, distinct=True),
            n_works=Count("work_sessions", distinct=True),
            last_answer_at=Max("assignments__submitted_at"),
            started_at=Min("work_sessions__started_at"),
            # The release closes the sessions it empties (recruitment.assignments_release_idle).
            released_at=Max("work_sessions__finished_at"),
        )
        .order_by("created_at", "pk")
    )


def study_ledger(*, study: Study, status: str = "") -> list[LedgerRow]:
    """One row per participant (only those with ``status`` when given), invitation order.

    Raises :class:`StudyError` naming the ``status`` field for an unknown status.
    """
    if status and status not in STATUSES:
        raise StudyError(f"status: unknown status {status!r}; use one of {', '.join(STATUSES)}")
    rows = [
        LedgerRow(participant=p, status=participant_status(p)) for p in ledger_participants(study)
    ]
    return [r for r in rows if r.status.key == status] if status else rows


def ledger_counts(rows: list[LedgerRow]) -> dict[str, int]:
    """Participants per status, every status present (0 when none), in STATUSES order."""
    counts = Counter(r.status.key for r in rows)
    return {key: counts[key] for key in STATUSES}


def ledger_csv_fields(row: LedgerRow) -> dict[str, Any]:
    """The ledger's columns of a CSV row (raters.csv and platform-ids.csv share them)."""
    p = row.participant
    ids = p.platform_ids or {}
    excluded = p.excluded_at is not None
    return {
        "platform_participant": ids.get("participant", ""),
        "platform_study": ids.get("study", ""),
        "platform_session": ids.get("session", ""),
        "participant_id": p.pk,
        "participant": str(p),
        "status": row.status.key,
        "status_at": row.status.at.isoformat() if row.status.at else "",
        "excluded": excluded,
        "exclusion_source": p.exclusion_source if excluded else "",
        "exclusion_reason": p.exclusion_reason if excluded else "",
        "suggested_action": row.suggested_action,
    }


def raters_csv_rows(*, study: Study) -> list[dict[str, Any]]:
    """``raters.csv``: every participant of the ledger with their quality figures (blank
    for those who answered nothing) and their ledger status."""
    rows = study_ledger(study=study)
    by_pid = {
        q.participant.pk: q for q in quality.study_quality(study, [r.participant for r in rows])
    }
    out = []
    for row in rows:
        p = row.participant
        figures = by_pid.get(p.pk) or quality.RaterQuality(participant=p)
        out.append(figures.row() | ledger_csv_fields(row))
    return out


# -- exclusions -------------------------------------------------------------------------


def instructed_checks(study: Study) -> bool:
    """Whether the study's attention checks are instructed-response items, with a
    threshold (``Study.instructed_max_failures``) and a reason of their own.

    A mapped benchmark's always are ("choose the option …"); a scene study's are when the
    researcher wrote an ``attention_instruction`` ("select '{name}' for this speaker"),
    else they are scenes that give their answer away, scored against the gold.
    """
    return study.benchmark == Benchmark.GENERIC or bool(study.attention_instruction)


def _rule_reasons(study: Study, participants: list[Participant]) -> dict[int, str]:
    """participant id -> why the study's rule excludes them (absent: it does not)."""
    share = study.fast_exclusion_share
    rows = quality.study_quality(study, participants, checks_only=share <= 0)
    reasons: dict[int, str] = {}
    if instructed_checks(study):
        label, allowed = INSTRUCTED_REASON, study.instructed_max_failures
    else:
        label, allowed = ATTENTION_REASON, study.attention_max_failures
    for q in rows:
        if q.attention_failed > allowed:
            reasons[q.participant.pk] = (
                f"{label}: {q.attention_failed} of {q.attention_checks} failed (allowed {allowed})"
            )
    for pid, reason in screening.study_floor_reasons(study, participants).items():
        reasons.setdefault(pid, reason)
    if share > 0:
        cohort = [
            q.median_s
            for q in rows
            if q.median_s is not None and q.participant.withdrawn_at is None
        ]
        typical = quality.cohort_median(cohort)
        for q in rows:
            if q.participant.withdrawn_at is None and quality.below_share(
                q.median_s, typical, share
            ):
                reasons.setdefault(
                    q.participant.pk,
                    f"too fast: median {q.median_s:.1f} s per item, under {share:g} times the "
                    f"cohort's median of {typical:.1f} s",
                )
    return reasons


def _places_follow(study: Study, changed: list[Participant]) -> None:
    """The places of participants whose exclusion changed: an excluded participant's go
    back to the pool (as a platform frees a rejected submission's place), so the next
    participant gets them; one taken back in gets theirs again where still free.

    Sets ``places_short`` on each: how many of their items had been given to others
    meanwhile (0 when excluded), which now have one more counted answer than the quota.
    """
    for p in changed:
        p.places_short = 0
        if p.withdrawn_at is not None:  # holds no place either way
            continue
        if study.benchmark in SCENE_BENCHMARKS:
            if p.excluded_at is not None:
                slots_rebalance(slots_free(participant_id=p.pk))
            else:
                p.places_short = slots_retake(participant_id=p.pk)
        elif p.excluded_at is None and study.benchmark != Benchmark.CHARTOM_QA:
            # Multiple-choice takes count the places when they take (``assignment``):
            # an exclusion frees them by itself; a return finds them taken or not.
            p.places_short = items_taken_meanwhile(participant_id=p.pk, quota=study.overlap)


@transaction.atomic
def exclusions_refresh(*, study: Study) -> list[Participant]:
    """Apply the study's exclusion rule and the researchers' overrides; store the result.

    Writes ``excluded_at`` (kept from the first time while still excluded),
    ``exclusion_source`` and ``exclusion_reason`` of the participants whose state
    changed, frees or takes back their places (``_places_follow``, which sets their
    ``places_short``), and returns those. Idempotent: a second call changes nothing.
    """
    participants = list(
        Participant.objects.filter(study=study, data_withdrawn_at__isnull=True).order_by("pk")
    )
    reasons = _rule_reasons(study, participants)
    now = timezone.now()
    changed = []
    for p in participants:
        if p.exclusion_override == Participant.ExclusionOverride.INCLUDE:
            state = (None, "", "")
        elif p.exclusion_override == Participant.ExclusionOverride.EXCLUDE:
            reason = p.exclusion_override_reason
            state = (p.excluded_at or now, Participant.ExclusionSource.RESEARCHER, reason)
        elif p.pk in reasons:
            state = (p.excluded_at or now, Participant.ExclusionSource.RULE, reasons[p.pk])
        else:
            state = (None, "", "")
        if state != (p.excluded_at, p.exclusion_source, p.exclusion_reason):
            p.excluded_at, p.exclusion_source, p.exclusion_reason = state
            changed.append(p)
    Participant.objects.bulk_update(
        changed, ["excluded_at", "exclusion_source", "exclusion_reason"]
    )
    _places_follow(study, changed)
    if changed:
        participants_exclusion_changed.send(sender=Participant, study=study, participants=changed)
    return changed


@transaction.atomic
def participant_exclusion_override(
    *, participant: Participant, decision: str, reason: str
) -> Participant:
    """A researcher's decision: ``include`` or ``exclude`` whatever the rule says (a reason
    is required), or "" to leave it to the rule again. Applied at once, places
    included: the returned participant's ``places_short`` says how many of their items
    were given to others while they were excluded."""
    reason = reason.strip()
    if decision not in ("", *Participant.ExclusionOverride.values):
        raise StudyError("decision: choose include, exclude or leave it to the rule")
    if decision and not reason:
        raise StudyError("reason: say why you include or exclude this participant")
    Participant.objects.filter(pk=participant.pk).update(
        exclusion_override=decision, exclusion_override_reason=reason if decision else ""
    )
    changed = exclusions_refresh(study=participant.study)
    participant.refresh_from_db()
    participant.places_short = next((c.places_short for c in changed if c.pk == participant.pk), 0)
    return participant
