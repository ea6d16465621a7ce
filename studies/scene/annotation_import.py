"""Published human annotations as a study: TVShowGuess's ``<show>.tsv`` as one finished rater.

The importer (``benchmarks/importers/tvshowguess.py``) reads a sheet (``friends.tsv``,
``tbbt.tsv``) by column position with its one reader, ``read_annotation_sheet``, and
keeps each row as a :class:`~benchmarks.models.SpeakerAnnotation`; this module reads
only those stored fields, so a sheet is read one way everywhere. :func:`annotations_as_study` turns
them into a closed, ``imported`` :class:`~studies.models.Study` with one participant,
"friends.tsv annotators (imported)", whose scenes are all submitted, so reports and
exports treat the published annotation like any rater's responses.

How the file's columns become a rater's answers (decided on the real ``friends.tsv``:
151 rows, 53 scenes, two rows for a scene that is not in ``friends.raw``):

- **Guessed Character Name** is filled for whole scenes or not at all (89 rows in 34
  scenes of ``friends.raw``; 60 rows in 19 scenes are blank). Where it is filled it is
  the annotators' guess (two rows, 09x03 2524 P0/P1, name the other candidate than the gold), so it
  becomes ``Guess.answer`` (in the candidate list's spelling; a qualifier such as
  tbbt.tsv's ``penny (abductive)`` is kept apart by the reader and noted) and ``correct`` is
  computed against the gold. Where it is blank the file records only evidence, not a
  guess: the answer stays blank and ``correct`` stays None, never filled from the gold.
- **need history** is per masked speaker in the file (yes/no; the release also uses
  "Unsolvable") but per scene in the study: the scene needed history if any of its
  speakers did (True), else None if any was unsolvable, else False. Each speaker's own
  value is kept in its evidence note.
- **Evidence-a1…c3 / Reasoning Type** name evidence kinds (history event,
  inside_scene(...), fact(...), personality, linguistic style) and reasoning kinds
  (multihop-..., commonsense). Only two are ToM dimensions of our tag set:
  personality -> personality and linguistic style -> linguistic. The rest are not
  mapped (calling them "other" would inflate that tag); the raw cells, with "Facts
  abstracted from memory", go into ``Guess.evidence``.
- The annotators drew on facts from memory of the show, so they count as having
  seen it. There is no timing, consent or history reading to record.
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from benchmarks.importers.tvshowguess import NEED_HISTORY_VALUES
from benchmarks.models import Scene, SpeakerAnnotation, Work

from ..errors import StudyError
from ..models import Assignment, Familiarity, Guess, Participant, Study, WorkSession
from ..services import item_set_hash, study_close, study_create

# The sheet's values as the importer's one sheet reader defines them.
NEED_HISTORY = NEED_HISTORY_VALUES
# Evidence kinds of the TVShowGuess release that are ToM dimensions of Table 3.
EVIDENCE_TAGS = {"personality": "personality", "linguistic style": "linguistic"}


def imported_label(source: str) -> str:
    """The imported participant's label, which also identifies the import."""
    return f"{source} annotators (imported)"


@dataclass(frozen=True)
class _Row:
    annotation: SpeakerAnnotation
    history_needed: bool | None

    @property
    def evidence_cells(self) -> list[str]:
        return [
            cell
            for group in self.annotation.evidence_groups
            for cell in [*group.get("evidence", []), group.get("reasoning", "")]
            if cell
        ]

    def tags(self, vocabulary: list[str]) -> list[str]:
        mapped = {
            EVIDENCE_TAGS[c.casefold()]
            for c in self.evidence_cells
            if c.casefold() in EVIDENCE_TAGS
        }
        return [t for t in vocabulary if t in mapped]

    def note(self, source: str) -> str:
        a = self.annotation
        parts = [
            f"{source} row {a.row_number}",
            f"need history: {a.need_history or '-'}",
            f"facts from memory: {a.facts_from_memory or '-'}",
        ]
        for block, group in zip("abc", a.evidence_groups, strict=False):
            cells = [c for c in group.get("evidence", []) if c]
            if cells or group.get("reasoning"):
                text = f"evidence {block}: {', '.join(cells) or '-'}"
                if group.get("reasoning"):
                    text += f" (reasoning: {group['reasoning']})"
                parts.append(text)
        if a.guess_qualifiers:
            parts.append(f"guess qualified as: {', '.join(a.guess_qualifiers)}")
        if self.history_needed is None:
            parts.append("the annotators marked this speaker unsolvable")
        return "; ".join(parts)

    def answer(self) -> str:
        """The guessed name in the candidate list's spelling; blank when none was given."""
        guessed = self.annotation.guessed_name.strip()
        for candidate in self.annotation.instance.candidates:
            if candidate.casefold() == guessed.casefold():
                return candidate
        return guessed


def _rows(work: Work, source: str) -> tuple[list[_Row], list[int]]:
    """The annotations that belong to a masked speaker, and the row numbers that do not."""
    annotations = (
        SpeakerAnnotation.objects.filter(work=work, source=source)
        .select_related("instance__gold_character", "instance__scene")
        .order_by("row_number")
    )
    rows: list[_Row] = []
    unmatched: list[int] = []
    for annotation in annotations:
        if annotation.instance_id is None:
            unmatched.append(annotation.row_number)
            continue
        value = annotation.need_history.strip().casefold()
        if value not in NEED_HISTORY:
            raise StudyError(
                f"{source} row {annotation.row_number}: need history is "
                f"{annotation.need_history!r}; expected yes, no or Unsolvable"
            )
        rows.append(_Row(annotation, NEED_HISTORY[value]))
    if not rows and not unmatched:
        raise StudyError(f"{work} has no {source} annotations; import the benchmark first")
    return rows, unmatched


def _scene_flag(values: list[bool | None]) -> bool | None:
    if any(v is True for v in values):
        return True
    if any(v is None for v in values):
        return None
    return False


@transaction.atomic
def annotations_as_study(*, work: Work, source: str = "friends.tsv") -> Study:
    """The ``source`` annotations of ``work`` as a closed study with one finished rater.

    Idempotent: a second call returns the study the first one made and writes nothing.
    """
    # Two imports at once must not both create a study: the work row serialises them.
    Work.objects.select_for_update().filter(pk=work.pk).first()
    label = imported_label(source)
    existing = (
        Study.objects.filter(imported=True, study_works__work=work, participants__label=label)
        .order_by("pk")
        .first()
    )
    if existing is not None:
        return existing
    rows, unmatched = _rows(work, source)
    by_scene: dict[int, list[_Row]] = defaultdict(list)
    for row in rows:
        by_scene[row.annotation.instance.scene_id].append(row)
    scenes = list(Scene.objects.filter(pk__in=by_scene).order_by("position"))
    study = study_create(
        name=f"{work.title}: {source} annotations (imported)",
        benchmark=work.benchmark,
        works=[work],
        scenes=scenes,
        overlap=1,
        imported=True,
        instructions=f"Published annotations from {source}, imported; not a live study.",
        sampling={"mode": "imported", "source": source, "unmatched_rows": unmatched},
    )
    study.item_set_hash = item_set_hash(study)
    study.save(update_fields=["item_set_hash", "updated_at"])
    study = study_close(study=study)

    now = timezone.now()
    participant = Participant.objects.create(
        study=study, label=label, token=secrets.token_urlsafe(32), finished_at=now
    )
    study_work = study.study_works.get()
    Familiarity.objects.create(participant=participant, work=work, seen=True)
    session = WorkSession.objects.create(
        participant=participant,
        study_work=study_work,
        seen=True,
        seed=0,
        history_confirmed_at=now,
        finished_at=now,
    )
    version = {"source": source, "item_set_hash": study.item_set_hash}
    study_items = list(study.study_items.order_by("position"))
    assignments = Assignment.objects.bulk_create(
        Assignment(
            participant=participant,
            session=session,
            study_item=study_item,
            position=position,
            seen=True,
            status=Assignment.Status.SUBMITTED,
            history_needed=_scene_flag([r.history_needed for r in by_scene[study_item.scene_id]]),
            submitted_at=now,
            version=version,
        )
        for position, study_item in enumerate(study_items)
    )
    guesses = []
    for assignment in assignments:
        for row in by_scene[assignment.study_item.scene_id]:
            instance = row.annotation.instance
            answer = row.answer()
            guesses.append(
                Guess(
                    assignment=assignment,
                    instance=instance,
                    answer=answer,
                    correct=(
                        answer.casefold() == instance.gold_character.name.casefold()
                        if answer
                        else None
                    ),
                    tags=row.tags(study.tags),
                    evidence=row.note(source),
                )
            )
    Guess.objects.bulk_create(guesses)
    return study
