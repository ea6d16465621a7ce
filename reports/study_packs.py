"""Closed scene studies' human answers packed for their reports (issue 51).

A TVShowGuess report at scale reads 100,000 human answers, sorted in the order the
bootstraps need, at every first build: most of its time. A closed study's answers no
longer grow, so each is read once and kept as one :class:`~reports.models.PackedStudy`
row per counting rule (excluded participants left out, or counted): the rows of
``selectors.human_answer_columns`` and ``selectors.human_response_rows`` for that
study, as columns (integer arrays, JSON for the rest), compressed.
``speaker_outcomes.human_answers`` reads a packed study from its pack and any other
study from the tables, into the same columns.

A pack is used only while its study is closed and its fingerprint
(``selectors.scene_study_sizes`` of it: the answers' count and latest change,
withdrawals, exclusions and their ids) is the database's: a new answer, an
answer changed, an exclusion or its reversal, a withdrawal or a study no longer
closed make it stale, and it is packed again on first use. A withdrawal also deletes
the study's packs at once (``reports.hooks``), as they hold the participant's answers.
"""

from __future__ import annotations

import hashlib
import json
import sys
import zlib
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from common.tasks import task_send_on_commit
from studies.models import Study

from . import selectors
from .models import PackedStudy

# Bumped when what a pack holds changes: every older pack is then stale.
PACK_FORMAT = 1
STUDY_PACK_TASK_NAME = "reports.study_pack"


@dataclass(frozen=True)
class StudyAnswers:
    """One study's counted answers as ``human_answer_columns`` gives them (its study id
    column left out), in that order, and its ``human_response_rows``."""

    responses: list[int]
    instances: list[int]
    answers: list[str]
    correct: list[bool | None]
    tags: list[str | None]  # JSON text, as the selector gives it
    response_rows: list[tuple[Any, ...]]


def _fingerprints(study_ids: list[int], include_excluded: bool) -> dict[int, str]:
    sizes = selectors.scene_study_sizes(study_ids)
    return {
        pk: hashlib.sha1(
            repr((PACK_FORMAT, include_excluded, sorted(size.items()))).encode()
        ).hexdigest()
        for pk, size in sizes.items()
    }


def _read(study_id: int, include_excluded: bool) -> StudyAnswers:
    rows = list(selectors.human_answer_columns([study_id], include_excluded=include_excluded))
    _, responses, instances, answers, correct, tags = (
        (list(column) for column in zip(*rows, strict=True)) if rows else ([] for _ in range(6))
    )
    return StudyAnswers(
        responses=responses,
        instances=instances,
        answers=answers,
        correct=correct,
        tags=tags,
        response_rows=list(
            selectors.human_response_rows([study_id], include_excluded=include_excluded)
        ),
    )


def _codes(values: list[Any]) -> tuple[list[Any], list[int]]:
    """(distinct values in first-seen order, each value's code): a study's answers
    name a few dozen characters and carry a handful of tag lists."""
    distinct = {value: code for code, value in enumerate(dict.fromkeys(values))}
    return list(distinct), list(map(distinct.__getitem__, values))


# Correctness as one byte per answer: its code is the index here.
CORRECT = (None, False, True)
# The answer columns held as machine integers (a JSON list of 100,000 numbers took
# longer to parse than the rest of the pack), then the header's JSON.
_ARRAYS = ("responses", "instances", "answers", "tags", "correct")


def _encode(answers: StudyAnswers) -> bytes:
    answer_values, answer_codes = _codes(answers.answers)
    tag_values, tag_codes = _codes(answers.tags)
    arrays = {
        "responses": array("q", answers.responses),
        "instances": array("q", answers.instances),
        "answers": array("q", answer_codes),
        "tags": array("q", tag_codes),
        "correct": array("b", map(CORRECT.index, answers.correct)),
    }
    header = {
        "byteorder": sys.byteorder,
        "lengths": [len(arrays[name]) for name in _ARRAYS],
        "answer_values": answer_values,
        "tag_values": tag_values,
        "response_columns": [list(column) for column in zip(*answers.response_rows, strict=True)],
    }
    head = json.dumps(header, separators=(",", ":")).encode()
    body = b"".join(arrays[name].tobytes() for name in _ARRAYS)
    return zlib.compress(len(head).to_bytes(8, "little") + head + body, 1)


def _decode(data: bytes) -> StudyAnswers:
    raw = zlib.decompress(data)
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + size])
    columns: dict[str, list[int]] = {}
    offset = 8 + size
    for name, length in zip(_ARRAYS, header["lengths"], strict=True):
        column = array("b" if name == "correct" else "q")
        end = offset + length * column.itemsize
        column.frombytes(raw[offset:end])
        if header["byteorder"] != sys.byteorder:
            column.byteswap()
        columns[name], offset = column.tolist(), end
    return StudyAnswers(
        responses=columns["responses"],
        instances=columns["instances"],
        answers=list(map(header["answer_values"].__getitem__, columns["answers"])),
        correct=list(map(CORRECT.__getitem__, columns["correct"])),
        tags=list(map(header["tag_values"].__getitem__, columns["tags"])),
        response_rows=list(zip(*header["response_columns"], strict=True)),
    )


def packed_study_answers(
    study_ids: Iterable[int], *, include_excluded: bool = False
) -> dict[int, StudyAnswers]:
    """The answers of the closed studies among ``study_ids`` (scene studies, whose
    status the caller read), from their packs, packing (and storing) any that is
    missing or stale. The status is read again here: a study no longer closed is
    absent, as are the others (the caller reads them from the tables)."""
    candidates = list(study_ids)
    if not candidates:
        return {}
    closed = list(
        Study.objects.filter(pk__in=candidates, status=Study.Status.CLOSED)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    if not closed:
        return {}
    # Before the read: an answer written while it reads leaves the pack stale.
    fingerprints = _fingerprints(closed, include_excluded)
    stored = {
        row.study_id: row
        for row in PackedStudy.objects.filter(
            study_id__in=closed, include_excluded=include_excluded
        )
    }
    result: dict[int, StudyAnswers] = {}
    for study_id in closed:
        row = stored.get(study_id)
        if row is not None and row.fingerprint == fingerprints[study_id]:
            result[study_id] = _decode(bytes(row.data))
            continue
        answers = _read(study_id, include_excluded)
        PackedStudy.objects.bulk_create(
            [
                PackedStudy(
                    study_id=study_id,
                    include_excluded=include_excluded,
                    fingerprint=fingerprints[study_id],
                    data=_encode(answers),
                )
            ],
            update_conflicts=True,
            unique_fields=["study", "include_excluded"],
            update_fields=["fingerprint", "data", "packed_at"],
        )
        result[study_id] = answers
    return result


def study_packs_delete(*, study_id: int) -> None:
    """Forget a study's packs (a participant withdrew: their answers must not stay)."""
    PackedStudy.objects.filter(study_id=study_id).delete()


def study_pack_queue(*, study_id: int) -> None:
    """Pack a study that has just closed, in a worker once the close commits, so its
    first report reads the pack instead of packing it (``reports.hooks``)."""
    task_send_on_commit(STUDY_PACK_TASK_NAME, (study_id,))


def study_pack_build(*, study_id: int) -> str:
    """The study's pack under the reports' default counting rule (excluded left out),
    built unless a current one is stored; "skipped" for a study no longer closed."""
    packed = packed_study_answers([study_id], include_excluded=False)
    return "packed" if study_id in packed else "skipped"
