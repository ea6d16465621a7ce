"""``manage.py chartom_import_books PATH... [--title T] [--replace]``: novels for CharToM-QA.

Reads Project Gutenberg plain-text books (header, footer and licence stripped); see
:func:`annotation.chartom.books.book_text_import`. All or nothing across the PATHs.
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from annotation.chartom.books import BookImportError, book_text_import


class Command(BaseCommand):
    help = (
        "Import Project Gutenberg plain-text books for CharToM-QA construction. The title "
        "(the CharToM-QA book_name) is the header's 'Title: ... by <Author>' unless given."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", metavar="PATH", nargs="+", type=Path)
        parser.add_argument("--title", default=None, help="title to store (one PATH only)")
        parser.add_argument(
            "--replace",
            action="store_true",
            help="overwrite a different text already imported under the same title",
        )

    def handle(self, *args, **options) -> None:
        paths: list[Path] = options["paths"]
        if options["title"] and len(paths) > 1:
            raise CommandError("--title names one book: give a single PATH")
        try:
            with transaction.atomic():
                books = [
                    book_text_import(path=path, title=options["title"], replace=options["replace"])
                    for path in paths
                ]
        except (BookImportError, ValueError) as exc:
            raise CommandError(f"import failed, nothing was written: {exc}") from None
        for path, book in zip(paths, books, strict=True):
            self.stdout.write(f"{path.name}: {book.title!r}, {len(book.text):,} characters")
            for warning in getattr(book, "import_warnings", []):
                self.stderr.write(f"warning: {path.name}: {warning}")
        self.stdout.write(f"{len(books)} book(s) imported")
