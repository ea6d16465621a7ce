"""Read queries on the item bank."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q, QuerySet

from .importers.generic_presets import BUILTIN_PRESETS, builtin_preset
from .models import DynToMQuestion, MappingPreset, QAItem, Scene, SpeakerInstance, Work


def item_bank_counts() -> list[dict]:
    """Works and items per benchmark, for the dashboard (one query per table)."""
    works = dict(
        Work.objects.values_list("benchmark").annotate(n=Count("id")).values_list("benchmark", "n")
    )
    scenes = dict(
        Scene.objects.values_list("work__benchmark")
        .annotate(n=Count("id"))
        .values_list("work__benchmark", "n")
    )
    instances = dict(
        SpeakerInstance.objects.values_list("scene__work__benchmark")
        .annotate(n=Count("id"))
        .values_list("scene__work__benchmark", "n")
    )
    qa = dict(
        QAItem.objects.values_list("work__benchmark")
        .annotate(n=Count("id"))
        .values_list("work__benchmark", "n")
    )
    questions = dict(
        DynToMQuestion.objects.values_list("stage__work__benchmark")
        .annotate(n=Count("id"))
        .values_list("stage__work__benchmark", "n")
    )
    from .models import Benchmark

    return [
        {
            "benchmark": b.label,
            "works": works.get(b.value, 0),
            "scenes": scenes.get(b.value, 0),
            "instances": instances.get(b.value, 0),
            "qa_items": qa.get(b.value, 0),
            "questions": questions.get(b.value, 0),
        }
        for b in Benchmark
    ]


def test_scene_filter(prefix: str = "") -> Q:
    """Test scenes, reached through ``prefix`` (e.g. ``"scenes__"``): scenes of the testing
    part with at least one masked speaker to guess.

    The one rule, under the one name "test scenes", for every count of them: the
    import report, the study form's works and a study's scenes. A testing-part scene
    where no main character speaks or is named has nothing to guess and is no test
    scene (the import report said "42 testing" where the study form said "41 test
    scenes", issue 49).
    """
    return Q(**{f"{prefix}part": Scene.Part.TESTING, f"{prefix}instances__isnull": False})


def test_scenes(*, works: Any) -> QuerySet[Scene]:
    """The test scenes (:func:`test_scene_filter`) of ``works`` (works or their ids)."""
    return Scene.objects.filter(test_scene_filter(), work__in=works).distinct()


def works_for_benchmark(benchmark: str) -> QuerySet[Work]:
    return Work.objects.filter(benchmark=benchmark).order_by("key")


def mapping_presets() -> list[dict[str, Any]]:
    """The field mappings to choose from: the built-in ones, then this workspace's saved
    ones by name. Each: name, description, builtin, mapping."""
    presets = [
        {"name": p.name, "description": p.description, "builtin": True, "mapping": p.mapping}
        for p in BUILTIN_PRESETS
    ]
    presets.extend(
        {"name": p.name, "description": p.description, "builtin": False, "mapping": p.mapping}
        for p in MappingPreset.objects.order_by("name")
    )
    return presets


def mapping_preset_get(name: str) -> dict[str, Any]:
    """The mapping of the preset ``name``: a built-in one (case does not matter), else
    one saved in this workspace. Raises ``LookupError`` with a message saying which
    exist (a command, unscoped, sees every workspace's: a name saved in two is refused)."""
    builtin = builtin_preset(name)
    if builtin is not None:
        return builtin.mapping
    saved = list(MappingPreset.objects.filter(name=name.strip())[:2])
    if len(saved) == 1:
        return saved[0].mapping
    known = ", ".join(p["name"] for p in mapping_presets()) or "none"
    if saved:
        raise LookupError(f"several workspaces have a preset named {name!r}; give a mapping file")
    raise LookupError(f"no mapping preset named {name!r} (presets: {known})")
