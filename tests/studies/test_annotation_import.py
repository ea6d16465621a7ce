"""The published friends.tsv annotations as a finished rater of an imported study."""

from __future__ import annotations

import shutil
from collections import defaultdict

import pytest
from django.core.management import call_command

from benchmarks.models import SpeakerAnnotation, Work
from studies.errors import StudyError
from studies.models import (
    Assignment,
    Familiarity,
    Guess,
    Participant,
    Study,
    StudyItem,
    WorkSession,
)
from studies.scene.annotation_import import annotations_as_study
from studies.scene.services import participant_score

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("friends")]

STUDY_MODELS = (Study, StudyItem, Participant, Familiarity, WorkSession, Assignment, Guess)


def _counts() -> dict[str, int]:
    return {m.__name__: m.objects.count() for m in STUDY_MODELS}


def test_friends_tsv_becomes_a_finished_raters_answers(friends):
    study = annotations_as_study(work=friends, source="friends.tsv")
    assert (study.status, study.imported, study.benchmark) == ("closed", True, "tvshowguess")
    assert study.sampling["unmatched_rows"] == [150, 151]  # 09x05 2562 is not in friends.raw
    (rater,) = study.participants.all()
    assert rater.label == "friends.tsv annotators (imported)" and rater.finished_at
    assert Familiarity.objects.get(participant=rater).seen is True

    assignments = Assignment.objects.filter(participant=rater).select_related("study_item__scene")
    assert assignments.count() == 53 == study.study_items.count()
    assert {a.status for a in assignments} == {"submitted"}
    assert {a.version["source"] for a in assignments} == {"friends.tsv"}
    assert {a.version["item_set_hash"] for a in assignments} == {study.item_set_hash}
    assert len(study.item_set_hash) == 64

    # The flag per scene: needed history if any of its speakers did (file: per speaker).
    rows = SpeakerAnnotation.objects.filter(work=friends, instance__isnull=False)
    needed = defaultdict(bool)
    for row in rows:
        needed[row.scene_source_id] |= row.need_history == "yes"
    flags = {a.study_item.scene.source_id: a.history_needed for a in assignments}
    assert flags == dict(needed)
    assert sum(flags.values()) == 27

    guesses = Guess.objects.filter(assignment__participant=rater).select_related(
        "instance__gold_character", "instance__scene"
    )
    assert guesses.count() == 149 == rows.count()
    named = [g for g in guesses if g.answer]
    assert len(named) == 89
    # Blank "Guessed Character Name": no answer, never the gold, correctness unknown.
    assert {g.correct for g in guesses if not g.answer} == {None}
    wrong = sorted(
        (g.instance.scene.source_id, g.instance.code, g.answer) for g in named if not g.correct
    )
    assert wrong == [("09x03 2524", "P0", "ross"), ("09x03 2524", "P1", "rachel")]
    assert all(g.answer in g.instance.candidates for g in named)  # candidate spelling

    # Tags only where the evidence names a ToM dimension; the raw cells stay in the note.
    by_row = {}
    for g in guesses:
        number = int(g.evidence.split(";")[0].removeprefix("friends.tsv row "))
        by_row[number] = g
    for row in rows:
        cells = [c for group in row.evidence_groups for c in group["evidence"] if c]
        guess = by_row[row.row_number]
        expected = [
            tag
            for tag, cell in (("personality", "personality"), ("linguistic", "linguistic style"))
            if cell in cells
        ]
        assert guess.tags == expected
        assert all(cell in guess.evidence for cell in cells)
        assert f"need history: {row.need_history}" in guess.evidence
    assert sum("personality" in g.tags for g in guesses) == 15

    score = participant_score(participant=rater)
    assert (score.speakers_correct, score.speakers) == (87, 89)
    assert (score.scenes_correct, score.scenes) == (33, 34)


def test_importing_twice_creates_nothing_new(friends):
    first = annotations_as_study(work=friends)
    before = _counts()
    again = annotations_as_study(work=friends)
    assert again.pk == first.pk
    assert _counts() == before
    assert before["Guess"] == 149


def _import_copy(tmp_path, shared_data, edit_row: int, value: str) -> Work:
    """friends.raw and a friends.tsv whose row ``edit_row`` has need history ``value``."""
    source = shared_data / "tvshowguess"
    shutil.copyfile(source / "friends.raw", tmp_path / "friends.raw")
    lines = (source / "friends.tsv").read_text(encoding="utf-8").split("\n")
    cells = lines[edit_row].split("\t")
    cells[1] = value
    lines[edit_row] = "\t".join(cells)
    (tmp_path / "friends.tsv").write_text("\n".join(lines), encoding="utf-8")
    call_command("import_benchmark", "tvshowguess", str(tmp_path / "friends.raw"), verbosity=0)
    return Work.objects.get(benchmark="tvshowguess", key="friends")


def test_an_unsolvable_speaker_leaves_the_flag_unknown_with_a_note(tmp_path, shared_data):
    # Row 19 is 09x01 2504 P0; its scene's other speaker (row 20) says "no".
    work = _import_copy(tmp_path, shared_data, edit_row=19, value="Unsolvable")
    study = annotations_as_study(work=work)
    assignment = Assignment.objects.get(
        participant__study=study, study_item__scene__source_id="09x01 2504"
    )
    assert assignment.history_needed is None
    notes = {g.instance.code: g.evidence for g in assignment.guesses.all()}
    assert "unsolvable" in notes["P0"] and "unsolvable" not in notes["P1"]


def test_an_unknown_need_history_value_is_refused_and_nothing_written(tmp_path, shared_data):
    work = _import_copy(tmp_path, shared_data, edit_row=19, value="maybe")
    with pytest.raises(StudyError, match="row 19: need history is 'maybe'"):
        annotations_as_study(work=work)
    assert _counts() == dict.fromkeys(_counts(), 0)


def test_a_work_without_those_annotations_is_refused(friends):
    with pytest.raises(StudyError, match=r"no tbbt\.tsv annotations"):
        annotations_as_study(work=friends, source="tbbt.tsv")
    assert not Study.objects.exists()


def test_a_tbbt_shaped_sheet_is_read_the_same_way(tmp_path):
    from tests.benchmarks.tbbt_sheet import write_tbbt

    call_command(
        "import_benchmark", "tvshowguess", str(write_tbbt(tmp_path)), "--no-progress", verbosity=0
    )
    work = Work.objects.get(key="tbbt")

    study = annotations_as_study(work=work, source="tbbt.tsv")

    guesses = {
        (g.instance.scene.source_id, g.instance.code): g
        for g in Guess.objects.filter(assignment__participant__study=study).select_related(
            "instance__scene"
        )
    }
    assert len(guesses) == 6
    # "penny (abductive)": the reader kept the name apart from its qualifier, so the
    # guess is the candidate and correct; the qualifier is in the note.
    penny = guesses[("08x01 100", "P1")]
    assert (penny.answer, penny.correct) == ("penny", True)
    assert "guess qualified as: abductive" in penny.evidence
    flags = {
        a.study_item.scene.source_id: a.history_needed
        for a in Assignment.objects.filter(participant__study=study)
    }
    # 08x01 101 has an Unsolvable speaker and no "yes": unknown, not False.
    assert flags == {"08x01 100": True, "08x01 101": None, "08x01 102": True}
