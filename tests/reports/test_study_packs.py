"""Closed scene studies read from their packs (``reports.study_packs``, issue 51).

The study is ``test_human_tables``' (three counted raters, 18 counted answers: r1 7,
r2 7, r3 4; r3's scene C answered but not submitted). Each change that can alter the
figures (a new answer, an answer changed, an exclusion, a withdrawal, the study open
again) must reach the next report of a packed study.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.workspaces import workspace_create
from common.scoping import scoped_to
from reports.models import PackedStudy
from reports.tables import build_report
from studies.models import Assignment, Guess, Participant, Study
from studies.participation.ledger import participant_exclusion_override
from studies.participation.services import participant_withdraw
from studies.scene.services import scene_submit
from studies.services import study_close
from tests.reports.test_human_tables import HUMANS, _row, study  # noqa: F401
from tests.studies.conftest import friends  # noqa: F401

pytestmark = pytest.mark.django_db

# A query that reads the guesses' answers themselves (not only counts them).
ANSWER_READ = '"studies_guess"."answer"'


def _build(**kwargs: Any):
    with CaptureQueriesContext(connection) as queries:
        report = build_report("tvshowguess", seed=0, **kwargs)
    read = any(ANSWER_READ in q["sql"] for q in queries.captured_queries)
    return report, read


def _without_status(report) -> dict[str, Any]:
    """The report as JSON less the studies table's status (live, then closed)."""
    data = report.as_json()
    for table in data["tables"]:
        for record in table["rows"]:
            record.pop("Status", None)
    return data


def _answers(report) -> int:
    return report.facts["human_answers"]


def _accuracy(report) -> float:
    return _row(report.table("accuracy"), HUMANS)["Accuracy %"]


def test_a_closed_study_is_packed_once_and_gives_the_same_report(study):  # noqa: F811
    live, read = _build()
    assert read and not PackedStudy.objects.exists()  # a live study is read every time
    study_close(study=study)
    first, read = _build()
    assert read  # packed on first use
    assert PackedStudy.objects.filter(study=study, include_excluded=False).count() == 1
    again, read = _build()
    assert not read  # from the pack: no answer read
    assert _without_status(first) == _without_status(live)
    assert again.as_json() == first.as_json()
    assert _answers(again) == 18
    # Another counting rule is another pack.
    _, read = _build(include_excluded=True)
    assert read and PackedStudy.objects.filter(study=study).count() == 2


def test_an_exclusion_and_its_reversal_reach_a_packed_study(study):  # noqa: F811
    study_close(study=study)
    _build()
    r2 = study.raters["r2"]
    participant_exclusion_override(participant=r2, decision="exclude", reason="speeding")
    excluded, read = _build()
    assert read and _answers(excluded) == 11  # r2's 7 answers left out
    assert _build(include_excluded=True)[0].facts["human_answers"] == 18
    participant_exclusion_override(participant=r2, decision="include", reason="checked")
    back, read = _build()
    assert read and _answers(back) == 18


def test_a_withdrawal_deletes_the_packs_and_leaves_the_rater_out(study):  # noqa: F811
    study_close(study=study)
    _build()
    _build(include_excluded=True)
    participant_withdraw(participant=study.raters["r1"])
    assert not PackedStudy.objects.filter(study=study).exists()
    report, read = _build()
    assert read and _answers(report) == 11  # r1's 7 answers gone


def test_a_new_or_changed_answer_reaches_a_packed_study(study):  # noqa: F811
    study_close(study=study)
    before, _ = _build()
    # Written behind the flows (a closed study takes no answers): r3's scene C submitted.
    Assignment.objects.filter(
        participant=study.raters["r3"], status=Assignment.Status.ASSIGNED
    ).update(status=Assignment.Status.SUBMITTED, submitted_at=timezone.now())
    more, read = _build()
    assert read and _answers(more) == _answers(before) + 3
    # An answer changed in place: one of r1's right guesses made wrong.
    guess = Guess.objects.filter(assignment__participant=study.raters["r1"], correct=True).earliest(
        "pk"
    )
    Guess.objects.filter(pk=guess.pk).update(correct=False, updated_at=timezone.now())
    changed, read = _build()
    assert read and _answers(changed) == _answers(more)
    assert _accuracy(changed) < _accuracy(more)


def test_a_study_open_again_is_read_live_then_packed_when_closed(study):  # noqa: F811
    study_close(study=study)
    _build()
    # Reopened (as an operator would, in the database) and r3 finishes scene C.
    Study.objects.filter(pk=study.pk).update(status=Study.Status.LIVE)
    r3 = Participant.objects.get(pk=study.raters["r3"].pk)
    open_c = Assignment.objects.get(participant=r3, status=Assignment.Status.ASSIGNED)
    scene_submit(participant=r3, assignment_id=open_c.pk)
    live, read = _build()
    assert read and _answers(live) == 21
    study_close(study=Study.objects.get(pk=study.pk))
    closed, read = _build()
    assert read and _answers(closed) == 21  # packed again, with the new answers
    assert not _build()[1]


def test_one_request_counts_the_studies_answers_once_with_the_same_figures(study):  # noqa: F811
    from django.db.models import Count, Max, Q, Sum

    from reports import selectors

    participant_exclusion_override(
        participant=study.raters["r2"], decision="exclude", reason="speeding"
    )
    study_close(study=study)
    guesses = selectors._human_guesses([study.pk], include_excluded=True)
    every = guesses.aggregate(n=Count("pk"), last=Max("updated_at"))
    counted = selectors._human_guesses([study.pk]).count()
    people = Participant.objects.filter(study=study).aggregate(
        withdrawn=Count("pk", filter=Q(withdrawn_at__isnull=False)),
        excluded_ids=Sum("pk", filter=Q(excluded_at__isnull=False)),
    )
    assert counted == 11 < every["n"] == 18  # r2's 7 answers are excluded

    def figures():
        size = selectors.human_response_size("tvshowguess")
        return (
            selectors.counted_answer_counts("tvshowguess", [study.pk]),
            selectors.counted_answer_counts("tvshowguess", [study.pk], include_excluded=True),
            (size["human_answers"], size["last_human_answer"], size["studies"]),
            (size["withdrawn"], size["excluded"], size["excluded_ids"]),
            selectors.scene_study_sizes([study.pk])[study.pk]["human_answers"],
        )

    expected = (
        {study.pk: 11},
        {study.pk: 18},
        (18, every["last"], 1),
        (people["withdrawn"], 1, people["excluded_ids"]),
        18,
    )
    assert figures() == expected  # each read on its own
    with selectors.shared_reads(), CaptureQueriesContext(connection) as queries:
        assert figures() == expected
        selectors.study_choices("tvshowguess")
        build_report("tvshowguess", seed=0)
    counts = [q["sql"] for q in queries.captured_queries if 'COUNT("studies_guess"' in q["sql"]]
    assert len(counts) == 1, counts  # the guesses counted once for all of them


def test_closing_a_scene_study_queues_its_packing(study, django_capture_on_commit_callbacks):  # noqa: F811
    from common.models import QueuedJob
    from reports.study_packs import STUDY_PACK_TASK_NAME
    from reports.tasks import study_pack_task

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        study_close(study=study)
    job = QueuedJob.objects.get(task=STUDY_PACK_TASK_NAME)
    assert job.args == [study.pk] and len(callbacks) == 1  # sent once the close commits
    assert not PackedStudy.objects.exists()
    assert study_pack_task.apply(args=(study.pk,)).get() == "packed"
    assert PackedStudy.objects.filter(study=study, include_excluded=False).count() == 1
    report, read = _build()
    assert not read and _answers(report) == 18  # the first report reads the pack
    assert study_pack_task.apply(args=(study.pk,)).get() == "packed"  # a redelivery: no harm
    study.status = Study.Status.LIVE
    study.save(update_fields=["status"])
    assert study_pack_task.apply(args=(study.pk,)).get() == "skipped"


def test_the_answer_counts_read_only_the_requests_workspace(study):  # noqa: F811
    """The studies' answers are counted from their scene responses, which carry the
    workspace scope: another workspace counts none of them, even by the study's id."""
    from reports import selectors

    other = workspace_create(name="Another lab")
    with scoped_to(other.pk):
        assert selectors.counted_answer_counts("tvshowguess", [study.pk]) == {}
        assert selectors.scene_study_sizes([study.pk])[study.pk]["human_answers"] == 0
    with scoped_to(study.workspace_id):
        assert selectors.counted_answer_counts("tvshowguess", [study.pk]) == {study.pk: 18}
