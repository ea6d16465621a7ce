"""The practice scene is not one of the rater's scenes (issue 28, part 7): not on the
scene page's progress, its result page, the break screen or the final page's score,
which counts test scenes only (attention checks are numbered like any scene but are
not results either)."""

from __future__ import annotations

import re

import pytest

from studies.models import Study
from studies.participation import recruitment
from studies.scene import services as scene_services
from tests.studies.quotas import quotas_set

from .test_rater_views import current, full_form, invite, keep_scenes, to_scenes, url

pytestmark = pytest.mark.django_db

PROGRESS = re.compile(r'data-testid="progress">([^<]*)<')


def _roles(study: Study, *, tests: int, attention: bool = False, cap: int = 0) -> None:
    """One rater takes every scene: a practice scene, ``tests`` test scenes, maybe a check."""
    quotas_set(study, overlap=1, min_unseen=0, session_cap=cap)
    n = 1 + tests + attention
    keep_scenes(study, n)
    items = list(study.study_items.order_by("position")[:n])
    recruitment.item_roles_set(
        study=study, practice=items[0], attention=[items[-1]] if attention else []
    )


def _submit(client, participant, *, right: bool) -> str:
    """Submit the open scene; returns the page the rater lands on."""
    assignment = current(participant)
    response = client.post(
        url("scene-submit", participant, assignment_id=assignment.pk),
        full_form(assignment, right=right),
        follow=True,
    )
    assert response.status_code == 200
    return response.content.decode()


def test_the_final_page_counts_and_numbers_test_scenes_only(client, live_study):
    _roles(live_study, tests=2, attention=True)
    participant = invite(live_study)
    to_scenes(client, participant)

    labels = []
    page = client.get(url("start", participant)).content.decode()
    labels.append(PROGRESS.search(page)[1])
    assert 'aria-valuenow="0"' in page and 'aria-valuenow="-1"' not in page
    # The practice answered wrongly: a count that took it in would not be 2 / 2.
    practice_result = _submit(client, participant, right=False)
    assert "Scene 1" not in practice_result
    assert PROGRESS.search(practice_result)[1].endswith("· Practice scene")
    for _ in range(3):  # two test scenes and the attention check, all right
        page = client.get(url("start", participant)).content.decode()
        labels.append(PROGRESS.search(page)[1])
        _submit(client, participant, right=True)
    assert labels == ["Practice scene", "Scene 1 / 3", "Scene 2 / 3", "Scene 3 / 3"]

    done = client.get(url("start", participant)).content.decode()
    scenes = re.search(r'data-testid="score-scenes">.*?<dd>([^<]*)</dd>', done, re.S)[1]
    assert scenes.startswith("2 / 2 (100%)")
    score = scene_services.participant_score(participant=participant)
    assert (score.scenes_correct, score.scenes) == (2, 2)
    assert score.speakers_correct == score.speakers
    headings = [
        " ".join(re.sub(r"<[^>]+>", " ", h).split()).split("·", 1)[1].strip()
        for h in re.findall(r"<h3>(.*?)</h3>", done, re.S)
    ]
    assert headings[0].startswith("Practice not counted")
    assert [h.split(" ✓")[0] for h in headings[1:]] == [
        "Scene 1",
        "Scene 2 attention check, not counted",
        "Scene 3",
    ]


def test_the_break_comes_after_the_cap_of_counted_scenes(client, live_study):
    _roles(live_study, tests=3, cap=2)
    participant = invite(live_study)
    to_scenes(client, participant)
    _submit(client, participant, right=True)  # the practice scene
    _submit(client, participant, right=True)  # the first counted scene
    page = client.get(url("start", participant)).content.decode()
    assert "Time for a break" not in page  # one scene done: no break yet
    assert PROGRESS.search(page)[1] == "Scene 2 / 3"
    _submit(client, participant, right=True)
    page = client.get(url("start", participant)).content.decode()
    assert "Time for a break" in page
    count = re.search(r'data-testid="break-count">([^<]*)<', page)[1]
    assert "answered 2 scenes in a row (2 in all so far)" in count
    assert client.post(url("continue", participant)).status_code == 302
    page = client.get(url("start", participant)).content.decode()
    assert PROGRESS.search(page)[1] == "Scene 3 / 3"


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split()).replace(" ,", ",").replace(" .", ".")


def test_consent_history_and_study_pages_tell_one_count_practice_apart(
    client, live_study, researcher
):
    # Issue 49: the consent page said 8 (practice counted) where the history said 7.
    _roles(live_study, tests=6, attention=True)
    participant = invite(live_study)

    consent = _text(client.get(url("start", participant)).content.decode())
    assert ", for at most 7 scenes, plus 1 practice scene." in consent

    client.post(url("consent", participant))
    study_work = live_study.study_works.get()
    client.post(url("familiarity", participant, study_work_id=study_work.pk), {"seen": "no"})
    session = participant.work_sessions.get()
    history = client.get(url("history", participant, session_id=session.pk)).content.decode()
    assert "· to answer: 7 scenes, plus 1 practice scene" in _text(history)

    client.force_login(researcher)
    detail = client.get(f"/studies/{live_study.pk}/").content.decode()
    told = re.search(r'data-testid="item-count">(.*?)</p>', detail, re.S)[1]
    assert _text(told) == "Each participant answers at most 7 scenes, plus 1 practice scene."
    # The study page's works and the study list count by the same rule (studies.counting).
    works = re.search(r'data-testid="work-scenes">(.*?)</span>', detail, re.S)[1]
    assert works.startswith("(7 scenes, plus 1 practice scene")
    listed = client.get("/studies/").content.decode()
    cell = re.search(r'data-testid="study-scenes">(.*?)</td>', listed, re.S)[1]
    assert _text(cell) == "7 + 1 practice"

    # And the scene pages number the same seven.
    _submit(client, participant, right=True)  # the practice scene
    page = client.get(url("start", participant)).content.decode()
    assert PROGRESS.search(page)[1] == "Scene 1 / 7"
