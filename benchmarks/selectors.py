"""Read queries on the item bank."""

from __future__ import annotations

from django.db.models import Count, QuerySet

from .models import DynToMQuestion, QAItem, Scene, SpeakerInstance, Work


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


def works_for_benchmark(benchmark: str) -> QuerySet[Work]:
    return Work.objects.filter(benchmark=benchmark).order_by("key")
