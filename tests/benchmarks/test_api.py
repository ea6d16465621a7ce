"""The read-only item bank API: contents, filters, query counts, permissions, schema."""

from __future__ import annotations

import base64
from collections.abc import Callable
from types import SimpleNamespace

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from benchmarks.models import Benchmark, DynToMQuestion, QAItem, Scene, Work
from tests.factories import (
    CharacterFactory,
    DynToMQuestionFactory,
    DynToMScenarioFactory,
    DynToMStageFactory,
    QAItemFactory,
    SceneFactory,
    SpeakerInstanceFactory,
    WorkFactory,
)

pytestmark = pytest.mark.django_db

BASENAMES = (
    "work",
    "character",
    "scene",
    "speaker-instance",
    "qa-item",
    "dyntom-stage",
    "dyntom-question",
)


def _list_url(basename: str) -> str:
    return reverse(f"{basename}-list")


def _scene_with_instances(**kwargs) -> Scene:
    scene = SceneFactory(**kwargs)
    SpeakerInstanceFactory.create_batch(2, scene=scene)
    return scene


def _stage_with_scenarios() -> None:
    stage = DynToMStageFactory()
    DynToMScenarioFactory.create_batch(2, stage=stage)


# Each builder makes rows with their own related rows, so a missing
# select_related/prefetch_related shows up as queries growing with the page.
BUILDERS: dict[str, Callable[[], object]] = {
    "work": WorkFactory,
    "character": CharacterFactory,
    "scene": _scene_with_instances,
    "speaker-instance": SpeakerInstanceFactory,
    "qa-item": QAItemFactory,
    "dyntom-stage": _stage_with_scenarios,
    "dyntom-question": DynToMQuestionFactory,
}


@pytest.fixture
def bank() -> SimpleNamespace:
    """One row of every kind, with recognisable gold answers."""
    instance = SpeakerInstanceFactory(
        gold_character__name="gold-speaker-rachel", candidates=["gold-speaker-rachel", "ross"]
    )
    qa_item = QAItemFactory(answer="gold-answer-she-knows")
    stage = DynToMStageFactory()
    DynToMScenarioFactory(stage=stage, number=2, key="scenario 2")
    DynToMScenarioFactory(stage=stage, number=1, key="scenario 1")
    question = DynToMQuestionFactory(stage=stage, gold_letter="zq")
    return SimpleNamespace(
        instance=instance,
        scene=instance.scene,
        character=instance.gold_character,
        work=instance.scene.work,
        qa_item=qa_item,
        stage=stage,
        question=question,
        gold_strings=("gold-speaker-rachel", "gold-answer-she-knows", '"zq"'),
    )


def _detail_urls(bank: SimpleNamespace) -> list[str]:
    objects = {
        "work": bank.work,
        "character": bank.character,
        "scene": bank.scene,
        "speaker-instance": bank.instance,
        "qa-item": bank.qa_item,
        "dyntom-stage": bank.stage,
        "dyntom-question": bank.question,
    }
    return [reverse(f"{name}-detail", args=[obj.pk]) for name, obj in objects.items()]


def _ids(response) -> set[int]:
    assert response.status_code == 200, response.content
    return {row["id"] for row in response.json()["results"]}


def _basic_auth(username: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{username}:{password}".encode()).decode()
    return {"HTTP_AUTHORIZATION": f"Basic {token}"}


# --- contents -------------------------------------------------------------------------


def test_scene_detail_has_lines_and_masked_speakers_with_gold(client, researcher, bank):
    client.force_login(researcher)
    response = client.get(reverse("scene-detail", args=[bank.scene.pk]))

    assert response.status_code == 200
    body = response.json()
    assert body["work"] == bank.work.pk
    assert body["lines"] == bank.scene.lines
    assert body["instances"] == [
        {
            "id": bank.instance.pk,
            "code": bank.instance.code,
            "gold_character": bank.character.pk,
            "gold_character_name": "gold-speaker-rachel",
            "candidates": ["gold-speaker-rachel", "ross"],
        }
    ]


def test_stage_detail_nests_scenarios_in_order(client, researcher, bank):
    client.force_login(researcher)
    body = client.get(reverse("dyntom-stage-detail", args=[bank.stage.pk])).json()

    assert body["work_key"] == bank.stage.work.key
    assert [s["key"] for s in body["scenarios"]] == ["scenario 1", "scenario 2"]


def test_question_and_qa_item_carry_their_answers(client, researcher, bank):
    client.force_login(researcher)
    question = client.get(reverse("dyntom-question-detail", args=[bank.question.pk])).json()
    qa_item = client.get(reverse("qa-item-detail", args=[bank.qa_item.pk])).json()

    assert question["gold_letter"] == "zq"
    assert question["work_key"] == bank.stage.work.key
    assert qa_item["answer"] == "gold-answer-she-knows"
    assert qa_item["character_name"] == bank.qa_item.character.name


def test_list_is_paginated_by_fifty(client, researcher):
    WorkFactory.create_batch(51)
    client.force_login(researcher)

    body = client.get(_list_url("work")).json()

    assert body["count"] == 51
    assert len(body["results"]) == 50
    assert body["next"] is not None


def test_write_methods_are_not_allowed(client, researcher, bank):
    client.force_login(researcher)

    response = client.post(_list_url("work"), {"key": "new", "title": "New"})
    delete = client.delete(reverse("work-detail", args=[bank.work.pk]))

    assert response.status_code == 405
    assert delete.status_code == 405
    assert Work.objects.filter(pk=bank.work.pk).exists()


# --- filters --------------------------------------------------------------------------


def test_works_filter_by_benchmark_kind_split_and_search(client, researcher):
    movie = WorkFactory(key="heat", title="Heat", split="train")
    show = WorkFactory(
        key="friends", title="Friends", benchmark=Benchmark.TVSHOWGUESS, kind=Work.Kind.TV_SHOW
    )
    book = QAItemFactory().work
    client.force_login(researcher)
    url = _list_url("work")

    assert _ids(client.get(url, {"benchmark": "tvshowguess"})) == {show.pk}
    assert _ids(client.get(url, {"kind": "book"})) == {book.pk}
    assert _ids(client.get(url, {"split": "train"})) == {movie.pk}
    assert _ids(client.get(url, {"search": "FRIEND"})) == {show.pk}
    assert _ids(client.get(url, {"search": "heat", "benchmark": "dyntom"})) == set()


def test_characters_and_scenes_filter_by_work_part_and_episode(client, researcher):
    wanted = SceneFactory(part=Scene.Part.TESTING, episode="s01e01")
    SceneFactory(work=wanted.work, part=Scene.Part.TRAINING, episode="s01e01")
    SceneFactory(work=wanted.work, part=Scene.Part.TESTING, episode="s01e02")
    SceneFactory(part=Scene.Part.TESTING, episode="s01e01")
    character = CharacterFactory(work=wanted.work)
    CharacterFactory()
    client.force_login(researcher)

    scenes = client.get(
        _list_url("scene"), {"work": wanted.work.pk, "part": "testing", "episode": "s01e01"}
    )
    characters = client.get(_list_url("character"), {"work": wanted.work.pk})

    assert _ids(scenes) == {wanted.pk}
    assert _ids(characters) == {character.pk}


def test_speaker_instances_filter_by_scene_work_and_gold_character(client, researcher):
    first = SpeakerInstanceFactory()
    same_scene = SpeakerInstanceFactory(scene=first.scene)
    same_work = SpeakerInstanceFactory(scene=SceneFactory(work=first.scene.work))
    SpeakerInstanceFactory()
    client.force_login(researcher)
    url = _list_url("speaker-instance")

    assert _ids(client.get(url, {"scene": first.scene.pk})) == {first.pk, same_scene.pk}
    assert _ids(client.get(url, {"work": first.scene.work.pk})) == {
        first.pk,
        same_scene.pk,
        same_work.pk,
    }
    assert _ids(client.get(url, {"gold_character": same_work.gold_character.pk})) == {same_work.pk}


def test_qa_items_filter_by_work_dimension_and_directness(client, researcher):
    item = QAItemFactory(dimension="desire", directness=QAItem.Directness.INDIRECT)
    QAItemFactory(work=item.work, character=item.character, dimension="desire")
    QAItemFactory(work=item.work, character=item.character, directness="indirect")
    QAItemFactory(dimension="desire", directness="indirect")
    client.force_login(researcher)

    response = client.get(
        _list_url("qa-item"),
        {"work": item.work.pk, "dimension": "desire", "directness": "indirect"},
    )

    assert _ids(response) == {item.pk}


def test_dyntom_questions_filter_by_stage_type_and_mental_state(client, researcher):
    stage = DynToMStageFactory()
    wanted = DynToMQuestionFactory(
        stage=stage,
        question_type=DynToMQuestion.QuestionType.TRANSFORMATION_2,
        mental_state="emotion",
    )
    DynToMQuestionFactory(stage=stage, question_type="transformation-2", mental_state="belief")
    DynToMQuestionFactory(stage=stage, question_type="understanding", mental_state="emotion")
    DynToMQuestionFactory(question_type="transformation-2", mental_state="emotion")
    other_stage = DynToMStageFactory()
    client.force_login(researcher)

    questions = client.get(
        _list_url("dyntom-question"),
        {"stage": stage.pk, "question_type": "transformation-2", "mental_state": "emotion"},
    )
    stages = client.get(_list_url("dyntom-stage"), {"work": other_stage.work.pk})

    assert _ids(questions) == {wanted.pk}
    assert _ids(stages) == {other_stage.pk}


def test_unknown_choice_is_a_400_naming_the_filter(client, researcher):
    client.force_login(researcher)

    response = client.get(_list_url("dyntom-question"), {"question_type": "nonsense"})

    assert response.status_code == 400
    assert "question_type" in response.json()


# --- query counts ---------------------------------------------------------------------


@pytest.mark.parametrize("basename", BASENAMES)
def test_list_query_count_does_not_grow_with_rows(
    client, researcher, basename, django_assert_max_num_queries
):
    client.force_login(researcher)
    build = BUILDERS[basename]
    url = _list_url(basename)

    for _ in range(2):
        build()
    with CaptureQueriesContext(connection) as two_rows:
        assert len(client.get(url).json()["results"]) == 2
    for _ in range(18):
        build()
    # session, user, role groups, count, page, and at most one prefetch
    with django_assert_max_num_queries(6):
        assert len(client.get(url).json()["results"]) == 20

    with CaptureQueriesContext(connection) as twenty_rows:
        client.get(url)
    assert len(twenty_rows) == len(two_rows)


# --- permissions ----------------------------------------------------------------------


@pytest.mark.parametrize("role", ["rater", "annotator", "anonymous"])
def test_non_researchers_get_403_everywhere_and_see_no_gold(client, request, role, bank):
    if role != "anonymous":
        client.force_login(request.getfixturevalue(role))
    urls = [
        reverse("api-root"),
        *(_list_url(name) for name in BASENAMES),
        *_detail_urls(bank),
        reverse("api-schema"),
        reverse("api-docs"),
    ]

    for url in urls:
        response = client.get(url)
        # Session auth comes first and sends no WWW-Authenticate challenge, so DRF
        # answers anonymous requests with 403 rather than 401.
        assert response.status_code == 403, url
        for gold in bank.gold_strings:
            assert gold not in response.content.decode(), (url, gold)


def test_basic_auth_rater_is_refused_and_researcher_is_served(client, rater, researcher, bank):
    url = _list_url("speaker-instance")

    refused = client.get(url, **_basic_auth("rat", "pw-rat-123!"))
    served = client.get(url, **_basic_auth("res", "pw-res-123!"))

    assert refused.status_code == 403
    assert "gold-speaker-rachel" not in refused.content.decode()
    assert served.status_code == 200
    assert served.json()["results"][0]["gold_character_name"] == "gold-speaker-rachel"


# --- schema ---------------------------------------------------------------------------


def test_schema_lists_every_item_bank_path(client, researcher):
    client.force_login(researcher)

    response = client.get(reverse("api-schema"), {"format": "json"})

    assert response.status_code == 200
    paths = response.json()["paths"]
    for basename in BASENAMES:
        list_path = _list_url(basename)
        assert list_path in paths
        assert f"{list_path}{{id}}/" in paths
    work_params = {p["name"] for p in paths[_list_url("work")]["get"]["parameters"]}
    assert {"benchmark", "kind", "split", "search", "page"} <= work_params


def test_docs_page_renders_for_researcher(client, researcher):
    client.force_login(researcher)

    response = client.get(reverse("api-docs"))

    assert response.status_code == 200
    page = response.content.decode()
    # Swagger UI names the schema inline, or (served from our static files, under a
    # strict CSP) in the settings script the page loads from ?script=.
    script = client.get(reverse("api-docs"), {"script": ""}) if "?script=" in page else None
    assert reverse("api-schema") in page + (script.content.decode() if script else "")


def _api_list_views() -> list[tuple[str, type]]:
    """Every list endpoint under /api/ (the item bank, modeling, reports routers)."""
    from django.urls import URLPattern, URLResolver, get_resolver
    from rest_framework.generics import GenericAPIView

    found: list[tuple[str, type]] = []

    def walk(patterns, prefix: str) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern) and prefix.startswith("api/"):
                view = getattr(p.callback, "cls", None)
                actions = getattr(p.callback, "actions", None) or {}
                is_list = actions.get("get") == "list" or (
                    view is not None and not actions and hasattr(view, "list")
                )
                if view is not None and issubclass(view, GenericAPIView) and is_list:
                    found.append((prefix + str(p.pattern), view))

    walk(get_resolver().url_patterns, "")
    return found


def test_every_api_list_endpoint_caps_its_page_size():
    from common.pagination import CappedPageNumberPagination

    views = _api_list_views()

    assert len(views) >= len(BASENAMES) + 4  # item bank, backends, templates, runs, predictions
    for route, view in views:
        assert issubclass(view.pagination_class, CappedPageNumberPagination), route


def test_page_size_is_asked_for_and_capped(client, researcher, settings):
    settings.TOMLAB_API_MAX_PAGE_SIZE = 5
    WorkFactory.create_batch(8)
    client.force_login(researcher)

    small = client.get(_list_url("work"), {"page_size": 3}).json()
    capped = client.get(_list_url("work"), {"page_size": 100_000}).json()

    assert (small["count"], len(small["results"])) == (8, 3)
    assert (capped["count"], len(capped["results"])) == (8, 5)
    rest = client.get(capped["next"]).json()  # the next page is capped the same way
    assert len(rest["results"]) == 3 and rest["next"] is None
