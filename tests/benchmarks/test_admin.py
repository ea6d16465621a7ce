"""The item bank admin: reachable by researchers only, changelists without N+1 queries."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from django.contrib import admin
from django.db import connection
from django.db.models import Model
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from benchmarks import models
from tests.factories import (
    CharacterFactory,
    DynToMQuestionFactory,
    DynToMScenarioFactory,
    DynToMStageFactory,
    QAItemFactory,
    SceneFactory,
    SpeakerAnnotationFactory,
    SpeakerInstanceFactory,
    WorkFactory,
)

pytestmark = pytest.mark.django_db


class _Batch:
    """A factory-like maker (call, ``create_batch``) for the mapped items' models."""

    def __init__(self, make: Callable[[int], Model]) -> None:
        self.make = make
        self.made = 0

    def __call__(self) -> Model:
        self.made += 1
        return self.make(self.made)

    def create_batch(self, size: int) -> list[Model]:
        return [self() for _ in range(size)]


def _mc_item(n: int) -> Model:
    work = WorkFactory(benchmark="generic", kind="item_set")
    texts = {"en": {"context": "", "question": f"Q{n}?", "options": ["a", "b"]}}
    return models.MCItem.objects.create(
        work=work, item_id=f"q{n}", texts=texts, answers=[0], content_hash="0" * 64
    )


def _mapping_preset(n: int) -> Model:
    mapping = {"question": "q", "options": "choices", "answer": "answer"}
    return models.MappingPreset.objects.create(name=f"preset {n}", mapping=mapping)


# Each factory makes its own related rows, so a changelist column that follows a
# foreign key without list_select_related costs one query per row.
FACTORIES: dict[type[Model], Callable[..., Model]] = {
    models.Work: WorkFactory,
    models.Character: CharacterFactory,
    models.Scene: SceneFactory,
    models.SpeakerInstance: SpeakerInstanceFactory,
    models.SpeakerAnnotation: SpeakerAnnotationFactory,
    models.QAItem: QAItemFactory,
    models.DynToMStage: DynToMStageFactory,
    models.DynToMScenario: DynToMScenarioFactory,
    models.DynToMQuestion: DynToMQuestionFactory,
    models.MCItem: _Batch(_mc_item),
    models.MappingPreset: _Batch(_mapping_preset),
}


def _admin_url(model: type[Model], view: str, *args: object) -> str:
    return reverse(f"admin:benchmarks_{model._meta.model_name}_{view}", args=args)


def test_every_item_bank_model_is_registered():
    registered = {m for m in admin.site._registry if m._meta.app_label == "benchmarks"}

    assert registered == set(FACTORIES)


@pytest.mark.parametrize("model", list(FACTORIES), ids=lambda m: m.__name__)
def test_researcher_opens_changelist_and_change_page(client, researcher, model):
    obj = FACTORIES[model]()
    client.force_login(researcher)

    changelist = client.get(_admin_url(model, "changelist"))
    change = client.get(_admin_url(model, "change", obj.pk))

    assert changelist.status_code == 200
    assert changelist.context["cl"].result_count == 1
    assert change.status_code == 200
    assert change.context["original"] == obj


@pytest.mark.parametrize("model", list(FACTORIES), ids=lambda m: m.__name__)
def test_changelist_query_count_does_not_grow_with_rows(client, researcher, model):
    client.force_login(researcher)
    url = _admin_url(model, "changelist")
    FACTORIES[model].create_batch(2)
    with CaptureQueriesContext(connection) as two_rows:
        assert client.get(url).status_code == 200

    FACTORIES[model].create_batch(18)
    with CaptureQueriesContext(connection) as twenty_rows:
        response = client.get(url)

    assert response.context["cl"].result_count == 20
    assert len(twenty_rows) == len(two_rows)


def test_filtered_changelists_behind_work_links(client, researcher):
    scene = SceneFactory()
    SceneFactory.create_batch(2, work=scene.work)
    SceneFactory()
    client.force_login(researcher)

    works = client.get(_admin_url(models.Work, "changelist"))
    link = f"{_admin_url(models.Scene, 'changelist')}?work__id__exact={scene.work.pk}"
    scenes = client.get(link)

    assert f'href="{link}">3</a>' in works.content.decode()
    assert scenes.status_code == 200
    assert {s.pk for s in scenes.context["cl"].result_list} == set(
        scene.work.scenes.values_list("pk", flat=True)
    )


def test_stage_change_page_inlines_its_scenarios(client, researcher):
    stage = DynToMStageFactory()
    DynToMScenarioFactory(stage=stage, key="scenario first", background="rain on the roof")
    client.force_login(researcher)

    response = client.get(_admin_url(models.DynToMStage, "change", stage.pk))

    assert response.status_code == 200
    assert "rain on the roof" in response.content.decode()


def test_work_changelist_filters_and_search(client, researcher):
    social_stage = DynToMStageFactory().work
    movie = WorkFactory(key="heat", split="train")
    client.force_login(researcher)
    url = _admin_url(models.Work, "changelist")

    def shown(params: dict[str, str]) -> set[int]:
        response = client.get(url, params)
        assert response.status_code == 200, params  # an unknown lookup would redirect
        return {w.pk for w in response.context["cl"].result_list}

    assert shown({"benchmark__exact": "dyntom", "kind__exact": "social_stage"}) == {social_stage.pk}
    assert shown({"split__exact": "train"}) == {movie.pk}
    assert shown({"q": "heat"}) == {movie.pk}


def test_rater_is_sent_to_admin_login(client, rater):
    work = WorkFactory()
    client.force_login(rater)
    login = reverse("admin:login")

    for url in (
        _admin_url(models.Work, "changelist"),
        _admin_url(models.Work, "change", work.pk),
        _admin_url(models.DynToMQuestion, "changelist"),
    ):
        response = client.get(url)
        assert response.status_code == 302
        assert response.url.startswith(login)


def test_scene_change_page_inlines_its_masked_speakers(client, researcher):
    instance = SpeakerInstanceFactory(gold_character__name="monica geller")
    client.force_login(researcher)

    response = client.get(_admin_url(models.Scene, "change", instance.scene.pk))

    assert response.status_code == 200
    formset = response.context["inline_admin_formsets"][0].formset
    assert [form.instance for form in formset.forms] == [instance]
    assert "monica geller" in response.content.decode()


def _work_with_spoken_scenes(scenes: int) -> models.Work:
    """A work whose scenes each have a speaker instance: the instances protect their
    gold characters, so the work's delete page lists them as what stops the delete."""
    work = WorkFactory()
    for _ in range(scenes):
        SpeakerInstanceFactory(scene=SceneFactory(work=work))
    return work


def test_delete_page_query_count_does_not_grow_with_the_rows_it_lists(client, researcher):
    client.force_login(researcher)
    small, large = _work_with_spoken_scenes(2), _work_with_spoken_scenes(20)

    with CaptureQueriesContext(connection) as two_scenes:
        client.get(_admin_url(models.Work, "delete", small.pk))
    with CaptureQueriesContext(connection) as twenty_scenes:
        response = client.get(_admin_url(models.Work, "delete", large.pk))

    assert response.status_code == 200
    protected = response.context["protected"]
    instances = models.SpeakerInstance.objects.filter(scene__work=large).order_by("pk")
    # Named as their own pages name them, in a stable order (Django lists a set).
    assert [re.search(r">(.*)</a>", p).group(1) for p in protected] == [str(i) for i in instances]
    assert f"{large.key} scene" in protected[0]
    assert len(twenty_scenes) == len(two_scenes)


def test_delete_selected_action_query_count_does_not_grow_with_the_selection(client, researcher):
    client.force_login(researcher)
    url = _admin_url(models.Work, "changelist")

    def confirm(works: list[models.Work]) -> tuple[int, object]:
        data = {"action": "delete_selected", "_selected_action": [w.pk for w in works]}
        with CaptureQueriesContext(connection) as queries:
            response = client.post(url, data)
        return len(queries), response

    two, _ = confirm([_work_with_spoken_scenes(1) for _ in range(2)])
    twenty, response = confirm([_work_with_spoken_scenes(1) for _ in range(20)])

    assert response.status_code == 200
    assert len(response.context["protected"]) == 20
    assert twenty == two
