"""Reads for the researcher's study pages: lists, live progress, responses.

Every selector returns rows with what its page shows already joined or counted, so
a page costs a fixed number of queries however many raters or scenes a study has.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Prefetch, Q, QuerySet

from benchmarks.models import Benchmark, Character, Scene, Work
from benchmarks.selectors import test_scene_filter

from .counting import counted_participants, practice_items, told_items
from .models import Assignment, Guess, Participant, Study, StudyItem, StudyWork
from .participation.ledger import LedgerRow, ledger_counts, study_ledger
from .scene.sampling import SceneRow

STUDY_BENCHMARKS = (Benchmark.TOM_IN_AMC, Benchmark.TVSHOWGUESS)
# Assignments of participants who hold places: the rule reports count by too.
_ACTIVE = counted_participants("assignments__")
_SUBMITTED = Q(assignments__status=Assignment.Status.SUBMITTED)


def study_list() -> QuerySet[Study]:
    return (
        Study.objects.select_related("created_by")
        .annotate(
            n_works=Count("study_works", distinct=True),
            # The count participants are told (studies.counting), practice apart.
            n_scenes=Count("study_items", filter=told_items("study_items__"), distinct=True),
            n_practice=Count("study_items", filter=practice_items("study_items__"), distinct=True),
            n_participants=Count("participants", distinct=True),
        )
        .order_by("-created_at", "-pk")
    )


def works_for_studies() -> QuerySet[Work]:
    """Works a study can use, with their number of masked test scenes."""
    return (
        Work.objects.filter(benchmark__in=STUDY_BENCHMARKS)
        .annotate(
            n_test=Count(
                "scenes",
                filter=test_scene_filter("scenes__"),
                distinct=True,
            )
        )
        .filter(n_test__gt=0)
        .order_by("benchmark", "title")
    )


def scene_rows(works: list[Work]) -> list[SceneRow]:
    """The masked test scenes of ``works`` as rows for :mod:`studies.scene.sampling`."""
    genres = {w.pk: tuple(w.genres or ()) for w in works}
    keys = {w.pk: w.key for w in works}
    rows = (
        Scene.objects.filter(test_scene_filter(), work__in=works)
        .values("pk", "work_id", "position")
        .annotate(speakers=Count("instances", distinct=True))
        .order_by("work_id", "position")
    )
    return [
        SceneRow(
            scene_id=r["pk"],
            work_key=keys[r["work_id"]],
            position=r["position"],
            genres=genres[r["work_id"]],
            speakers=r["speakers"],
        )
        for r in rows
    ]


def study_detail(study_id: int) -> Study:
    return Study.objects.select_related("created_by").get(pk=study_id)


def study_works(study: Study) -> list[StudyWork]:
    """The study's works, each with its scene counts and main characters: ``n_scenes``
    as participants are told them (``studies.counting``), the practice and the scenes
    held back apart."""
    return list(
        StudyWork.objects.filter(study=study)
        .select_related("work")
        .annotate(
            n_scenes=Count("items", filter=told_items("items__"), distinct=True),
            n_practice=Count("items", filter=practice_items("items__"), distinct=True),
            n_held=Count("items", filter=Q(items__held_back=True), distinct=True),
        )
        .prefetch_related(
            Prefetch(
                "work__characters",
                queryset=Character.objects.filter(is_main=True).order_by("position", "name"),
                to_attr="main_characters",
            )
        )
        .order_by("position")
    )


def study_participants(study: Study) -> list[Participant]:
    """Raters with their scenes assigned and submitted (withdrawn ones included)."""
    return list(
        Participant.objects.filter(study=study)
        .select_related("user")
        .annotate(
            n_assigned=Count("assignments", distinct=True),
            n_submitted=Count(
                "assignments",
                filter=Q(assignments__status=Assignment.Status.SUBMITTED),
                distinct=True,
            ),
            n_works=Count("work_sessions", distinct=True),
        )
        .order_by("created_at", "pk")
    )


def study_item_progress(study: Study) -> list[StudyItem]:
    """Scenes with raters assigned/submitted and seen/unseen counts, of the participants
    who count (``studies.counting``): withdrawn and excluded ones are left out, as the
    reports leave them out, and their places are free again."""
    return list(
        StudyItem.objects.filter(study=study)
        .select_related("scene", "study_work__work")
        .annotate(
            n_assigned=Count("assignments", filter=_ACTIVE),
            n_submitted=Count("assignments", filter=_ACTIVE & _SUBMITTED),
            n_seen=Count("assignments", filter=_ACTIVE & Q(assignments__seen=True)),
            n_unseen=Count("assignments", filter=_ACTIVE & Q(assignments__seen=False)),
        )
        .order_by("study_work__position", "position")
    )


@dataclass(frozen=True)
class ProgressSummary:
    participants: int
    active: int
    withdrawn: int
    finished: int
    scenes: int
    held_back: int
    open_scenes: int
    scenes_full: int  # test scenes with as many counted answers as the overlap
    submitted: int  # counted answers, at most the overlap per scene: what reports count
    needed: int  # answers the study needs in all (test scenes not held back x overlap)
    no_work: int = 0  # told there was nothing for them to answer (no completion code)
    # Participants per ledger status (studies.participation.ledger.STATUSES order).
    statuses: dict[str, int] = field(default_factory=dict)


def progress_summary(
    study: Study, rows: list[LedgerRow], scenes: list[StudyItem]
) -> ProgressSummary:
    """The study page's tiles: participants by their ledger status (``rows`` from
    ``study_ledger``, the one source of those counts) and scene answers against quotas.

    ``scenes`` come from :func:`study_item_progress`. Only test scenes have quotas:
    practice scenes and attention checks go to everyone and never count in reports.
    """
    open_scenes = [s for s in scenes if not s.held_back and s.role == StudyItem.Role.TEST]
    statuses = ledger_counts(rows)
    return ProgressSummary(
        participants=len(rows),
        active=len(rows) - statuses["withdrawn"],
        withdrawn=statuses["withdrawn"],
        finished=statuses["finished"],
        scenes=len(scenes),
        held_back=sum(s.held_back for s in scenes),
        open_scenes=len(open_scenes),
        scenes_full=sum(s.n_submitted >= study.overlap for s in open_scenes),
        submitted=sum(min(s.n_submitted, study.overlap) for s in open_scenes),
        needed=len(open_scenes) * study.overlap,
        no_work=statuses["no_work"],
        statuses=statuses,
    )


def participant_has_no_work(participant: Participant) -> bool:
    """The ledger's "no work available": told there was nothing for them to answer, and
    given nothing since. ``participant`` comes from :func:`study_participants`."""
    return (
        participant.no_work_at is not None
        and participant.withdrawn_at is None
        and not participant.n_assigned
    )


def study_no_work_count(study: Study) -> int:
    """How many participants have "no work available": the ledger's count, as the study
    page's tile shows it."""
    return ledger_counts(study_ledger(study=study))["no_work"]


LEAK_KINDS = ("blocking", "shown", "speech")


def leak_kind(leaks: list[dict[str, Any]]) -> str:
    """A scene's group on the leak page: ``blocking`` (gives a candidate away: held back
    until released), ``shown`` (names one outside dialogue where the benchmark's task
    shows that text anyway), ``speech`` (names only in dialogue), or "" (nothing)."""
    from .scene.leaks import is_blocking

    if not leaks:
        return ""
    if any(is_blocking(f) for f in leaks):
        return "blocking"
    return "shown" if any(f.get("where") != "speech" for f in leaks) else "speech"


def leaking_scenes(study: Study, kind: str = "") -> list[StudyItem]:
    """Scenes whose leak check found anything (of one ``kind`` if given), in study order."""
    return [
        s
        for s in StudyItem.objects.filter(study=study)
        .select_related("scene", "study_work__work")
        .order_by("study_work__position", "position")
        if s.leaks and (not kind or leak_kind(s.leaks) == kind)
    ]


def leak_counts(study: Study) -> dict[str, int]:
    """Scenes, held back, and scenes per :func:`leak_kind`: the groups add up to the
    scenes the leak page lists (``listed``). ``flagged`` and ``mentions`` are the
    blocking and dialogue-only counts under their older names."""
    counts: Counter[str] = Counter()
    for leaks, held in StudyItem.objects.filter(study=study).values_list("leaks", "held_back"):
        counts["scenes"] += 1
        counts["held_back"] += held
        if kind := leak_kind(leaks or []):
            counts[kind] += 1
            counts["listed"] += 1
    counts["flagged"], counts["mentions"] = counts["blocking"], counts["speech"]
    return dict(counts)


def study_responses(study: Study, *, include_excluded: bool = False) -> QuerySet[Assignment]:
    """Every submitted scene of the study, with its rater, scene and guesses.

    Excluded participants (``Participant.excluded_at``) are left out unless asked for.
    """
    answers = Assignment.objects.filter(
        participant__study=study, status=Assignment.Status.SUBMITTED
    )
    if not include_excluded:
        answers = answers.filter(participant__excluded_at__isnull=True)
    return (
        answers.select_related(
            "participant__user", "study_item__scene", "study_item__study_work__work"
        )
        .prefetch_related(
            Prefetch(
                "guesses",
                queryset=Guess.objects.select_related("instance__gold_character").order_by(
                    "instance__code"
                ),
            )
        )
        .order_by("participant__created_at", "participant_id", "session__started_at", "position")
    )


def excluded_left_out(study: Study) -> int:
    """How many excluded participants have answers that exports leave out by default."""
    return (
        Participant.objects.filter(study=study, excluded_at__isnull=False)
        .filter(
            Q(assignments__status=Assignment.Status.SUBMITTED)
            | Q(assignments__choices__isnull=False)
        )
        .distinct()
        .count()
    )


# Who answered, and whether reports count them: the first columns of every row-level
# export (scene answers, multiple-choice picks, exit answers).
PARTICIPANT_COLUMNS = ["participant_id", "participant", "withdrawn", "excluded", "exclusion_reason"]
# What the item was there for: practice and attention checks never count in scores.
ROLE_COLUMNS = ["role", "practice", "attention_check"]


def participant_fields(participant: Participant) -> dict[str, Any]:
    """The :data:`PARTICIPANT_COLUMNS` of one participant's rows."""
    return {
        "participant_id": participant.pk,
        "participant": str(participant),
        "withdrawn": participant.withdrawn_at is not None,
        "excluded": participant.excluded_at is not None,
        "exclusion_reason": participant.exclusion_reason,
    }


def role_fields(item: StudyItem) -> dict[str, Any]:
    """The :data:`ROLE_COLUMNS` of one item's rows."""
    return {
        "role": item.role,
        "practice": item.role == StudyItem.Role.PRACTICE,
        "attention_check": item.role == StudyItem.Role.ATTENTION,
    }


def seconds(ms: int | None) -> float | None:
    """Milliseconds as seconds for exports (None stays None: not timed)."""
    return None if ms is None else round(ms / 1000, 3)


RESPONSE_COLUMNS = [
    *PARTICIPANT_COLUMNS,
    "work",
    "scene",
    *ROLE_COLUMNS,
    "seen",
    "code",
    "answer",
    "answer_shown",
    "cant_tell",
    "gold",
    "correct",
    "confidence",
    "history_needed",
    "tags",
    "evidence",
    "seconds_total",
    "seconds_active",
    "total_ms",
    "active_ms",
    "first_shown_at",
    "submitted_at",
    "item_set_hash",
    "instructions_version",
    "assignment_seed",
    "app_version",
    "names",
]


def response_rows(study: Study, *, include_excluded: bool = False) -> list[dict[str, Any]]:
    """One flat row per masked-speaker answer: responses.csv, responses.json and the API."""
    name_maps = {
        sw.pk: sw.name_map or {} for sw in StudyWork.objects.filter(study=study).only("name_map")
    }
    from .scene.perturbation import display_name

    rows = []
    for a in study_responses(study, include_excluded=include_excluded):
        version = a.version or {}
        name_map = name_maps.get(a.study_item.study_work_id, {}) if study.perturb_names else {}
        who, role = participant_fields(a.participant), role_fields(a.study_item)
        for g in a.guesses.all():
            rows.append(
                {
                    **who,
                    "work": a.study_item.study_work.work.key,
                    "scene": a.study_item.scene.source_id,
                    **role,
                    "seen": a.seen,
                    "code": g.instance.code,
                    "answer": g.answer,
                    "answer_shown": display_name(g.answer, name_map),
                    "cant_tell": g.cant_tell,
                    "gold": g.instance.gold_character.name,
                    "correct": g.correct,
                    "confidence": a.confidence,
                    "history_needed": a.history_needed,
                    "tags": ";".join(g.tags or []),
                    "evidence": g.evidence,
                    "seconds_total": seconds(a.total_ms),
                    "seconds_active": seconds(a.active_ms),
                    "total_ms": a.total_ms,
                    "active_ms": a.active_ms,
                    "first_shown_at": a.first_shown_at.isoformat() if a.first_shown_at else "",
                    "submitted_at": a.submitted_at.isoformat() if a.submitted_at else "",
                    "item_set_hash": version.get("item_set_hash", ""),
                    "instructions_version": version.get("instructions_version", ""),
                    "assignment_seed": version.get("assignment_seed", ""),
                    "app_version": version.get("app_version", ""),
                    "names": version.get("names", ""),
                }
            )
    return rows
