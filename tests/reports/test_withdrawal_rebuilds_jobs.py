"""A withdrawal reaches the report jobs stored before it (issue 26, item 6).

The live report pages left a withdrawn participant out, but a report job's stored
result (its page, ``export.<fmt>`` and each table's CSV) still served their row. Now
a withdrawal deletes the stored results that could hold it, queues those jobs to be
built again, the job says "rebuilt after a withdrawal", and the participant's ledger
records when.
"""

from __future__ import annotations

import io
import zipfile

import pytest
from django.urls import reverse

from reports import services
from reports.models import ReportJob
from studies.choice import services as cs
from studies.participation.services import (
    participant_consent,
    participant_withdraw,
    participants_invite,
)
from studies.services import study_launch
from tests.factories import DynToMQuestionFactory, DynToMStageFactory
from tests.page_text import without_tokens

pytestmark = pytest.mark.django_db


@pytest.fixture
def dyntom_people():
    """A DynToM human baseline answered by Zoe (2/2) and Bob (1/2)."""
    stage = DynToMStageFactory()
    questions = [DynToMQuestionFactory(stage=stage, gold_letter="b") for _ in range(2)]
    study = cs.choice_study_create(
        name="Baseline", benchmark="dyntom", works=[stage.work], stage_fraction=1, overlap=2
    ).study
    study_launch(study=study)
    people = participants_invite(study=study, labels=["Zoe", "Bob"])
    for p, picks in zip(people, ([1, 1], [1, 0]), strict=True):
        participant_consent(participant=p)
        x = cs.dyntom_stage_take(participant=p, study_work_id=study.study_works.get().pk)
        for q, shown in zip(questions, picks, strict=True):
            cs.choice_record(
                participant=p, assignment_id=x.pk, action="submit", shown=shown, question_id=q.pk
            )
    return study, people


def _built_job(benchmark: str = "dyntom") -> ReportJob:
    job = services.report_job_create(benchmark=benchmark, enqueue=False)
    assert services.report_job_execute(job_id=job.pk) == ReportJob.Status.SUCCEEDED
    return job


def _exports(client, job: ReportJob) -> dict[str, str]:
    """What the job serves: its page, the tables zip, the xlsx and one table's CSV."""
    out = {"page": client.get(reverse("reports:job", args=[job.pk]))}
    for fmt in ("csv", "xlsx"):
        out[fmt] = client.get(reverse("reports:job-export", args=[job.pk, fmt]))
    out["table"] = client.get(reverse("reports:job-table-csv", args=[job.pk, "human-participants"]))
    return out


def _zip_text(response) -> str:
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        return archive.read("human-participants.csv").decode()


def test_withdrawing_data_empties_and_rebuilds_the_stored_job(
    client, researcher, dyntom_people, django_capture_on_commit_callbacks
):
    study, (ann, _bob) = dyntom_people
    job = _built_job()
    other = _built_job("tom-in-amc")  # another benchmark's job holds nobody of this study
    client.force_login(researcher)
    before = _exports(client, job)
    assert "Zoe" in _zip_text(before["csv"]) and "Zoe" in before["table"].content.decode()

    # Zoe withdraws her data through her own page.
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        client.post(reverse("rater:withdraw", args=[ann.token]))
    client.force_login(researcher)  # the rater page used the same client
    job.refresh_from_db()
    assert job.status == ReportJob.Status.QUEUED and job.result is None
    assert job.rebuilt_after_withdrawal_at is not None
    assert len(callbacks) == 1  # the rebuild is queued once the withdrawal commits
    other.refresh_from_db()
    assert other.status == ReportJob.Status.SUCCEEDED and other.rebuilt_after_withdrawal_at is None

    # Nothing stored serves her row any more, while the job waits for a worker.
    waiting = _exports(client, job)
    for fmt in ("csv", "xlsx", "table"):
        assert waiting[fmt].status_code == 404
    assert "Zoe" not in waiting["page"].content.decode()
    assert "after a withdrawal" in waiting["page"].content.decode()
    ann.refresh_from_db()
    assert ann.report_jobs_rebuilt_at is not None and ann.report_jobs_rebuilt == 1

    # The worker builds it again: Bob only.
    assert services.report_job_execute(job_id=job.pk) == ReportJob.Status.SUCCEEDED
    after = _exports(client, job)
    table = after["table"].content.decode()
    assert "Bob" in table and "Zoe" not in table
    assert "Zoe" not in _zip_text(after["csv"])
    assert after["xlsx"].status_code == 200
    page = after["page"].content.decode()
    assert 'data-testid="rebuilt-after-withdrawal"' in page and "Zoe" not in without_tokens(page)

    # The researcher's ledger says when it happened.
    detail = client.get(reverse("studies:detail", args=[study.pk])).content.decode()
    assert "1 report job rebuilt after the withdrawal" in detail


def test_a_researcher_withdrawal_does_the_same(dyntom_people):
    _study, (ann, _bob) = dyntom_people
    job = _built_job()
    participant_withdraw(participant=ann)
    job.refresh_from_db()
    assert job.result is None and job.status == ReportJob.Status.QUEUED
    services.report_job_execute(job_id=job.pk)
    job.refresh_from_db()
    people = job.report().table("human-participants")
    assert [r["Participant"] for r in people.records()] == ["Bob"]


def test_a_job_built_before_the_participant_joined_is_kept(dyntom_people):
    study, _people = dyntom_people
    job = _built_job()
    (late,) = participants_invite(study=study, labels=["Late"])
    participant_withdraw(participant=late)
    job.refresh_from_db()
    assert job.status == ReportJob.Status.SUCCEEDED and job.result is not None
    late.refresh_from_db()
    assert late.report_jobs_rebuilt_at is None


def test_a_build_running_at_the_withdrawal_stores_nothing(dyntom_people):
    """A build that read the data before the withdrawal is overtaken: it finds its claim
    gone and stores nothing; the job is queued again instead."""
    _study, (ann, _bob) = dyntom_people
    job = services.report_job_create(benchmark="dyntom", enqueue=False)
    started = services._claim(job.pk)  # a worker took it and is building
    assert started is not None
    participant_withdraw(participant=ann)
    job.refresh_from_db()
    assert job.status == ReportJob.Status.QUEUED and job.rebuilt_after_withdrawal_at is not None
    # The overtaken build's result would be refused: its claim is no longer the job's.
    assert not ReportJob.objects.filter(
        pk=job.pk, status=ReportJob.Status.RUNNING, started_at=started
    ).exists()
    assert services.report_job_execute(job_id=job.pk) == ReportJob.Status.SUCCEEDED
    job.refresh_from_db()
    names = [r["Participant"] for r in job.report().table("human-participants").records()]
    assert names == ["Bob"]
