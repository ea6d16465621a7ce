"""The speaker-guessing reports, table for table, against reports saved before the
report readers changed (issue 17: compact reads of 100k human answers).

``golden/*.json`` hold the whole report JSON (every table, note and chart) that the
previous builders made from the data built here; the builders must reproduce it
exactly, bootstrap intervals included. The data mixes what the faster readers treat
specially: two works with different genres, three studies (two with the same name, one
imported with no correctness), "can't tell" answers, scenes with and without the
history flag, an unsubmitted scene, a withdrawn rater, pinned per-scene times, and two
runs beside the humans (a second sample and an unparseable answer).

Run ids and study ids differ between databases and runs of the suite, so they are
replaced by their order (``RUN1``, ``STUDY2``) before comparing. When a change to a
table is intended, rewrite the files with ``TOMLAB_GOLDEN_WRITE=1`` and review the diff.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from benchmarks.models import Scene, SpeakerInstance, Work
from modeling.models import Prediction, Run
from reports.tables import build_report, report_json
from studies.models import Assignment, Study
from studies.participation.services import (
    participant_consent,
    participant_withdraw,
    participants_invite,
)
from studies.scene.services import (
    CANT_TELL,
    answers_record,
    familiarity_declare,
    history_confirm,
    scene_submit,
)
from studies.services import study_create, study_go_live
from tests.reports.test_tables import amc_set  # noqa: F401

pytestmark = pytest.mark.django_db

GOLDEN = Path(__file__).parent / "golden"


def _normalised(data: dict[str, Any], runs: list[int], studies: list[int]) -> dict[str, Any]:
    """The report JSON with run and study ids replaced by their order of creation."""
    text = json.dumps(data, sort_keys=True)
    for n, pk in enumerate(runs, start=1):
        text = text.replace(f'"#{pk} ', f'"#RUN{n} ')
    for n, pk in enumerate(studies, start=1):
        text = text.replace(f"(#{pk})", f"(#STUDY{n})")
    data = json.loads(text)
    ids = {pk: f"RUN{n}" for n, pk in enumerate(runs, start=1)}
    study_ids = {pk: f"STUDY{n}" for n, pk in enumerate(studies, start=1)}
    for table in data["tables"]:
        for record in table["rows"]:
            if table["key"] == "runs":
                record["Run"] = ids[record["Run"]]
            if table["key"] == "human-studies":
                record["ID"] = study_ids[record["ID"]]
    return data


def _check(name: str, data: dict[str, Any]) -> None:
    path = GOLDEN / f"{name}.json"
    if os.environ.get("TOMLAB_GOLDEN_WRITE"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    expected = json.loads(path.read_text())
    for table, saved in zip(data["tables"], expected["tables"], strict=True):
        assert table == saved, table["key"]  # one table at a time, for a readable diff
    assert data == expected


def _rate(study: Study, *, raters: int, rng: random.Random, withdraw: int | None = None):
    """Every invited rater declares familiarity with each work and answers its scenes.

    Answers are drawn from the candidates (sometimes "can't tell" where the study
    offers it), tags from the study's, the history flag is left unset on some scenes,
    and each rater's last scene of the last work stays unsubmitted.
    """
    invited = participants_invite(study=study, labels=[f"r{n}" for n in range(raters)])
    for n, participant in enumerate(invited):
        participant_consent(participant=participant)
        for study_work in study.study_works.order_by("position"):
            session = familiarity_declare(
                participant=participant, study_work=study_work, seen=rng.random() < 0.5
            )
            history_confirm(participant=participant, session=session)
        assignments = list(
            Assignment.objects.filter(participant=participant)
            .select_related("study_item")
            .order_by("session__study_work__position", "position")
        )
        for k, assignment in enumerate(assignments):
            instances = SpeakerInstance.objects.filter(
                scene_id=assignment.study_item.scene_id
            ).order_by("code")
            answers = {}
            for instance in instances:
                choice = rng.randrange(len(instance.candidates))
                if study.allow_cant_tell and rng.random() < 0.15:
                    choice = CANT_TELL
                tags = rng.sample(study.tags, k=rng.choice([0, 0, 1, 2]))
                answers[instance.pk] = {"choice": choice, "tags": tags}
            flag = rng.choice([True, False, None])
            if k == len(assignments) - 1:
                answers_record(
                    participant=participant, assignment_id=assignment.pk, answers=answers
                )
                continue
            scene_submit(
                participant=participant,
                assignment_id=assignment.pk,
                answers=answers,
                history_needed=flag,
            )
            # The server clocks real time; pinned so the time table is reproducible.
            total = rng.randrange(5_000, 200_000)
            Assignment.objects.filter(pk=assignment.pk).update(
                total_ms=total, active_ms=rng.randrange(1_000, total)
            )
        if n == withdraw:
            participant_withdraw(participant=participant)


@pytest.fixture
def speaker_data(shared_data, tmp_path) -> tuple[list[int], list[int]]:
    raw = shared_data / "tvshowguess" / "friends.raw"
    call_command("import_benchmark", "tvshowguess", str(raw), verbosity=0)
    copy = tmp_path / "friends_again.raw"
    shutil.copyfile(raw, copy)
    call_command("import_benchmark", "tvshowguess", str(copy), verbosity=0)
    friends = Work.objects.get(key="friends")
    again = Work.objects.get(key="friends_again")
    Work.objects.filter(pk=friends.pk).update(genres=["Comedy"])
    Work.objects.filter(pk=again.pk).update(genres=["Drama", "Comedy"])
    works = [friends, again]

    def scenes(work: Work, count: int) -> list[Scene]:
        return list(
            Scene.objects.filter(work=work, part="testing", instances__isnull=False)
            .distinct()
            .order_by("position")[:count]
        )

    rng = random.Random(17)
    guessing = study_go_live(
        study=study_create(
            name="Friends guessing",
            benchmark="tvshowguess",
            works=works,
            scenes=scenes(friends, 6) + scenes(again, 4),
            overlap=5,
            allow_cant_tell=True,
        )
    )
    _rate(guessing, raters=7, rng=rng, withdraw=3)
    again_study = study_go_live(
        study=study_create(
            name="Friends guessing",
            benchmark="tvshowguess",
            works=[friends],
            scenes=scenes(friends, 8)[3:],
            overlap=3,
        )
    )
    _rate(again_study, raters=3, rng=rng)
    imported = study_go_live(
        study=study_create(
            name="Published notes",
            benchmark="tvshowguess",
            works=[friends],
            scenes=scenes(friends, 3),
            overlap=2,
            imported=True,
        )
    )
    for participant in participants_invite(study=imported, labels=["a1", "a2"]):
        participant_consent(participant=participant)
        session = familiarity_declare(
            participant=participant, study_work=imported.study_works.get(), seen=True
        )
        history_confirm(participant=participant, session=session)
        for assignment in Assignment.objects.filter(participant=participant).select_related(
            "study_item"
        ):
            answers = {
                i.pk: {"choice": rng.randrange(len(i.candidates)), "tags": ["belief"]}
                for i in SpeakerInstance.objects.filter(scene_id=assignment.study_item.scene_id)
            }
            answers_record(
                participant=participant,
                assignment_id=assignment.pk,
                answers=answers,
                history_needed=rng.random() < 0.5,
            )
    study_create(name="Draft", benchmark="tvshowguess", works=[friends])  # never counted

    runs = []
    instances = list(SpeakerInstance.objects.order_by("scene__work_id", "scene_id", "code"))
    for name, share in (("A", 0.9), ("B", 0.8)):
        run = Run.objects.create(
            name=name, benchmark="tvshowguess", method="vanilla", model=f"{name}-model"
        )
        runs.append(run.pk)
        for n, instance in enumerate(instances[: int(len(instances) * share)]):
            unparseable = n % 23 == 0
            Prediction.objects.create(
                run=run,
                speaker_instance=instance,
                correct=False if unparseable else rng.random() < 0.6,
                parse_status="unparseable" if unparseable else "ok",
            )
            if name == "A" and n % 5 == 0:
                Prediction.objects.create(
                    run=run, speaker_instance=instance, correct=True, sample_index=1
                )
    return runs, [guessing.pk, again_study.pk, imported.pk]


def test_tvshowguess_report_matches_the_saved_report(speaker_data):
    runs, studies = speaker_data
    data = _normalised(report_json(build_report("tvshowguess", seed=3)), runs, studies)
    assert data["facts"]["studies"] == 3 and data["facts"]["runs"] == 2
    _check("tvshowguess", data)


def test_tvshowguess_report_of_humans_alone_matches(speaker_data):
    runs, studies = speaker_data
    report = build_report("tvshowguess", run_ids=[], study_ids=studies[:1])
    _check("tvshowguess-one-study", _normalised(report_json(report), runs, studies))


def test_tvshowguess_report_of_runs_and_one_study_matches(speaker_data):
    # Compared over both works, so two genres and three systems: the genre correlation.
    runs, studies = speaker_data
    report = build_report("tvshowguess", study_ids=studies[:1], seed=5)
    assert "genre-correlation" in {t.key for t in report.tables}
    _check("tvshowguess-runs-one-study", _normalised(report_json(report), runs, studies))


def test_tom_in_amc_report_matches_the_saved_report(amc_set):  # noqa: F811
    runs = [run.pk for run in amc_set]
    _check("tom-in-amc", _normalised(report_json(build_report("tom-in-amc")), runs, []))
