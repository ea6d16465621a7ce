"""Appendix J: the judge's defects steer a second round of distractors for a published item."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.urls import reverse

from annotation.chartom import workflow
from annotation.chartom.distractor_review import distractor_review_submit
from annotation.chartom.llm_steps import construction_step_run
from annotation.chartom.misleadings import construction_distractors_redo, judge_defects
from annotation.chartom.publish import construction_publish
from annotation.models import FieldChange, Stage, TaskKind
from benchmarks.models import QAItem
from modeling.models import Prediction, Run
from tests.factories import DEFAULT_PASSWORD, UserFactory

from .test_llm_steps import Script

pytestmark = pytest.mark.django_db

DEFECT = "It says he is generous, when the scene shows him scheming."


@pytest.fixture
def published(make_construction, chartom_backend, annotator):
    construction = make_construction(
        stage=Stage.DISTRACTOR_REVIEW,
        state="waiting_human",
        backend=chartom_backend,
        question="Why does Vautrin fill his neighbours' glasses first?",
        description="He flatters them on purpose so that his scheme goes ahead.",
        bonus_points=["He flatters them on purpose.", "His scheme must go ahead."],
        distractors=["He is generous.", "He wants to rule the table.", "He tests the wine."],
    )
    with transaction.atomic():
        construction_publish(workflow.construction_lock(construction.pk), user=annotator)
    construction.refresh_from_db()
    return construction


def _judged(item: QAItem, defects: list[str]) -> Run:
    run = Run.objects.create(
        name="judged", benchmark="chartom-qa", method="generative", model="m", imported=True
    )
    Prediction.objects.create(
        run=run,
        qa_item=item,
        parse_status="ok",
        raw_output="He is just being generous.",
        details={"task": "generative", "bonus_points_total": 2, "defects": defects},
    )
    return run


def test_judge_defects_become_misleadings_and_the_same_item_is_revised(
    published, llm_server, annotator
):
    item = published.qa_item
    _judged(item, [DEFECT, "None", " "])
    assert judge_defects(published) == ([DEFECT], ["judged"])
    model = Script()
    llm_server.responder = model

    assert construction_distractors_redo(construction_id=published.pk, user=None) == [DEFECT]
    published.refresh_from_db()
    assert (published.stage, published.misleadings) == (Stage.DISTRACTORS, [DEFECT])
    change = FieldChange.objects.get(construction=published, field="misleadings")
    assert change.model == "LLM judge (judged)" and change.action == "from judge"

    assert construction_step_run(construction_id=published.pk) == "advanced:distractor_review"
    prompt = llm_server.requests[-1]["messages"][-1]["content"]
    assert DEFECT in prompt

    slot = workflow.task_take(kind=TaskKind.DISTRACTOR_REVIEW, annotator=annotator)
    new = ["He is simply generous.", "He rules the table.", "He only wants to taste it."]
    distractor_review_submit(assignment_id=slot.pk, annotator=annotator, distractors=new)
    published.refresh_from_db()
    assert published.stage == Stage.PUBLISHED and published.qa_item_id == item.pk
    item.refresh_from_db()
    assert item.misleading_choices == new
    assert QAItem.objects.count() == 1 and Prediction.objects.filter(qa_item=item).count() == 1


def test_refused_before_publishing_or_without_defects(published, make_construction, client):
    with pytest.raises(workflow.WorkflowError, match="no judged model answer"):
        construction_distractors_redo(construction_id=published.pk, user=None)
    early = make_construction(stage=Stage.BONUS_REVIEW, dimension="belief")
    with pytest.raises(workflow.WorkflowError, match="not published"):
        construction_distractors_redo(construction_id=early.pk, user=None)

    url = reverse("annotation:chartom-distractors-redo", args=[published.pk])
    worker = UserFactory(username="redo-annotator", role="annotator")
    assert client.login(username=worker.username, password=DEFAULT_PASSWORD)
    assert client.post(url).status_code == 403
    boss = UserFactory(username="redo-researcher", role="researcher")
    assert client.login(username=boss.username, password=DEFAULT_PASSWORD)
    response = client.post(url, follow=True)
    assert "no judged model answer" in response.content.decode()
    page = client.get(reverse("annotation:chartom-construction", args=[published.pk]))
    assert b"Rewrite distractors from the judge" in page.content
