"""Two reader notes through all ten stages of CharToM-QA construction, as people do it.

The researcher uploads a real novel (Father Goriot, with its BOM and CRLF) and two
notes we wrote through the board; a real Celery worker process runs every LLM step
against the loopback OpenAI-compatible server; two annotators do every human step
through the real views (note checks, the qualification trial, extraction, paraphrase
review, question choice, bonus point review, distractor review, which publishes);
the published items export to CharToM-QA JSONL and import back unchanged; a
generative run on them is judged by two experts, and /reports/chartom-qa/ shows the
note-check shares, the qualification agreement and the Table 7 correlations.
"""

from __future__ import annotations

import io
import json
import time
import zipfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from annotation.models import (
    AnnotationTask,
    Construction,
    FieldChange,
    QualificationAttempt,
    QuestionChoice,
    TaskKind,
)
from benchmarks.models import QAItem
from modeling.models import Prediction, Run
from tests.celery_worker import purge_queues, start_worker, stop_worker
from tests.factories import DEFAULT_PASSWORD, UserFactory

from .test_llm_steps import Script

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ACCENT = "Euge\u0301ne"  # e + combining acute: offsets must count code points
VAUTRIN_NOTE = (
    f"Vautrin pours for the two of them first on purpose \U0001f377: he wants {ACCENT} "
    "to trust him so that his plan can go ahead."
)
GORIOT_NOTE = (
    "Goriot longs to see his daughters more often; he waits for hours in the street "
    "just to catch a smile from their carriages."
)
NOTES = [
    {
        "book": "Father Goriot",
        "character": "Vautrin",
        "underlined": "Vautrin filled Eugene\u2019s glass and Goriot\u2019s likewise, then he "
        "deliberately poured out a few drops into his own glass",
        "context": "“Here it is, sir,” said Christophe, holding out the bottle. Vautrin "
        "filled Eugene\u2019s glass and Goriot\u2019s likewise, then he deliberately poured out a "
        "few drops into his own glass, and sipped it while his two neighbors drank their "
        "wine.",
        "note": VAUTRIN_NOTE,
        "author": "reader-17",
    },
    {
        "book": "Father Goriot",
        "character": "Father Goriot",
        "underlined": "I cannot always see mine when I wish",
        "context": "Fathers who can see their daughters at any time have no idea of all the "
        "pleasure that all this mystery gives me; I cannot always see mine when I wish, "
        "do you understand?",
        "note": GORIOT_NOTE,
    },
]
# The one dimension each note states; the filter drops the other six constructions.
KEPT = {"Vautrin": "intention", "Father Goriot": "desire"}
KEY_FRAGMENTS = {
    "Vautrin": ["on purpose", f"he wants {ACCENT} to trust him"],
    "Father Goriot": ["longs to see his daughters more often"],
}


class Model(Script):
    """The scripted model, keeping one dimension per note at the filter."""

    def __call__(self, body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        if "whether the reader's note below" in prompt:
            self.seen.append("filter")
            for character, dimension in KEPT.items():
                if f"[What {dimension} means]" in prompt and (
                    (character == "Vautrin") == ("Vautrin pours" in prompt)
                ):
                    return f"Yes\nThe note states {character}'s {dimension}."
            return "No\nThe note says nothing of this."
        return super().__call__(body)


def _login(user) -> Client:
    client = Client()
    assert client.login(username=user.username, password=DEFAULT_PASSWORD)
    return client


def _wait(condition, log: Path, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"the worker did not {what}\n{log.read_text()[-4000:]}")


def _spans(text: str, fragments: list[str]) -> list[list[int]]:
    return [[text.index(f), text.index(f) + len(f)] for f in fragments]


def _take(client: Client, url: str) -> int:
    """POST a take URL and return the assignment id of the screen it lands on."""
    response = client.post(url)
    assert response.status_code == 302, response.content[:500]
    location = response["Location"]
    if not location.rstrip("/").split("/")[-1].isdigit():
        page = client.get(location).content.decode()
        tasks = list(
            AnnotationTask.objects.values(
                "pk", "kind", "closed", "k", "construction__stage", "assignments__annotator"
            )
        )
        raise AssertionError(f"{url} took nothing: {page[page.find('<ul') :][:600]} {tasks}")
    return int(location.rstrip("/").split("/")[-1])


def test_two_notes_through_all_ten_stages(shared_data, chartom_backend, llm_server, tmp_path):
    model = Model()
    llm_server.responder = model
    experts = [UserFactory(username=f"expert{i}", role="annotator") for i in (1, 2)]
    first, second = (_login(u) for u in experts)
    boss = _login(UserFactory(username="boss", role="researcher"))
    purge_queues()
    log = tmp_path / "worker.log"
    worker = start_worker(log, name="chartom-e2e")
    try:
        _walk(shared_data, chartom_backend, llm_server, tmp_path, boss, first, second, log)
    finally:
        stop_worker(worker)
    _publish_checked(tmp_path)
    _judge_and_report(tmp_path, boss, first, second)


def _walk(shared_data, backend, llm_server, tmp_path, boss, first, second, log) -> None:
    # Stage 1: the researcher uploads the book and the notes through the board.
    notes_path = tmp_path / "notes.jsonl"
    notes_path.write_text("".join(json.dumps(n) + "\n" for n in NOTES), encoding="utf-8")
    novel = shared_data / "novels" / "father_goriot_pg1237.txt"
    with novel.open("rb") as book_file, notes_path.open("rb") as notes_file:
        response = boss.post(
            reverse("annotation:chartom"),
            {
                "books": book_file,
                "notes": notes_file,
                "name": "e2e",
                "backend": backend.pk,
                "budget_tokens": 200_000,
            },
        )
    assert response.status_code == 302, response.content.decode()[-2000:]
    constructions = Construction.objects.filter(note__batch__name="e2e")
    assert constructions.count() == 8
    note = constructions.first().note
    assert note.context_1000 and note.context_1000.startswith(".....")
    assert len(note.author_hash) == 64 or note.author_hash == ""

    # Stage 2: the LLM filter keeps one dimension per note ...
    _wait(lambda: not constructions.filter(stage="filter").exists(), log, "filter")
    kept = constructions.exclude(stage="dropped")
    assert sorted(kept.values_list("note__target_character", "dimension", "stage")) == [
        ("Father Goriot", "desire", "extract"),
        ("Vautrin", "intention", "extract"),
    ]
    # ... and both annotators check both notes.
    batch_id = note.batch_id
    response = boss.post(
        reverse("annotation:chartom-note-check-sample"),
        {"notes-batch": batch_id, "notes-size": 2, "notes-seed": 1, "notes-k": 2},
    )
    assert response.status_code == 302
    labels = {id(first): ["accurate", "accurate"], id(second): ["accurate", "subjective"]}
    for client in (first, second):
        for label in labels[id(client)]:
            slot = _take(client, reverse("annotation:chartom-note-check-take"))
            response = client.post(
                reverse("annotation:chartom-note-check-submit", args=[slot]), {"label": label}
            )
            assert response.status_code in (200, 302), response.content[:500]
    assert AnnotationTask.objects.filter(kind=TaskKind.NOTE_CHECK, closed=True).count() == 2

    # Stage 3: a gold set of one item; the first annotator passes, the second is not
    # qualified and cannot extract.
    vautrin = kept.get(note__target_character="Vautrin")
    gold = {"note": vautrin.note_id, "dimension": "intention", "gold": KEY_FRAGMENTS["Vautrin"]}
    response = boss.post(
        reverse("annotation:chartom-qualification"),
        {"name": "gold", "threshold": "0.8", "gold": json.dumps(gold)},
    )
    assert response.status_code == 302, response.content.decode()[-1500:]
    response = first.post(reverse("annotation:chartom-qualification-start"))
    item_url = response["Location"]
    attempt_id = int(item_url.split("/attempts/")[1].split("/")[0])
    response = first.post(
        item_url, {"spans": json.dumps(_spans(VAUTRIN_NOTE, KEY_FRAGMENTS["Vautrin"]))}
    )
    assert response.status_code == 302
    first.post(reverse("annotation:chartom-qualification-finish", args=[attempt_id]))
    attempt = QualificationAttempt.objects.get(pk=attempt_id)
    assert attempt.passed and attempt.score == pytest.approx(1.0)
    response = second.post(reverse("annotation:chartom-take", args=["extract"]), follow=True)
    assert not AnnotationTask.objects.filter(
        kind=TaskKind.EXTRACT, assignments__annotator__username="expert2"
    ).exists()

    # Stage 4: key-note extraction by the qualified annotator, spans in code points.
    for _ in range(2):
        slot = _take(first, reverse("annotation:chartom-take", args=["extract"]))
        construction = Construction.objects.get(tasks__assignments__pk=slot)
        character = construction.note.target_character
        spans = _spans(construction.note.note_text, KEY_FRAGMENTS[character])
        response = first.post(
            reverse("annotation:chartom-extract-submit", args=[slot]),
            {"spans": json.dumps(spans)},
        )
        assert response.status_code == 302, response.content.decode()[-1500:]
    vautrin.refresh_from_db()
    assert vautrin.key_spans == _spans(VAUTRIN_NOTE, KEY_FRAGMENTS["Vautrin"])
    assert vautrin.key_note == f"on purpose … he wants {ACCENT} to trust him"

    # Stage 5: paraphrase by the LLM, then one accepted and one edited.
    _wait(lambda: kept.filter(stage="paraphrase_review").count() == 2, log, "paraphrase")
    edited = "Vautrin flatters Eugène and Goriot on purpose so that his plan goes ahead."
    # After a submit the screen opens the next task at once (same annotator).
    for client, post in ((second, {"accept": "1"}), (second, {"text": edited})):
        slot = _take(client, reverse("annotation:chartom-take", args=["paraphrase_review"]))
        response = client.post(reverse("annotation:chartom-paraphrase-submit", args=[slot]), post)
        assert response.status_code == 302, response.content.decode()[-1500:]
    descriptions = set(kept.values_list("description", flat=True))
    assert edited in descriptions and len(descriptions) == 2

    # Stage 6: candidate questions, plot-free verification, and the pick (one edited).
    _wait(lambda: kept.filter(stage="question_choice").count() == 2, log, "ask questions")
    for construction in kept:
        assert 1 <= construction.candidates.filter(kept=True).count() <= 4
    for client, edit in ((first, "Why does he pour their glasses first, really?"), (first, "")):
        slot = _take(client, reverse("annotation:chartom-take", args=["question_choice"]))
        construction = Construction.objects.get(tasks__assignments__pk=slot)
        pick = construction.candidates.filter(kept=True).order_by("position").last()
        response = client.post(
            reverse("annotation:chartom-question-submit", args=[slot]),
            {"candidate": pick.pk, "text": edit},
        )
        assert response.status_code == 302, response.content.decode()[-1500:]
    choices = QuestionChoice.objects.filter(construction__in=kept)
    assert choices.count() == 2
    edited_choice = choices.get(edit_distance__gt=0)
    assert edited_choice.final_text == "Why does he pour their glasses first, really?"
    assert edited_choice.diff and edited_choice.seconds >= 0
    assert edited_choice.rejected.count() == edited_choice.construction.candidates.count() - 1

    # Stage 7: bonus points by the LLM; the annotator merges the two into one.
    _wait(lambda: kept.filter(stage="bonus_review").count() == 2, log, "extract bonus points")
    for client in (second, second):
        slot = _take(client, reverse("annotation:chartom-bonus-take"))
        construction = Construction.objects.get(tasks__assignments__pk=slot)
        points = construction.bonus_points
        merged = [f"{points[0].rstrip('.')}, and {points[1][0].lower()}{points[1][1:]}"]
        response = client.post(
            reverse("annotation:chartom-bonus-submit", args=[slot]),
            {
                "points_json": json.dumps(merged),
                "operations_json": json.dumps([{"op": "merge", "index": 0}]),
            },
        )
        assert response.status_code == 302, response.content.decode()[-1500:]
    assert all(len(points) == 1 for points in kept.values_list("bonus_points", flat=True))

    # Stage 8: three distractors by the LLM, one rewritten; submitting publishes (stage 9).
    _wait(lambda: kept.filter(stage="distractor_review").count() == 2, log, "write distractors")
    for client in (first, first):
        slot = _take(client, reverse("annotation:chartom-distractor-take"))
        construction = Construction.objects.get(tasks__assignments__pk=slot)
        choices = list(construction.distractors)
        choices[2] = "He wants to find out whether the wine is corked."
        response = client.post(
            reverse("annotation:chartom-distractor-submit", args=[slot]),
            {f"choice_{i}": choice for i, choice in enumerate(choices, start=1)},
        )
        assert response.status_code == 302, response.content.decode()[-1500:]
    assert sorted(kept.values_list("stage", flat=True)) == ["published", "published"]


def _publish_checked(tmp_path: Path) -> None:
    kept = Construction.objects.filter(stage="published")
    items = QAItem.objects.filter(pk__in=kept.values_list("qa_item", flat=True))
    assert items.count() == 2
    vautrin = kept.get(note__target_character="Vautrin")
    item = vautrin.qa_item
    assert item.work.key.startswith("Father Goriot")
    assert item.character.name == "Vautrin" and item.dimension == "intention"
    assert item.answer == vautrin.description and len(item.misleading_choices) == 3
    assert item.context_0 and item.context_1000 and item.context_2000
    # Provenance: the description was written by the model and then by a person.
    history = FieldChange.objects.filter(construction=vautrin, field="description")
    by_model = [c for c in history if c.model and c.template.startswith("chartom-paraphrase v")]
    by_people = [c for c in history if c.changed_by_id is not None]
    assert by_model and by_people and by_people[-1].old_value == by_model[0].new_value

    # Export to CharToM-QA JSONL; the file reads back unchanged.
    out = tmp_path / "export"
    out.mkdir()
    call_command("export_benchmark", "chartom-qa", str(out), stdout=io.StringIO())
    exported = next(out.rglob("*.jsonl"))
    lines = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]
    assert {line["question"] for line in lines} == set(items.values_list("question", flat=True))
    before = {i.pk: (i.question, i.answer, i.bonus_points, i.misleading_choices) for i in items}
    call_command("import_benchmark", "chartom-qa", str(exported), stdout=io.StringIO())
    after = {i.pk: (i.question, i.answer, i.bonus_points, i.misleading_choices) for i in items}
    assert after == before and QAItem.objects.count() == 2


def _judge_and_report(tmp_path: Path, boss: Client, first: Client, second: Client) -> None:
    # Stage 10: two models' generative answers on the published items, judged by the
    # LLM judge (imported verdicts), then blind expert scores through the screen.
    items = list(QAItem.objects.order_by("pk"))
    answers = {
        "gpt-secret-a": [
            ("He flatters them so that his plan goes ahead.", [0], []),
            ("He is thirsty.", [], ["misses his longing entirely"]),
        ],
        "gpt-secret-b": [
            ("He wants them on his side for his plan.", [0], []),
            ("He likes good wine.", [], ["off the point"]),
        ],
    }
    # The experts' scores, by answer: means 0.9, 0.1, 0.8, 0.2 against BPC 1, 0, 1, 0.
    scores = {
        "He flatters them": "0.9",
        "He is thirsty": "0.1",
        "He wants them on his side": "0.8",
        "He likes good wine": "0.2",
    }
    runs = []
    for model, replies in answers.items():
        path = tmp_path / f"{model}.jsonl"
        path.write_text(
            "".join(
                json.dumps(
                    {
                        "benchmark": "chartom-qa",
                        "model": model,
                        "task": "generative",
                        "book": item.work.key,
                        "character": item.character.name,
                        "question": item.question,
                        "raw_output": text,
                        "bonus_points_included": included,
                        "defects": defects,
                    }
                )
                + "\n"
                for item, (text, included, defects) in zip(items, replies, strict=True)
            ),
            encoding="utf-8",
        )
        call_command("import_predictions", str(path), "--name", model, stdout=io.StringIO())
        run = Run.objects.get(name__startswith=model, imported=True)
        call_command("score_text_similarity", "--run", str(run.pk), stdout=io.StringIO())
        runs.append(run.pk)
    assert all("rouge_l" in p.details for p in Prediction.objects.filter(run__in=runs))
    response = boss.post(
        reverse("annotation:chartom-judgement-sample-create"),
        {
            "judgement-name": "blind batch",
            "judgement-runs": runs,
            "judgement-size": 4,
            "judgement-seed": 0,
            "judgement-k": 2,
        },
    )
    assert response.status_code == 302, response.content.decode()[-1500:]
    sample_id = AnnotationTask.objects.filter(kind=TaskKind.JUDGEMENT).first().sample_id
    for client in (first, second):
        for _ in range(4):
            slot = _take(client, reverse("annotation:chartom-judgement-take", args=[sample_id]))
            page = client.get(reverse("annotation:chartom-judgement", args=[slot])).content
            # Blind: no judge verdict and no model name reaches the expert.
            text = page.decode()
            for secret in ("misses his longing", "gpt-secret-a", "gpt-secret-b"):
                assert secret not in text, text[text.find(secret) - 150 :][:300]
            score = next(v for k, v in scores.items() if k.encode() in page)
            response = client.post(
                reverse("annotation:chartom-judgement-submit", args=[slot]), {"score": score}
            )
            assert response.status_code in (200, 302), response.content[:500]

    # The report: note-check shares, qualification agreement, Table 7 correlations.
    page = boss.get("/reports/chartom-qa/").content.decode()
    for needle in ("accurate", "subjective", "Qualification", "Human Correlation", "0.92"):
        assert needle in page, needle
    response = boss.get(reverse("reports:export", args=["chartom-qa", "csv"]))
    assert response.status_code == 200
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        shares = pd.read_csv(archive.open("note-checks.csv"))
        qualification = pd.read_csv(archive.open("qualification.csv"))
        table_7 = pd.read_csv(archive.open("table-7.csv")).set_index("System")
    # 4 judgements of 2 notes: 3 accurate, 1 subjective.
    assert shares["Accurate %"].tolist()[0] == 75.0
    assert qualification.to_string().count("expert1") == 1
    # r([0.9, 0.1, 0.8, 0.2], [1, 0, 1, 0]) = 0.7 / sqrt(0.5 * 1.0), by hand.
    assert table_7.loc["Human Correlation (Pearson r)", "BPC"] == pytest.approx(0.98995, abs=1e-4)
    assert table_7.loc["Human Correlation (Pearson r)", "Answers"] == 4
    # The long-format export carries each answer's RougeL for analysis elsewhere.
    response = boss.get(reverse("reports:export", args=["chartom-qa", "json"]))
    rows = json.loads(b"".join(response.streaming_content))
    assert len(rows) == 4 and all(0 <= row["rouge_l"] <= 1 for row in rows)
