"""Writes of the speaker-guessing study (ToM-in-AMC, TVShowGuess): the rater's next step,
familiarity and history, assignments under quotas, guesses, submit and score.
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from common.compiled_queries import CompiledQuery, binding_cursor, update_where
from studies.counting import counted_participants
from studies.errors import (
    StudyError,  # views, commands and tests import it from here
    SubmitIncomplete,
)
from studies.models import (
    Assignment,
    Familiarity,
    Guess,
    HistoryView,
    Participant,
    SceneSlot,
    Study,
    StudyItem,
    StudyWork,
    WorkSession,
)
from studies.participation.ledger import exclusions_refresh
from studies.participation.recruitment import (
    assignments_release_idle,
    session_prepare,
    study_work_has_history,
)
from studies.participation.services import check_active, participant_finish
from studies.scene.cache import SceneSpeaker, scene_gold, scene_speakers
from studies.slots import slots_claim, slots_ensure, slots_seat

# Gaps between a rater's actions longer than this are idle time, not work.
IDLE_CUTOFF = timedelta(minutes=2)
# The choice index that stands for "can't tell" (studies that offer it).
CANT_TELL = -2


@dataclass(frozen=True)
class NextStep:
    """Where the rater goes next: ``kind`` is consent, familiarity, history, scene or done."""

    kind: str
    study_work: StudyWork | None = None
    session: WorkSession | None = None
    assignment: Assignment | None = None


def _open_works(participant: Participant) -> list[StudyWork]:
    """Works the rater has not started whose scenes still have room for some rater."""
    started = participant.work_sessions.values("study_work")
    return list(
        StudyWork.objects.filter(study=participant.study)
        .exclude(pk__in=started)
        .select_related("work")
        .order_by("position")
    )


# ``participant_next_step``'s default: the caller has not looked for the open scene.
_UNREAD = object()


def participant_next_step(*, participant: Participant, open_assignment: Any = _UNREAD) -> NextStep:
    """What the rater should see now; the same answer after a reload (resumption).

    ``open_assignment``: what ``rater_open_assignment`` gave the caller for this rater
    in this request (None included), so an onboarding page does not ask twice.
    """
    offer_work = participant.study.status == Study.Status.LIVE and participant.withdrawn_at is None
    return _next_step(participant, offer_work=offer_work, open_assignment=open_assignment)


def participant_finished(*, participant: Participant) -> bool:
    """Whether the rater has done everything the study has for them: the "at the end".

    Only the rater's own progress counts, never the study's status: a paused (or
    closed) study offers no new work, so asking ``participant_next_step`` would call a
    rater half-way through "done" and reveal the gold of the works they finished
    while others they still have to answer wait (issue 10, item 3).
    """
    return _next_step(participant, offer_work=True).kind == "done"


def participant_reveal_allowed(*, participant: Participant) -> bool:
    """Whether the rater may see the gold of their submitted scenes now."""
    if participant.study.reveal == Study.Reveal.AFTER_SCENE:
        return True
    return participant_finished(participant=participant)


def _open_scene_assignments(**rater: Any) -> QuerySet[Assignment]:
    """The rater's first open scene assignment, with what the scene page shows."""
    # Scenes only: multiple-choice items have their own pages (studies.choice.views).
    # The first open one is picked in a subquery that joins only what the order needs.
    # Ordering the whole join made PostgreSQL join every open scene of the rater to
    # five tables to keep one: twice its CPU for this query.
    first_open = (
        Assignment.objects.filter(
            status=Assignment.Status.ASSIGNED, study_item__scene__isnull=False, **rater
        )
        .order_by("session__started_at", "position")
        .values("pk")[:1]
    )
    in_session = (
        Assignment.objects.filter(session_id=OuterRef("session_id"))
        .order_by()
        .values("session_id")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return (
        Assignment.objects.filter(pk=Subquery(first_open))
        .select_related("participant__study", "session__study_work__work", "study_item")
        .only(
            *_ASSIGNMENT_FIELDS,
            *_RATER_FIELDS,
            "session__study_work_id",
            "session__history_confirmed_at",
            "session__study_work__work_id",
            "session__study_work__name_map",
            "session__study_work__work__title",
            "session__study_work__work__kind",
        )
        .annotate(session_total=Subquery(in_session))
        .order_by()  # one row: the model's default ordering would only add a sort
    )


# Every scene page runs one of these: compiled once per connection (common.compiled_queries).
_OPEN_BY_TOKEN = CompiledQuery(
    lambda token: _open_scene_assignments(participant__token=token), token=str
)
_OPEN_BY_PARTICIPANT = CompiledQuery(
    lambda participant_id: _open_scene_assignments(participant_id=participant_id),
    participant_id=int,
)


def rater_open_assignment(
    *, participant: Participant | None = None, token: str | None = None
) -> Assignment | None:
    """The rater's next open scene (the first by session, then position), or None.

    One query brings what the scene page shows: the participant and study, the
    session, its work, the study item (not the scene: its body is cached, see
    ``scene_cache``) and ``session_total``, the number of scenes in the session, so no
    page counts them. The rater is ``participant`` or the invite ``token``.
    """
    if participant is not None:
        return _OPEN_BY_PARTICIPANT.first(participant_id=participant.pk)
    if token is not None:
        return _OPEN_BY_TOKEN.first(token=token)
    raise TypeError("rater_open_assignment needs a participant or a token")


def _next_step(
    participant: Participant, *, offer_work: bool, open_assignment: Any = _UNREAD
) -> NextStep:
    if participant.consented_at is None:
        return NextStep("consent")
    if open_assignment is _UNREAD:
        open_assignment = rater_open_assignment(participant=participant)
    if open_assignment is not None:
        if open_assignment.session.history_confirmed_at is None:
            return NextStep(
                "history",
                study_work=open_assignment.session.study_work,
                session=open_assignment.session,
            )
        return NextStep(
            "scene",
            study_work=open_assignment.session.study_work,
            session=open_assignment.session,
            assignment=open_assignment,
        )
    # An excluded rater's places went back to the pool: they are given no new ones.
    if offer_work and participant.excluded_at is None:
        assignments_release_idle(study=participant.study)  # no query without a timeout
        for study_work in _open_works(participant):
            if _work_has_room(study_work, overlap=participant.study.overlap):
                return NextStep("familiarity", study_work=study_work)
    return NextStep("done")


def _work_has_room(study_work: StudyWork, *, overlap: int) -> bool:
    """Cheap pre-check (no locks) that some scene of the work is not yet full.

    A free slot is room (``studies.slots``: a scene's counted raters sit in its slots),
    found on the partial index of free slots. Counting every scene's raters instead
    read all the work's assignments on each onboarding page (5,300 rows for 100
    raters of 53 scenes). A scene without slots yet (``slots_ensure`` makes them on the
    claim) is counted the old way.
    """
    counted = (
        Assignment.objects.filter(counted_participants(), study_item_id=OuterRef("pk"))
        .order_by()
        .values("study_item_id")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return (
        StudyItem.objects.filter(study_work=study_work, held_back=False, role=StudyItem.Role.TEST)
        .alias(n=Coalesce(Subquery(counted), 0))
        .filter(
            Exists(SceneSlot.objects.filter(study_item_id=OuterRef("pk"), assignment__isnull=True))
            | (~Exists(SceneSlot.objects.filter(study_item_id=OuterRef("pk"))) & Q(n__lt=overlap))
        )
        .exists()
    )


def familiarity_declare(
    *, participant: Participant, study_work: StudyWork, seen: bool
) -> WorkSession:
    """Record "seen it?" for the work and assign its scenes that have room for this rater.

    Each scene's quota is a set of slot rows (``studies.slots``): the rater
    claims one free slot per scene, skipping slots another rater is claiming at that
    moment, so raters starting a work together do not wait for each other. No scene is
    ever given to more raters than the study allows, and no rater gets a scene twice.
    """
    check_active(participant)
    if study_work.study_id != participant.study_id:
        raise StudyError("that work is not part of your study")
    study = participant.study
    assignments_release_idle(study=study)  # idle raters' open scenes count as free
    slots_ensure(study_work=study_work)
    with transaction.atomic():
        session, created = WorkSession.objects.get_or_create(
            participant=participant,
            study_work=study_work,
            defaults={"seen": seen, "seed": secrets.randbelow(2**31)},
        )
        if not created:
            return session  # a second tab or a replay: the first declaration stands
        # Written only with the session, so a replay saying the opposite cannot leave
        # the familiarity record disagreeing with the quota its scenes were counted in.
        Familiarity.objects.update_or_create(
            participant=participant, work=study_work.work, defaults={"seen": seen}
        )
        # An excluded rater holds no place (``studies.counting``): they claim none.
        excluded = participant.excluded_at is not None
        claimed = [] if excluded else slots_claim(study_work=study_work, seen=seen)
        given = Assignment.objects.bulk_create(
            Assignment(
                participant=participant,
                session=session,
                study_item_id=item_id,
                position=position,
                seen=seen,
            )
            for position, (item_id, _) in enumerate(claimed)
        )
        slots_seat(participant_id=participant.pk, slot_ids=[slot for _, slot in claimed])
        if not given:
            WorkSession.objects.filter(pk=session.pk).update(finished_at=timezone.now())
        session_prepare(participant=participant, session=session, given=given)
    return session


def history_view_log(
    *, session: WorkSession, where: str = "reader", assignment: Assignment | None = None
) -> None:
    HistoryView.objects.create(session=session, where=where, assignment=assignment)


def history_confirm(*, participant: Participant, session: WorkSession) -> WorkSession:
    check_active(participant)
    if session.participant_id != participant.pk:
        raise StudyError("that is not your session")
    confirmed = WorkSession.objects.filter(pk=session.pk, history_confirmed_at__isnull=True).update(
        history_confirmed_at=timezone.now()
    )
    if confirmed and participant.study.floor_wpm:
        # The history is the longest page: read under the floor, the rule can tell now.
        exclusions_refresh(study=participant.study)
    session.refresh_from_db()
    return session


class AssignmentNotFound(StudyError):
    """Not one of this rater's assignments (another rater's id, or no such id)."""


# What the rater's requests read, in the one query each makes: building and
# compiling a query costs CPU per column, and a column left out but read later would
# cost a query of its own (the query-count tests would fail).
_ASSIGNMENT_FIELDS = (
    "participant_id",
    "session_id",
    "study_item_id",
    "position",
    "status",
    "history_needed",
    "first_shown_at",
    "last_event_at",
    "active_ms",
    "study_item__scene_id",
    "study_item__role",
)
_RATER_FIELDS = (
    "participant__token",
    "participant__study_id",
    "participant__withdrawn_at",
    "participant__consented_at",
    "participant__study__name",
    "participant__study__status",
    "participant__study__reveal",
    "participant__study__tags",
    "participant__study__item_set_hash",
    "participant__study__perturb_names",
    "participant__study__allow_cant_tell",
    "participant__study__ask_confidence",
    "participant__study__session_cap",
    "participant__study__one_to_one",
    "participant__study__attention_instruction",
    "participant__released_count",
)


def _rater_assignments(*, lock: bool, **where: Any) -> QuerySet[Assignment]:
    rows = Assignment.objects.select_related("participant__study", "study_item", "session").only(
        *_ASSIGNMENT_FIELDS,
        *_RATER_FIELDS,
        "version",
        "session__seed",
        "participant__study__one_to_one",
        "participant__study__instructions_version",
    )
    if lock:
        rows = rows.select_for_update(of=("self",))
    return rows.filter(**where)[:1]


# Autosaves and submits run these (compiled once per connection); ``lock`` is part of the SQL.
_ASSIGNMENT_QUERIES = {
    (rater, lock): CompiledQuery(
        lambda assignment_id, rater_value, rater=rater, lock=lock: _rater_assignments(
            lock=lock, pk=assignment_id, **{rater: rater_value}
        ),
        assignment_id=int,
        rater_value=str if rater == "participant__token" else int,
    )
    for rater in ("participant__token", "participant_id")
    for lock in (False, True)
}


def rater_assignment(
    *,
    assignment_id: int,
    participant: Participant | None = None,
    token: str | None = None,
    lock: bool = False,
) -> Assignment:
    """The rater's own assignment, with its participant, study, item and session: one query.

    The rater is ``participant`` or the invite ``token`` (the rater pages pass the
    token, so the participant comes in the same query). ``lock`` takes the
    assignment's row lock (only that row's), for the caller's transaction.
    """
    if participant is not None:
        rater, value = "participant_id", participant.pk
    elif token is not None:
        rater, value = "participant__token", token
    else:
        raise TypeError("rater_assignment needs a participant or a token")
    assignment = _ASSIGNMENT_QUERIES[rater, lock].first(
        assignment_id=assignment_id, rater_value=value
    )
    if assignment is None:
        raise AssignmentNotFound("no such scene in your assignments")
    return assignment


def _assignment_for(participant: Participant, assignment_id: int) -> Assignment:
    """The participant's own assignment, locked; another rater's id is simply not found."""
    return rater_assignment(participant=participant, assignment_id=assignment_id, lock=True)


def _time_event(assignment: Assignment, now) -> list[str]:
    """Advance the scene's clocks to ``now``; returns the fields changed."""
    if assignment.first_shown_at is None:
        assignment.first_shown_at = now
        assignment.last_event_at = now
        return ["first_shown_at", "last_event_at"]
    gap = now - (assignment.last_event_at or now)
    if timedelta(0) < gap <= IDLE_CUTOFF:
        assignment.active_ms += int(gap.total_seconds() * 1000)
    assignment.last_event_at = now
    return ["active_ms", "last_event_at"]


def _clock_advance(assignment: Assignment, **also: Any) -> bool:
    """Advance an open scene's clocks (and write ``also``) in one UPDATE, without a lock.

    A compare-and-set on the ``last_event_at`` this request read: a concurrent event
    (another tab) makes it miss, and it reads the clock again and retries, so no
    active time is counted twice. Returns False when the scene is submitted by now
    (or, with nothing in ``also``, after five misses in a row).
    """
    for _ in range(5):
        seen = assignment.last_event_at
        fields = _time_event(assignment, timezone.now())
        values = {f: getattr(assignment, f) for f in fields} | also
        if update_where(
            Assignment,
            values,
            pk=assignment.pk,
            status=Assignment.Status.ASSIGNED,
            last_event_at=seen,
        ):
            for name, value in also.items():
                setattr(assignment, name, value)
            return True
        fresh = (
            Assignment.objects.filter(pk=assignment.pk)
            .values("status", "first_shown_at", "last_event_at", "active_ms")
            .first()
        )
        if fresh is None or fresh["status"] != Assignment.Status.ASSIGNED:
            return False
        for name, value in fresh.items():
            setattr(assignment, name, value)
    # Five concurrent events in a row: this one's time is left out, but not what it
    # writes (the history flag): that is the rater's answer, refused only once the
    # scene is submitted. (Before, the flag was dropped with "already submitted", and
    # a submit right after it stored the scene without its flag.)
    if also and update_where(Assignment, also, pk=assignment.pk, status=Assignment.Status.ASSIGNED):
        for name, value in also.items():
            setattr(assignment, name, value)
        return True
    return False


def scene_shown(*, participant: Participant, assignment: Assignment) -> None:
    """The scene page was served: starts its clock (once) and counts as activity."""
    if assignment.status == Assignment.Status.SUBMITTED:
        return
    _clock_advance(assignment)


def _guess_values(
    study: Study,
    instance: SceneSpeaker,
    *,
    choice: int | None = None,
    tags: list[str] | None = None,
    evidence: str | None = None,
) -> dict[str, Any]:
    """Validated Guess fields for what the rater sent (``None``: not sent)."""
    values: dict[str, Any] = {}
    if choice == CANT_TELL and study.allow_cant_tell:
        values["answer"], values["cant_tell"] = "", True
    elif choice is not None:
        values["cant_tell"] = False
        if not 0 <= choice < len(instance.candidates):
            raise StudyError(f"choose one of the {len(instance.candidates)} candidates")
        values["answer"] = instance.candidates[choice]
    if tags is not None:
        allowed = set(study.tags)
        if unknown := [t for t in tags if t not in allowed]:
            raise StudyError(f"unknown tag(s): {', '.join(unknown)}")
        values["tags"] = [t for t in study.tags if t in set(tags)]
    if evidence is not None:
        values["evidence"] = evidence.strip()[:2000]
    return values


def _speakers_of(assignment: Assignment) -> list[SceneSpeaker]:
    return scene_speakers(
        scene_id=assignment.study_item.scene_id,
        version=assignment.participant.study.item_set_hash,
    )


def _answers_validate(
    assignment: Assignment, answers: dict[int, dict[str, Any]]
) -> dict[int, dict[str, Any]]:
    """instance id -> validated Guess fields; raises StudyError before anything is written."""
    speakers = {s.instance_id: s for s in _speakers_of(assignment)}
    rows = {}
    for instance_id, sent in answers.items():
        speaker = speakers.get(instance_id)
        if speaker is None:
            raise StudyError("that masked speaker is not in this scene")
        rows[instance_id] = _guess_values(assignment.participant.study, speaker, **sent)
    return rows


# The Guess columns an upsert writes; on conflict only those the rater sent change.
_GUESS_COLUMNS = ("answer", "cant_tell", "tags", "evidence", "correct")


def _guesses_upsert(assignment: Assignment, rows: dict[int, dict[str, Any]]) -> int:
    """Insert or update the guesses in ``rows`` in one statement per set of fields sent.

    ``ON CONFLICT … DO UPDATE … WHERE correct IS NULL``: a guess of a submitted scene
    (``scene_submit`` scores every guess) never changes, even from a request that read
    the scene as open just before it was submitted, so an autosave needs no lock.
    Returns how many guesses were written.
    """
    guess = Guess._meta
    now = timezone.now()
    groups: dict[tuple[str, ...], list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for instance_id, values in rows.items():
        groups[tuple(sorted(values))].append((instance_id, values))
    table = connection.ops.quote_name(guess.db_table)
    columns = ("assignment_id", "instance_id", *_GUESS_COLUMNS, "updated_at")
    fields = {c: guess.get_field(c.removesuffix("_id")) for c in columns}
    written = 0
    for sent, group in groups.items():
        params: list[Any] = []
        for instance_id, values in group:
            row = {
                "assignment_id": assignment.pk,
                "instance_id": instance_id,
                "answer": "",
                "cant_tell": False,
                "tags": [],
                "evidence": "",
                "correct": None,
                "updated_at": now,
                **values,
            }
            params += [fields[c].get_db_prep_save(row[c], connection) for c in columns]
        placeholders = ", ".join(["(" + ", ".join(["%s"] * len(columns)) + ")"] * len(group))
        changes = ", ".join(f"{c} = excluded.{c}" for c in (*sent, "updated_at"))
        sql = (
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES {placeholders} "
            f"ON CONFLICT (assignment_id, instance_id) DO UPDATE SET {changes} "
            f"WHERE {table}.correct IS NULL RETURNING id"
        )
        with binding_cursor(connection) as cursor:
            cursor.execute(sql, params)
            written += len(cursor.fetchall())
    return written


def guess_record(
    *,
    participant: Participant,
    assignment_id: int,
    instance_id: int,
    choice: int | None = None,
    tags: list[str] | None = None,
    evidence: str | None = None,
) -> Guess:
    """Save (or change) one masked speaker's answer, tags or note; idempotent.

    ``choice`` indexes the instance's candidate list, so the page never needs the
    real names when the study shows perturbed ones.
    """
    answers_record(
        participant=participant,
        assignment_id=assignment_id,
        answers={instance_id: {"choice": choice, "tags": tags, "evidence": evidence}},
    )
    return Guess.objects.get(assignment_id=assignment_id, instance_id=instance_id)


_SUBMITTED_ALREADY = "this scene is already submitted; answers can no longer change"


def answers_record(
    *,
    assignment_id: int,
    answers: dict[int, dict[str, Any]],
    history_needed: bool | None = None,
    participant: Participant | None = None,
    token: str | None = None,
) -> int:
    """Save several answers of one scene (and its flag) at once: all of them or none.

    ``answers`` maps a SpeakerInstance id to ``choice``/``tags``/``evidence`` (absent or
    ``None``: unchanged). The rater is ``participant`` or the invite ``token``.
    Everything is validated before the first write; then one upsert writes the
    guesses and one UPDATE the scene's clock and flag: three queries and no lock
    (``_guesses_upsert`` says why none is needed). Returns how many guesses were
    written.
    """
    assignment = rater_assignment(participant=participant, token=token, assignment_id=assignment_id)
    check_active(assignment.participant)
    if assignment.status == Assignment.Status.SUBMITTED:
        raise StudyError(_SUBMITTED_ALREADY)
    rows = {k: v for k, v in _answers_validate(assignment, answers).items() if v}
    written = _guesses_upsert(assignment, rows) if rows else 0
    if written < len(rows):  # submitted after we read it: the upsert left it alone
        raise StudyError(_SUBMITTED_ALREADY)
    also = {} if history_needed is None else {"history_needed": history_needed}
    if not _clock_advance(assignment, **also) and also:
        raise StudyError(_SUBMITTED_ALREADY)
    return written


def flag_record(*, participant: Participant, assignment_id: int, history_needed: bool) -> None:
    """The scene's "I needed earlier scenes" flag."""
    answers_record(
        participant=participant,
        assignment_id=assignment_id,
        answers={},
        history_needed=history_needed,
    )


def attention_names(*, study: Study, study_item: StudyItem) -> dict[int, str]:
    """instance id -> the name an attention check's instruction tells the rater to select:
    its gold, given away on purpose. Empty for every other scene, and for checks when the
    study has no instruction: the one way a page reads the gold of an open scene."""
    if study_item.role != StudyItem.Role.ATTENTION or not study.attention_instruction:
        return {}
    return scene_gold(scene_id=study_item.scene_id, version=study.item_set_hash)


def _version_stamp(participant: Participant, assignment: Assignment) -> dict[str, Any]:
    study = participant.study
    return {
        "item_set_hash": study.item_set_hash,
        "instructions_version": study.instructions_version,
        "assignment_seed": assignment.session.seed,
        "app_version": getattr(settings, "TOMLAB_VERSION", ""),
        "names": "perturbed" if study.perturb_names else "original",
    }


def scene_submit(
    *,
    assignment_id: int,
    answers: dict[int, dict[str, Any]] | None = None,
    history_needed: bool | None = None,
    participant: Participant | None = None,
    token: str | None = None,
) -> Assignment:
    """Finalise a scene: every masked speaker answered (one-to-one if the study says so).

    ``answers``/``history_needed`` (the whole form, as ``answers_record`` takes them)
    are saved first, under the same lock. A second submit (double click, replay, back
    button, five tabs at once) changes nothing and returns the stored result: the
    submitted status is read under the lock, so a submit that waited for another one
    finds the scene submitted and is a replay, never an "already submitted" error.
    Answers that were valid stay saved when the scene cannot be submitted yet.
    Correctness is computed here, from the gold on the server. The rater is
    ``participant`` or the invite ``token``; the returned assignment carries both.

    A whole form that answers every speaker is scored as it is written: one locked
    read, one upsert, one UPDATE of the scene and one of its session.
    """
    with transaction.atomic():
        assignment = rater_assignment(
            participant=participant, token=token, assignment_id=assignment_id, lock=True
        )
        if assignment.status == Assignment.Status.SUBMITTED:
            return assignment
        check_active(assignment.participant)
        rows = _answers_validate(assignment, answers or {})
        if history_needed is not None:
            assignment.history_needed = history_needed
        final = _final_answers(assignment, rows)
        problem = _submit_problem(assignment, final) if final is not None else None
        if final is not None and not problem:
            # The form answers every speaker: score it in the upsert itself.
            gold = scene_gold(
                scene_id=assignment.study_item.scene_id,
                version=assignment.participant.study.item_set_hash,
            )
            for instance_id, values in rows.items():
                values["correct"] = (
                    not values.get("cant_tell")
                    and final[instance_id].casefold() == gold[instance_id].casefold()
                )
            _guesses_upsert(assignment, rows)
        else:
            if rows := {k: v for k, v in rows.items() if v}:
                _guesses_upsert(assignment, rows)
            problem = _submit_score(assignment)
        if problem:
            fields = _time_event(assignment, timezone.now())
            if history_needed is not None:
                fields.append("history_needed")
            assignment.save(update_fields=fields)
        elif _submit_close(assignment) and _nothing_left(assignment.participant):
            participant_finish(participant=assignment.participant)  # applies the rule too
        elif assignment.study_item.role == StudyItem.Role.ATTENTION:
            # The rule reads every participant's checks: applied only as one is answered
            # and when a participant finishes, never on an ordinary scene's submit.
            exclusions_refresh(study=assignment.participant.study)
    if problem:  # raised after the commit, so the answers just saved are kept
        raise problem
    return assignment


def _final_answers(
    assignment: Assignment, rows: dict[int, dict[str, Any]]
) -> dict[int, str] | None:
    """The scene's answers when ``rows`` (the form) answers every speaker, else None.

    A "can't tell" answers a speaker too; its answer is "".
    """
    speakers = _speakers_of(assignment)
    if not all(_answered_values(rows.get(s.instance_id, {})) for s in speakers):
        return None
    return {s.instance_id: rows[s.instance_id].get("answer", "") for s in speakers}


def _answered_values(values: dict[str, Any]) -> bool:
    return bool(values.get("answer")) or bool(values.get("cant_tell"))


def _answered(guess: Guess) -> bool:
    return bool(guess.answer) or guess.cant_tell


def _history_question_due(assignment: Assignment) -> bool:
    """Whether the rater still has to say if they needed earlier scenes (works with some)."""
    return assignment.history_needed is None and study_work_has_history(
        assignment.session.study_work_id
    )


def _submit_problem(assignment: Assignment, answers: dict[int, str]) -> SubmitIncomplete | None:
    """What stops the scene from being submitted with ``answers`` (all speakers), if anything."""
    if _history_question_due(assignment):
        return SubmitIncomplete("say whether you needed earlier scenes", code="history")
    named = [a for a in answers.values() if a]  # "can't tell" answers name no one
    if assignment.participant.study.one_to_one and len(set(named)) < len(named):
        return SubmitIncomplete(
            "each masked speaker must be a different character", code="one_to_one"
        )
    return None


def _submit_score(assignment: Assignment) -> SubmitIncomplete | None:
    """Score the stored guesses of the locked assignment; returns what is missing instead.

    The guesses are read ``FOR UPDATE``: an autosave that read the scene as open
    waits, then finds its guess scored and leaves it alone (``_guesses_upsert``).
    """
    speakers = _speakers_of(assignment)
    guesses = {
        g.instance_id: g
        for g in Guess.objects.filter(assignment=assignment)
        .select_for_update()
        .only("pk", "instance_id", "answer", "cant_tell", "correct")
    }
    if missing := [s.code for s in speakers if not _answered(guesses.get(s.instance_id, Guess()))]:
        return SubmitIncomplete(
            f"choose a character for {', '.join(missing)} first",
            code="missing",
            missing=tuple(missing),
        )
    problem = _submit_problem(assignment, {k: g.answer for k, g in guesses.items()})
    if problem:
        return problem
    gold = scene_gold(
        scene_id=assignment.study_item.scene_id,
        version=assignment.participant.study.item_set_hash,
    )
    for guess in guesses.values():
        guess.correct = (
            not guess.cant_tell and guess.answer.casefold() == gold[guess.instance_id].casefold()
        )
    Guess.objects.bulk_update(list(guesses.values()), ["correct"])
    return None


def _nothing_left(participant: Participant) -> bool:
    """After a work's last scene: whether the study has nothing more for the rater and
    no exit questionnaire waits (then the last page writes "finished" instead)."""
    exit_done, questions = (
        Participant.objects.filter(pk=participant.pk)
        .values_list("exit_done_at", "study__exit_questions")
        .get()
    )
    if questions and exit_done is None:
        return False
    return participant_finished(participant=participant)


def _submit_close(assignment: Assignment) -> bool:
    """Mark the locked, scored assignment submitted; finish its session if it was the
    last. Returns whether it was (the rater's work on that work is done)."""
    now = timezone.now()
    fields = _time_event(assignment, now)
    assignment.status = Assignment.Status.SUBMITTED
    assignment.submitted_at = now
    assignment.total_ms = int((now - assignment.first_shown_at).total_seconds() * 1000)
    assignment.version = _version_stamp(assignment.participant, assignment)
    written = [*fields, "history_needed", "status", "submitted_at", "total_ms", "version"]
    update_where(Assignment, {f: getattr(assignment, f) for f in written}, pk=assignment.pk)
    # One statement, no COUNT: the session is finished when no scene of it is open.
    with binding_cursor(connection) as cursor:
        finished_at = WorkSession._meta.get_field("finished_at").get_db_prep_save(now, connection)
        cursor.execute(
            _SESSION_FINISH, [finished_at, assignment.session_id, Assignment.Status.ASSIGNED]
        )
        return bool(cursor.rowcount)


_SESSION_FINISH = (
    f"UPDATE {WorkSession._meta.db_table} SET finished_at = %s "
    f"WHERE id = %s AND finished_at IS NULL AND NOT EXISTS "
    f"(SELECT 1 FROM {Assignment._meta.db_table} WHERE session_id = {WorkSession._meta.db_table}.id"
    f" AND status = %s)"
)


@dataclass(frozen=True)
class ParticipantScore:
    """Figure 10(d): masked speakers and whole scenes answered correctly."""

    speakers_correct: int
    speakers: int
    scenes_correct: int
    scenes: int

    @property
    def speaker_percent(self) -> float | None:
        return 100 * self.speakers_correct / self.speakers if self.speakers else None

    @property
    def scene_percent(self) -> float | None:
        return 100 * self.scenes_correct / self.scenes if self.scenes else None


def participant_score(*, participant: Participant) -> ParticipantScore:
    """The rater's own submitted answers only (imported blanks, correct None, are not answers).

    Test scenes only: the practice scene and attention checks are not results (their
    place among the rater's scenes is ``recruitment.scene_place``).
    """
    rows = Guess.objects.filter(
        assignment__participant=participant,
        assignment__status="submitted",
        assignment__study_item__role=StudyItem.Role.TEST,
        correct__isnull=False,
    ).values_list("assignment_id", "correct")
    by_scene: dict[int, list[bool]] = defaultdict(list)
    for assignment_id, correct in rows:
        by_scene[assignment_id].append(bool(correct))
    return ParticipantScore(
        speakers_correct=sum(sum(v) for v in by_scene.values()),
        speakers=sum(len(v) for v in by_scene.values()),
        scenes_correct=sum(all(v) for v in by_scene.values()),
        scenes=len(by_scene),
    )
