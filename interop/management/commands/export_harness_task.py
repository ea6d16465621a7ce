"""``manage.py export_harness_task (--item-set KEY | --dyntom [KEY ...] | --study ID)
--out FILE.zip``: items as a task for Inspect or lm-evaluation-harness.

Every sample's id is the item's key here, so the log the harness writes imports back
onto the same items (``manage.py import_harness_log``). ``--out`` ending in ``.zip``
writes the zip; any other path is a folder the task is unpacked into.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from modeling.pipelines.generic import parse_categories
from studies.models import Study

from ...export import DYNTOM, HARNESSES, INSPECT, ITEM_SET, STUDY, ExportError, ExportRequest
from ...exporting import error_param, export_build, stage_keys

# How each parameter is typed here, for the error that names it.
OPTION = {
    "work": "--item-set",
    "works": "--dyntom",
    "split": "--split",
    "study": "--study",
    "harness": "--harness",
    "language": "--language",
    "categories": "--category",
    "limit": "--limit",
    "method": "--method",
}


class Command(BaseCommand):
    help = "Export an item set, DynToM stages or a study's items as a harness task."

    def add_arguments(self, parser: CommandParser) -> None:
        what = parser.add_mutually_exclusive_group(required=True)
        what.add_argument("--item-set", metavar="KEY", help="an item set's key, e.g. tombench@1.0")
        what.add_argument(
            "--dyntom",
            nargs="*",
            metavar="KEY",
            help="DynToM stage keys (none: every stage, or every stage of --split)",
        )
        what.add_argument("--study", type=int, metavar="ID", help="a study's items")
        parser.add_argument("--split", default="", help="DynToM: train, dev or test")
        parser.add_argument("--harness", choices=HARNESSES, default=INSPECT)
        parser.add_argument("--language", default="", help="e.g. en (default: the first)")
        parser.add_argument(
            "--category",
            action="append",
            default=[],
            metavar="FIELD=VALUE",
            help="item sets: only items with this value (repeat; one field's values "
            "are alternatives)",
        )
        parser.add_argument("--limit", type=int, help="at most this many items (DynToM: stages)")
        parser.add_argument(
            "--method",
            choices=("vanilla", "cot"),
            default="vanilla",
            help="inspect-plain: the prompt method",
        )
        parser.add_argument(
            "--out", type=Path, required=True, help="FILE.zip, or a folder to unpack into"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        request = self._request(options)
        try:
            bundle = export_build(request)
        except ExportError as exc:
            name, message = error_param(exc, source=request.source)
            raise CommandError(f"{OPTION.get(name, name)}: {message}") from None
        out: Path = options["out"]
        data = bundle.zip_bytes()
        if out.suffix.lower() == ".zip":
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
            written = out
        else:
            out.mkdir(parents=True, exist_ok=True)
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                archive.extractall(out)
            written = out / bundle.name
        self.stdout.write(
            f"{written}: {len(bundle.samples)} samples of {bundle.title} "
            f"({bundle.harness}, task {bundle.name})"
        )

    @staticmethod
    def _request(options: dict[str, Any]) -> ExportRequest:
        try:
            categories = parse_categories("\n".join(options["category"]))
        except ValueError as exc:
            raise CommandError(f"--category {exc}") from None
        if options["study"] is not None:
            source = STUDY
            if not Study.objects.filter(pk=options["study"]).exists():
                raise CommandError(f"--study: no study with id {options['study']}")
        elif options["dyntom"] is not None:
            source = DYNTOM
        else:
            source = ITEM_SET
        return ExportRequest(
            source=source,
            harness=options["harness"],
            work=options["item_set"] or "",
            works=stage_keys(" ".join(options["dyntom"] or ())),
            split=options["split"],
            study_id=options["study"],
            language=options["language"],
            categories=categories,
            limit=options["limit"],
            method=options["method"],
        )
