"""Stage 9: publishing a construction as a CharToM-QA item, and the round trip."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import transaction

from annotation.chartom.publish import construction_publish
from annotation.chartom.workflow import WorkflowError, construction_lock
from annotation.models import Construction, FieldChange
from benchmarks.importers import ImportDataError
from benchmarks.models import Character, QAItem, Work
from benchmarks.services import benchmark_export, qa_item_publish

pytestmark = pytest.mark.django_db

REVIEWED: dict[str, Any] = {
    "question": "Why does Vautrin pour for his neighbours before himself?",
    "description": "Vautrin flatters Eugene and Goriot so that his plan is not spoiled.",
    "bonus_points": ["Vautrin wants to please them.", "He needs his plan to go ahead."],
    "distractors": [
        "He wants everyone at the table to see how generous he is.",
        "He wants to show that he is in charge of the dinner.",
        "He wants to find out whether the wine is good before drinking it.",
    ],
}


@pytest.fixture
def reviewed(make_construction):
    def make(**overrides: Any) -> Construction:
        fields = {**REVIEWED, **overrides}
        return make_construction(stage="distractor_review", state="waiting_human", **fields)

    return make


def publish(construction: Construction, user=None):
    with transaction.atomic():
        locked = construction_lock(construction.pk)
        return construction_publish(locked, user=user)


def test_publish_makes_one_item_with_the_record_fields(reviewed, django_user_model) -> None:
    user = django_user_model.objects.create_user("ann")
    construction = reviewed()

    item = publish(construction, user)

    construction.refresh_from_db()
    assert (construction.stage, construction.state) == ("published", "done")
    assert construction.qa_item_id == item.pk
    assert item.work.key == "Father Goriot" and item.work.kind == Work.Kind.BOOK
    assert item.character.name == "Vautrin"
    assert item.dimension == "intention"
    assert item.question == REVIEWED["question"]
    assert item.answer == REVIEWED["description"]
    assert item.bonus_points == REVIEWED["bonus_points"]
    assert item.misleading_choices == REVIEWED["distractors"]
    assert item.context_0 == construction.note.context_0
    change = FieldChange.objects.get(construction=construction, field="qa_item_id")
    assert (change.old_value, change.new_value, change.changed_by) == (None, item.pk, user)

    again = publish(construction, user)
    assert again.pk == item.pk
    assert QAItem.objects.count() == 1


def test_two_constructions_of_one_book_take_successive_positions(reviewed) -> None:
    first = publish(reviewed())
    second = publish(
        reviewed(dimension="belief", question="What does Vautrin believe about the wine?")
    )
    assert (first.position, second.position) == (0, 1)
    assert Work.objects.count() == 1 and Character.objects.count() == 1


def test_bad_content_is_refused_naming_the_field_and_nothing_is_written(reviewed) -> None:
    construction = reviewed(distractors=["only one"])
    with pytest.raises(WorkflowError, match="distractors: expected 3 choices, got 1"):
        publish(construction)
    construction.refresh_from_db()
    assert construction.stage == "distractor_review" and construction.qa_item_id is None
    assert not QAItem.objects.exists() and not Work.objects.exists()


def test_dropped_construction_is_not_published(make_construction) -> None:
    construction = make_construction(stage="dropped", state="done", **REVIEWED)
    with pytest.raises(WorkflowError, match="dropped"):
        publish(construction)


def test_qa_item_publish_applies_the_importer_rules() -> None:
    record = {
        "book_name": "Father Goriot",
        "tom_dimension": "wish",
        "question": "q",
        "answer": "a",
        "bonus_points": [],
        "misleading_choices": ["a", "b", "c"],
    }
    with pytest.raises(ImportDataError) as caught:
        qa_item_publish(record)
    assert caught.value.field == "tom_dimension"
    assert "'Father Goriot'" in str(caught.value)

    record["tom_dimension"] = "desire"
    item = qa_item_publish(record)
    assert qa_item_publish(dict(record)).pk == item.pk
    with pytest.raises(ImportDataError, match="already has a different item") as caught:
        qa_item_publish({**record, "answer": "another answer"})
    assert caught.value.field == "question"


def test_published_items_export_and_import_back_unchanged(reviewed, tmp_path: Path) -> None:
    publish(reviewed())
    publish(reviewed(dimension="belief", note=1, question="What does Goriot think?"))
    before = list(QAItem.objects.order_by("pk").values())

    out = tmp_path / "export"
    out.mkdir()
    assert benchmark_export(format_name="chartom-qa", out=out) == 2
    stdout = StringIO()
    call_command("export_benchmark", "chartom-qa", str(tmp_path / "cmd.jsonl"), stdout=stdout)
    exported = (out / "chartom_qa.jsonl").read_text(encoding="utf-8")
    assert (tmp_path / "cmd.jsonl").read_text(encoding="utf-8") == exported
    records = [json.loads(line) for line in exported.splitlines()]
    assert [r["question"] for r in records] == [
        REVIEWED["question"],
        "What does Goriot think?",
    ]
    assert records[0]["misleading_choices"] == REVIEWED["distractors"]

    stdout = StringIO()
    call_command(
        "import_benchmark",
        "chartom-qa",
        str(out),
        "--no-progress",
        stdout=stdout,
        stderr=StringIO(),
    )
    assert "QAItem: 0 created, 2 unchanged, 0 updated" in stdout.getvalue()
    assert list(QAItem.objects.order_by("pk").values()) == before

    # What the importer wrote from the export exports to the same lines again.
    again = tmp_path / "again.jsonl"
    benchmark_export(format_name="chartom-qa", out=again)
    assert again.read_text(encoding="utf-8") == exported
