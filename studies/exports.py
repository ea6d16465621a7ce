"""The row-level exports of a study: one function per export, behind its CSV, its JSON
and the API (``studies.views.study_export``, ``studies.api``), so the three cannot differ.

Rows are flat dicts keyed by the export's columns; excluded participants
(``Participant.excluded_at``) are left out unless ``include_excluded``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import selectors
from .choice import exchange
from .choice.services import CHOICE_BENCHMARKS, GENERIC
from .models import Study, StudyTextVersion
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


def exit_export(study: Study, *, include_excluded: bool = False) -> Export:
    """The exit questionnaire, one row per participant and question of the version they
    answered, with that version's wording (exit.csv, exit.json and the API).

    Participants identified by id only: the label may be a name or an e-mail address.
    Answers from before versions were stored carry no version; the questions were
    never versioned then, so they answered version 1.
    """
    texts = {
        v.version: v.content
        for v in StudyTextVersion.objects.filter(
            study=study, kind=StudyTextVersion.Kind.EXIT_QUESTIONS
        )
    }
    # The current version needs no snapshot to be read: it is on the study.
    texts.setdefault(study.exit_questions_version, study.exit_questions)
    rows = []
    for entry in study_ledger(study=study):
        p = entry.participant
        # "Withdraw my data" empties the answers but keeps the time: nothing to export.
        if p.exit_done_at is None or p.data_withdrawn_at is not None:
            continue
        if p.excluded_at is not None and not include_excluded:
            continue
        version = p.exit_version or 1
        who = selectors.participant_fields(p)
        for question in texts.get(version, []):
            rows.append(
                {
                    "participant_id": p.pk,
                    "status": entry.status.key,
                    "withdrawn": who["withdrawn"],
                    "excluded": who["excluded"],
                    "exclusion_reason": who["exclusion_reason"],
                    "version": version,
                    "key": question["key"],
                    "question": question["label"],
                    "choices": " | ".join(question.get("choices") or []),
                    "answer": (p.exit_answers or {}).get(question["key"], ""),
                    "answered_at": p.exit_done_at.isoformat(),
                }
            )
    return Export(EXIT_COLUMNS, rows)
