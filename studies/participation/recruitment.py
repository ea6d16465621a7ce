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
from django.db.models import Count, Exists, Max, OuterRef, Sum
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from benchmarks.models import DynToMQuestion, Scene

from ..counting import counted_people, practice_items
from ..errors import StudyError
from ..models import (
    Assignment,
    Participant,
    Study,
    StudyItem,
    StudyTextVersion,
    StudyWork,
    WorkSession,
)
from ..services import study_attention_instruction_set, text_version_ensure
from ..slots import slots_free, slots_rebalance
from . import questionnaire
from .signals import participant_withdrawn
from .words import (
    choices_words,
    scene_words,
    stage_words,
    text_words,
)

PLATFORM_KEYS = ("participant", "study", "session")
MAX_PLATFORM_ID = 200
MAX_CSV_INVITES = 2000
MAX_CSV_INVITE_BYTES = 5_000_000


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


def public_places(study: Study) -> tuple[int, int]:
    """The public link's (places taken, sign-ups in all).

    A place is taken by a participant of the link who still counts (``studies.counting``:
    not withdrawn or excluded) and has not declined consent; the cap counts those, so a
    place an exclusion or a withdrawal frees is offered again. ``signup_ceiling`` bounds
    the sign-ups in all.
    """
    arrivals = Participant.objects.filter(study=study, via_public_link=True)
    return (
        arrivals.filter(counted_people(), refused_at__isnull=True).count(),
        arrivals.count(),
    )


def _public_full(study: Study, taken: int, signups: int) -> str:
    """Why the public link takes no one new now ("" when it does), given
    :func:`public_places`."""
    if taken >= study.public_cap:
        return "this study is full: every place has been taken. Thank you"
    if study.signup_ceiling and signups >= study.signup_ceiling:
        return "this study is full: it has had all the sign-ups it can take. Thank you"
    return ""


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
    if full := _public_full(study, *public_places(study)):
        raise StudyError(full)
    return None


def public_participant(*, study: Study, params: dict[str, str]) -> Participant:
    """The participant for one arrival on the public link, within the study's cap.

    The same platform participant id comes back to the same participant (a second
    click resumes, it does not take a second place). The study row is locked while
    the places are counted, so the cap and the ceiling hold when many arrive at once.
    """
    if not study.public_cap or not study.public_token:
        raise StudyError("this study has no public link")
    if study.status != Study.Status.LIVE:
        raise StudyError(f"this study is {study.get_status_display()} and takes no one new")
    ids = platform_ids_from(study, params)
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)  # the cap as saved
        if ids.get("participant"):
            existing = Participant.objects.filter(
                study=study, platform_ids__participant=ids["participant"]
            ).first()
            if existing is not None:
                return existing
        taken, signups = public_places(study)
        if full := _public_full(locked, taken, signups):
            raise StudyError(full)
        return Participant.objects.create(
            study=study,
            token=secrets.token_urlsafe(32),
            label=f"public {signups + 1}",
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
    """The researcher's questionnaire, one question a line (``questionnaire`` has the
    syntax); ``QuestionnaireSyntaxError`` names every faulty line."""
    return questionnaire.parse(text)


def exit_questions_text(questions: list[dict[str, Any]]) -> str:
    """The questionnaire back as the researcher types it."""
    return questionnaire.text(questions)


@transaction.atomic
def exit_questions_save(*, study: Study, questions: list[dict[str, Any]]) -> Study:
    """Save the exit questionnaire. Changed questions are a new version
    (``exit_questions_version``), with the outgoing and the new text both kept, so
    answers stay paired with what they answered; the same questions are no new version."""
    # Questions saved before item types were stored read the same as their new form.
    if questionnaire.items(questions) == questionnaire.items(study.exit_questions):
        return study
    kind = StudyTextVersion.Kind.EXIT_QUESTIONS
    text_version_ensure(study=study, kind=kind)
    study.exit_questions = questions
    study.exit_questions_version += 1
    study.save(update_fields=["exit_questions", "exit_questions_version", "updated_at"])
    text_version_ensure(study=study, kind=kind)
    return study


def exit_answers_record(*, participant: Participant, answers: dict[str, list[str]]) -> Participant:
    """Store the exit questionnaire's answers, or refuse them all with
    ``questionnaire.AnswersInvalid`` (a message per question: required, out of range,
    too long, not an option). A question whose condition is unmet is neither required
    nor kept."""
    clean = questionnaire.answers_clean(participant.study.exit_questions, answers)
    # The version answered, with its text kept, pairs each answer with its question.
    snapshot = text_version_ensure(
        study=participant.study, kind=StudyTextVersion.Kind.EXIT_QUESTIONS
    )
    Participant.objects.filter(pk=participant.pk).update(
        exit_answers=clean, exit_done_at=timezone.now(), exit_version=snapshot.version
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
    freed = slots_free(participant_id=participant.pk)
    participant.assignments.all().delete()  # guesses and choices go with them
    slots_rebalance(freed)
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


# Brysbaert (2019), "How many words do we read per minute? A review and meta-analysis of
# reading rate", J. Memory and Language 109: the mean silent reading rate of adults for
# English non-fiction is 238 words a minute (fiction: 260). The lower figure is used:
# participants read scripts, passages and stories closely enough to answer about them.
READING_WPM = 238
# Answering time per item on top of reading its text, which is counted in words. A scene
# asks for every masked speaker (up to 5 candidates each), the "needed earlier scenes"
# flag and the ToM tags; a CharToM-QA question is answered twice (c = 0, then keep or
# change at c = 2k); a DynToM question is one pick among four options, the story in view.
# A mapped benchmark's item is one pick among its options, like a DynToM question.
ANSWER_SECONDS = {
    "tom-in-amc": 45,
    "tvshowguess": 45,
    "chartom-qa": 30,
    "dyntom": 15,
    "generic": 15,
}
DEFAULT_ANSWER_SECONDS = 45
# Finished, kept participants needed before their times replace the word-based figure.
PILOT_MIN = 5


@dataclass(frozen=True)
class Estimate:
    """How long one participant's part of a study takes, and on what basis.

    ``minutes`` is what participants are told: the researcher's figure when set,
    otherwise ``computed_minutes``. ``words`` is everything they read (history and item
    texts), ``items`` what they answer (scenes or questions: test items and attention
    checks), ``practice`` the practice items they do first, told apart and never in
    ``items`` (the count the scene pages give, ``session_scenes``), ``pilot`` how many
    finished, kept participants there are so far (their times count from ``PILOT_MIN``
    on), ``per_stage`` that the figure is for one DynToM stage (participants may take
    another afterwards).
    """

    minutes: int
    computed_minutes: int
    items: int
    words: int
    wpm: int
    item_seconds: int
    basis: str
    noun: str
    practice: int = 0
    pilot: int = 0
    researcher_set: bool = False
    per_stage: bool = False


def _scene_study_words(study: Study, items) -> tuple[int, int, int]:
    """(history words, item words, items): each study work's history once, every item."""
    history = Scene.objects.filter(
        work_id__in=StudyWork.objects.filter(study=study).values("work_id"),
        part=Scene.Part.TRAINING,
    ).values_list("heading", "lines")
    history_words = sum(scene_words(heading, lines) for heading, lines in history)
    rows = items.values_list("scene__heading", "scene__lines")
    return history_words, sum(scene_words(h, lines) for h, lines in rows), len(rows)


def _chartom_words(items) -> tuple[int, int, int]:
    """Both plot windows (c = 0, then c = 2k), the question and its four options."""
    words = 0
    rows = items.values_list(
        "qa_item__context_0",
        "qa_item__context_2000",
        "qa_item__question",
        "qa_item__answer",
        "qa_item__misleading_choices",
    )
    for c0, c2k, question, answer, misleading in rows:
        words += text_words(c0) + text_words(c2k) + text_words(question) + text_words(answer)
        words += choices_words(misleading or [])
    return 0, words, len(rows)


def _dyntom_words(items) -> tuple[int, int, int]:
    """The longest stage (words and questions): a participant takes one stage at a time."""
    longest = (0, 0)
    seconds = ANSWER_SECONDS["dyntom"]
    for item in items.select_related("stage").prefetch_related("stage__scenarios"):
        questions = DynToMQuestion.objects.filter(stage_id=item.stage_id)
        if item.question_ids:
            questions = questions.filter(pk__in=item.question_ids)
        questions = list(questions)
        candidate = (stage_words(item.stage, questions), len(questions))
        if _minutes_of(*candidate, seconds) > _minutes_of(*longest, seconds):
            longest = candidate
    return 0, *longest


def _generic_words(study: Study, items) -> tuple[int, int, int]:
    """One participant's part of a mapped benchmark's study: the context, question and
    options of a batch of test items (the mean item's words times the batch) and of
    every practice and attention item, in the study's language."""
    from ..choice.generic import item_words, shown_item

    language = (study.sampling or {}).get("language", "")
    batch = (study.sampling or {}).get("items_per_participant") or 0
    tests: list[int] = []
    extras = 0
    n_extras = 0
    for item in items.select_related("mc_item"):
        words = item_words(shown_item(item), language, text_words)
        if item.role == StudyItem.Role.TEST:
            tests.append(words)
        else:
            extras += words
            n_extras += 1
    n_tests = min(batch, len(tests)) if batch else len(tests)
    mean = sum(tests) / len(tests) if tests else 0
    return 0, round(mean * n_tests) + extras, n_tests + n_extras


def _minutes_of(words: int, items: int, seconds: int) -> float:
    return words / READING_WPM + items * seconds / 60


def _pilot_item_ms(study: Study) -> list[float]:
    """Each pilot participant's mean time per study item, in milliseconds.

    Pilot participants: not withdrawn, not excluded (``excluded_at`` is the current
    state, rule or researcher), and finished: marked finished, or with submitted items
    and none still open. Times are the server's first-shown-to-submit times.
    """
    # Two small reads scoped to the study's participants. One query with a NOT EXISTS
    # per assignment made PostgreSQL hash every open assignment of every study (40-100
    # ms at 100,000 assignments), and every invited rater's first page shows this.
    kept = Participant.objects.filter(
        study=study, withdrawn_at__isnull=True, excluded_at__isnull=True
    )
    open_items = Assignment.objects.filter(
        participant=OuterRef("pk"), status=Assignment.Status.ASSIGNED
    )
    done = {
        pk
        for pk, finished_at, still_open in kept.annotate(still_open=Exists(open_items))
        .order_by()
        .values_list("pk", "finished_at", "still_open")
        if finished_at is not None or not still_open
    }
    rows = (
        Assignment.objects.filter(
            participant__in=kept, status=Assignment.Status.SUBMITTED, total_ms__isnull=False
        )
        .order_by()
        .values("participant")
        .annotate(total=Sum("total_ms"), n=Count("pk"))
    )
    return [row["total"] / row["n"] for row in rows if row["participant"] in done]


def _reading(study: Study) -> tuple[int, int, int, int]:
    """(history words, item words, items, practice items) of the study's items not held
    back; the items include the practice ones.

    Counting reads every item's text (583 scenes: 40 ms of CPU), and every invited
    participant's first page shows the estimate: so the count is kept for ten minutes
    under the set of items it counted (holding a scene back makes another key). The
    practice items are counted in the same query, outside the cache: choosing the
    practice scene changes no item, but it changes what participants are told.
    """
    items = StudyItem.objects.filter(study=study, held_back=False)
    shape = items.aggregate(
        n=Count("pk"), ids=Sum("pk"), practice=Count("pk", filter=practice_items())
    )
    key = f"studies:reading:{study.pk}:{shape['n']}:{shape['ids']}"
    counted = cache.get(key)
    if counted is None:
        if study.benchmark == "chartom-qa":
            counted = _chartom_words(items)
        elif study.benchmark == "dyntom":
            counted = _dyntom_words(items)
        elif study.benchmark == "generic":
            counted = _generic_words(study, items)
        else:
            counted = _scene_study_words(study, items)
        cache.set(key, counted, 600)
    # DynToM counts the questions of one stage, which has no practice item.
    practice = 0 if study.benchmark == "dyntom" else shape["practice"]
    return (*counted, practice)


def study_estimate_for_participants(*, study: Study) -> Estimate:
    """``study_estimate`` as participants' pages show it: kept a minute under the study's
    last save. Its pilot median reads every finished participant's items, which every
    arrival of a launch paid on the consent page (issue 51); the researcher's pages
    compute it afresh."""
    key = f"studies:estimate:{study.pk}:{study.updated_at.timestamp()}"
    return cache.get_or_set(key, lambda: study_estimate(study=study), 60)


def study_estimate(*, study: Study) -> Estimate:
    """How long one participant's part of ``study`` takes, with the basis shown to the
    researcher.

    Before a pilot: the words a participant reads (ToM-in-AMC and TVShowGuess: each
    work's history scenes once, plus every scene; CharToM-QA: both plot windows, the
    question and its options; DynToM: the longest stage's story and questions, one
    stage at a time; a mapped benchmark: the context, question and options of one
    participant's batch and of the practice and attention items, in the study's language)
    at ``READING_WPM``, plus ``ANSWER_SECONDS`` per scene or question.

    From ``PILOT_MIN`` finished, kept participants on: the median over them of their
    mean time per item times the items, plus the history at the reading rate (history
    reading is not timed per item, and a participant's wall clock from consent to
    finish would count breaks between sittings). Never below the reading floor: the
    words alone at the reading rate, so fast, careless pilots cannot shrink it.

    The researcher's ``minutes_estimate``, when set, is what participants are told;
    the computed figure and its basis stay on the estimate for the study page.
    """
    seconds = ANSWER_SECONDS.get(study.benchmark, DEFAULT_ANSWER_SECONDS)
    history, item_words, n, practice = _reading(study)
    words = history + item_words
    per_stage = study.benchmark == "dyntom"
    noun = "scene" if study.benchmark in ("tom-in-amc", "tvshowguess") else "question"
    if study.benchmark == "generic":
        noun = "item"
    floor = words / READING_WPM
    computed = math.ceil(floor + n * seconds / 60)
    timed = f"({n - practice} + {practice} practice)" if practice else f"{n}"
    basis = f"{words:,} words to read at {READING_WPM} wpm + {timed} × {seconds} s"  # noqa: RUF001
    pilot = _pilot_item_ms(study)
    if len(pilot) >= PILOT_MIN:
        units = 1 if per_stage else n  # DynToM: one study item is a whole stage
        measured = median(pilot) * units / 60000 + history / READING_WPM
        computed = math.ceil(max(measured, floor))
        reading = f"{words:,} words at {READING_WPM} wpm = {math.ceil(floor)} min"
        if measured >= floor:
            basis = f"median of {len(pilot)} pilot participants (floor: {reading})"
        else:
            basis = (
                f"reading floor: {reading} (the median of {len(pilot)} pilot participants, "
                f"{math.ceil(measured)} min, is below it)"
            )
    if per_stage:
        basis += ", for one stage"
    computed = max(1, computed)
    return Estimate(
        minutes=study.minutes_estimate or computed,
        computed_minutes=computed,
        items=n - practice,
        practice=practice,
        words=words,
        wpm=READING_WPM,
        item_seconds=seconds,
        basis=basis,
        noun=noun,
        pilot=len(pilot),
        researcher_set=bool(study.minutes_estimate),
        per_stage=per_stage,
    )


# -- pacing -------------------------------------------------------------------------------


def study_work_has_history(study_work_id: int) -> bool:
    """Whether the study work's work has earlier (training) scenes to read (no history
    step otherwise): one query, then cached (a work's scenes do not change while a
    study runs, and the rater path asks on every page and every "seen it?")."""
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
    if not study_work_has_history(session.study_work_id):
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


# How scenes are counted to the participant, everywhere they are told a count (the
# scene page, its result, the break, the last page): the practice scene is a warm-up
# and never one of "their" scenes. Attention checks are numbered like any scene (they
# must look like one) but, like practice, stay out of the score (``participant_score``).


def practice_count(*, session_id: int) -> int:
    """The session's practice items. They are given with its test items and never change,
    so the count is cached (the scene page is the rater path's hottest request)."""
    return cache.get_or_set(
        f"studies:session-practice:{session_id}",
        lambda: Assignment.objects.filter(
            practice_items("study_item__"), session_id=session_id
        ).count(),
        3600,
    )


@dataclass(frozen=True)
class ScenePlace:
    """Where one assignment stands among its session's scenes, as the participant counts."""

    practice: bool
    number: int  # 1 for the first counted scene; 0 for a practice scene
    total: int  # the session's scenes, practice left out

    @property
    def label(self) -> str:
        return "Practice scene" if self.practice else f"Scene {self.number} / {self.total}"


def scene_place(*, assignment: Assignment, session_total: int | None = None) -> ScenePlace:
    """``assignment``'s number and its session's total, practice left out.

    Practice items come first in a session (``session_prepare``), so a counted scene's
    number is its position less the practice items. ``session_total``: the session's
    assignments when the caller has counted them (``rater_open_assignment`` does).
    """
    n_practice = practice_count(session_id=assignment.session_id)
    practice = assignment.study_item.role == StudyItem.Role.PRACTICE
    return ScenePlace(
        practice=practice,
        number=0 if practice else assignment.position + 1 - n_practice,
        total=session_scenes(session_id=assignment.session_id, session_total=session_total),
    )


def session_scenes(*, session_id: int, session_total: int | None = None) -> int:
    """The session's scenes as the participant counts them: practice left out.

    ``session_total``: all the session's assignments, when the caller has counted them.
    """
    if session_total is None:
        session_total = Assignment.objects.filter(session_id=session_id).count()
    return session_total - practice_count(session_id=session_id)


def scenes_submitted(*, participant: Participant) -> int:
    """How many scenes the participant has submitted, counted as they are told: no practice."""
    return (
        participant.assignments.filter(status=Assignment.Status.SUBMITTED)
        .exclude(practice_items("study_item__"))
        .count()
    )


def break_due(*, participant: Participant) -> bool:
    """Whether the participant has done a sitting's worth of scenes and has more to do."""
    cap = participant.study.session_cap
    if not cap:
        return False
    return scenes_submitted(participant=participant) - participant.sitting_start >= cap


def sitting_resume(*, participant: Participant) -> Participant:
    """After the break screen: a new sitting starts from the scenes submitted so far."""
    submitted = scenes_submitted(participant=participant)
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
    # Each candidate's last activity, computed by the database: reading every
    # assignment of every rater with an open one into Python cost a big study tens of
    # milliseconds on each "seen it?" and each move to a new work.
    moments = [
        Coalesce(name, "assigned_at")
        for name in ("first_shown_at", "last_event_at", "submitted_at")
    ]
    idle = list(
        Assignment.objects.filter(participant_id__in=open_rows.values("participant_id"))
        .values("participant_id")
        .annotate(latest=Max(Greatest("assigned_at", *moments)))
        .filter(latest__lt=cutoff)
        .order_by("participant_id")
        .values_list("participant_id", flat=True)
    )
    freed = 0
    for pid in idle:
        with transaction.atomic():
            rows = open_rows.filter(participant_id=pid)
            n = rows.count()
            if not n:
                continue
            item_ids = list(rows.values_list("study_item_id", flat=True))
            rows.delete()  # their slots are freed with them (SET_NULL)
            slots_rebalance(item_ids)
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
    """Save the recruitment, pacing and quality settings (``RunningForm.study_fields``);
    the exit questionnaire has its own page and version (``exit_questions_save``)."""
    update_fields = [*fields, "updated_at"]
    for name, value in fields.items():
        setattr(study, name, value)
    study.save(update_fields=update_fields)
    return study


@transaction.atomic
def item_roles_set(*, study: Study, practice: StudyItem | None, attention: list[StudyItem]) -> int:
    """Mark the practice scene and the attention checks; every other scene is a test item.

    Only before anyone has been given scenes: a role changed mid-study would change
    quotas and scores already handed out (the same roles again change nothing and are
    no error). Checks are meant to give their answer away, so they are released from
    the leak check's hold. Returns how many items changed.
    """
    chosen = {item.pk: StudyItem.Role.ATTENTION for item in attention}
    if practice is not None:
        chosen[practice.pk] = StudyItem.Role.PRACTICE
    changes = []
    for item in StudyItem.objects.filter(study=study).select_for_update():
        role = chosen.get(item.pk, StudyItem.Role.TEST)
        if item.role != role or (role != StudyItem.Role.TEST and item.held_back):
            item.role = role
            if role != StudyItem.Role.TEST:
                item.held_back = False
            changes.append(item)
    if changes and Assignment.objects.filter(study_item__study=study).exists():
        raise StudyError("scenes have been handed out: practice and checks can no longer change")
    StudyItem.objects.bulk_update(changes, ["role", "held_back"])
    return len(changes)


@transaction.atomic
def attention_checks_set(
    *,
    study: Study,
    practice: StudyItem | None,
    attention: list[StudyItem],
    instruction: str,
) -> Study:
    """The study page's "Practice and attention checks": the roles
    (:func:`item_roles_set`) and the checks' instruction
    (``services.study_attention_instruction_set``), both or neither."""
    item_roles_set(study=study, practice=practice, attention=attention)
    return study_attention_instruction_set(study=study, instruction=instruction)
