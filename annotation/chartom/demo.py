"""Demo data for CharToM-QA construction, for ``manage.py load_demo``.

* :func:`chartom_demo_load`: Father Goriot from the shared data and three reader notes
  of ours, waiting for a backend (nothing queued): the batch to try "Start LLM steps"
  on with a real model.
* :func:`chartom_demo_construction_load`: the demo books and a batch of our notes
  taken through the real workflow with replies we wrote ourselves, recorded as the
  ``demo-recorded`` backend's, so that every annotator queue has a task waiting and
  no model is needed.

Running either again changes nothing.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from modeling.backends import ChatRequest
from modeling.models import Backend, CachedResponse, RunCall
from modeling.runs.direct import DirectRequest

from .bonus_review import bonus_review_submit
from .books import book_text_import
from .extraction import extraction_submit
from .judgement import judgement_sample_create
from .llm_steps import STEPS, Step, StepFailed, batch_run, construction_claim
from .models import LLM_STAGES, Construction, NoteBatch, QuestionCandidate, Stage
from .note_checks import note_check_sample
from .notes_import import note_batch_import
from .paraphrase_review import paraphrase_review_submit
from .qualification import (
    attempt_finish,
    attempt_start,
    gold_rows_parse,
    qualification_answer_save,
    qualification_set_create,
)
from .question_choice import question_choose
from .spans import spans_from_fragments
from .workflow import WorkflowError, task_take

DEMO_BATCH = "CharToM-QA demo"
NOVEL = Path("novels") / "father_goriot_pg1237.txt"
# Our own notes on three moments of the novel; the underlined texts are the novel's.
DEMO_NOTES = [
    {
        "book": "Father Goriot",
        "target_character": "Vautrin",
        "underlined_text": (
            "Vautrin filled Eugene\u2019s glass and Goriot\u2019s likewise, then he "
            "deliberately poured out a few drops into his own glass"
        ),
        "context": (
            "Vautrin filled Eugene\u2019s glass and Goriot\u2019s likewise, then he "
            "deliberately poured out a few drops into his own glass, and sipped it while "
            "his two neighbors drank their wine."
        ),
        "note": (
            "Vautrin is flattering the two of them on purpose: he needs Eugene on his side "
            "before he can put his scheme to him."
        ),
        "author": "demo-reader-1",
    },
    {
        "book": "Father Goriot",
        "target_character": "Father Goriot",
        "underlined_text": "my heart beats\nfast when the carriages begin to come",
        "context": (
            "I wait near the entrance; my heart beats fast when the carriages begin to "
            "come; I admire them in their dresses, and as they pass they give me a little "
            "smile, and it seems as if everything was lighted up for me by a ray of bright "
            "sunlight."
        ),
        "note": (
            "Goriot lives for a glimpse of his daughters. A smile from a passing carriage "
            "makes him happy for the whole day, and he asks for nothing more."
        ),
        "author": "demo-reader-2",
    },
    {
        "book": "Father Goriot",
        "target_character": "Rastignac",
        "underlined_text": "\u201cHenceforth there is war between us.\u201d",
        "context": (
            "He glanced over that humming hive, seeming to draw a foretaste of its honey, "
            "and said magniloquently:\n\n\u201cHenceforth there is war between us.\u201d"
        ),
        "note": (
            "Rastignac decides to conquer the society that let Goriot die alone, and to "
            "win by its own rules."
        ),
        "author": "demo-reader-1",
    },
]


@transaction.atomic
def chartom_demo_load(shared_data: Path) -> NoteBatch:
    """Import Father Goriot from ``shared_data`` and the demo notes (nothing queued)."""
    existing = NoteBatch.objects.filter(name=DEMO_BATCH).first()
    if existing is not None:
        return existing
    book_text_import(path=Path(shared_data) / NOVEL)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "chartom_demo_notes.jsonl"
        path.write_text(
            "".join(json.dumps(note, ensure_ascii=False) + "\n" for note in DEMO_NOTES),
            encoding="utf-8",
        )
        batch = note_batch_import(path=path, name=DEMO_BATCH, enqueue=False)
    return batch


# --- the demo construction batch: every queue with a task waiting ------------------------

DEMO_BACKEND = "demo-recorded"
# Nothing listens on the discard port: a reply the demo did not record fails at once,
# on this machine, instead of reaching any model.
DEMO_BACKEND_URL = "http://127.0.0.1:9/v1"
# The entry of a construction's fixture that holds each stage's reply or decision.
STAGE_ENTRIES: dict[str, str] = {
    Stage.FILTER: "filter",
    Stage.EXTRACT: "extract",
    Stage.PARAPHRASE: "paraphrase",
    Stage.PARAPHRASE_REVIEW: "paraphrase_review",
    Stage.QUESTIONS: "questions",
    Stage.QUESTION_CHOICE: "question_choice",
    Stage.BONUS: "bonus",
    Stage.BONUS_REVIEW: "bonus_review",
    Stage.DISTRACTORS: "distractors",
    Stage.DISTRACTOR_REVIEW: "distractor_review",
}


class DemoDataError(ValueError):
    """The demo fixture does not fit the workflow (a reply it lacks, a step refused)."""


def demo_backend_ensure() -> Backend:
    """The ``demo-recorded`` backend: its replies are the ones the demo fixture recorded."""
    backend, _ = Backend.objects.get_or_create(
        name=DEMO_BACKEND,
        defaults={
            "kind": Backend.Kind.OPENAI,
            "base_url": DEMO_BACKEND_URL,
            "default_model": DEMO_BACKEND,
            "max_concurrency": 1,
            "max_retries": 0,
            "timeout_s": 5.0,
            "options": {
                "demo": "replies written by the ToMLab contributors for the demo, replayed "
                "from the response cache by manage.py load_demo; it reaches no model"
            },
        },
    )
    return backend


@dataclass
class _RecordedStep(Step):
    """A step whose calls are answered with the demo's recorded replies.

    Before each call the recorded reply is put in the response cache under the exact
    request the step sends, so :func:`modeling.runs.direct.run_direct_calls` records it
    like any cached reply: a RunCall of the batch's run, tokens, provenance.
    """

    entries: dict[str, Any] = field(default_factory=dict)

    def call_many(
        self, requests: list[DirectRequest]
    ) -> tuple[dict[int, RunCall], StepFailed | None]:
        for asked in requests:
            kind = asked.unit_key.split(":")[2]
            reply = self._reply(kind, asked.messages, asked.sample_index)
            # The demo batch sets no sampling parameters: this is the request (and so the
            # cache key) run_direct_calls builds for this call.
            request = ChatRequest.build(
                asked.messages, model=self.run.model, params={}, sample_index=asked.sample_index
            )
            CachedResponse.objects.get_or_create(
                key=request.cache_key(self.run.backend.name),
                defaults={
                    "backend_name": self.run.backend.name,
                    "model": self.run.model,
                    "request": request.as_json(),
                    "text": reply,
                    "finish_reason": "stop",
                    "prompt_tokens": request.estimated_prompt_tokens(),
                    "completion_tokens": len(reply) // 4 + 1,
                },
            )
        return super().call_many(requests)

    def _reply(self, kind: str, messages: list[dict[str, str]], sample_index: int) -> str:
        where = f"{self.construction} {kind}"
        if kind == "question":
            replies = self.entries.get("questions") or []
            if not replies:
                raise DemoDataError(f"{where}: no recorded questions")
            return replies[sample_index % len(replies)]
        if kind == "verify":
            prompt = messages[-1]["content"]
            for question, reply in (self.entries.get("verify") or {}).items():
                if question in prompt:
                    return reply
            raise DemoDataError(f"{where}: no recorded verification for this candidate")
        reply = self.entries.get(kind)
        if not isinstance(reply, str):
            raise DemoDataError(f"{where}: no recorded reply")
        return reply


def _llm_step(construction: Construction, entries: dict[str, Any]) -> None:
    """Run the construction's LLM step with the recorded replies (as ``construction_step_run``)."""
    if not construction_claim(construction.pk):
        raise DemoDataError(f"{construction}: its LLM step is not waiting")
    construction = Construction.objects.select_related("note", "note__book", "note__batch").get(
        pk=construction.pk
    )
    step = _RecordedStep(
        construction=construction, run=batch_run(construction.note.batch_id), entries=entries
    )
    try:
        STEPS[construction.stage](step)
    except StepFailed as exc:
        raise DemoDataError(f"{construction}: {exc}") from None


def _take(construction: Construction, kind: str, annotator: AbstractBaseUser) -> int:
    """The annotator's slot on this construction's open task of ``kind``."""
    slot = task_take(
        kind=kind,
        annotator=annotator,
        eligible=lambda tasks: tasks.filter(construction__stage=kind),
        construction=construction,
    )
    if slot is None:
        raise DemoDataError(f"{construction}: no {kind} task to take")
    return slot.pk


def _human_step(construction: Construction, value: Any, annotator: AbstractBaseUser) -> None:
    """The annotator's recorded decision, through the screen's own service."""
    stage = construction.stage
    slot = _take(construction, stage, annotator)
    if stage == Stage.EXTRACT:
        spans = spans_from_fragments(construction.note.note_text, value)
        extraction_submit(assignment_id=slot, annotator=annotator, spans=spans)
    elif stage == Stage.PARAPHRASE_REVIEW:
        text = construction.description if value is None else value
        paraphrase_review_submit(assignment_id=slot, annotator=annotator, text=text)
    elif stage == Stage.QUESTION_CHOICE:
        chosen = QuestionCandidate.objects.filter(
            construction=construction, kept=True, text=value["pick"]
        ).first()
        if chosen is None:
            raise DemoDataError(f"{construction}: {value['pick']!r} is not a kept candidate")
        question_choose(
            assignment_id=slot, annotator=annotator, candidate_id=chosen.pk, text=value["text"]
        )
    elif stage == Stage.BONUS_REVIEW:
        points = construction.bonus_points if value is None else value["points"]
        operations = [] if value is None else value.get("operations", [])
        bonus_review_submit(
            assignment_id=slot, annotator=annotator, points=points, operations=operations
        )
    else:
        raise DemoDataError(f"{construction}: the demo does not submit {stage}")


def _walk(construction: Construction, entries: dict[str, Any], annotator) -> None:
    """Take the construction through every stage the fixture has an entry for."""
    while True:
        construction.refresh_from_db()
        entry = STAGE_ENTRIES.get(construction.stage)
        if entry is None or entry not in entries:
            return  # it waits here: published, dropped, or in this stage's queue
        if construction.stage in LLM_STAGES:
            _llm_step(construction, entries)
        else:
            _human_step(construction, entries[entry], annotator)


def _notes_file(folder: str, notes: list[dict[str, Any]]) -> Path:
    path = Path(folder) / "chartom_demo_construction_notes.jsonl"
    rows = [{k: v for k, v in note.items() if k != "constructions"} for note in notes]
    path.write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8"
    )
    return path


def _qualification(spec: dict[str, Any], batch: NoteBatch, researcher, annotator) -> None:
    """The demo gold set, and the annotator's passed attempt at it (the real trial)."""
    rows = gold_rows_parse(
        "\n".join(
            json.dumps(
                {
                    "batch": batch.pk,
                    "position": g["note"],
                    "dimension": g["dimension"],
                    "gold": g["gold"],
                }
            )
            for g in spec["gold"]
        )
    )
    qset = qualification_set_create(
        name=spec["name"], threshold=spec["threshold"], rows=rows, created_by=researcher
    )
    attempt = attempt_start(annotator=annotator)
    for item, fragments in zip(qset.items.order_by("position"), spec["attempt"], strict=True):
        qualification_answer_save(
            attempt_id=attempt.pk,
            annotator=annotator,
            item_id=item.pk,
            spans=spans_from_fragments(item.note.note_text, fragments) if fragments else [],
            no_key_note=not fragments,
        )
    if not attempt_finish(attempt_id=attempt.pk, annotator=annotator).passed:
        raise DemoDataError(f"the demo annotator's attempt at {qset.name!r} did not pass")


@transaction.atomic
def chartom_demo_construction_load(
    *,
    fixture: Path,
    researcher: AbstractBaseUser,
    annotator: AbstractBaseUser,
    generative_run_ids: list[int],
) -> tuple[NoteBatch, bool]:
    """The demo construction batch with a task waiting in every annotator queue.

    From ``fixture`` (``fixtures/demo/chartom_construction.json``): the demo books, a
    batch of our reader notes on the ``demo-recorded`` backend, each construction taken
    through the real workflow as far as the fixture goes (LLM steps answered with the
    recorded replies, human steps submitted by ``annotator``), a note-check sample, a
    qualification trial the annotator passed, and an expert-judgement sample of the
    ``generative_run_ids`` answers. Returns ``(batch, created)``; a batch of that name
    already there is returned as it is. Raises :class:`DemoDataError`.
    """
    spec = json.loads(Path(fixture).read_text(encoding="utf-8"))
    existing = NoteBatch.objects.filter(name=spec["batch"]).first()
    if existing is not None:
        return existing, False
    for title, book in spec["books"].items():
        book_text_import(path=Path(fixture).parent / book, title=title)
    backend = demo_backend_ensure()
    with tempfile.TemporaryDirectory() as folder:
        batch = note_batch_import(
            path=_notes_file(folder, spec["notes"]),
            name=spec["batch"],
            backend=backend,
            model=spec["model"],
            created_by=researcher,
            enqueue=False,
        )
    _qualification(spec["qualification"], batch, researcher, annotator)
    for position, note in enumerate(spec["notes"], start=1):
        for dimension, entries in note["constructions"].items():
            construction = Construction.objects.get(
                note__batch=batch, note__position=position, dimension=dimension
            )
            try:
                _walk(construction, entries, annotator)
            except WorkflowError as exc:
                raise DemoDataError(f"{construction}: {exc}") from None
    checks = spec["note_checks"]
    note_check_sample(
        batch=batch, size=checks["size"], k=checks["k"], seed=checks["seed"], created_by=researcher
    )
    judgement = spec["judgement"]
    judgement_sample_create(
        name=judgement["name"],
        run_ids=generative_run_ids,
        size=judgement["size"],
        seed=judgement["seed"],
        k=judgement["k"],
        created_by=researcher,
    )
    return batch, True
