"""``manage.py chartom_import_notes PATH --backend NAME [...]``: reader notes for CharToM-QA.

Creates a note batch with one construction per note and ToM dimension and queues
their LLM filter steps; see :func:`annotation.chartom.notes_import.note_batch_import`.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.chartom.notes_import import NotesImportError, note_batch_import
from modeling.models import Backend


class Command(BaseCommand):
    help = (
        "Import reader notes (CSV or JSONL: book, target character, underlined text, "
        "context, note, optional author id) as a CharToM-QA note batch and queue the LLM "
        "filter step of each note and ToM dimension. The books must be imported first "
        "(chartom_import_books)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", metavar="PATH", type=Path)
        parser.add_argument("--backend", help="name of the LLM backend the steps use")
        parser.add_argument("--model", default="", help="model (default: the backend's)")
        parser.add_argument("--name", default="", help="batch name (default: the file name)")
        parser.add_argument(
            "--params",
            default="",
            help="sampling parameters as JSON, e.g. '{\"temperature\": 0.7}'",
        )
        parser.add_argument(
            "--budget-tokens", type=int, default=None, help="token budget of the batch's run"
        )
        parser.add_argument(
            "--no-enqueue",
            action="store_true",
            help="import only; queue nothing (a backend is then optional)",
        )

    def handle(self, *args, **options) -> None:
        backend = None
        if options["backend"]:
            backend = Backend.objects.filter(name=options["backend"]).first()
            if backend is None:
                known = ", ".join(Backend.objects.order_by("name").values_list("name", flat=True))
                raise CommandError(
                    f"no backend named {options['backend']!r} (known: {known or 'none'})"
                )
        elif not options["no_enqueue"]:
            raise CommandError("--backend is required unless --no-enqueue is given")
        params = {}
        if options["params"]:
            try:
                params = json.loads(options["params"])
            except json.JSONDecodeError as exc:
                raise CommandError(f"--params is not JSON: {exc}") from None
            if not isinstance(params, dict):
                raise CommandError("--params must be a JSON object")
        try:
            batch = note_batch_import(
                path=options["path"],
                name=options["name"],
                backend=backend,
                model=options["model"],
                params=params,
                budget_tokens=options["budget_tokens"],
                enqueue=not options["no_enqueue"],
            )
        except NotesImportError as exc:
            raise CommandError(f"import failed, nothing was written: {exc}") from None
        for warning in getattr(batch, "import_warnings", []):
            self.stderr.write(f"warning: {warning}")
        notes = batch.notes.count()
        constructions = notes * 4
        located = batch.notes.filter(book_offset__isnull=False).count()
        self.stdout.write(
            f"batch {batch.pk} {batch.name!r}: {notes} note(s), {constructions} construction(s), "
            f"plot windows for {located} ({batch.window_tokenizer} tokens)"
        )
        self.stdout.write(
            "queued the filter steps"
            if not options["no_enqueue"]
            else "nothing queued (--no-enqueue)"
        )
