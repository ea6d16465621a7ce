"""DynToM question validation shows which option is keyed (issue 28, part 7): the
annotator judging "can a careful reader pick the correct option?" sees the gold option
marked; a participant answering the same stage never does."""

from __future__ import annotations

import html as html_lib
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.dyntom.questions.lettering import letter_index
from annotation.models import ValidationBatch
from benchmarks.models import DynToMQuestion, DynToMStage
from studies.choice import services as cs
from studies.participation.services import participant_consent, participants_invite
from studies.services import study_launch
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

KEYED = re.compile(r'<li class="keyed" data-testid="keyed-option"><strong>([^<]*)</strong>')


@pytest.fixture
def stage(shared_data: Path) -> DynToMStage:
    call_command("import_benchmark", "dyntom", str(shared_data / "dyntom" / "trial149"))
    return DynToMStage.objects.get()


def test_the_question_being_validated_shows_its_keyed_option(client, stage, researcher):
    client.force_login(researcher)
    client.post(
        reverse("annotation:validation"),
        {"name": "questions", "k": 1, "kinds": ["question"], "work_keys": stage.work.key},
    )
    batch = ValidationBatch.objects.get()
    client.force_login(UserFactory(username="ann", role="annotator"))
    url = client.post(reverse("annotation:validation-take", args=[batch.pk]))["Location"]
    response = client.get(url)
    key = response.context["object"].ref
    question = DynToMQuestion.objects.get(stage=stage, key=key)
    html = response.content.decode()
    keyed = [html_lib.unescape(k) for k in KEYED.findall(html)]
    assert keyed == [question.options[cs.dyntom_gold_index(question)]]
    assert "✓ keyed answer" in html
    # Another question of the stage, chosen from the side list: its own key.
    slots = response.context["slots"]
    other = client.get(f"{url}?slot={slots[3].pk}")
    other_q = DynToMQuestion.objects.get(stage=stage, key=other.context["object"].ref)
    assert other_q.key != key
    keyed = [html_lib.unescape(k) for k in KEYED.findall(other.content.decode())]
    assert keyed == [other_q.options[cs.dyntom_gold_index(other_q)]]


def test_a_participant_answering_the_stage_never_sees_the_key(client, stage):
    study = cs.choice_study_create(
        name="DynToM humans", benchmark="dyntom", works=[stage.work], stage_fraction=1
    ).study
    study_launch(study=study)
    (p,) = participants_invite(study=study, labels=["Dee"])
    participant_consent(participant=p)
    cs.dyntom_stage_take(participant=p, study_work_id=study.study_works.get().pk)
    html = client.get(reverse("rater:start", args=[p.token])).content.decode()
    assert 'id="question-text"' in html
    assert "keyed" not in html and "✓" not in html


def test_a_letter_keys_its_option_or_none():
    assert letter_index("b", 4) == 1
    assert letter_index(" C ", 4) == 2
    assert letter_index("e", 4) is None
    assert letter_index("", 4) is None
