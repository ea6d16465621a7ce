"""Leases of CharToM-QA LLM steps: who holds a running step, and who may take it over.

A step "running" in a process that is gone (dead on this host, or its lease expired) is
taken over by the next delivery of its job, offered a retry on the batch page and sent
again when a worker starts; a step held by a live process is left to it. Calls answered
before a takeover come back from their RunCall rows: the loopback server's request
count shows none asked twice.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from annotation.chartom.llm_steps import (
    candidate_count,
    construction_step_run,
    stale_steps,
)
from annotation.chartom.tasks import chartom_step_task, requeue_stale_steps
from annotation.chartom.workflow import STEP_TASK_NAME, WorkflowError, construction_retry
from annotation.models import Construction
from common.models import QueuedJob
from common.queueing import job_key
from modeling.models import RunCall
from modeling.runs.leases import LeaseHeld, _process_started_at

from .test_llm_steps import QUESTIONS, Script, batch_run_of

pytestmark = pytest.mark.django_db

DESCRIPTION = "Vautrin flatters them on purpose."


@pytest.fixture
def script(llm_server) -> Script:
    responder = Script()
    llm_server.responder = responder
    return responder


@pytest.fixture
def at(make_construction, chartom_backend):
    def make(stage: str = "filter", **fields: Any) -> Construction:
        return make_construction(stage=stage, state="queued", backend=chartom_backend, **fields)

    return make


def a_dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def hold(
    construction: Construction,
    *,
    pid: int,
    host: str | None = None,
    started_at=None,
    seconds: float = 300,
) -> None:
    """Mark the step running under a lease held by ``pid`` (on this host by default)."""
    Construction.objects.filter(pk=construction.pk).update(
        state="running",
        updated_at=timezone.now(),
        lease_expires_at=timezone.now() + timedelta(seconds=seconds),
        lease_holder_host=socket.gethostname() if host is None else host,
        lease_holder_pid=pid,
        lease_holder_started_at=started_at,
    )


def half_done_question_step(at, llm_server, backend) -> Construction:
    """A question step whose fourth candidate failed (the others are answered), then
    lost its worker."""
    backend.max_concurrency = 1  # one call at a time: the failure hits the fourth
    backend.save(update_fields=["max_concurrency"])
    construction = at(stage="questions", description=DESCRIPTION)
    for text in QUESTIONS[3:]:
        llm_server.enqueue(text)
    for _ in range(2):  # the backend's own retry gets the second
        llm_server.enqueue(status=500, headers={"Retry-After": "0"})
    assert construction_step_run(construction_id=construction.pk) == "needs_retry"
    assert construction.candidates.count() == candidate_count() - 1
    return construction


def test_a_step_whose_holder_died_on_this_host_is_taken_over_without_paying_twice(
    at, script, llm_server, chartom_backend
) -> None:
    construction = half_done_question_step(at, llm_server, chartom_backend)
    # The worker process running it was killed: the step still says "running", its
    # lease has minutes left, and the job is delivered again.
    hold(construction, pid=a_dead_pid())
    asked = llm_server.request_count

    assert construction_step_run(construction_id=construction.pk) == "advanced:question_choice"

    construction.refresh_from_db()
    assert (construction.state, construction.lease_holder_pid) == ("waiting_human", None)
    n = candidate_count()
    assert construction.candidates.count() == n
    # Only the missing candidate and the verifications were asked (the two samples
    # after the failed one were answered before the worker was lost).
    assert script.question_calls == n - 3
    assert llm_server.request_count - asked == 1 + (n - 1)
    paid = RunCall.objects.filter(run=batch_run_of(construction), status="done")
    assert paid.count() == 3 + (n - 3) + (n - 1)


def test_a_reused_pid_or_an_expired_lease_elsewhere_frees_the_step(at, script) -> None:
    reused = at()
    me = os.getpid()  # alive, but not the process that started at this time
    hold(reused, pid=me, started_at=timezone.now() - timedelta(days=3))
    assert construction_step_run(construction_id=reused.pk) == "advanced:extract"

    elsewhere = at(note=1)
    hold(elsewhere, pid=4242, host="gone-host.example", seconds=-1)
    assert construction_step_run(construction_id=elsewhere.pk) == "advanced:extract"


def test_a_step_held_by_a_live_process_is_left_to_it(at, script, llm_server) -> None:
    here = at()
    me = os.getpid()
    hold(here, pid=me, started_at=_process_started_at(me))
    assert construction_step_run(construction_id=here.pk) == "skipped"

    elsewhere = at(note=1)
    hold(elsewhere, pid=4242, host="other-host.example", seconds=120)
    who = r"held by process 4242 on host other-host\.example"
    with pytest.raises(LeaseHeld, match=who) as held:
        construction_step_run(construction_id=elsewhere.pk)
    # The task tries again when that lease would expire (eagerly: it gives up at once).
    assert 100 < held.value.seconds <= 120 and not held.value.local
    assert chartom_step_task.apply(args=(elsewhere.pk,)).get() == "skipped"

    assert llm_server.request_count == 0
    assert set(Construction.objects.values_list("state", flat=True)) == {"running"}


@pytest.mark.django_db(transaction=True)
def test_a_step_taken_over_meanwhile_stops_without_writing(at, llm_server) -> None:
    construction = at()

    def responder(body: dict[str, Any]) -> str:
        # While this reply is on its way, another worker takes the step for dead (its
        # own connection, committed, as a worker's is).
        Construction.objects.filter(pk=construction.pk).update(
            lease_holder_host="other-host.example", lease_holder_pid=4242
        )
        connection.close()
        return "Yes\nVautrin wants Eugene on his side."

    llm_server.responder = responder
    assert construction_step_run(construction_id=construction.pk) == "skipped"
    construction.refresh_from_db()
    # Neither its verdict nor a failure: the step is the other worker's now.
    assert (construction.stage, construction.state, construction.error) == ("filter", "running", "")
    assert construction.filter_verdict == "" and not construction.changes.exists()
    assert construction.lease_holder_pid == 4242


# --- retry and the worker's start ---------------------------------------------------------


def test_failures_on_the_demos_recorded_backend_say_the_recording_ends(at, client, researcher):
    from annotation.chartom.demo import DEMO_BACKEND_URL

    failed = at(dimension="desire")
    Construction.objects.filter(pk=failed.pk).update(
        state="needs_retry", error="filter: APIConnectionError: Connection error."
    )
    batch = failed.note.batch
    client.force_login(researcher)
    url = reverse("annotation:chartom-batch", args=[batch.pk])
    page = client.get(url).content.decode()
    assert "APIConnectionError" in page and "recorded-backend-end" not in page

    type(batch.backend).objects.filter(pk=batch.backend_id).update(base_url=DEMO_BACKEND_URL)
    page = client.get(url).content.decode()
    assert 'data-testid="recorded-backend-end"' in page
    assert "The recording has no reply for this step." in page
    assert "APIConnectionError" not in page


def test_retry_offers_a_running_step_once_its_lease_is_stale(
    at, client, researcher, django_capture_on_commit_callbacks
) -> None:
    live, dead, failed = at(), at(dimension="belief"), at(dimension="desire")
    me = os.getpid()
    hold(live, pid=me, started_at=_process_started_at(me))
    hold(dead, pid=a_dead_pid())
    Construction.objects.filter(pk=failed.pk).update(state="needs_retry", error="filter: boom")
    batch = live.note.batch
    client.force_login(researcher)

    page = client.get(reverse("annotation:chartom-batch", args=[batch.pk])).content.decode()
    assert 'Needs retry <span class="muted">(2)</span>' in page
    assert page.count('data-testid="stale-step"') == 1
    assert reverse("annotation:chartom-retry", args=[dead.pk]) in page
    assert reverse("annotation:chartom-retry", args=[live.pk]) not in page
    assert "Retry all 2" in page
    assert [c.pk for c in stale_steps(note__batch=batch)] == [dead.pk]

    # The live one is refused by name; the dead one is queued again, lease released.
    with pytest.raises(WorkflowError, match=f"running in process {me} on this host"):
        construction_retry(construction_id=live.pk)
    with django_capture_on_commit_callbacks():
        response = client.post(reverse("annotation:chartom-retry", args=[dead.pk]), follow=True)
    assert "queued again" in response.content.decode()
    dead.refresh_from_db()
    assert (dead.state, dead.lease_holder_pid, dead.lease_expires_at) == ("queued", None, None)
    assert QueuedJob.objects.filter(key=job_key(STEP_TASK_NAME, [dead.pk])).count() == 1


def test_retry_all_sends_the_failed_and_the_stale_steps(at, client, researcher) -> None:
    live, dead, failed = at(), at(dimension="belief"), at(dimension="desire")
    me = os.getpid()
    hold(live, pid=me, started_at=_process_started_at(me))
    hold(dead, pid=4242, host="gone-host.example", seconds=-60)
    Construction.objects.filter(pk=failed.pk).update(state="needs_retry")
    client.force_login(researcher)
    response = client.post(
        reverse("annotation:chartom-batch-retry", args=[live.note.batch_id]), follow=True
    )
    assert "2 failed LLM steps queued again." in response.content.decode()
    states = dict(Construction.objects.values_list("pk", "state"))
    assert states == {live.pk: "running", dead.pk: "queued", failed.pk: "queued"}


def test_a_starting_worker_sends_again_the_stale_steps_no_envelope_brings_back(
    at, django_capture_on_commit_callbacks
) -> None:
    live, expired, dead, waiting = (
        at(),
        at(dimension="belief"),
        at(dimension="desire"),
        at(dimension="emotion"),
    )
    me = os.getpid()
    hold(live, pid=me, started_at=_process_started_at(me))
    hold(expired, pid=4242, host="gone-host.example", seconds=-60)
    hold(dead, pid=a_dead_pid())
    # A dead holder's envelope the sweep has just sent again: that message brings it back.
    hold(waiting, pid=a_dead_pid())
    QueuedJob.objects.create(
        task=STEP_TASK_NAME, args=[waiting.pk], key=job_key(STEP_TASK_NAME, [waiting.pk])
    )

    with django_capture_on_commit_callbacks():
        requeue_stale_steps()

    sent = QueuedJob.objects.filter(task=STEP_TASK_NAME).values_list("args", flat=True)
    assert sorted(sent) == sorted([[expired.pk], [dead.pk], [waiting.pk]])
    # Sent once: a second start finds their envelopes waiting.
    with django_capture_on_commit_callbacks():
        requeue_stale_steps()
    assert QueuedJob.objects.filter(task=STEP_TASK_NAME).count() == 3
