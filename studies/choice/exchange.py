"""Multiple-choice study responses out and back in (CSV or JSON), one row per pick.

A study run elsewhere (a crowd platform, a paper form) is brought in through the same
rows and reported like one run here. Export never carries invite tokens. Import is all
or nothing: the first bad row is named with its field and nothing is written; rows
already stored are recognised (same participant label, item and round) and left as
they are, so importing a file twice creates nothing the second time. The limits are
the benchmark importers': a file over its size limit is refused before it is read,
a value over the per-field limit is refused with its place, and an error quotes at
most 200 characters of a value.
"""

from __future__ import annotations

import csv
import io
import json
import re
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from common.csv_safe import FORMULA_STARTS

from ..errors import StudyError
from ..models import (
    Assignment,
    ChoiceAnswer,
    Familiarity,
    Participant,
    Study,
    StudyItem,
    WorkSession,
)
from ..selectors import ROLE_COLUMNS, participant_fields, role_fields, seconds
from . import generic
from . import services as cs

COLUMNS = [
    "participant",
    "item",
    "work",
    "read",
    "round",
    "option",
    "shown",
    "kept",
    "correct",
    "ms",
    "shown_at",
    "answered_at",
    "question",
    "dimension",
    "question_type",
    "mental_state",
    "directness",
    # Not read back by the import: who is counted, and how the pick was made.
    "participant_id",
    "withdrawn",
    "excluded",
    "exclusion_reason",
    *ROLE_COLUMNS,
    "confidence",
    "seconds",
    "seconds_total",
    "seconds_active",
]
REQUIRED = ("participant", "item", "round", "option")
# A mapped benchmark's picks (``generic_rows_export``): the item's id, the option picked
# as its index and letter in the item's own order, the position (and key) it was shown
# at, then one ``category_<field>`` column per category field of the benchmark. The
# first columns are those the import reads back (``item`` is the item's id).
GENERIC_COLUMNS = [
    "participant",
    "item",
    "item_id",
    "work",
    "language",
    "round",
    "option",
    "option_letter",
    "shown",
    "shown_letter",
    "correct",
    "ms",
    "shown_at",
    "answered_at",
    "question",
]
GENERIC_TAIL = [
    "participant_id",
    "withdrawn",
    "excluded",
    "exclusion_reason",
    *ROLE_COLUMNS,
    "option_seed",
    "seconds",
    "seconds_total",
]
# The largest file read, as for the benchmark importers (benchmarks/importers/base.py);
# override with TOMLAB_IMPORT_MAX_BYTES="study-choices=...". An export of a large study
# is a few MB: 600 picks with their question texts are about 0.3 MB.
IMPORT_LIMIT = "study-choices"
DEFAULT_MAX_BYTES = 50 * 1024 * 1024
# An error shows at most this much of the value it is about.
SHOWN_CHARS = 200
MAX_LABEL = 200  # Participant.label
MAX_MS = 10**12  # about 31 years: anything above is not a time
_WHOLE = re.compile(r"-?[0-9]{1,18}")


class ExchangeError(StudyError):
    """A row that cannot be imported: says which row and which field."""

    def __init__(self, message: str, *, row: int, field: str) -> None:
        super().__init__(f"row {row}, field {shown(field)}: {message}")
        self.row, self.field = row, field


class FileTooLarge(ExchangeError):
    """The upload is over the import's size limit: refused before it is read."""


def shown(value: Any) -> str:
    """A value as an error message quotes it: its first 200 characters, escaped."""
    text = value if isinstance(value, str) else str(value)
    if len(text) > SHOWN_CHARS:
        return repr(text[:SHOWN_CHARS]) + f"… ({len(text):,} characters)"
    return repr(text)


def max_bytes() -> int:
    """The largest file the import reads (``TOMLAB_IMPORT_MAX_BYTES['study-choices']``)."""
    limits: dict[str, int] = getattr(settings, "TOMLAB_IMPORT_MAX_BYTES", {})
    return int(limits.get(IMPORT_LIMIT, DEFAULT_MAX_BYTES))


def upload_read(upload: Any) -> bytes:
    """The uploaded file's bytes, refused before it is read when over :func:`max_bytes`.

    Django has the upload's size from the request (a large one waits in a temporary
    file, not in memory); reading at most one byte past the limit keeps the check
    honest for a file-like object whose size is not known.
    """
    limit = max_bytes()
    size = getattr(upload, "size", None)
    if size is None or size <= limit:
        data = upload.read(limit + 1)
        size = len(data)
    if size > limit:
        raise FileTooLarge(
            f"the file is {size:,} bytes, over the {limit:,}-byte limit for response imports "
            f"(settings.TOMLAB_IMPORT_MAX_BYTES[{IMPORT_LIMIT!r}])",
            row=0,
            field="file",
        )
    return data


def _field_check(value: Any, *, row: int, field: str) -> None:
    """Refuse a value over ``settings.TOMLAB_IMPORT_MAX_FIELD_BYTES``, as every importer."""
    limit: int = settings.TOMLAB_IMPORT_MAX_FIELD_BYTES
    if isinstance(value, str):
        size = len(value.encode("utf-8")) if len(value) * 4 > limit else 0
    elif isinstance(value, (dict, list)):
        size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
    else:
        return
    if size > limit:
        raise ExchangeError(
            f"the value is {size:,} bytes, over the {limit:,}-byte limit per field "
            "(settings.TOMLAB_IMPORT_MAX_FIELD_BYTES)",
            row=row,
            field=field,
        )


def item_key(item: StudyItem, question=None) -> str:
    """A stable name for a pick's item: the QA item's natural key, or stage/question."""
    if item.qa_item_id:
        return item.qa_item.natural_key
    return f"{item.stage.work.key}/{question.key}"


def rows_export(study: Study, *, include_excluded: bool = False) -> Iterator[dict[str, Any]]:
    """Every pick of the study, in participant and item order (streamable); excluded
    participants' picks only when asked for."""
    picks = ChoiceAnswer.objects.filter(assignment__participant__study=study)
    if not include_excluded:
        picks = picks.filter(assignment__participant__excluded_at__isnull=True)
    picks = picks.select_related(
        "assignment__participant__user",
        "assignment__study_item__qa_item",
        "assignment__study_item__stage__work",
        "assignment__session__study_work__work",
        "question",
    ).order_by("assignment__participant_id", "assignment__position", "question_id", "round")
    for c in picks.iterator(chunk_size=2000):
        a = c.assignment
        item = a.study_item
        qa, q = item.qa_item, c.question
        yield {
            "participant": str(a.participant),
            "item": item_key(item, q),
            "work": a.session.study_work.work.key,
            "read": a.seen if qa else "",
            "round": c.round,
            "option": c.option,
            "shown": c.shown,
            "kept": "" if c.kept is None else c.kept,
            "correct": "" if c.correct is None else c.correct,
            "ms": c.ms,
            "shown_at": c.shown_at.isoformat(),
            "answered_at": c.answered_at.isoformat(),
            "question": qa.question if qa else q.text,
            "dimension": qa.dimension if qa else "",
            "question_type": "" if qa else q.question_type,
            "mental_state": "" if qa else q.mental_state,
            "directness": (qa.directness or "") if qa else "",
            **participant_fields(a.participant),
            **role_fields(item),
            "confidence": a.confidence,
            "seconds": seconds(c.ms),
            "seconds_total": seconds(a.total_ms),
            "seconds_active": seconds(a.active_ms),
        }


def generic_category_fields(study: Study) -> list[str]:
    """The category fields of a generic study's benchmark, in the mapping's order (then
    any other field its items carry)."""
    works = [sw.work for sw in study.study_works.select_related("work").order_by("position")]
    facts = generic.generic_facts(works)
    return list(dict.fromkeys(name for f in facts for name in f.categories))


def generic_columns(study: Study) -> list[str]:
    """The columns of a generic study's export: fixed, then one per category field."""
    categories = [f"category_{name}" for name in generic_category_fields(study)]
    return [*GENERIC_COLUMNS, *categories, *GENERIC_TAIL]


def generic_rows_export(
    study: Study, *, include_excluded: bool = False
) -> Iterator[dict[str, Any]]:
    """Every pick of a generic study, one row each, in participant and item order
    (streamable); excluded participants' picks only when asked for."""
    fields_ = generic_category_fields(study)
    language = (study.sampling or {}).get("language", "")
    picks = ChoiceAnswer.objects.filter(assignment__participant__study=study, mc_item__isnull=False)
    if not include_excluded:
        picks = picks.filter(assignment__participant__excluded_at__isnull=True)
    picks = picks.select_related(
        "assignment__participant__user",
        "assignment__study_item",
        "assignment__session__study_work__work",
        "mc_item",
    ).order_by("assignment__participant_id", "assignment__position", "round")
    for c in picks.iterator(chunk_size=2000):
        a, item = c.assignment, c.mc_item
        shown_in = generic.study_language({"language": language}, item)
        yield {
            "participant": str(a.participant),
            "item": item.item_id,
            "item_id": item.item_id,
            "work": a.session.study_work.work.key,
            "language": shown_in,
            "round": c.round,
            "option": c.option,
            "option_letter": generic.option_letter(c.option),
            "shown": c.shown,
            "shown_letter": generic.option_letter(c.shown),
            "correct": "" if c.correct is None else c.correct,
            "ms": c.ms,
            "shown_at": c.shown_at.isoformat(),
            "answered_at": c.answered_at.isoformat(),
            "question": item.text(shown_in).get("question", ""),
            **{f"category_{name}": str((item.categories or {}).get(name, "")) for name in fields_},
            **participant_fields(a.participant),
            **role_fields(a.study_item),
            "option_seed": "" if a.option_seed is None else a.option_seed,
            "seconds": seconds(c.ms),
            "seconds_total": seconds(a.total_ms),
        }


def rows_parse(data: bytes, *, filename: str) -> list[dict[str, Any]]:
    """Rows from an uploaded CSV or JSON file (a list of objects, or JSON lines).

    ``data`` comes through :func:`upload_read` (the file size limit); every value is
    held to the per-field limit here, and a CSV value over the CSV reader's own limit
    (131,072 characters) is a located error, not a server error.
    """
    if len(data) > max_bytes():
        raise FileTooLarge(
            f"the file is {len(data):,} bytes, over the {max_bytes():,}-byte limit",
            row=0,
            field="file",
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ExchangeError("the file is not UTF-8 text", row=0, field="file") from None
    read = _json_rows if filename.lower().endswith((".json", ".jsonl")) else _csv_rows
    rows = read(text)
    for n, row in enumerate(rows, start=1):
        for name, value in row.items():
            _field_check(value, row=n, field=str(name))
    return rows


def _json_rows(text: str) -> list[dict[str, Any]]:
    stripped = text.strip()
    try:
        if stripped.startswith("["):
            rows = json.loads(stripped)
        else:
            rows = [json.loads(line) for line in stripped.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise ExchangeError(f"not JSON ({exc.msg})", row=0, field="file") from None
    except RecursionError:
        raise ExchangeError("not JSON (nested too deeply)", row=0, field="file") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ExchangeError("each row must be a JSON object", row=0, field="file")
    return rows


def _csv_rows(text: str) -> list[dict[str, Any]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    rows = []
    try:
        if missing := [c for c in REQUIRED if c not in (reader.fieldnames or [])]:
            raise ExchangeError(f"missing column(s) {', '.join(missing)}", row=0, field="header")
        for row in reader:
            rows.append(row)
    except csv.Error as exc:
        # e.g. "field larger than field limit (131072)": a value over the CSV reader's
        # limit, or a malformed quote. The row is the data row being read.
        raise ExchangeError(f"malformed CSV: {exc}", row=len(rows) + 1, field="file") from None
    return rows


def _bool(value: Any, *, row: int, field: str) -> bool | None:
    if value in ("", None):
        return None
    if isinstance(value, bool):
        return value
    text = str(value).strip().lstrip("'").lower()
    if text in ("true", "1", "yes", "read"):
        return True
    if text in ("false", "0", "no", "not read"):
        return False
    raise ExchangeError(f"{shown(value)} is not yes/no", row=row, field=field)


def _int(
    value: Any, *, row: int, field: str, required: bool = True, maximum: int = 32767
) -> int | None:
    if value in ("", None):
        if required:
            raise ExchangeError("missing", row=row, field=field)
        return None
    try:
        text = str(value).strip()
        if not _WHOLE.fullmatch(text):  # int() takes "٣", "1_0" and 4,300 digits
            raise ValueError(text)
        number = int(text)
    except ValueError:
        raise ExchangeError(f"{shown(value)} is not a whole number", row=row, field=field) from None
    if number < 0:
        raise ExchangeError("must not be negative", row=row, field=field)
    if number > maximum:
        raise ExchangeError(f"must be at most {maximum:,}", row=row, field=field)
    return number


def _when(value: Any, *, row: int, field: str) -> datetime | None:
    if value in ("", None):
        return None
    try:
        parsed = parse_datetime(str(value).strip())
    except ValueError:  # well formed, but not a date (month 13)
        parsed = None
    if parsed is None:
        raise ExchangeError(f"{shown(value)} is not an ISO date and time", row=row, field=field)
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed)


@dataclass(frozen=True)
class ImportResult:
    created: int
    unchanged: int
    participants_created: int


@transaction.atomic
def rows_import(*, study: Study, rows: Iterable[dict[str, Any]]) -> ImportResult:
    """Store picks made elsewhere as this study's responses (all rows or none)."""
    if not cs.study_is_choice(study):
        raise StudyError("responses can be imported into multiple-choice studies only")
    items: dict[str, tuple[StudyItem, Any]] = {}
    for item in StudyItem.objects.filter(study=study).select_related(
        "qa_item", "stage__work", "study_work__work", "mc_item"
    ):
        if item.mc_item_id:
            items[item.mc_item.item_id] = (item, None)
        elif item.qa_item_id:
            items[item.qa_item.natural_key] = (item, None)
        else:
            for q in cs.dyntom_questions(item):
                items[item_key(item, q)] = (item, q)
    people = {str(p): p for p in Participant.objects.filter(study=study)}
    created = unchanged = new_people = 0
    now = timezone.now()
    for n, raw in enumerate(rows, start=1):
        for field in REQUIRED:
            if raw.get(field) in ("", None):
                raise ExchangeError("missing", row=n, field=field)
        key = str(raw["item"]).strip()
        if key not in items:
            raise ExchangeError(f"{shown(key)} is not an item of this study", row=n, field="item")
        item, question = items[key]
        round_ = _int(raw["round"], row=n, field="round")
        if round_ not in (1, 2) or (round_ == 2 and not item.qa_item_id):
            raise ExchangeError("must be 1, or 2 for a CharToM-QA revision", row=n, field="round")
        if item.mc_item_id:
            language = generic.study_language(study.sampling, item.mc_item)
            n_options = len(generic.generic_options(item.mc_item, language))
        elif question is None:
            n_options = len(cs.chartom_options(item.qa_item))
        else:
            n_options = len(question.options)
        option = _int(raw["option"], row=n, field="option")
        if option >= n_options:
            raise ExchangeError(
                f"the item has {n_options} options (0-{n_options - 1})", row=n, field="option"
            )
        read = _bool(raw.get("read"), row=n, field="read")
        if item.qa_item_id and read is None:
            raise ExchangeError(
                "say whether the participant had read the book", row=n, field="read"
            )
        label = str(raw["participant"]).strip()
        if label[:1] == "'" and label[1:2] in FORMULA_STARTS:  # our CSV writer's guard
            label = label[1:]
        if len(label) > MAX_LABEL:
            raise ExchangeError(
                f"at most {MAX_LABEL} characters (this one has {len(label):,})",
                row=n,
                field="participant",
            )
        if any(ord(c) < 32 for c in label):
            raise ExchangeError("holds a control character", row=n, field="participant")
        participant = people.get(label)
        if participant is None:
            participant = Participant.objects.create(
                study=study, label=label, token=secrets.token_urlsafe(32), consented_at=now
            )
            people[label] = participant
            new_people += 1
        session, _ = WorkSession.objects.get_or_create(
            participant=participant,
            study_work=item.study_work,
            defaults={"seen": bool(read), "seed": 0, "history_confirmed_at": now},
        )
        if item.qa_item_id and session.seen != read:
            raise ExchangeError(
                f"{label} was recorded as {'having' if session.seen else 'not having'} read "
                f"{item.study_work.work.key}",
                row=n,
                field="read",
            )
        Familiarity.objects.get_or_create(
            participant=participant, work=item.study_work.work, defaults={"seen": bool(read)}
        )
        assignment, _ = Assignment.objects.get_or_create(
            participant=participant,
            study_item=item,
            defaults={
                "session": session,
                "position": participant.assignments.count(),
                "seen": bool(read),
                "status": Assignment.Status.SUBMITTED,
                "submitted_at": now,
                "version": {"imported": True},
            },
        )
        lookup: dict[str, Any] = {"assignment": assignment, "round": round_}
        if item.mc_item_id:
            lookup["mc_item_id"] = item.mc_item_id
        elif question is None:
            lookup["qa_item_id"] = item.qa_item_id
        else:
            lookup["question"] = question
        existing = ChoiceAnswer.objects.filter(**lookup).first()
        if existing is not None:
            if existing.option != option:
                raise ExchangeError(
                    f"{label} already has option {existing.option} stored for this item and round",
                    row=n,
                    field="option",
                )
            unchanged += 1
            continue
        if round_ == 2 and not ChoiceAnswer.objects.filter(assignment=assignment, round=1).exists():
            raise ExchangeError(
                "a revision needs the first answer (round 1) before it", row=n, field="round"
            )
        answered = _when(raw.get("answered_at"), row=n, field="answered_at") or now
        ms = _int(raw.get("ms"), row=n, field="ms", required=False, maximum=MAX_MS) or 0
        shown_at = _when(raw.get("shown_at"), row=n, field="shown_at") or answered
        first = ChoiceAnswer.objects.filter(assignment=assignment, round=1).first()
        if item.mc_item_id:
            golds = set(item.mc_item.answers or [])
        else:
            golds = {0 if question is None else cs.dyntom_gold_index(question)}
        ChoiceAnswer.objects.create(
            **lookup,
            option=option,
            shown=_int(
                raw.get("shown"), row=n, field="shown", required=False, maximum=n_options - 1
            )
            or option,
            kept=(first.option == option) if (round_ == 2 and first) else None,
            shown_at=shown_at,
            answered_at=answered,
            ms=ms,
            correct=option in golds,
        )
        created += 1
    return ImportResult(created, unchanged, new_people)
