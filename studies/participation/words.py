"""Words a participant reads, per item and per work's history: what the time estimate
counts (``recruitment.study_estimate``) and what the reading floors compare with
(``screening``). Apart from recruitment so that screening, which the ledger imports,
does not import the study services through it.
"""

from __future__ import annotations

from typing import Any

from django.core.cache import cache
from django.db.models import Count, Sum

from benchmarks.models import DynToMQuestion, DynToMStage, Scene

from ..models import Study, StudyItem, StudyWork


def text_words(text: str | None) -> int:
    """Words in ``text``, split on whitespace: the one count every estimate uses."""
    return len(text.split()) if text else 0


def scene_words(heading: str, lines: list[dict[str, Any]] | None) -> int:
    """A scene as the rater pages show it: heading, speaker cues and every line's text."""
    words = text_words(heading)
    for line in lines or []:
        if line.get("type") == "dialog":
            words += text_words(line.get("title"))
        words += text_words(line.get("text"))
    return words


def choices_words(choices: list[Any]) -> int:
    return sum(text_words(str(c)) for c in choices)


def stage_words(stage: DynToMStage, questions: list[DynToMQuestion]) -> int:
    """A DynToM stage as its page shows it: profiles, relationship, each scenario's
    background and dialogue, and the questions asked with their options."""
    words = sum(
        text_words(p.get("name")) + text_words(p.get("description")) for p in stage.profiles
    )
    words += sum(text_words(str(text)) for text in (stage.relationships or {}).values())
    for scenario in stage.scenarios.all():
        words += text_words(scenario.background)
        words += sum(
            text_words(t.get("speaker")) + text_words(t.get("text")) for t in scenario.dialogue
        )
    return words + sum(text_words(q.text) + choices_words(q.options) for q in questions)


def study_item_words(*, study: Study) -> dict[int, int]:
    """Words each of the study's items shows, by study item id: what the estimate
    counts, item by item (a scene as the rater page shows it; CharToM-QA both windows,
    the question and its options; DynToM the stage and its questions; a mapped
    benchmark's item in the study's language). Kept ten minutes, like the estimate's."""
    items = StudyItem.objects.filter(study=study)
    shape = items.aggregate(n=Count("pk"), ids=Sum("pk"))
    key = f"studies:item-words:{study.pk}:{shape['n']}:{shape['ids']}"
    counted = cache.get(key)
    if counted is not None:
        return counted
    counted = {}
    if study.benchmark == "chartom-qa":
        rows = items.values_list(
            "pk",
            "qa_item__context_0",
            "qa_item__context_2000",
            "qa_item__question",
            "qa_item__answer",
            "qa_item__misleading_choices",
        )
        for pk, *texts, misleading in rows:
            counted[pk] = sum(map(text_words, texts)) + choices_words(misleading or [])
    elif study.benchmark == "dyntom":
        for item in items.select_related("stage").prefetch_related("stage__scenarios"):
            questions = DynToMQuestion.objects.filter(stage_id=item.stage_id)
            if item.question_ids:
                questions = questions.filter(pk__in=item.question_ids)
            counted[item.pk] = stage_words(item.stage, list(questions))
    elif study.benchmark == "generic":
        from ..choice.generic import item_words, shown_item

        language = (study.sampling or {}).get("language", "")
        for item in items.select_related("mc_item"):
            counted[item.pk] = item_words(shown_item(item), language, text_words)
    else:
        for pk, heading, lines in items.values_list("pk", "scene__heading", "scene__lines"):
            counted[pk] = scene_words(heading, lines)
    cache.set(key, counted, 600)
    return counted


def study_history_words(*, study: Study) -> dict[int, tuple[int, int]]:
    """(history scenes, words) of each study work with a history, by study work id: the
    page behind "I have read it" (scene studies only; the others have none)."""
    key = f"studies:history-words:{study.pk}"
    counted = cache.get(key)
    if counted is not None:
        return counted
    counted = {}
    works = dict(StudyWork.objects.filter(study=study).values_list("work_id", "pk"))
    scenes = Scene.objects.filter(work_id__in=works, part=Scene.Part.TRAINING)
    for work_id, heading, lines in scenes.values_list("work_id", "heading", "lines"):
        n, words = counted.get(works[work_id], (0, 0))
        counted[works[work_id]] = (n + 1, words + scene_words(heading, lines))
    # A work's scenes do not change while a study runs (as ``study_work_has_history``).
    cache.set(key, counted, 600)
    return counted
