"""The time estimate participants are told before consent (issue #28, part 4).

Dead Poets Society from ../shared/data/screenplays: 63 history scenes to read before
any scene is answered. The estimate must cover that reading before any data, and a
pilot of careless, fast participants must not shrink it below the reading time.
"""

from __future__ import annotations

import math
import secrets
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from benchmarks.models import Scene, Work
from studies.models import Assignment, Participant, Study, StudyItem, WorkSession
from studies.participation import recruitment
from studies.participation.recruitment import READING_WPM, scene_words, study_estimate
from studies.services import study_create, study_go_live

pytestmark = pytest.mark.django_db


@pytest.fixture
def dead_poets(shared_data: Path) -> Work:
    path = shared_data / "screenplays" / "dead_poets_society.txt"
    call_command("import_benchmark", "screenplay", str(path), verbosity=0)
    return Work.objects.get(benchmark="tom-in-amc")


@pytest.fixture
def study(dead_poets: Work, researcher) -> Study:
    study = study_create(
        name="Dead Poets guessing",
        benchmark="tom-in-amc",
        works=[dead_poets],
        overlap=2,
        created_by=researcher,
    )
    return study_go_live(study=study)


def _reading_minutes(study: Study) -> float:
    """History and item words counted here, independently of the estimate's helpers'
    queries: every training scene of the work and every scene a participant may get."""
    work = study.study_works.get().work
    history = Scene.objects.filter(work=work, part=Scene.Part.TRAINING)
    items = Scene.objects.filter(
        pk__in=StudyItem.objects.filter(study=study, held_back=False).values("scene")
    )
    words = sum(scene_words(s.heading, s.lines) for s in [*history, *items])
    return words / READING_WPM


def _pilot(study: Study, n: int, *, seconds_per_scene: float, **participant_fields) -> None:
    """``n`` participants who answered every open scene in ``seconds_per_scene`` each."""
    items = list(StudyItem.objects.filter(study=study, held_back=False))
    study_work = study.study_works.get()
    now = timezone.now()
    for k in range(n):
        participant = Participant.objects.create(
            study=study,
            token=secrets.token_urlsafe(16),
            label=f"fast {k}",
            consented_at=now - timedelta(minutes=5),
            **participant_fields,
        )
        session = WorkSession.objects.create(
            participant=participant, study_work=study_work, seen=False, seed=k
        )
        Assignment.objects.bulk_create(
            Assignment(
                participant=participant,
                session=session,
                study_item=item,
                position=position,
                seen=False,
                status=Assignment.Status.SUBMITTED,
                total_ms=int(seconds_per_scene * 1000),
                submitted_at=now,
            )
            for position, item in enumerate(items)
        )


def test_before_any_data_the_estimate_covers_the_history_and_the_scenes(study):
    estimate = study_estimate(study=study)
    reading = _reading_minutes(study)
    history = Scene.objects.filter(
        work=study.study_works.get().work, part=Scene.Part.TRAINING
    ).count()

    assert history == 63  # the "63 history scenes"
    assert estimate.items == StudyItem.objects.filter(study=study, held_back=False).count() > 0
    assert estimate.minutes >= reading
    assert estimate.minutes == math.ceil(reading + estimate.items * 45 / 60)
    assert estimate.words / READING_WPM == pytest.approx(reading)
    assert estimate.basis == (
        f"{estimate.words:,} words to read at 238 wpm + {estimate.items} × 45 s"  # noqa: RUF001
    )
    assert estimate.pilot == 0


def test_a_pilot_of_fast_participants_never_brings_it_under_the_reading_floor(study):
    before = study_estimate(study=study)
    _pilot(study, 5, seconds_per_scene=2, finished_at=timezone.now())

    after = study_estimate(study=study)

    assert after.pilot == 5
    assert after.minutes >= _reading_minutes(study)
    assert after.minutes == math.ceil(before.words / READING_WPM)
    assert after.basis.startswith("reading floor: ")
    assert "median of 5 pilot participants" in after.basis


def test_a_slow_pilot_raises_it_to_their_median(study):
    before = study_estimate(study=study)
    _pilot(study, 5, seconds_per_scene=300, finished_at=timezone.now())

    after = study_estimate(study=study)

    history_minutes = (before.words - _item_words(study)) / READING_WPM
    assert after.minutes == math.ceil(before.items * 5 + history_minutes)
    assert after.minutes > before.minutes
    assert after.basis.startswith("median of 5 pilot participants (floor: ")


def _item_words(study: Study) -> int:
    items = Scene.objects.filter(pk__in=StudyItem.objects.filter(study=study).values("scene"))
    return sum(scene_words(s.heading, s.lines) for s in items)


def test_excluded_withdrawn_and_unfinished_participants_are_no_pilot(study):
    now = timezone.now()
    _pilot(study, 4, seconds_per_scene=300, finished_at=now)
    _pilot(study, 3, seconds_per_scene=1, finished_at=now, excluded_at=now)
    _pilot(study, 2, seconds_per_scene=1, finished_at=now, withdrawn_at=now)
    estimate = study_estimate(study=study)
    assert estimate.pilot == 4  # 4 kept: under the 5 a pilot needs, so words still rule
    assert estimate.basis.endswith(" × 45 s")  # noqa: RUF001

    # A fifth participant with an open scene has not finished: still no pilot.
    _pilot(study, 1, seconds_per_scene=300)
    late = Participant.objects.get(label="fast 0", finished_at__isnull=True)
    Assignment.objects.filter(participant=late).update(status=Assignment.Status.ASSIGNED)
    assert study_estimate(study=study).pilot == 4

    # Once they submit everything they count, and only the slow ones set the median.
    Assignment.objects.filter(participant=late).update(status=Assignment.Status.SUBMITTED)
    estimate = study_estimate(study=study)
    assert estimate.pilot == 5
    assert estimate.minutes > math.ceil(estimate.words / READING_WPM)


def test_the_researchers_figure_is_told_and_the_computed_basis_kept(study, client, researcher):
    computed = study_estimate(study=study)
    Study.objects.filter(pk=study.pk).update(minutes_estimate=20)
    study.refresh_from_db()

    estimate = study_estimate(study=study)

    assert (estimate.minutes, estimate.computed_minutes) == (20, computed.minutes)
    assert estimate.researcher_set
    client.force_login(researcher)
    page = client.get(f"/studies/{study.pk}/").content.decode()
    assert "about 20 minutes</strong>: your figure; computed: " in page
    assert f"{computed.words:,} words to read at 238 wpm" in page


def test_the_consent_page_tells_the_minutes_and_scenes(study):
    estimate = study_estimate(study=study)
    participant = Participant.objects.create(study=study, token=secrets.token_urlsafe(16))
    from django.test import Client

    page = Client().get(f"/s/{participant.token}/").content.decode()

    assert (
        f"About <strong>{estimate.minutes} minutes</strong>, for at most "
        f"<strong>{estimate.items} scenes</strong>."
    ) in page
    assert recruitment.PILOT_MIN == 5


# -- multiple-choice studies: their own texts and answering times -------------------------


def test_a_chartom_question_counts_both_plot_windows_the_question_and_its_options(client):
    from studies.choice import services as cs
    from tests.studies.test_choice_services import _books

    works = _books(1, 2)
    study = cs.choice_study_create(
        name="CharToM", benchmark="chartom-qa", works=works, questions=2
    ).study

    estimate = study_estimate(study=study)

    # c = 0: 9 words, c = 2k: 60, the question 7, the answer 8, three misleading 2 each.
    assert (estimate.items, estimate.words, estimate.item_seconds) == (2, 2 * 90, 30)
    assert estimate.minutes == math.ceil(180 / 238 + 2 * 30 / 60)
    assert estimate.noun == "question" and not estimate.per_stage
    participant = Participant.objects.create(study=study, token=secrets.token_urlsafe(16))
    study_go_live(study=study)
    page = client.get(f"/s/{participant.token}/").content.decode()
    assert f"About <strong>{estimate.minutes} minutes</strong>, for at most " in page
    assert "<strong>2 questions</strong>." in page


def test_dyntom_is_estimated_for_its_longest_stage(client):
    from studies.choice import services as cs
    from tests.factories import (
        DynToMQuestionFactory,
        DynToMScenarioFactory,
        DynToMStageFactory,
    )

    long, short = DynToMStageFactory(work__key="long"), DynToMStageFactory(work__key="short")
    for number in (1, 2):
        DynToMScenarioFactory(stage=long, number=number)
    DynToMScenarioFactory(stage=short, number=1)
    for _ in range(3):
        DynToMQuestionFactory(stage=long)
    DynToMQuestionFactory(stage=short)
    study = cs.choice_study_create(
        name="DynToM", benchmark="dyntom", works=[long.work, short.work], stage_fraction=1
    ).study

    estimate = study_estimate(study=study)

    # Profiles 6 words, each scenario 7 + 5 of dialogue, each question 9 + two options of 4.
    assert (estimate.items, estimate.words) == (3, 6 + 2 * 12 + 3 * 17)
    assert estimate.per_stage and estimate.basis.endswith(" × 15 s, for one stage")  # noqa: RUF001
    participant = Participant.objects.create(study=study, token=secrets.token_urlsafe(16))
    study_go_live(study=study)
    page = client.get(f"/s/{participant.token}/").content.decode()
    assert "a story, with at most <strong>3 questions</strong> on it." in page
