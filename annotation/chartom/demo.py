"""Demo data for CharToM-QA construction: Father Goriot and three reader notes.

:func:`chartom_demo_load` is for ``manage.py load_demo``: it imports the novel from
the shared data and a small batch of notes we wrote ourselves, without queueing any
LLM step (the demo has no backend to call). Running it again changes nothing.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from django.db import transaction

from .books import book_text_import
from .models import NoteBatch
from .notes_import import note_batch_import

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
