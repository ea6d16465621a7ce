"""The row-level exports of a study: one function per export, behind its CSV, its JSON
and the API (``studies.views.study_export``, ``studies.api``), so the three cannot differ.

Rows are flat dicts keyed by the export's columns; excluded participants
(``Participant.excluded_at``) are left out unless ``include_excluded``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from . import selectors
from .choice import exchange
from .choice.services import CHOICE_BENCHMARKS, GENERIC
from .models import Study, StudyTextVersion
from .participation import questionnaire
from .participation.ledger import study_ledger


@dataclass(frozen=True)
class Export:
    """A row-level export: its columns in order and its rows (dicts keyed by them)."""

    columns: list[str]
    rows: Iterable[dict[str, Any]]


def response_export(study: Study, *, include_excluded: bool = False) -> Export:
    """The study's answers, one row each, for responses.csv/.json and the API: masked
    speakers for scene studies, picks for multiple-choice ones (a mapped benchmark's
    with its item id, categories and option letters: ``exchange.generic_columns``)."""
    if study.benchmark == GENERIC:
        return Export(
            exchange.generic_columns(study),
            exchange.generic_rows_export(study, include_excluded=include_excluded),
        )
    if study.benchmark in CHOICE_BENCHMARKS:
        return Export(
            exchange.COLUMNS, exchange.rows_export(study, include_excluded=include_excluded)
        )
    return Export(
        selectors.RESPONSE_COLUMNS,
        selectors.response_rows(study, include_excluded=include_excluded),
    )


EXIT_COLUMNS = [
    "participant_id",
    "status",
    "withdrawn",
    "excluded",
    "exclusion_reason",
    "version",
    "key",
    "question",
    "choices",
    "answer",
    "answered_at",
]


def _exit_versions(study: Study) -> dict[int, list[dict[str, Any]]]:
    """Every version of the exit questions, by number."""
    texts = {
        v.version: v.content
        for v in StudyTextVersion.objects.filter(
            study=study, kind=StudyTextVersion.Kind.EXIT_QUESTIONS
        )
    }
    # The current version needs no snapshot to be read: it is on the study.
    texts.setdefault(study.exit_questions_version, study.exit_questions)
    return texts


def _exit_answerers(study: Study, *, include_excluded: bool) -> Iterator[tuple[Any, int]]:
    """The ledger's entries of participants whose exit answers are exported, each with
    the version they answered. Answers from before versions were stored carry no
    version; the questions were never versioned then, so they answered version 1."""
    for entry in study_ledger(study=study):
        p = entry.participant
        # "Withdraw my data" empties the answers but keeps the time: nothing to export.
        if p.exit_done_at is None or p.data_withdrawn_at is not None:
            continue
        if p.excluded_at is not None and not include_excluded:
            continue
        yield entry, p.exit_version or 1


def exit_export(study: Study, *, include_excluded: bool = False) -> Export:
    """The exit questionnaire, one row per participant and question of the version they
    answered (a grid: one per statement, key ``q4_1``…; a multiple choice's ticks joined
    with " | "), with that version's wording (exit.csv, exit.json and the API).

    Participants identified by id only: the label may be a name or an e-mail address.
    """
    texts = _exit_versions(study)
    rows = []
    for entry, version in _exit_answerers(study, include_excluded=include_excluded):
        p = entry.participant
        who = selectors.participant_fields(p)
        for answer in questionnaire.long_answers(texts.get(version, []), p.exit_answers or {}):
            rows.append(
                {
                    "participant_id": p.pk,
                    "status": entry.status.key,
                    "withdrawn": who["withdrawn"],
                    "excluded": who["excluded"],
                    "exclusion_reason": who["exclusion_reason"],
                    "version": version,
                    **answer,
                    "answered_at": p.exit_done_at.isoformat(),
                }
            )
    return Export(EXIT_COLUMNS, rows)


EXIT_WIDE_COLUMNS = [
    "participant_id",
    "status",
    "withdrawn",
    "excluded",
    "exclusion_reason",
    "version",
    "answered_at",
]


def _exit_columns(texts: dict[int, list[dict[str, Any]]], current: int) -> list[str]:
    """The answer columns of every version: the current version's in order, then those
    only older versions have (a question since removed)."""
    names: dict[str, None] = {}
    for version in [current, *sorted(texts, reverse=True)]:
        names.update((c.name, None) for c in questionnaire.columns(texts.get(version, [])))
    return list(names)


def exit_wide_export(study: Study, *, include_excluded: bool = False) -> Export:
    """The exit questionnaire, one row per participant and one column per item
    (exit-wide.csv/.json): ``q1``…; a grid, one column a statement (``q4_1``…, the
    point chosen); a multiple choice, one column an option (``q3_1``…: 1 ticked, 0 not,
    empty when nothing was ticked). Empty: not answered, or not shown (its condition
    unmet). The codebook (``exit_codebook``) gives each column's question."""
    texts = _exit_versions(study)
    answer_columns = _exit_columns(texts, study.exit_questions_version)
    rows = []
    for entry, version in _exit_answerers(study, include_excluded=include_excluded):
        p = entry.participant
        who = selectors.participant_fields(p)
        cells = questionnaire.cells(texts.get(version, []), p.exit_answers or {})
        row = {
            "participant_id": p.pk,
            "status": entry.status.key,
            "withdrawn": who["withdrawn"],
            "excluded": who["excluded"],
            "exclusion_reason": who["exclusion_reason"],
            "version": version,
            "answered_at": p.exit_done_at.isoformat(),
        }
        rows.append(row | {name: cells.get(name, "") for name in answer_columns})
    return Export(EXIT_WIDE_COLUMNS + answer_columns, rows)


CODEBOOK_COLUMNS = [
    "column",
    "version",
    "key",
    "type",
    "question",
    "part",
    "values",
    "required",
    "shown_if",
]
_WIDE_MEANINGS = {
    "participant_id": "the participant's id (the label is never exported)",
    "status": "the participant ledger's status",
    "withdrawn": "withdrew from the study (true/false)",
    "excluded": "excluded from reports (true/false)",
    "exclusion_reason": "why, when excluded",
    "version": "version of the exit questions answered",
    "answered_at": "when the questionnaire was sent (ISO 8601)",
}


def exit_codebook(study: Study, *, include_excluded: bool = False) -> Export:
    """What each column of exit-wide.csv holds (exit-codebook.csv/.json): the
    participant columns, then each version's items with their question text, the
    statement or option a column stands for, the values it takes, and whether it was
    required or shown only on a condition. ``include_excluded`` changes nothing here;
    it is taken so that every export is called alike."""
    texts = _exit_versions(study)
    blank = dict.fromkeys(CODEBOOK_COLUMNS, "")
    rows = [blank | {"column": name, "question": text} for name, text in _WIDE_MEANINGS.items()]
    for version in sorted(texts):
        for c in questionnaire.columns(texts[version]):
            rows.append(
                {
                    "column": c.name,
                    "version": version,
                    "key": c.key,
                    "type": c.type,
                    "question": c.question,
                    "part": c.part,
                    "values": c.values,
                    "required": c.required,
                    "shown_if": c.shown_if,
                }
            )
    return Export(CODEBOOK_COLUMNS, rows)
