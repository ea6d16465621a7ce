"""Answers to the item bank's and the run engine's questions (``benchmarks.signals``,
``modeling.runs.signals``).

The CharToM-QA importer cuts plot windows for published items from books; the books
this app has imported (:class:`~annotation.chartom.models.BookText`) are among those
it may use. A construction batch's direct-call run names its batch on the run page.
"""

from __future__ import annotations

import functools
from typing import Any

from django.dispatch import receiver
from django.urls import reverse

from benchmarks.books import BookReadError, BookSource
from benchmarks.signals import book_sources_wanted
from modeling.models import Run
from modeling.runs.signals import run_owner_wanted

from .models import BookText, NoteBatch


def _book_text(pk: int) -> str:
    text = BookText.objects.filter(pk=pk).values_list("text", flat=True).first()
    if text is None:
        raise BookReadError(f"imported book {pk} was deleted meanwhile")
    return text


@receiver(book_sources_wanted, dispatch_uid="annotation.chartom.imported_books")
def imported_books(sender: Any, **kwargs: Any) -> list[BookSource]:
    """Every imported book, its text read only when an item needs it."""
    return [
        BookSource(
            title=title,
            origin=f"imported book {title!r}",
            read=functools.partial(_book_text, pk),
        )
        for pk, title in BookText.objects.order_by("title").values_list("pk", "title")
    ]


@receiver(run_owner_wanted, dispatch_uid="annotation.chartom.batch_run_owner")
def batch_run_owner(sender: Any, run: Run, **kwargs: Any) -> tuple[str, str] | None:
    """The construction batch whose calls the run records."""
    batch = NoteBatch.objects.filter(run=run).only("pk", "name").first()
    if batch is None:
        return None
    return (
        f"the CharToM-QA construction batch {batch.name!r}",
        reverse("annotation:chartom-batch", args=[batch.pk]),
    )
