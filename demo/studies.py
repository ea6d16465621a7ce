"""The demo's five live human studies, each with answers already in and invite links.

One per benchmark the demo covers: the "who is speaking?" scene study over the demo
film (ToM-in-AMC), the CharToM-QA read/not-read study over the two demo books, the
DynToM human baseline over the demo stage and a multiple-choice study over "Mini ToM",
the twelve items of a benchmark imported through a field mapping. Each is created,
launched and answered through the services the researcher's and the participants'
pages call: two demo participants (three for Mini ToM), labelled "... (answers
loaded)", answer from ``fixtures/demo/human_answers.json``, so every report has a human
row at once, and three more get invite links for whoever tries the demo. A fifth
study runs Mini ToM again with adaptive allocation ("balanced by category", issue 50),
ten participants' answers in, so its page shows the per-stratum table.

Each ``*_ensure`` returns ``(study, created)`` and leaves an existing study of its name
as it is.
"""

from __future__ import annotations

import json
import random
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchmarks.models import Benchmark, MCItem, QAItem, Work
from studies.choice.allocation import AllocationSpec
from studies.choice.generic import GenericSpec, generic_options
from studies.choice.services import (
    books_declare,
    chartom_options,
    choice_record,
    choice_study_create,
    design_apply,
    dyntom_questions,
    dyntom_stage_take,
    generic_batch_take,
    generic_order,
    option_order,
)
from studies.models import Assignment, Participant, Study, StudyWork
from studies.participation.services import (
    participant_consent,
    participant_finish,
    participants_invite,
)
from studies.participation.words import study_item_words
from studies.scene.cache import scene_speakers
from studies.scene.services import (
    familiarity_declare,
    history_confirm,
    rater_open_assignment,
    scene_shown,
    scene_submit,
)
from studies.services import study_create, study_launch

SCENE_STUDY = "Demo: who is speaking?"
CHARTOM_STUDY = "Demo: CharToM-QA, read the book or not"
DYNTOM_STUDY = "Demo: DynToM human baseline"
GENERIC_STUDY = "Demo: Mini ToM, a mapped benchmark"
GENERIC_WORK = "mini-tom@1"
BALANCED_STUDY = "Demo: Mini ToM, balanced by category"
BALANCED_ANSWERERS = 10  # loaded participants of 3 items each: past phase one (24 answers)
INVITES = 3  # links printed for whoever tries the demo
INVITE_LABEL = "demo invite"

CONSENT = (
    "This is a demonstration study of ToMLab with made-up stories written for the demo. "
    "Nothing you answer is used for research. Your answers are stored on this machine "
    "with a random participant code, never with your name. You may stop at any time, "
    "and ask for your answers to be deleted from the page at the end."
)


class DemoStudyError(ValueError):
    """The demo answers do not fit the study (a scene, code or question it lacks)."""


def human_answers(path: Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def invite_participants(study: Study) -> list[Participant]:
    """The study's printed invite links: unused ones first created by the demo."""
    return list(
        Participant.objects.filter(
            study=study, user__isnull=True, label__startswith=INVITE_LABEL
        ).order_by("pk")
    )


def _invite(study: Study) -> None:
    participants_invite(study=study, labels=[f"{INVITE_LABEL} {n}" for n in range(1, INVITES + 1)])


def _answerers(study: Study, answers: dict[str, Any]) -> list[tuple[Participant, Any]]:
    """One consented participant per demo answerer of the fixture, in its order."""
    labels = [label for label in answers if not label.startswith("_")]
    created = participants_invite(study=study, labels=labels)
    return [
        (participant_consent(participant=participant), answers[participant.label])
        for participant in created
    ]


# A demo participant reads at about this speed, and takes this long to answer an item
# on top of reading it: times a reader of the ledger believes (the services record the
# instant the demo loads them otherwise).
DEMO_WPM = 220
DEMO_ANSWER_SECONDS = (12, 40)


def _finish_with_believable_times(participant: Participant) -> None:
    """Spread the participant's answered items over a sitting, from their consent on:
    each item's words at ``DEMO_WPM`` plus an answering time drawn with a seed of the
    participant's label (the same on every load), then mark them finished."""
    words = study_item_words(study=participant.study)
    rng = random.Random(f"demo-times:{participant.label}")
    at = participant.consented_at
    rows = Assignment.objects.filter(participant=participant, submitted_at__isnull=False)
    for assignment in rows.order_by("position", "pk"):
        seconds = words.get(assignment.study_item_id, 0) * 60 / DEMO_WPM
        seconds += rng.uniform(*DEMO_ANSWER_SECONDS)
        shown, at = at, at + timedelta(seconds=seconds)
        Assignment.objects.filter(pk=assignment.pk).update(
            first_shown_at=shown,
            last_event_at=at,
            submitted_at=at,
            active_ms=round(seconds * 1000),
            total_ms=round(seconds * 1000),
        )
    participant_finish(participant=participant)


# --- "who is speaking?" (ToM-in-AMC) ---------------------------------------------------


def scene_study_ensure(*, answers: dict[str, Any]) -> tuple[Study | None, bool]:
    """The live scene study over the demo film: one-to-one, with a consent text."""
    study = Study.objects.filter(name=SCENE_STUDY).first()
    if study is not None:
        return study, False
    works = list(Work.objects.filter(benchmark="tom-in-amc").order_by("key")[:1])
    if not works:
        return None, False
    raters = answers["tom-in-amc"]
    study = study_create(
        name=SCENE_STUDY,
        benchmark="tom-in-amc",
        works=works,
        # The demo raters, the invite links, and the demo "rater" account joining.
        overlap=len(raters) + INVITES + 1,
        reveal=Study.Reveal.AFTER_SCENE,
        # The paper's task: two masked speakers of a scene are never the same person.
        one_to_one=True,
        open_join=True,  # its join link is on the demo rater's home page
        instructions=(
            "Read the first scenes of the film, then guess who each masked speaker "
            "(P0, P1, ...) is. Two masked speakers of one scene are never the same character."
        ),
        consent=CONSENT,
    )
    study = study_launch(study=study).study
    study_work = StudyWork.objects.get(study=study, work=works[0])
    for participant, rater in _answerers(study, raters):
        session = familiarity_declare(
            participant=participant, study_work=study_work, seen=rater["seen"]
        )
        history_confirm(participant=participant, session=session)
        while (assignment := rater_open_assignment(participant=participant)) is not None:
            scene_shown(participant=participant, assignment=assignment)
            scene = assignment.study_item.scene
            named = rater["scenes"].get(scene.source_id)
            if named is None:
                raise DemoStudyError(f"{participant.label}: no answers for {scene.source_id}")
            form = {}
            for speaker in scene_speakers(scene_id=scene.pk, version=study.item_set_hash):
                form[speaker.instance_id] = {
                    "choice": speaker.candidates.index(named[speaker.code])
                }
            scene_submit(
                participant=participant,
                assignment_id=assignment.pk,
                answers=form,
                history_needed=rater["needed_earlier_scenes"],
            )
        _finish_with_believable_times(participant)
    _invite(study)
    return study, True


# --- CharToM-QA: read the book or not --------------------------------------------------


def _chartom_answer(participant: Participant, assignment: Assignment, picks: list[int]) -> None:
    """First pick with the short window, then keep or change it after the long one."""
    item = QAItem.objects.get(pk=assignment.study_item.qa_item_id)
    order = option_order(assignment.option_seed or 0, len(chartom_options(item)))
    first, final = picks
    scene_shown(participant=participant, assignment=assignment)
    choice_record(
        participant=participant,
        assignment_id=assignment.pk,
        action="submit",
        shown=order.index(first),
    )
    choice_record(
        participant=participant,
        assignment_id=assignment.pk,
        action="keep" if final == first else "change",
        shown=order.index(final),
    )


def chartom_study_ensure(*, answers: dict[str, Any]) -> tuple[Study | None, bool]:
    """The live read/not-read study over both demo books, its design applied.

    Each demo reader has read one book, so the design gives them questions about the
    book they read and the one they did not; they answer their first few and leave the
    rest, which the design shares out again when an invited participant says which
    books they have read.
    """
    study = Study.objects.filter(name=CHARTOM_STUDY).first()
    if study is not None:
        return study, False
    works = list(Work.objects.filter(benchmark="chartom-qa").order_by("key"))
    if len(works) < 2:
        return None, False  # a design needs a book people have read and one they have not
    study = choice_study_create(
        name=CHARTOM_STUDY,
        benchmark="chartom-qa",
        works=works,
        questions=QAItem.objects.filter(work__in=works).count(),
        reveal=Study.Reveal.AFTER_SCENE,
        instructions=(
            "Say which of the two short stories you have read. Then answer each question "
            "about a character: first with a short passage, then with a longer one, when "
            "you may keep your answer or change it."
        ),
        consent=CONSENT,
    ).study
    study = study_launch(study=study).study
    readers = _answerers(study, answers["chartom-qa"])
    by_key = {work.key: work.pk for work in works}
    for participant, reader in readers:
        books_declare(participant=participant, read_work_ids={by_key[k] for k in reader["read"]})
    design_apply(study=study)
    for participant, reader in readers:
        assignments = Assignment.objects.filter(participant=participant).select_related(
            "study_item__qa_item"
        )
        # Read and not-read questions alternately, so what they leave is balanced too
        # and an invited participant always finds a pair to take (which questions the
        # design hands each reader first depends on their row id).
        ordered = list(assignments.order_by("position", "pk"))
        reads = [a for a in ordered if a.seen]
        others = [a for a in ordered if not a.seen]
        alternated = [a for pair in zip(reads, others, strict=False) for a in pair]
        for assignment in alternated[: reader["answer_first"]]:
            question = assignment.study_item.qa_item.question
            if question not in reader["picks"]:
                raise DemoStudyError(f"{participant.label}: no picks for {question!r}")
            _chartom_answer(participant, assignment, reader["picks"][question])
    _invite(study)
    return study, True


# --- DynToM human baseline --------------------------------------------------------------


def dyntom_study_ensure(*, answers: dict[str, Any]) -> tuple[Study | None, bool]:
    """The live DynToM baseline over the demo stage, two participants' answers in."""
    study = Study.objects.filter(name=DYNTOM_STUDY).first()
    if study is not None:
        return study, False
    works = list(Work.objects.filter(benchmark="dyntom").order_by("key")[:1])
    if not works:
        return None, False
    participants = answers["dyntom"]
    study = choice_study_create(
        name=DYNTOM_STUDY,
        benchmark="dyntom",
        works=works,
        stage_fraction=1,
        overlap=len(participants) + INVITES,
        reveal=Study.Reveal.AFTER_SCENE,
        instructions="Read the story, then answer each question about its characters.",
        consent=CONSENT,
    ).study
    study = study_launch(study=study).study
    study_work = StudyWork.objects.get(study=study)
    for participant, letters in _answerers(study, participants):
        assignment = dyntom_stage_take(participant=participant, study_work_id=study_work.pk)
        if assignment is None:
            raise DemoStudyError(f"{participant.label}: the demo stage had no room")
        scene_shown(participant=participant, assignment=assignment)
        for question in dyntom_questions(assignment.study_item):
            letter = letters.get(question.key)
            if letter is None:
                raise DemoStudyError(f"{participant.label}: no answer to {question.key}")
            choice_record(
                participant=participant,
                assignment_id=assignment.pk,
                action="submit",
                shown=ord(letter) - ord("a"),
                question_id=question.pk,
            )
        _finish_with_believable_times(participant)
    _invite(study)
    return study, True


# --- a benchmark imported through a field mapping ---------------------------------------


MINI_TOM_INSTRUCTIONS = (
    "Each item is a short story and a question about what a character thinks, "
    "feels or wants. Read the story, then choose the best answer."
)


def generic_study_ensure(*, answers: dict[str, Any]) -> tuple[Study | None, bool]:
    """The live multiple-choice study over Mini ToM: every item, options shuffled per
    participant, three participants' answers in (given as letters in each item's own
    order, picked on screen where the participant's shuffled order put them)."""
    study = Study.objects.filter(name=GENERIC_STUDY).first()
    if study is not None:
        return study, False
    work = Work.objects.filter(benchmark=Benchmark.GENERIC, key=GENERIC_WORK).first()
    if work is None:
        return None, False
    participants = answers["generic"]
    answerers = [label for label in participants if not label.startswith("_")]
    study = choice_study_create(
        name=GENERIC_STUDY,
        benchmark=Benchmark.GENERIC,
        works=[work],
        generic=GenericSpec(language="en", category_field="ability", shuffle_options=True),
        overlap=len(answerers) + INVITES,
        reveal=Study.Reveal.AT_END,
        instructions=MINI_TOM_INSTRUCTIONS,
        consent=CONSENT,
    ).study
    study = study_launch(study=study).study
    items = {item.pk: item for item in MCItem.objects.filter(work=work)}
    for participant, letters in _answerers(study, participants):
        assignments = generic_batch_take(participant=participant)
        if not assignments:
            raise DemoStudyError(f"{participant.label}: the demo study had no room")
        _answer_batch(study, participant, assignments, items, letters)
        _finish_with_believable_times(participant)
    _invite(study)
    return study, True


def _answer_batch(study, participant, assignments, items, letters: dict[str, str]) -> None:
    """Submit ``participant``'s pick (a letter per item id) for each assignment of a
    Mini ToM batch, as the item page would (shown, then the option in its shown order)."""
    for assignment in assignments:
        item = items[assignment.study_item.mc_item_id]
        letter = letters.get(item.item_id)
        if letter is None:
            raise DemoStudyError(f"{participant.label}: no answer to {item.item_id}")
        order = generic_order(study, assignment, len(generic_options(item, "en")))
        scene_shown(participant=participant, assignment=assignment)
        choice_record(
            participant=participant,
            assignment_id=assignment.pk,
            action="submit",
            shown=order.index(ord(letter) - ord("A")),
        )


def balanced_study_ensure(*, answers: dict[str, Any]) -> tuple[Study | None, bool]:
    """A multiple-choice study over Mini ToM whose answers go where they narrow the
    intervals (issue 50: allocation "balanced by category", strata by ability, phase
    one 2 answers per item, batches of 3 items, a budget of 4 answers per item). Ten
    participants' answers are in (30: phase one's 24, then six where the rule sent
    them), each answering with the picks of a Mini ToM demo participant in turn, so
    the study page shows every ability's interval and the answers left to reach ±5
    points with no shell step."""
    study = Study.objects.filter(name=BALANCED_STUDY).first()
    if study is not None:
        return study, False
    work = Work.objects.filter(benchmark=Benchmark.GENERIC, key=GENERIC_WORK).first()
    if work is None:
        return None, False
    picks = [value for label, value in answers["generic"].items() if not label.startswith("_")]
    study = choice_study_create(
        name=BALANCED_STUDY,
        benchmark=Benchmark.GENERIC,
        works=[work],
        generic=GenericSpec(language="en", category_field="ability", items_per_participant=3),
        allocation_spec=AllocationSpec(design="balanced", stratum_field="ability"),
        overlap=4,
        seed=50,
        reveal=Study.Reveal.AT_END,
        instructions=MINI_TOM_INSTRUCTIONS,
        consent=CONSENT,
    ).study
    study = study_launch(study=study).study
    items = {item.pk: item for item in MCItem.objects.filter(work=work)}
    labels = [f"demo participant {n} (answers loaded)" for n in range(1, BALANCED_ANSWERERS + 1)]
    people = participants_invite(study=study, labels=labels)
    for n, participant in enumerate(people):
        participant = participant_consent(participant=participant)
        letters = picks[n % len(picks)]
        _answer_batch(
            study, participant, generic_batch_take(participant=participant), items, letters
        )
        _finish_with_believable_times(participant)
    _invite(study)
    return study, True
