"""Multiple-choice studies on the one study mechanism: CharToM-QA and the DynToM baseline.

Both reuse what scene studies use: participants and invite tokens, consent, the
``Familiarity``/``WorkSession``/``Assignment`` rows, assignment under row locks
(``studies.assignment``), the server clock on the assignment, version stamps, pause and
withdraw. What differs is the item and the answer:

- CharToM-QA (paper 6.3): the item is one question (``StudyItem.qa_item``). People say
  which books they have read; the researcher applies the read/not-read design
  (``studies.choice.design``), after which late joiners and withdrawals rebalance it.
  A participant first picks with the short plot window (c = 0), then sees the long one
  (c = 2k) and keeps or changes the pick: two ``ChoiceAnswer`` rows.
- DynToM (paper 4.1): the item is a whole stage (``StudyItem.stage``), handed out with
  the study's overlap quota; its questions (or the researcher's subset) are answered
  one at a time with the story in view.
- A mapped benchmark (``benchmark="generic"``, ``studies.choice.generic``): the item is
  one multiple-choice item (``StudyItem.mc_item``), drawn by category; a participant
  takes a batch of the items with room under the overlap quota, practice items first
  and attention checks among them, and answers each once, the options in an order
  fixed by the assignment's stored seed.

Gold is read only here, when an assignment becomes final.
"""

from __future__ import annotations

import random
import secrets
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from benchmarks.models import DynToMQuestion, DynToMStage, MCItem, QAItem, Work

from ..assignment import items_assign_with_room
from ..counting import counted_participants
from ..errors import StudyError
from ..models import (
    Assignment,
    ChoiceAnswer,
    Familiarity,
    Participant,
    StratumTally,
    Study,
    StudyItem,
    StudyWork,
    WorkSession,
)
from ..participation.ledger import exclusions_refresh
from ..participation.recruitment import participant_no_work_record, session_prepare
from ..participation.services import check_active
from ..services import item_set_hash, study_items_set
from . import allocation
from .design import Design, Slot, design_compute
from .generic import (
    GENERIC,
    GenericSpec,
    GenericSpecError,
    generic_options,
    generic_sample,
    instructed_parse,
    shown_item,
    shuffles,
)

CHARTOM = "chartom-qa"
DYNTOM = "dyntom"
CHOICE_BENCHMARKS = (CHARTOM, DYNTOM, GENERIC)
# The paper's human study (6.3): 150 questions from 5 books.
DEFAULT_QUESTIONS = 150
# DynToM's human baseline (4.1) answered a random 30% of the stages.
DEFAULT_STAGE_FRACTION = 0.3


class ChoiceReplay(StudyError):
    """The answer was already given: a replay (double click, second tab, back button)."""


def study_is_choice(study: Study) -> bool:
    return study.benchmark in CHOICE_BENCHMARKS


# -- set-up -----------------------------------------------------------------------------


def chartom_options(item: QAItem) -> list[str]:
    """The item's options in its own order: the reference answer, then the misleading ones."""
    return [item.answer, *item.misleading_choices]


def option_order(seed: int, n: int) -> list[int]:
    """The order a participant sees ``n`` options in, fixed by the assignment's seed."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


def dyntom_gold_index(question: DynToMQuestion) -> int:
    return ord(question.gold_letter.strip().lower()[:1] or "?") - ord("a")


def generic_order(study: Study, assignment: Assignment, n: int) -> list[int]:
    """The order a participant sees a mapped item's ``n`` options in: the item's own
    order, or (when the study shuffles) the order the assignment's stored seed gives."""
    if shuffles(study.sampling) and assignment.option_seed is not None:
        return option_order(assignment.option_seed, n)
    return list(range(n))


@dataclass(frozen=True)
class ChoiceStudyCreated:
    study: Study
    items: int
    skipped: dict[str, int]  # reason -> how many items of the chosen works were left out


@dataclass(frozen=True)
class ChoiceSample:
    """The items a multiple-choice study asks, as ``studies.services`` builds them."""

    items: list[tuple[int, dict[str, Any]]]  # (work id, StudyItem fields with position)
    sampling: dict[str, Any]  # stored on the study: how they were drawn, and what was left out
    defaults: dict[str, Any]  # the benchmark's study settings (the caller's win)


def choice_items_sample(
    *,
    benchmark: str,
    works: list[Work],
    questions: int | None = None,
    stage_fraction: float | None = None,
    question_types: list[str] | None = None,
    generic: GenericSpec | None = None,
    seed: int = 0,
) -> ChoiceSample:
    """The items of a multiple-choice study over ``works``, drawn with ``seed``.

    CharToM-QA: ``questions`` questions (default 150), spread as evenly as the books
    allow; only items with three misleading choices and both plot windows (c = 0 and
    c = 2k) can be asked in the paper's two rounds. DynToM: a seeded ``stage_fraction``
    of the stages (default 30%), each with all its questions or those of
    ``question_types``. A mapped benchmark (one work): the items ``generic`` asks for,
    drawn by category (``generic.generic_sample``). The same arguments always draw the
    same items.
    """
    if benchmark not in CHOICE_BENCHMARKS:
        raise StudyError(f"not a multiple-choice benchmark: {benchmark}")
    if not works:
        raise StudyError("choose at least one work")
    if wrong := [w.key for w in works if w.benchmark != benchmark]:
        raise StudyError(f"not {benchmark} works: {', '.join(wrong)}")
    if benchmark == GENERIC:
        if len(works) != 1:
            raise StudyError("works: choose one mapped benchmark (a study covers one)")
        items, sampling = generic_sample(work=works[0], spec=generic or GenericSpec(), seed=seed)
        return ChoiceSample(items=items, sampling=sampling, defaults={"overlap": 1})
    rng = random.Random(seed)
    skipped: dict[str, int] = defaultdict(int)
    if benchmark == CHARTOM:
        defaults: dict[str, Any] = {"overlap": 2, "min_seen": 1, "min_unseen": 1}
        chosen = _chartom_sample(works, questions or DEFAULT_QUESTIONS, rng, skipped)
    else:
        defaults = {"overlap": 1}
        chosen = _dyntom_sample(works, stage_fraction, question_types, rng, skipped)
    if not chosen:
        raise StudyError(
            "the chosen works have no items this study can ask"
            + (f" ({_skip_text(skipped)})" if skipped else "")
        )
    return ChoiceSample(
        items=[
            (work_id, {**fields, "position": position})
            for position, (work_id, fields) in enumerate(chosen)
        ],
        sampling={
            "questions": questions,
            "stage_fraction": stage_fraction,
            "question_types": question_types or [],
            "skipped": dict(skipped),
        },
        defaults=defaults,
    )


@transaction.atomic
def choice_study_create(
    *,
    name: str,
    benchmark: str,
    works: list[Work],
    questions: int | None = None,
    stage_fraction: float | None = None,
    question_types: list[str] | None = None,
    generic: GenericSpec | None = None,
    allocation_spec: allocation.AllocationSpec | None = None,
    seed: int = 0,
    created_by=None,
    **settings_: Any,
) -> ChoiceStudyCreated:
    """A draft multiple-choice study over ``works`` (books, DynToM stages, or one mapped
    benchmark), its items drawn by :func:`choice_items_sample`. ``settings_`` are Study
    fields (overlap, reveal, texts…). A mapped benchmark's study also stores how its
    answers are allocated (``allocation_spec``, uniform by default).
    """
    sample = choice_items_sample(
        benchmark=benchmark,
        works=works,
        questions=questions,
        stage_fraction=stage_fraction,
        question_types=question_types,
        generic=generic,
        seed=seed,
    )
    if benchmark == GENERIC:
        sample.sampling["allocation"] = allocation.allocation_settings(
            allocation_spec or allocation.AllocationSpec(),
            work=works[0],
            sampling=sample.sampling,
            overlap=(sample.defaults | settings_)["overlap"],
            test_items=sum(1 for _, f in sample.items if f.get("role") == StudyItem.Role.TEST),
        )
    if Study.objects.filter(name=name).exists():
        raise StudyError(f"a study named {name!r} exists already: choose another name")
    study = Study.objects.create(
        name=name,
        benchmark=benchmark,
        seed=seed,
        created_by=created_by,
        sampling=sample.sampling,
        **(sample.defaults | settings_),
    )
    study_items_set(study=study, works=works, items=sample.items)
    return ChoiceStudyCreated(
        study=study, items=len(sample.items), skipped=sample.sampling.get("skipped") or {}
    )


def _skip_text(skipped: dict[str, int]) -> str:
    return "; ".join(f"{n} {reason}" for reason, n in sorted(skipped.items()))


def _chartom_sample(works, n, rng, skipped) -> list[tuple[int, dict]]:
    by_work: dict[int, list[QAItem]] = defaultdict(list)
    for item in QAItem.objects.filter(work__in=works).order_by("work_id", "position"):
        if len(item.misleading_choices or []) != 3:
            skipped["without three misleading choices"] += 1
        elif not (item.context_0 or "").strip() or not (item.context_2000 or "").strip():
            skipped["without both plot windows (c = 0 and c = 2k)"] += 1
        else:
            by_work[item.work_id].append(item)
    for items in by_work.values():
        rng.shuffle(items)
    # Round-robin over the books, so 150 from 5 books is 30 each where they have them.
    picked: list[QAItem] = []
    queues = [by_work[w.pk] for w in works if by_work[w.pk]]
    while len(picked) < n and queues:
        for queue in list(queues):
            if len(picked) == n:
                break
            picked.append(queue.pop())
            if not queue:
                queues.remove(queue)
    picked.sort(key=lambda i: (i.work_id, i.position))
    return [(item.work_id, {"qa_item": item}) for item in picked]


def _dyntom_sample(works, fraction, question_types, rng, skipped) -> list[tuple[int, dict]]:
    fraction = DEFAULT_STAGE_FRACTION if fraction is None else fraction
    if not 0 < fraction <= 1:
        raise StudyError("the share of stages must be between 0 and 1 (e.g. 0.3)")
    stages = list(DynToMStage.objects.filter(work__in=works).order_by("work__key"))
    k = max(1, round(len(stages) * fraction)) if stages else 0
    picked = sorted(rng.sample(stages, k), key=lambda s: s.work.key)
    out = []
    for stage in picked:
        ids: list[int] = []
        if question_types:
            ids = list(
                DynToMQuestion.objects.filter(stage=stage, question_type__in=question_types)
                .order_by("position")
                .values_list("pk", flat=True)
            )
            if not ids:
                skipped["stages without questions of the chosen types"] += 1
                continue
        out.append((stage.work_id, {"stage": stage, "question_ids": ids}))
    return out


# -- CharToM-QA: which books, and the design ----------------------------------------------


def books_declare(*, participant: Participant, read_work_ids: set[int]) -> list[WorkSession]:
    """Record which of the study's books the participant has read (all at once).

    The first declaration stands (a replay or a second tab changes nothing). When the
    design is already applied, this is a late joiner: the design is rebalanced at once.

    Someone who has read every book or none cannot be given as many questions about
    books they have read as about books they have not, so the design has nothing for
    them: that declaration is refused, recorded in the ledger as "no work available"
    (with which of the two) and no session is made; the participant is told why and
    gets no completion code. Returns no sessions then.
    """
    check_active(participant)
    study = participant.study
    study_works = list(StudyWork.objects.filter(study=study).select_related("work"))
    if unknown := set(read_work_ids) - {sw.work_id for sw in study_works}:
        raise StudyError(f"not books of this study: {sorted(unknown)}")
    with transaction.atomic():
        # One declaration at a time per participant (two tabs, a double click).
        locked = Participant.objects.select_for_update().get(pk=participant.pk)
        if WorkSession.objects.filter(participant=participant).exists():
            return list(participant.work_sessions.all())
        if locked.no_work_reason:
            return []
        read_all = len(set(read_work_ids)) == len(study_works)
        if read_all or not read_work_ids:
            reason = Participant.NoWork.READ_ALL if read_all else Participant.NoWork.READ_NONE
            participant_no_work_record(participant=participant, reason=reason)
            return []
        sessions = []
        for sw in study_works:
            read = sw.work_id in read_work_ids
            sessions.append(
                WorkSession.objects.create(
                    participant=participant,
                    study_work=sw,
                    seen=read,
                    seed=secrets.randbelow(2**31),
                    # Nothing to read first: the plot windows come with each question.
                    history_confirmed_at=timezone.now(),
                )
            )
            Familiarity.objects.update_or_create(
                participant=participant, work=sw.work, defaults={"seen": read}
            )
        if study.design_applied_at is not None:
            design_apply(study=study)
    return sessions


@dataclass(frozen=True)
class DesignView:
    """The design as the researcher sees it before (and after) applying it."""

    design: Design
    fixed: list[Slot]
    participants: dict[int, Participant]
    books: dict[int, Work]
    declared: dict[int, set[int]]  # participant id -> ids of the books read
    waiting: list[Participant]  # consented or invited, no declaration yet
    items: dict[int, StudyItem]  # qa_item id -> study item
    # Declared every book or none: refused, told there is no work for them.
    refused: list[Participant] = field(default_factory=list)

    def rows(self) -> list[dict[str, Any]]:
        counts = self.design.counts(self.fixed)
        return [
            {
                "participant": p,
                "read_books": [self.books[w] for w in sorted(self.declared[pid])],
                "read": counts.get(pid, (0, 0))[0],
                "not_read": counts.get(pid, (0, 0))[1],
                "excluded": self.design.excluded.get(pid, "")
                or (
                    "no question left that keeps the design balanced (more readers of "
                    "their books than questions)"
                    if counts.get(pid, (0, 0)) == (0, 0) and self.design.slots
                    else ""
                ),
                # Gets questions, but read != not-read cannot hold for them: say why.
                "note": self.design.unbalanced.get(pid, ""),
            }
            for pid, p in self.participants.items()
        ]

    def uncovered(self) -> list[dict[str, Any]]:
        return [{"item": self.items[q], "reason": reason} for q, reason in self.design.uncovered]


def design_preview(*, study: Study) -> DesignView:
    """What ``design_apply`` would do now, computed from the declarations so far."""
    return _design(study)


def _design(study: Study) -> DesignView:
    active = Participant.objects.filter(study=study, withdrawn_at__isnull=True)
    declared: dict[int, set[int]] = defaultdict(set)
    participants: dict[int, Participant] = {}
    for session in (
        WorkSession.objects.filter(participant__in=active)
        .select_related("participant", "study_work")
        .order_by("participant_id", "study_work__position")
    ):
        participants[session.participant_id] = session.participant
        declared[session.participant_id]
        if session.seen:
            declared[session.participant_id].add(session.study_work.work_id)
    items = {
        i.qa_item_id: i
        for i in StudyItem.objects.filter(study=study, held_back=False).select_related(
            "qa_item", "study_work__work"
        )
    }
    questions: dict[int, list[int]] = defaultdict(list)
    for qa_id, item in sorted(items.items(), key=lambda kv: kv[1].position):
        questions[item.study_work.work_id].append(qa_id)
    books = {
        sw.work_id: sw.work for sw in StudyWork.objects.filter(study=study).select_related("work")
    }
    fixed = [
        Slot(a.study_item.qa_item_id, a.participant_id, a.seen)
        for a in Assignment.objects.filter(participant__in=active, study_item__study=study)
        .filter(_started())
        .select_related("study_item")
    ]
    design = design_compute(
        questions={w: questions.get(w, []) for w in books},
        readers={pid: declared[pid] for pid in participants},
        fixed=fixed,
        seed=study.seed,
        titles={w: work.title for w, work in books.items()},
    )
    undeclared = active.exclude(pk__in=list(participants)).order_by("created_at")
    refused = [Participant.NoWork.READ_ALL, Participant.NoWork.READ_NONE]
    return DesignView(
        design,
        fixed,
        participants,
        books,
        dict(declared),
        list(undeclared.exclude(no_work_reason__in=refused)),
        items,
        list(undeclared.filter(no_work_reason__in=refused)),
    )


def _started() -> Q:
    """Assignments someone has seen or answered: a rebalance never takes them away."""
    return (
        Q(first_shown_at__isnull=False)
        | Q(status=Assignment.Status.SUBMITTED)
        | Q(choices__isnull=False)
    )


@transaction.atomic
def design_apply(*, study: Study) -> DesignView:
    """Hand out the design: assignments for every slot, keeping those already started.

    The study row is locked, so declarations, withdrawals and the researcher's button
    rebalance one at a time; the study's assignment rows are locked too, so a question
    being opened right now is either kept (started) or gone before it is shown.
    """
    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.benchmark != CHARTOM:
        raise StudyError("only CharToM-QA studies have a read/not-read design")
    if study.status == Study.Status.CLOSED:
        raise StudyError("the study is closed")
    list(
        Assignment.objects.select_for_update(of=("self",))
        .filter(study_item__study=study)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    # Unstarted slots go back to the pool (a withdrawn participant's too), then the
    # design is recomputed around what was started.
    stale = Assignment.objects.filter(study_item__study=study).exclude(
        pk__in=Assignment.objects.filter(study_item__study=study).filter(_started()).values("pk")
    )
    stale.delete()
    view = _design(study)
    sessions = {
        (s.participant_id, s.study_work.work_id): s
        for s in WorkSession.objects.filter(participant__study=study).select_related("study_work")
    }
    next_position = {
        row["participant_id"]: (row["top"] or 0) + 1
        for row in Assignment.objects.filter(study_item__study=study)
        .values("participant_id")
        .annotate(top=Max("position"))
    }
    by_person: dict[int, list[Slot]] = defaultdict(list)
    for slot in view.design.slots:
        by_person[slot.participant].append(slot)
    rows = []
    for pid, slots in by_person.items():
        rng = random.Random(f"{study.seed}:{pid}")
        rng.shuffle(slots)  # read and not-read questions interleaved, book by book mixed
        for offset, slot in enumerate(slots):
            item = view.items[slot.question]
            rows.append(
                Assignment(
                    participant_id=pid,
                    session=sessions[(pid, item.study_work.work_id)],
                    study_item=item,
                    position=next_position.get(pid, 0) + offset,
                    seen=slot.read,
                    option_seed=rng.randrange(2**31),
                )
            )
    Assignment.objects.bulk_create(rows)
    if study.design_applied_at is None:
        study.design_applied_at = timezone.now()
        study.save(update_fields=["design_applied_at", "updated_at"])
    return view


def design_rebalance_if_applied(*, study: Study) -> None:
    """After a withdrawal: the withdrawn participant's unstarted questions go to others."""
    if study.benchmark == CHARTOM and study.design_applied_at is not None:
        design_apply(study=study)


def qa_directness_label(*, study: Study, item_id: int, directness: str) -> QAItem:
    """A researcher's direct/indirect label (paper 6.4) on one of the study's questions.

    The label belongs to the item bank's question, so model runs on the same item are
    reported by it too.
    """
    from benchmarks.services import qa_item_directness_set

    item = StudyItem.objects.filter(study=study, pk=item_id, qa_item__isnull=False).first()
    if item is None:
        raise StudyError("no such question in this study")
    return qa_item_directness_set(item=item.qa_item, directness=directness)


# -- DynToM: taking a stage -----------------------------------------------------------------


def _stage_has_room(study: Study, counts) -> bool:
    return sum(counts.values()) < study.overlap


def dyntom_stage_open(participant: Participant) -> StudyWork | None:
    """The next stage with room that the participant has not taken (a cheap pre-check,
    one query whatever the number of stages)."""
    if participant.excluded_at is not None:  # their places went back to the pool
        return None
    live = Count(
        "items__assignments", filter=counted_participants("items__assignments__"), distinct=True
    )
    return (
        StudyWork.objects.filter(study=participant.study, items__held_back=False)
        .exclude(pk__in=participant.work_sessions.values("study_work"))
        .annotate(live=live)
        .filter(live__lt=participant.study.overlap)
        .order_by("position")
        .first()
    )


def dyntom_stage_take(*, participant: Participant, study_work_id: int) -> Assignment | None:
    """Give the participant this stage if it still has room (row-locked quota)."""
    check_active(participant)
    study = participant.study
    study_work = StudyWork.objects.filter(study=study, pk=study_work_id).first()
    if study_work is None:
        raise StudyError("that stage is not part of your study")
    with transaction.atomic():
        session, created = WorkSession.objects.get_or_create(
            participant=participant,
            study_work=study_work,
            defaults={
                "seen": False,
                "seed": secrets.randbelow(2**31),
                "history_confirmed_at": timezone.now(),
            },
        )
        if not created:
            return session.assignments.first()
        top = participant.assignments.aggregate(top=Max("position"))["top"]
        given = items_assign_with_room(
            items=StudyItem.objects.filter(study_work=study_work, held_back=False),
            assignments=Assignment.objects.filter(counted_participants()),
            item_field="study_item",
            has_room=lambda item, counts: _stage_has_room(study, counts),
            build=lambda items: (
                Assignment(
                    participant=participant,
                    session=session,
                    study_item=item,
                    position=(top or 0) + 1,
                    seen=False,
                )
                for item in items
            ),
        )
        if not given:
            WorkSession.objects.filter(pk=session.pk).update(finished_at=timezone.now())
            return None
    return session.assignments.first()


def dyntom_questions(item: StudyItem) -> list[DynToMQuestion]:
    """The stage's questions this study asks, in the data's order."""
    qs = DynToMQuestion.objects.filter(stage_id=item.stage_id).order_by("position")
    if item.question_ids:
        qs = qs.filter(pk__in=item.question_ids)
    return list(qs)


# -- mapped benchmarks: taking a batch ---------------------------------------------------


def _generic_open(study: Study):
    """The study's test items a participant can be given (practice and checks go to
    everyone, outside the quota)."""
    return StudyItem.objects.filter(study=study, role=StudyItem.Role.TEST, held_back=False)


def generic_has_room(participant: Participant) -> bool:
    """Whether any test item still has room under the overlap quota (a cheap pre-check
    before the offer page; the take itself counts again under row locks)."""
    study = participant.study
    if participant.excluded_at is not None:  # their places went back to the pool
        return False
    if allocation.is_adaptive(study):  # no quota per item: the budget in all
        places = Assignment.objects.filter(
            counted_participants(), study_item__in=_generic_open(study)
        ).count()
        return places < allocation.study_budget(study)
    live = Count("assignments", filter=counted_participants("assignments__"), distinct=True)
    return _generic_open(study).annotate(live=live).filter(live__lt=study.overlap).exists()


def generic_batch_take(*, participant: Participant) -> list[Assignment]:
    """Give the participant their batch: up to ``items_per_participant`` test items with
    room (all of them when 0), practice items first and attention checks among them.

    The items with the fewest live participants go first (ties in an order drawn from
    the session's stored seed), so the overlap fills evenly; the test items are shown
    in a seeded order too, and each assignment gets its own stored option seed when
    the study shuffles options. Quotas are counted under row locks
    (``studies.assignment``); a second call (a double click, a second tab) gives
    nothing new. Returns the participant's assignments, none when no item had room.
    """
    check_active(participant)
    study = participant.study
    study_work = StudyWork.objects.filter(study=study).order_by("position").first()
    if study.benchmark != GENERIC or study_work is None:
        raise StudyError("this study has no items to take")
    batch = (study.sampling or {}).get("items_per_participant") or 0
    shuffle = shuffles(study.sampling)
    with transaction.atomic():
        # One take at a time per participant (two tabs, a double click).
        Participant.objects.select_for_update().get(pk=participant.pk)
        if WorkSession.objects.filter(participant=participant).exists():
            return list(participant.assignments.order_by("position"))
        seed = secrets.randbelow(2**31)
        rng = random.Random(seed)
        session = WorkSession.objects.create(
            participant=participant,
            study_work=study_work,
            seen=False,
            seed=seed,
            history_confirmed_at=timezone.now(),
        )
        if allocation.is_adaptive(study):
            given = _generic_adaptive_take(participant, session, rng, batch, shuffle)
        else:
            given = _generic_uniform_take(participant, session, rng, batch, shuffle)
        if not given:
            session.delete()
            return []
        # Practice items first, attention checks spread among the test items.
        session_prepare(participant=participant, session=session, given=given)
        if shuffle:
            extras = list(session.assignments.filter(option_seed__isnull=True).order_by("position"))
            for assignment in extras:
                assignment.option_seed = rng.randrange(2**31)
            Assignment.objects.bulk_update(extras, ["option_seed"])
    return list(participant.assignments.order_by("position"))


def _generic_assignments(
    participant: Participant,
    session: WorkSession,
    rng: random.Random,
    chosen: list[StudyItem],
    shuffle: bool,
) -> list[Assignment]:
    """The batch's assignment rows, in the participant's (seeded) order."""
    chosen.sort(key=lambda i: i.pk)
    rng.shuffle(chosen)  # the participant's order
    return [
        Assignment(
            participant=participant,
            session=session,
            study_item=item,
            position=position,
            seen=False,
            option_seed=rng.randrange(2**31) if shuffle else None,
        )
        for position, item in enumerate(chosen)
    ]


def _generic_uniform_take(
    participant: Participant, session: WorkSession, rng: random.Random, batch: int, shuffle: bool
) -> list[StudyItem]:
    """Today's rule: every item up to the overlap quota, the emptiest first (ties by
    the session's seed)."""
    study = participant.study
    live: dict[int, int] = {}

    def has_room(item: StudyItem, counts) -> bool:
        live[item.pk] = sum(counts.values())
        return live[item.pk] < study.overlap

    def build(items: list[StudyItem]) -> list[Assignment]:
        ties = {item.pk: rng.random() for item in items}  # items come in pk order
        ranked = sorted(items, key=lambda i: (live[i.pk], ties[i.pk]))
        chosen = ranked[:batch] if batch else ranked
        return _generic_assignments(participant, session, rng, chosen, shuffle)

    return items_assign_with_room(
        items=_generic_open(study),
        assignments=Assignment.objects.filter(counted_participants()),
        item_field="study_item",
        has_room=has_room,
        build=build,
    )


def _generic_adaptive_take(
    participant: Participant, session: WorkSession, rng: random.Random, batch: int, shuffle: bool
) -> list[StudyItem]:
    """An adaptive design's batch (``allocation.items_choose``): under the same item locks
    and counts as the uniform take, plus one read of the strata. No item has a quota
    of its own; the study's budget (overlap x test items places in all) has: once the
    counted places reach it, nothing more is handed out.

    The strata's tallies are worked out here from each item's counted answers, which
    the take's own counting statement also counts (``allocation.TAKE_COUNTS``): kept
    nowhere, they cost an answer nothing and cannot drift from the answers when some
    stop counting (an exclusion, a withdrawal)."""
    study = participant.study
    spec = allocation.study_allocation(study)
    live: dict[int, int] = {}
    chosen: list[StudyItem] = []

    def has_room(item: StudyItem, counts) -> bool:
        live[item.pk] = sum(counts.values())
        return True  # the budget and the design decide in build(), over all the items

    def build(items: list[StudyItem]) -> list[Assignment]:
        rows = list(StratumTally.objects.filter(study=study).order_by("key"))
        strata = {pk: row.key for row in rows for pk in row.item_ids}
        by_pk = {item.pk: item for item in items if item.pk in strata}
        answers = {pk: (item.answers, item.right) for pk, item in by_pk.items()}
        budget = allocation.study_budget(study, len(items))
        picked = allocation.items_choose(
            design=spec.design,
            tallies={row.key: allocation.row_tally(row, answers) for row in rows},
            strata={pk: strata[pk] for pk in by_pk},
            live=live,
            ties={pk: rng.random() for pk in sorted(by_pk)},
            n=max(0, min(batch, budget - sum(live.values()))),
            min_per_item=spec.min_per_item,
            cap=allocation.cap_per_item(budget, batch),
        )
        chosen.extend(by_pk[pk] for pk in picked)
        return _generic_assignments(participant, session, rng, list(chosen), shuffle)

    items_assign_with_room(
        items=_generic_open(study),
        assignments=Assignment.objects.filter(counted_participants()),
        item_field="study_item",
        has_room=has_room,
        build=build,
        extra=allocation.TAKE_COUNTS,
    )
    return chosen


# -- instructed-response items the researcher writes -----------------------------------------


def _instructed_editable(study: Study, field_name: str) -> StudyWork:
    """The study's work, when its written checks may still change (raises otherwise)."""
    if study.benchmark != GENERIC:
        raise GenericSpecError(
            field_name, "only a multiple-choice study over a mapped benchmark takes written checks"
        )
    if study.status == Study.Status.CLOSED:
        raise GenericSpecError(field_name, "the study is closed")
    if WorkSession.objects.filter(participant__study=study).exists():
        # Everyone who takes a batch gets every check: one added later would reach only
        # the participants after it, and the rule would count them unevenly.
        raise GenericSpecError(
            field_name,
            "participants have taken their items already: every participant must get the "
            "same checks, so they can no longer change",
        )
    study_work = StudyWork.objects.filter(study=study).order_by("position").first()
    if study_work is None:
        raise GenericSpecError(field_name, "the study has no items")
    return study_work


def _item_set_refresh(study: Study) -> None:
    if study.item_set_hash:  # live, no batch taken yet: the fixed set moves with the checks
        study.item_set_hash = item_set_hash(study)
        study.save(update_fields=["item_set_hash", "updated_at"])


@transaction.atomic
def instructed_item_add(
    *, study: Study, question: str, options: str | list[str], answer: str
) -> StudyItem:
    """Add an attention check the researcher wrote: ``question`` as participants read it
    ("Select 'Iris' for this question"), ``options`` one a line, ``answer`` the option to
    pick. It goes to every participant among their test items, like the drawn checks,
    and a wrong pick counts as a failed instructed-response item
    (``Study.instructed_max_failures``, ``ledger.INSTRUCTED_REASON``).

    Raises :class:`GenericSpecError` naming the field (``instructed_question``,
    ``instructed_options``, ``instructed_answer``), and before anything is written.
    """
    data = instructed_parse(question=question, options=options, answer=answer)
    study = Study.objects.select_for_update().get(pk=study.pk)
    study_work = _instructed_editable(study, "instructed_question")
    last = StudyItem.objects.filter(study=study).aggregate(m=Max("position"))["m"]
    item = StudyItem.objects.create(
        study=study,
        study_work=study_work,
        role=StudyItem.Role.ATTENTION,
        position=(last or 0) + 1,
        instructed=data,
    )
    _item_set_refresh(study)
    return item


@transaction.atomic
def instructed_item_remove(*, study: Study, item_id: int) -> None:
    """Remove one of the study's written checks (only while no batch was taken).

    Raises :class:`GenericSpecError` naming the ``item`` field for another study's item
    or a bank item."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    _instructed_editable(study, "item")
    # An attention item with no bank item is a written one (``study_item_one_kind``).
    deleted, _ = instructed_items_of(study).filter(pk=item_id).delete()
    if not deleted:
        raise GenericSpecError("item", f"this study has no written check {item_id}")
    _item_set_refresh(study)


def instructed_items_of(study: Study):
    """The study's written checks, in the order they were added (a queryset)."""
    return StudyItem.objects.filter(
        study=study,
        role=StudyItem.Role.ATTENTION,
        scene__isnull=True,
        qa_item__isnull=True,
        stage__isnull=True,
        mc_item__isnull=True,
    ).order_by("position", "pk")


# -- answers ----------------------------------------------------------------------------------


def _locked(participant: Participant, assignment_id: int) -> Assignment:
    try:
        return (
            Assignment.objects.select_for_update(of=("self",))
            .select_related("study_item", "session")
            .get(pk=assignment_id, participant=participant)
        )
    except Assignment.DoesNotExist:
        raise StudyError("no such question in your assignments") from None


def _ms(since, now) -> int:
    return max(0, int((now - since).total_seconds() * 1000))


def choice_record(
    *,
    participant: Participant,
    assignment_id: int,
    action: str,
    shown: int | None = None,
    question_id: int | None = None,
) -> ChoiceAnswer:
    """Save one pick at once; the assignment becomes final with its last pick.

    CharToM-QA: ``action`` "submit" is the first pick (c = 0); then "keep" or "change"
    (with a different ``shown``) after the long window. DynToM: "submit" with the
    ``question_id``. A mapped item: "submit", once. ``shown`` is the position on the
    participant's screen. Replays
    raise :class:`ChoiceReplay`; anything else that cannot be stored, ``StudyError``.
    Nothing is written unless the whole pick is valid.
    """
    check_active(participant)
    if action not in ("submit", "keep", "change"):
        raise StudyError("unknown action: use Submit answer, Keep answer or Change answer")
    with transaction.atomic():
        assignment = _locked(participant, assignment_id)
        if assignment.study_item.qa_item_id:
            answer = _chartom_record(participant, assignment, action, shown)
        elif assignment.study_item.stage_id:
            answer = _dyntom_record(participant, assignment, action, shown, question_id)
        elif assignment.study_item.mc_item_id or assignment.study_item.instructed:
            answer = _generic_record(participant, assignment, action, shown)
        else:
            raise StudyError("this is not a multiple-choice question")
    return answer


def _chartom_record(participant, assignment, action, shown) -> ChoiceAnswer:
    item = QAItem.objects.get(pk=assignment.study_item.qa_item_id)
    order = option_order(assignment.option_seed or 0, len(chartom_options(item)))
    picks = {c.round: c for c in assignment.choices.all()}
    now = timezone.now()
    first = picks.get(ChoiceAnswer.Round.FIRST)
    if first is None:
        if action != "submit":
            raise StudyError("give your first answer (with the short passage) before revising it")
        if shown is None or not 0 <= shown < len(order):
            raise StudyError(f"choose one of the {len(order)} options")
        shown_at = assignment.first_shown_at or now
        return ChoiceAnswer.objects.create(
            assignment=assignment,
            qa_item_id=item.pk,
            round=ChoiceAnswer.Round.FIRST,
            option=order[shown],
            shown=shown,
            shown_at=shown_at,
            answered_at=now,
            ms=_ms(shown_at, now),
        )
    if ChoiceAnswer.Round.REVISION in picks or action == "submit":
        raise ChoiceReplay("you have already answered this; your answer stands")
    if action == "keep":
        option, shown, kept = first.option, first.shown, True
    else:
        if shown is None or not 0 <= shown < len(order):
            raise StudyError(f"choose one of the {len(order)} options")
        if order[shown] == first.option:
            raise StudyError("that is your first answer: choose another option, or keep it")
        option, kept = order[shown], False
    revision = ChoiceAnswer.objects.create(
        assignment=assignment,
        qa_item_id=item.pk,
        round=ChoiceAnswer.Round.REVISION,
        option=option,
        shown=shown,
        kept=kept,
        # The long window is shown the moment the first answer is taken.
        shown_at=first.answered_at,
        answered_at=now,
        ms=_ms(first.answered_at, now),
    )
    # Final: score both picks (0 is the reference answer in the item's own order).
    ChoiceAnswer.objects.filter(assignment=assignment, option=0).update(correct=True)
    ChoiceAnswer.objects.filter(assignment=assignment).exclude(option=0).update(correct=False)
    _finalise(participant, assignment, now)
    revision.refresh_from_db()
    return revision


def _dyntom_record(participant, assignment, action, shown, question_id) -> ChoiceAnswer:
    if action != "submit":
        raise StudyError("DynToM questions are answered once: use Submit answer")
    questions = {q.pk: q for q in dyntom_questions(assignment.study_item)}
    question = questions.get(question_id) if question_id is not None else None
    if question is None:
        raise StudyError("that question is not part of this stage")
    answered = {c.question_id: c for c in assignment.choices.all()}
    if question.pk in answered:
        raise ChoiceReplay("you have already answered this question; your answer stands")
    if shown is None or not 0 <= shown < len(question.options):
        raise StudyError(f"choose one of the {len(question.options)} options")
    now = timezone.now()
    last = max((c.answered_at for c in answered.values()), default=None)
    shown_at = last or assignment.first_shown_at or now
    answer = ChoiceAnswer.objects.create(
        assignment=assignment,
        question=question,
        round=ChoiceAnswer.Round.FIRST,
        option=shown,  # options are shown as in the data, in its order
        shown=shown,
        shown_at=shown_at,
        answered_at=now,
        ms=_ms(shown_at, now),
    )
    if len(answered) + 1 == len(questions):
        for c in [*answered.values(), answer]:
            c.correct = c.option == dyntom_gold_index(questions[c.question_id])
        ChoiceAnswer.objects.bulk_update([*answered.values(), answer], ["correct"])
        _finalise(participant, assignment, now)
    return answer


def _generic_record(participant, assignment, action, shown) -> ChoiceAnswer:
    if action != "submit":
        raise StudyError("each item is answered once: use Submit answer")
    if assignment.status == Assignment.Status.SUBMITTED or assignment.choices.exists():
        raise ChoiceReplay("you have already answered this item; your answer stands")
    # A bank item, or an attention check the researcher wrote (no bank item: the answer
    # is stored without one, so it is never an answer to a benchmark item).
    item = shown_item(assignment.study_item)
    order = generic_order(
        participant.study,
        assignment,
        len(generic_options(item, participant.study.sampling.get("language", ""))),
    )
    if shown is None or not 0 <= shown < len(order):
        raise StudyError(f"choose one of the {len(order)} options")
    now = timezone.now()
    shown_at = assignment.first_shown_at or now
    option = order[shown]
    # One pick makes the item final: it is scored at once, gold read only here.
    answer = ChoiceAnswer.objects.create(
        assignment=assignment,
        mc_item=item if isinstance(item, MCItem) else None,
        round=ChoiceAnswer.Round.FIRST,
        option=option,
        shown=shown,
        shown_at=shown_at,
        answered_at=now,
        ms=_ms(shown_at, now),
        correct=option in (item.answers or []),
    )
    _finalise(participant, assignment, now)
    return answer


def _finalise(participant: Participant, assignment: Assignment, now) -> None:
    study = participant.study
    assignment.status = Assignment.Status.SUBMITTED
    assignment.submitted_at = now
    assignment.last_event_at = now
    assignment.total_ms = _ms(assignment.first_shown_at or now, now)
    assignment.active_ms = assignment.total_ms
    assignment.version = {
        "item_set_hash": study.item_set_hash,
        "instructions_version": study.instructions_version,
        "assignment_seed": assignment.session.seed,
        "option_seed": assignment.option_seed,
        "app_version": getattr(settings, "TOMLAB_VERSION", ""),
    }
    assignment.save(
        update_fields=[
            "status",
            "submitted_at",
            "last_event_at",
            "total_ms",
            "active_ms",
            "version",
        ]
    )
    if not assignment.session.assignments.filter(status=Assignment.Status.ASSIGNED).exists():
        WorkSession.objects.filter(pk=assignment.session_id).update(finished_at=now)
    if assignment.study_item.role == StudyItem.Role.ATTENTION:
        exclusions_refresh(study=study)  # only when a check is answered: it reads them all
