"""Shared fixtures of the CharToM-QA construction tests.

The notes are our own words about scenes of the public-domain novels in
``../shared/data/novels/``; the book text here is a short excerpt-like paragraph we
wrote, so the tests do not depend on the novels' size. Tests that need a real novel
read it from ``shared_data``.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from tests.llm_server import LLMTestServer

BOOK_TITLE = "Father Goriot"
BOOK_TEXT = (
    "The boarding house smelled of soup and old wood. Eugene climbed the stairs slowly, "
    "turning over what Vautrin had told him at dinner. Vautrin filled the glasses of "
    "his two neighbours first, then poured a few careful drops into his own and watched "
    "them drink. Father Goriot smiled at nobody in particular and thought of his "
    "daughters, whom he had not seen for a week."
)
# (target character, underlined text, note text) — our own reader notes.
SAMPLE_NOTES: list[tuple[str, str, str]] = [
    (
        "Vautrin",
        "Vautrin filled the glasses of his two neighbours first",
        "Vautrin is buttering them up on purpose: he wants Eugene on his side so that "
        "the scheme he has in mind goes ahead.",
    ),
    (
        "Father Goriot",
        "thought of his daughters, whom he had not seen for a week",
        "Goriot misses his daughters terribly and longs to see them, even though they "
        "only visit when they need money.",
    ),
]


@pytest.fixture
def chartom_backend(db, llm_server: LLMTestServer):
    from modeling.models import Backend

    return Backend.objects.create(
        name="chartom-test",
        kind=Backend.Kind.OPENAI,
        base_url=llm_server.base_url,
        default_model="test-model",
        max_retries=1,
        timeout_s=5.0,
        price_input_per_1k=1,
        price_output_per_1k=2,
    )


@pytest.fixture
def book(db):
    from annotation.models import BookText

    return BookText.objects.create(
        title=BOOK_TITLE,
        text=BOOK_TEXT,
        source_name="test",
        sha256=hashlib.sha256(BOOK_TEXT.encode()).hexdigest(),
    )


@pytest.fixture
def make_construction(db, book):
    """Build a batch, a note and its construction at any stage, straight in the database.

    ``make_construction(stage="extract", dimension="intention", note=0, **fields)``;
    ``note`` indexes SAMPLE_NOTES. No LLM call and no task is made: tests that need the
    stage's task call ``annotation.chartom.workflow.construction_advance`` themselves.
    """
    from annotation.models import Construction, NoteBatch, ReaderNote

    batches: dict[str, Any] = {}

    def make(
        *,
        stage: str = "filter",
        state: str = "queued",
        dimension: str = "intention",
        note: int = 0,
        backend=None,
        **fields: Any,
    ) -> Construction:
        if "batch" not in batches:
            batches["batch"] = NoteBatch.objects.create(
                name="test batch", backend=backend, model="test-model" if backend else ""
            )
        batch = batches["batch"]
        character, underlined, note_text = SAMPLE_NOTES[note]
        start = BOOK_TEXT.index(underlined)
        reader_note, _ = ReaderNote.objects.get_or_create(
            batch=batch,
            position=note + 1,
            defaults={
                "book": book,
                "target_character": character,
                "underlined_text": underlined,
                "context": BOOK_TEXT,
                "note_text": note_text,
                "book_offset": start + len(underlined),
                "context_0": BOOK_TEXT,
            },
        )
        return Construction.objects.create(
            note=reader_note, dimension=dimension, stage=stage, state=state, **fields
        )

    return make
