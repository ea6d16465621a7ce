"""Four annotators who disagree on CharToM-QA note checks, for the reviewer-queue tests,
fast and in the browser. Every label goes through the real queue and submit services.

Three sampled notes, k = 4, labels by the task's queue position:
- 0: accurate x4 (agreed, not disputed);
- 1: accurate, accurate, accurate, inappropriate (disputed; most frequent: accurate);
- 2: accurate, accurate, inappropriate, inappropriate (disputed; a split).

Percent agreement (mean share of agreeing ordered pairs): (1 + 6/12 + 4/12) / 3 =
61.11%. Nominal alpha: n = 12 values, 9 accurate and 3 inappropriate; o(a,i) = 3/3 +
4/3 = 7/3, so D_o = 2 * 7/3 / 12 = 0.38889 and D_e = 2 * 9 * 3 / (12 * 11) = 0.40909;
alpha = 1 - D_o / D_e = 0.0494. Once both disputed notes are settled every note is
agreed on: 100%, alpha 1.0.
"""

from __future__ import annotations

import hashlib

from annotation.chartom.note_checks import note_check_sample, note_check_submit, note_check_take
from annotation.models import AnnotationTask, BookText, NoteBatch
from tests.annotation.chartom.conftest import BOOK_TEXT, BOOK_TITLE
from tests.annotation.chartom.test_note_checks import make_notes
from tests.factories import UserFactory

A, I = "accurate", "inappropriate"  # noqa: E741
LABELS = {0: (A, A, A, A), 1: (A, A, A, I), 2: (A, A, I, I)}


def conflicting_note_checks() -> tuple[NoteBatch, list, dict[int, AnnotationTask]]:
    """(batch, the four annotators ann0-ann3, queue position -> note-check task)."""
    book, _ = BookText.objects.get_or_create(
        title=BOOK_TITLE,
        defaults={"text": BOOK_TEXT, "sha256": hashlib.sha256(BOOK_TEXT.encode()).hexdigest()},
    )
    batch = make_notes(book, kept=3, name="Review batch")
    note_check_sample(batch=batch, size=3, seed=0, k=4)
    tasks = {t.position: t for t in AnnotationTask.objects.filter(batch=batch)}
    annotators = [UserFactory(username=f"ann{i}", role="annotator") for i in range(4)]
    for i, annotator in enumerate(annotators):
        while (slot := note_check_take(annotator=annotator, batch=batch)) is not None:
            label = LABELS[slot.task.position][i]
            note_check_submit(assignment_id=slot.pk, annotator=annotator, label=label)
    for task in tasks.values():
        task.refresh_from_db()
    return batch, annotators, tasks
