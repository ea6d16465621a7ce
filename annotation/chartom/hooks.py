"""Answers to the item bank's questions (``benchmarks.signals``).

The CharToM-QA importer cuts plot windows for published items from books; the books
this app has imported (:class:`~annotation.chartom.models.BookText`) are among those
it may use.
"""

from __future__ import annotations

import functools
from typing import Any

from django.dispatch import receiver

from benchmarks.books import BookReadError, BookSource
from benchmarks.signals import book_sources_wanted

from .models import BookText


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
