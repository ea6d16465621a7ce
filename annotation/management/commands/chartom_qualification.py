"""``manage.py chartom_qualification PATH --name N [--threshold T]``: a gold set for the trial.

PATH holds JSON lines, one gold item each (see
:func:`annotation.chartom.qualification.gold_rows_parse`)::

    {"note": 12, "dimension": "intention", "gold": ["buttering them up"]}
    {"batch": 3, "position": 2, "dimension": "desire", "gold": []}

The researcher page /annotation/chartom/qualification/ takes the same lines.
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.chartom.qualification import gold_rows_parse, qualification_set_create
from annotation.chartom.workflow import WorkflowError

MAX_BYTES = 5 * 1024 * 1024


class Command(BaseCommand):
    help = "Create an active qualification set (gold key-note extractions) from JSON lines."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", metavar="PATH", type=Path)
        parser.add_argument("--name", required=True)
        parser.add_argument(
            "--threshold", type=float, default=0.8, help="mean span F1 to qualify (0-1)"
        )

    def handle(self, *args, **options) -> None:
        path: Path = options["path"]
        try:
            if path.stat().st_size > MAX_BYTES:
                raise CommandError(f"{path}: over {MAX_BYTES:,} bytes")
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{path}: cannot read it ({exc})") from None
        try:
            qset = qualification_set_create(
                name=options["name"], threshold=options["threshold"], rows=gold_rows_parse(text)
            )
        except WorkflowError as exc:
            raise CommandError(f"{path}: {exc}; nothing was written") from None
        self.stdout.write(
            f"qualification set {qset.name!r} (id {qset.pk}): {qset.items.count()} item(s), "
            f"threshold {qset.threshold:.2f}"
        )
