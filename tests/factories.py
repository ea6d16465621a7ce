"""factory_boy factories for the item bank and for users with a role.

Related rows stay consistent: a speaker instance's gold character belongs to its
scene's work, a QA item's character to the item's work, so a test never builds an
item bank that no importer could produce.
"""

from __future__ import annotations

import hashlib
from typing import Any

import factory
from django.contrib.auth import get_user_model
from factory.django import DjangoModelFactory

from accounts.services import user_create_with_role
from benchmarks.models import (
    Benchmark,
    Character,
    DynToMQuestion,
    DynToMScenario,
    DynToMStage,
    QAItem,
    Scene,
    SpeakerAnnotation,
    SpeakerInstance,
    ToMDimension,
    Work,
)

DEFAULT_PASSWORD = "pw-factory-123!"


class UserFactory(DjangoModelFactory):
    """A user; ``UserFactory(role="researcher")`` also puts it in that role's group."""

    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda o: f"{o.username}@example.org")
    password = factory.django.Password(DEFAULT_PASSWORD)

    @factory.post_generation
    def role(obj, create: bool, extracted: str | None, **kwargs: Any) -> None:
        if not extracted:
            return
        # The service owns what a role means (group, staff flag); reuse it, then pick up
        # the flags it saved on its own copy of the row.
        user_create_with_role(
            username=obj.username, password=DEFAULT_PASSWORD, role=extracted, email=obj.email
        )
        obj.refresh_from_db()


class WorkFactory(DjangoModelFactory):
    class Meta:
        model = Work

    benchmark = Benchmark.TOM_IN_AMC
    key = factory.Sequence(lambda n: f"work-{n}")
    title = factory.LazyAttribute(lambda o: o.key.replace("-", " ").title())
    kind = Work.Kind.MOVIE
    split = "test"


class CharacterFactory(DjangoModelFactory):
    class Meta:
        model = Character

    work = factory.SubFactory(WorkFactory)
    name = factory.Sequence(lambda n: f"character {n}")
    position = factory.Sequence(lambda n: n)
    gender = Character.Gender.FEMALE
    gender_source = Character.GenderSource.MANUAL
    utterance_count = 12
    is_main = True


class SceneFactory(DjangoModelFactory):
    class Meta:
        model = Scene

    work = factory.SubFactory(WorkFactory)
    source_id = factory.Sequence(lambda n: f"s{n}")
    position = factory.Sequence(lambda n: n)
    part = Scene.Part.TESTING
    heading = "INT. KITCHEN - NIGHT"
    lines = factory.LazyFunction(
        lambda: [
            {"type": "scene", "title": "INT. KITCHEN - NIGHT", "text": "A quiet kitchen."},
            {"type": "dialog", "title": "P0", "text": "Did you tell her?"},
            {"type": "dialog", "title": "P1", "text": "Not yet."},
        ]
    )
    participants = factory.LazyFunction(lambda: ["P0", "P1"])


class SpeakerInstanceFactory(DjangoModelFactory):
    class Meta:
        model = SpeakerInstance

    scene = factory.SubFactory(SceneFactory)
    code = factory.Sequence(lambda n: f"P{n}")
    gold_character = factory.SubFactory(
        CharacterFactory, work=factory.SelfAttribute("..scene.work")
    )
    candidates = factory.LazyAttribute(lambda o: [o.gold_character.name, "someone else"])


class SpeakerAnnotationFactory(DjangoModelFactory):
    class Meta:
        model = SpeakerAnnotation

    instance = factory.SubFactory(SpeakerInstanceFactory)
    work = factory.SelfAttribute("instance.scene.work")
    source = "friends.tsv"
    row_number = factory.Sequence(lambda n: n + 1)
    scene_source_id = factory.SelfAttribute("instance.scene.source_id")
    code = factory.SelfAttribute("instance.code")
    need_history = "no"
    facts_from_memory = "no"
    guessed_name = factory.SelfAttribute("instance.gold_character.name")


class QAItemFactory(DjangoModelFactory):
    class Meta:
        model = QAItem

    work = factory.SubFactory(
        WorkFactory, benchmark=Benchmark.CHARTOM_QA, kind=Work.Kind.BOOK, split=""
    )
    character = factory.SubFactory(CharacterFactory, work=factory.SelfAttribute("..work"))
    question = factory.Sequence(lambda n: f"Why does the character hesitate, time {n}?")
    natural_key = factory.LazyAttribute(
        lambda o: hashlib.sha1(f"{o.work.key}|{o.character.name}|{o.question}".encode()).hexdigest()
    )
    position = factory.Sequence(lambda n: n)
    dimension = ToMDimension.BELIEF
    context_0 = "She stood at the door for a long time."
    answer = "She believes the letter has already been read."
    bonus_points = factory.LazyFunction(lambda: ["she saw the open envelope"])
    misleading_choices = factory.LazyFunction(lambda: ["wrong one", "wrong two", "wrong three"])
    directness = QAItem.Directness.DIRECT


class DynToMStageFactory(DjangoModelFactory):
    class Meta:
        model = DynToMStage

    work = factory.SubFactory(
        WorkFactory, benchmark=Benchmark.DYNTOM, kind=Work.Kind.SOCIAL_STAGE, split=""
    )
    main_character = "Mia"
    scenario_count = 4
    location = "a community garden"
    location_category = "neighbourhood"
    profiles = factory.LazyFunction(
        lambda: [
            {"role": "main", "index": 1, "name": "Mia", "description": "a gardener"},
            {"role": "supporting", "index": 1, "name": "Leo", "description": "a neighbour"},
        ]
    )


class DynToMScenarioFactory(DjangoModelFactory):
    class Meta:
        model = DynToMScenario

    stage = factory.SubFactory(DynToMStageFactory)
    number = factory.Sequence(lambda n: n + 1)
    key = factory.LazyAttribute(lambda o: f"scenario {o.number}")
    background = "Mia waters the plants while Leo watches."
    dialogue = factory.LazyFunction(
        lambda: [
            {"speaker": "Mia", "text": "Good morning!"},
            {"speaker": "Leo", "text": "Morning."},
        ]
    )
    extra = factory.LazyFunction(lambda: {"round_sizes": [1, 1]})


class DynToMQuestionFactory(DjangoModelFactory):
    class Meta:
        model = DynToMQuestion

    stage = factory.SubFactory(DynToMStageFactory)
    key = factory.Sequence(lambda n: f"type_a_what_{n}")
    position = factory.Sequence(lambda n: n)
    source_type = "type_a_what"
    question_type = DynToMQuestion.QuestionType.UNDERSTANDING
    mental_state = "belief"
    scenario_from = 1
    text = "What does Mia believe about Leo in scenario 1?"
    options = factory.LazyFunction(lambda: ["a. he is friendly", "b. he is hostile"])
    gold_letter = "a"


def generation_job(backend: Any, **fields: Any) -> Any:
    """A DynToM generation job on ``backend`` with the active default templates (made if
    missing), as the generation form would create it; ``fields`` override the rest."""
    from annotation.dyntom.generation.prompts import (
        active_generation_templates,
        generation_templates_ensure_defaults,
    )
    from annotation.models import GenerationJob

    generation_templates_ensure_defaults()
    templates = active_generation_templates()
    return GenerationJob.objects.create(
        backend=backend,
        model="m",
        relationship_template=templates["relationship"],
        trajectory_template=templates["trajectory"],
        scenarios_template=templates["scenarios"],
        retry_template=templates["retry"],
        **fields,
    )
