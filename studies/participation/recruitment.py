"""Running a study with recruited participants, for every study kind.

Recruitment links (the platform's participant/study/session ids from the link's query
string, a public link with a cap, bulk invites from CSV), consent and its refusal,
the time estimate, the exit questionnaire, "withdraw my data", and pacing: practice
and attention-check items, a break after a sitting's cap, and open assignments that
go back to the pool once idle past the study's timeout.

These live beside ``studies.services`` (the scene study's answer path) and are called
from it at two points only: when a work's items are assigned (``session_prepare``) and
before that, to free idle slots (``assignments_release_idle``).
"""

from __future__ import annotations

import csv
import io
import math
import secrets
from dataclasses import dataclass
from datetime import timedelta
from statistics import median
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from benchmarks.models import Scene

from ..errors import StudyError
from ..models import Assignment, Participant, Study, StudyItem, StudyWork, WorkSession
from .signals import participant_withdrawn

PLATFORM_KEYS = ("participant", "study", "session")
MAX_PLATFORM_ID = 200
MAX_CSV_INVITES = 2000
MAX_CSV_INVITE_BYTES = 5_000_000
# A scene takes about this long when no rater has finished one yet (the Friends demo).
DEFAULT_SCENE_MINUTES = 1.5
MAX_EXIT_ANSWER = 500


# -- links ----------------------------------------------------------------------------


class BadPlatformId(StudyError):
    """A platform id on the link that cannot be stored (a NUL or another control character)."""


def platform_ids_from(study: Study, params: dict[str, str]) -> dict[str, str]:
    """The platform's ids in ``params`` under the study's parameter names (absent: left out).

    An id with a control character is refused (:class:`BadPlatformId`): no platform
    writes one, and PostgreSQL cannot store a NUL in a JSON value or compare with one,
    so it would otherwise end as a server error before anyone has logged in.
    """
    names = {
        "participant": study.param_participant,
        "study": study.param_study,
        "session": study.param_session,
    }
    found = {}
    for key, name in names.items():
        value = (params.get(name) or "").strip() if name else ""
        if any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise BadPlatformId(
                f"the link's {name} parameter holds a control character; "
                "open the link exactly as the study platform gave it"
            )
        if value:
            found[key] = value[:MAX_PLATFORM_ID]
    return found


def platform_ids_capture(*, participant: Participant, params: dict[str, str]) -> Participant:
    """Store the ids a personal invite link arrived with; the first ids seen stand."""
    ids = platform_ids_from(participant.study, params)
    if ids and not participant.platform_ids:
        Participant.objects.filter(pk=participant.pk, platform_ids={}).update(platform_ids=ids)
        participant.platform_ids = ids
    return participant


def public_link_set(*, study: Study, cap: int) -> Study:
    """Open (cap > 0) or close (cap 0) the study's public link; the token is kept."""
    if cap < 0:
        raise StudyError("the cap cannot be negative")
    study.public_cap = cap
    fields = ["public_cap", "updated_at"]
    if cap and not study.public_token:
        study.public_token = secrets.token_urlsafe(24)
        fields.append("public_token")
    study.save(update_fields=fields)
    return study


def public_link_check(*, study: Study, params: dict[str, str]) -> Participant | None:
    """What the public link's page offers, without writing anything.

    The participant the platform id already has (to resume), or None when a new place
    can be taken; :class:`StudyError` when it cannot (no link, not live, full, a bad id).
    """
    if not study.public_cap or not study.public_token:
        raise StudyError("this study has no public link")
    ids = platform_ids_from(study, params)
    if ids.get("participant"):
        existing = Participant.objects.filter(
            study=study, platform_ids__participant=ids["participant"]
        ).first()
        if existing is not None:
            return existing
    if study.status != Study.Status.LIVE:
        raise StudyError(f"this study is {study.get_status_display()} and takes no one new")
    taken = Participant.objects.filter(study=study, via_public_link=True).count()
    if taken >= study.public_cap:
        raise StudyError("this study is full: every place has been taken. Thank you")
    return None


def public_participant(*, study: Study, params: dict[str, str]) -> Participant:
    """The participant for one arrival on the public link, within the study's cap.

    The same platform participant id comes back to the same participant (a second
    click resumes, it does not take a second place). The study row is locked while
    the places are counted, so the cap holds when many arrive at once.
    """
    if not study.public_cap or not study.public_token:
        raise StudyError("this study has no public link")
    if study.status != Study.Status.LIVE:
        raise StudyError(f"this study is {study.get_status_display()} and takes no one new")
    ids = platform_ids_from(study, params)
    with transaction.atomic():
        Study.objects.select_for_update().filter(pk=study.pk).first()
        if ids.get("participant"):
            existing = Participant.objects.filter(
                study=study, platform_ids__participant=ids["participant"]
            ).first()
            if existing is not None:
                return existing
        taken = Participant.objects.filter(study=study, via_public_link=True).count()
        if taken >= study.public_cap:
            raise StudyError("this study is full: every place has been taken. Thank you")
        return Participant.objects.create(
            study=study,
            token=secrets.token_urlsafe(32),
            label=f"public {taken + 1}",
            platform_ids=ids,
            via_public_link=True,
        )


def invites_from_csv(*, study: Study, data: bytes) -> list[Participant]:
    """One invite per row of a CSV with a ``label`` column (other columns are ignored).

    All or nothing: an unreadable file, a missing column or an over-long label names
    the row and creates no link. ``data`` is read with at most one byte past
    ``MAX_CSV_INVITE_BYTES``, so a longer file is refused, never cut short.
    """
    if len(data) > MAX_CSV_INVITE_BYTES:
        raise StudyError(f"the CSV file is over {MAX_CSV_INVITE_BYTES:,} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise StudyError("the CSV file is not UTF-8 text") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    labels = []
    try:
        columns = [c.strip().casefold() for c in reader.fieldnames or []]
        if "label" not in columns:
            raise StudyError("the CSV file needs a 'label' column (one row per invite)")
        key = (reader.fieldnames or [])[columns.index("label")]
        for number, row in enumerate(reader, start=2):
            label = (row.get(key) or "").strip()
            if not label:
                raise StudyError(f"row {number}: the label is empty")
            if len(label) > 200:
                raise StudyError(f"row {number}: the label is over 200 characters")
            if any(ord(c) < 32 for c in label):
                raise StudyError(f"row {number}: the label holds a control character")
            labels.append(label)
    except csv.Error as exc:  # a value over the CSV reader's limit, a stray quote
        raise StudyError(f"line {reader.line_num}: malformed CSV ({exc})") from None
    if not labels:
        raise StudyError("the CSV file has no rows")
    if len(labels) > MAX_CSV_INVITES:
        raise StudyError(f"at most {MAX_CSV_INVITES} invites at a time")
    return Participant.objects.bulk_create(
        Participant(study=study, label=label, token=secrets.token_urlsafe(32)) for label in labels
    )


# -- consent, exit questionnaire, withdrawal ----------------------------------------------


def participant_refuse(*, participant: Participant) -> Participant:
    """ "I do not agree": recorded, and the participant is given nothing more."""
    if participant.consented_at is not None:
        raise StudyError("you have already agreed; use “withdraw my data” to leave")
    Participant.objects.filter(pk=participant.pk, refused_at__isnull=True).update(
        refused_at=timezone.now()
    )
    participant.refresh_from_db()
    return participant


def exit_questions_parse(text: str) -> list[dict[str, Any]]:
    """The researcher's questionnaire, one question a line: ``Label: choice | choice``.

    A line without a colon is a free-text question. Keys are ``q1``, ``q2``… so that
    rewording a question keeps its answers' column.
    """
    questions = []
    for line in (raw.strip() for raw in text.splitlines()):
        if not line:
            continue
        label, _, rest = line.partition(":")
        choices = [c.strip() for c in rest.split("|") if c.strip()] if rest else []
        if not label.strip():
            raise StudyError(f"question {len(questions) + 1} has no text before the colon")
        questions.append(
            {"key": f"q{len(questions) + 1}", "label": label.strip()[:200], "choices": choices}
        )
    return questions


def exit_questions_text(questions: list[dict[str, Any]]) -> str:
    """The questionnaire back as the researcher types it."""
    return "\n".join(
        q["label"] + (": " + " | ".join(q["choices"]) if q["choices"] else "") for q in questions
    )


def exit_answers_record(*, participant: Participant, answers: dict[str, str]) -> Participant:
    """Store the exit questionnaire (every question optional; unknown choices refused)."""
    clean = {}
    for question in participant.study.exit_questions:
        value = (answers.get(question["key"]) or "").strip()
        if question["choices"] and value and value not in question["choices"]:
            raise StudyError(f"{question['label']}: choose one of the options")
        if value:
            clean[question["key"]] = value[:MAX_EXIT_ANSWER]
    Participant.objects.filter(pk=participant.pk).update(
        exit_answers=clean, exit_done_at=timezone.now()
    )
    participant.refresh_from_db()
    return participant


@transaction.atomic
def participant_data_withdraw(*, participant: Participant) -> Participant:
    """ "Withdraw my data": every answer of theirs is deleted and their open slots freed.

    The participant row stays (with the time of the request and their platform ids,
    so the researcher can tell the platform) but holds no answer any more.
    """
    now = timezone.now()
    participant.assignments.all().delete()  # guesses and choices go with them
    participant.familiarities.all().delete()
    participant.work_sessions.all().delete()
    Participant.objects.filter(pk=participant.pk).update(
        data_withdrawn_at=now, withdrawn_at=now, exit_answers={}
    )
    participant.refresh_from_db()
    participant_withdrawn.send(sender=Participant, participant=participant)
    return participant


def participant_no_work_record(*, participant: Participant, reason: str) -> Participant:
    """The ledger's "no work available": the participant was told there is nothing for
    them to answer, and so gets no completion code. The first time and reason stand."""
    if reason not in Participant.NoWork.values:
        raise ValueError(f"unknown reason {reason!r}; expected one of {Participant.NoWork.values}")
    Participant.objects.filter(pk=participant.pk, no_work_at__isnull=True).update(
        no_work_at=timezone.now(), no_work_reason=reason
    )
    participant.refresh_from_db(fields=["no_work_at", "no_work_reason"])
    return participant


def no_work_return_url(study: Study) -> str:
    """Where a participant with nothing to answer goes back to the platform.

    The study's own "no work" URL, else the completion URL's site without its path and
    query (which may carry the completion code: Prolific's ``?cc=``), else none.
    """
    if study.no_work_url:
        return study.no_work_url
    if study.completion_url:
        parts = urlsplit(study.completion_url)
        if parts.scheme in ("http", "https") and parts.netloc:
            return urlunsplit((parts.scheme, parts.netloc, "/", "", ""))
    return ""


# -- what a participant is told before and after ------------------------------------------


@dataclass(frozen=True)
class Estimate:
    scenes: int
    minutes: int


def study_estimate(*, study: Study) -> Estimate:
    """How many scenes one participant gets at most, and about how long that takes.

    Scenes: the study's open test items (a participant never gets more), plus practice
    and attention items. Minutes: the researcher's figure, else the median time per
    submitted scene so far (or 1.5 minutes) times the scenes.
    """
    items = StudyItem.objects.filter(study=study, held_back=False)
    scenes = items.count()
    if study.minutes_estimate:
        return Estimate(scenes=scenes, minutes=study.minutes_estimate)
    times = list(
        Assignment.objects.filter(
            study_item__study=study, status=Assignment.Status.SUBMITTED, total_ms__isnull=False
        )
        .order_by("-submitted_at")
        .values_list("total_ms", flat=True)[:500]
    )
    per_scene = median(times) / 60000 if times else DEFAULT_SCENE_MINUTES
    return Estimate(scenes=scenes, minutes=max(1, math.ceil(per_scene * scenes)))


# -- pacing -------------------------------------------------------------------------------


def work_has_history(work_id: int) -> bool:
    """Whether the work has earlier (training) scenes to read: no history step otherwise."""
    return Scene.objects.filter(work_id=work_id, part=Scene.Part.TRAINING).exists()


def study_work_has_history(study_work_id: int) -> bool:
    """``work_has_history`` from a study work's id: one query, then cached (a work's
    scenes do not change while a study runs, and the rater path asks on every page)."""
    key = f"studies:has-history:{study_work_id}"
    has = cache.get(key)
    if has is None:
        work = StudyWork.objects.filter(pk=study_work_id).values("work_id")[:1]
        has = Scene.objects.filter(work_id__in=work, part=Scene.Part.TRAINING).exists()
        cache.set(key, has, 3600)
    return has


def session_prepare(*, participant: Participant, session: WorkSession, given: list) -> None:
    """After a work's test items were assigned: add practice and attention items.

    Practice items go first, attention checks are spread among the test items (so they
    look like any scene); both go to every participant who got test items, outside the
    quotas. A work with no earlier scenes needs no history step: it is confirmed here.
    """
    if not given:
        return
    if not work_has_history(session.study_work.work_id):
        WorkSession.objects.filter(pk=session.pk).update(history_confirmed_at=timezone.now())
    extras = list(
        StudyItem.objects.filter(study_work=session.study_work)
        .exclude(role=StudyItem.Role.TEST)
        .order_by("position")
    )
    if not extras:
        return
    tests = list(session.assignments.order_by("position"))
    practice = [i for i in extras if i.role == StudyItem.Role.PRACTICE]
    attention = [i for i in extras if i.role == StudyItem.Role.ATTENTION]
    # Attention checks at evenly spaced places among the test items, never first.
    slots: dict[int, list[StudyItem]] = {}
    for n, item in enumerate(attention, start=1):
        at = max(1, round(n * len(tests) / (len(attention) + 1)))
        slots.setdefault(at, []).append(item)
    order: list[Any] = list(practice)
    for index, assignment in enumerate(tests):
        order.extend(slots.get(index, []))
        order.append(assignment)
    order.extend(slots.get(len(tests), []))
    new = []
    for position, row in enumerate(order):
        if isinstance(row, Assignment):
            row.position = position
        else:
            new.append(
                Assignment(
                    participant=participant,
                    session=session,
                    study_item=row,
                    position=position,
                    seen=session.seen,
                )
            )
    Assignment.objects.bulk_update(tests, ["position"])
    Assignment.objects.bulk_create(new)


def practice_count(session: WorkSession) -> int:
    return session.assignments.filter(study_item__role=StudyItem.Role.PRACTICE).count()


def break_due(*, participant: Participant) -> bool:
    """Whether the participant has done a sitting's worth of scenes and has more to do."""
    cap = participant.study.session_cap
    if not cap:
        return False
    submitted = participant.assignments.filter(status=Assignment.Status.SUBMITTED).count()
    return submitted - participant.sitting_start >= cap


def sitting_resume(*, participant: Participant) -> Participant:
    """After the break screen: a new sitting starts from the scenes submitted so far."""
    submitted = participant.assignments.filter(status=Assignment.Status.SUBMITTED).count()
    Participant.objects.filter(pk=participant.pk).update(sitting_start=submitted)
    participant.refresh_from_db()
    return participant


def assignments_release_idle(*, study: Study, now=None) -> int:
    """Give the open items of participants idle past the study's timeout back to the pool.

    Idle means none of the participant's assignments changed (shown, answered,
    submitted) for ``idle_timeout_minutes``. Their submitted scenes stay; each open
    one is deleted, freeing its quota slot, and the participant is told when they
    come back (``released_count``). Returns how many slots were freed.
    """
    if not study.idle_timeout_minutes:
        return 0
    now = now or timezone.now()
    cutoff = now - timedelta(minutes=study.idle_timeout_minutes)
    open_rows = Assignment.objects.filter(
        participant__study=study, status=Assignment.Status.ASSIGNED
    )
    candidates = set(open_rows.values_list("participant_id", flat=True))
    if not candidates:
        return 0
    latest: dict[int, Any] = {}
    for pid, shown, event, submitted, assigned in Assignment.objects.filter(
        participant_id__in=candidates
    ).values_list(
        "participant_id", "first_shown_at", "last_event_at", "submitted_at", "assigned_at"
    ):
        moments = [m for m in (shown, event, submitted, assigned) if m is not None]
        latest[pid] = max([latest.get(pid, assigned), *moments])
    idle = [pid for pid, moment in latest.items() if moment < cutoff]
    freed = 0
    for pid in idle:
        with transaction.atomic():
            rows = open_rows.filter(participant_id=pid)
            n = rows.count()
            if not n:
                continue
            rows.delete()
            freed += n
            Participant.objects.filter(pk=pid).update(released_count=n)
            # The sessions with nothing left open are finished for this participant.
            WorkSession.objects.filter(participant_id=pid, finished_at__isnull=True).update(
                finished_at=now
            )
    return freed


def released_acknowledge(*, participant: Participant) -> Participant:
    Participant.objects.filter(pk=participant.pk).update(released_count=0)
    participant.refresh_from_db()
    return participant


def study_name_taken(name: str, *, exclude_id: int | None = None) -> bool:
    """Whether another study already has this name (case and outer spaces ignored)."""
    rows = Study.objects.filter(name__iexact=name.strip())
    if exclude_id is not None:
        rows = rows.exclude(pk=exclude_id)
    return rows.exists()


def confidence_record(*, participant: Participant, assignment_id: int, value: str) -> None:
    """The scene's confidence rating, 1 (not at all) to 5 (completely); open scenes only."""
    if participant.withdrawn_at is not None or participant.study.status != Study.Status.LIVE:
        raise StudyError("this study takes no answers from you at the moment")
    if not participant.study.ask_confidence:
        raise StudyError("this study does not ask how confident you are")
    if value not in {"1", "2", "3", "4", "5"}:
        raise StudyError("choose a confidence from 1 to 5")
    updated = Assignment.objects.filter(
        pk=assignment_id, participant=participant, status=Assignment.Status.ASSIGNED
    ).update(confidence=int(value))
    if not updated:
        raise StudyError("no such open scene in your assignments")


@transaction.atomic
def study_running_update(*, study: Study, **fields: Any) -> Study:
    """Save the recruitment, pacing and quality settings (``RunningForm.study_fields``)."""
    for name, value in fields.items():
        setattr(study, name, value)
    study.save(update_fields=[*fields, "updated_at"])
    return study


@transaction.atomic
def item_roles_set(*, study: Study, practice: StudyItem | None, attention: list[StudyItem]) -> int:
    """Mark the practice scene and the attention checks; every other scene is a test item.

    Only before anyone has been given scenes: a role changed mid-study would change
    quotas and scores already handed out. Checks are meant to give their answer away,
    so they are released from the leak check's hold. Returns how many items changed.
    """
    if Assignment.objects.filter(study_item__study=study).exists():
        raise StudyError("scenes have been handed out: practice and checks can no longer change")
    chosen = {item.pk: StudyItem.Role.ATTENTION for item in attention}
    if practice is not None:
        chosen[practice.pk] = StudyItem.Role.PRACTICE
    changed = 0
    for item in StudyItem.objects.filter(study=study).select_for_update():
        role = chosen.get(item.pk, StudyItem.Role.TEST)
        if item.role != role or (role != StudyItem.Role.TEST and item.held_back):
            item.role = role
            if role != StudyItem.Role.TEST:
                item.held_back = False
            item.save(update_fields=["role", "held_back"])
            changed += 1
    return changed
