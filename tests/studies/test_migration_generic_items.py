"""studies 0003/0004 turn scene rows into generic study items without losing any row."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [
    ("studies", "0002_study_open_join"),
    ("benchmarks", "0003_speaker_annotation_guess_qualifiers"),
]
AFTER = [("studies", "0004_choice_studies")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


def test_scene_study_rows_survive_the_generalisation():
    old = _migrate(BEFORE)
    Work = old.get_model("benchmarks", "Work")
    Scene = old.get_model("benchmarks", "Scene")
    Character = old.get_model("benchmarks", "Character")
    Instance = old.get_model("benchmarks", "SpeakerInstance")
    Study = old.get_model("studies", "Study")
    StudyWork = old.get_model("studies", "StudyWork")
    StudyScene = old.get_model("studies", "StudyScene")
    Participant = old.get_model("studies", "Participant")
    WorkSession = old.get_model("studies", "WorkSession")
    SceneAssignment = old.get_model("studies", "SceneAssignment")
    Guess = old.get_model("studies", "Guess")
    HistoryView = old.get_model("studies", "HistoryView")

    work = Work.objects.create(benchmark="tvshowguess", key="friends", title="Friends")
    scene = Scene.objects.create(work=work, source_id="01x01 1", position=0, part="testing")
    ross = Character.objects.create(work=work, name="Ross")
    instance = Instance.objects.create(scene=scene, code="P0", gold_character=ross)
    study = Study.objects.create(name="Old", benchmark="tvshowguess")
    sw = StudyWork.objects.create(study=study, work=work)
    ss = StudyScene.objects.create(study=study, study_work=sw, scene=scene, held_back=False)
    p = Participant.objects.create(study=study, token="t" * 43)
    session = WorkSession.objects.create(participant=p, study_work=sw, seen=True, seed=7)
    sa = SceneAssignment.objects.create(
        participant=p,
        session=session,
        study_scene=ss,
        position=0,
        seen=True,
        status="submitted",
        total_ms=1234,
        submitted_at=timezone.now(),
    )
    Guess.objects.create(assignment=sa, instance=instance, answer="Ross", correct=True)
    HistoryView.objects.create(session=session, where="panel", scene_assignment=sa)

    new = _migrate(AFTER)
    StudyItem = new.get_model("studies", "StudyItem")
    Assignment = new.get_model("studies", "Assignment")
    item = StudyItem.objects.get()
    assert (item.pk, item.scene_id, item.qa_item_id, item.stage_id) == (ss.pk, scene.pk, None, None)
    a = Assignment.objects.get()
    assert (a.pk, a.study_item_id, a.status, a.total_ms) == (sa.pk, ss.pk, "submitted", 1234)
    guess = new.get_model("studies", "Guess").objects.get()
    assert (guess.assignment_id, guess.answer, guess.correct) == (sa.pk, "Ross", True)
    assert new.get_model("studies", "HistoryView").objects.get().assignment_id == sa.pk
    # The quota's last line of defence is back under its new name.
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        Assignment.objects.create(
            participant_id=p.pk, session_id=session.pk, study_item_id=ss.pk, position=1, seen=True
        )
    # Leave the database as the other tests expect it: every app at its latest.
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
