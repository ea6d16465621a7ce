"""One scene submitted twice, one after the other or from five tabs at once.

Issue 10, item 9: the view read the scene as open, then saved the form under the lock
and met the first tab's submission: "already submitted", a 400 page. Every submit must
land where a replay lands (the next step), and the data must hold one answer per
masked speaker.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connections, transaction
from django.test import Client

from studies.models import Assignment, Guess, Study
from studies.scene import services as scene_services
from tests.studies.test_concurrency import run_together
from tests.studies.test_rater_views import current, full_form, instances, invite, to_scenes, url


def _at_scene(client: Client, study: Study):
    participant = invite(study)
    to_scenes(client, participant)
    return participant, current(participant)


def _landing(response) -> tuple[int, str]:
    return response.status_code, response.headers.get("Location", "")


@pytest.mark.django_db
@pytest.mark.parametrize("reveal", [Study.Reveal.AT_END, Study.Reveal.AFTER_SCENE])
def test_a_replayed_submit_lands_on_the_next_step(client, live_study, reveal):
    Study.objects.filter(pk=live_study.pk).update(reveal=reveal)
    live_study.refresh_from_db()
    participant, assignment = _at_scene(client, live_study)
    submit = url("scene-submit", participant, assignment_id=assignment.pk)
    first = client.post(submit, full_form(assignment))
    # The replay says something else: it changes nothing and goes where the first went.
    replay = client.post(submit, full_form(assignment, right=False))
    expected = (
        url("scene-result", participant, assignment_id=assignment.pk)
        if reveal == Study.Reveal.AFTER_SCENE
        else url("start", participant)
    )
    assert _landing(first) == _landing(replay) == (302, expected)
    assert set(Guess.objects.filter(assignment=assignment).values_list("correct", flat=True)) == {
        True
    }


@pytest.mark.django_db(transaction=True)
def test_five_tabs_submitting_one_scene_at_once_all_move_on(live_study):
    """Real threads, each with its own connection (row locks on PostgreSQL; SQLite's
    ``BEGIN IMMEDIATE`` serialises the same transactions)."""
    participant, assignment = _at_scene(Client(), live_study)
    form = full_form(assignment)
    submit = url("scene-submit", participant, assignment_id=assignment.pk)

    results, errors = run_together([lambda: _landing(Client().post(submit, form))] * 5)

    assert errors == []
    assert results == [(302, url("start", participant))] * 5
    assignment.refresh_from_db()
    assert assignment.status == Assignment.Status.SUBMITTED
    guesses = Guess.objects.filter(assignment=assignment)
    assert guesses.count() == len(instances(assignment))  # no duplicate rows
    assert all(g.correct for g in guesses)


@pytest.mark.django_db(transaction=True)
def test_tabs_arriving_while_another_tab_submits_move_on(live_study):
    """The race made certain: one tab's submit holds the scene's row lock while four more
    tabs read the scene as open and then wait for that lock. On the old code each of
    them met "already submitted" once the first committed, and answered 400."""
    participant, assignment = _at_scene(Client(), live_study)
    form = full_form(assignment)
    saved = Client().post(url("scene-save", participant, assignment_id=assignment.pk), form)
    assert saved.status_code == 302  # the answers are in, as autosave leaves them
    submit = url("scene-submit", participant, assignment_id=assignment.pk)
    locked, release = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def first_tab() -> None:
        try:
            with transaction.atomic():
                # The first tab's submit, paused inside its transaction, lock held.
                Assignment.objects.select_for_update().get(pk=assignment.pk)
                locked.set()
                release.wait(timeout=30)
                scene_services.scene_submit(participant=participant, assignment_id=assignment.pk)
        except BaseException as exc:
            failures.append(exc)
        finally:
            connections.close_all()

    first = threading.Thread(target=first_tab)
    first.start()
    assert locked.wait(timeout=30)
    # Give the other tabs time to read the scene as open and queue on the lock.
    threading.Timer(1.0, release.set).start()
    started = time.monotonic()
    results, errors = run_together([lambda: _landing(Client().post(submit, form))] * 4)
    first.join(timeout=60)

    assert failures == [] and errors == []
    assert time.monotonic() - started >= 0.9  # they did wait for the first tab
    assert results == [(302, url("start", participant))] * 4
    assert Guess.objects.filter(assignment=assignment).count() == len(instances(assignment))
