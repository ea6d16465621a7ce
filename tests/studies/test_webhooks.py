"""A study's webhook (issue 29, part 5): a participant's finishing and withdrawing POSTed,
signed with HMAC-SHA256, to the researcher's URL from a Celery task with retries.

A real HTTP receiver on 127.0.0.1 records every request and checks its signature with
the code docs/researcher.md gives receivers (read from the file and run). Tasks run
eagerly in this process (Celery runs an eager retry at once, so six tries take no
time); the last test runs them on a real worker (tests/celery_worker.py) through the
broker the suite uses.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from common.models import QueuedJob
from common.secrets import decrypt_secret
from studies import services
from studies.models import Participant, Study, WebhookDelivery
from studies.participation import services as participation_services
from studies.participation import webhooks
from tests.celery_worker import purge_queues, start_worker, stop_worker, wait_for

from .test_ledger import answer_all
from .test_rater_views import current, full_form, invite, keep_scenes, to_scenes, url

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("friends")]


# -- the receiver ---------------------------------------------------------------------------


def _documented_verify():
    """The receiver's check exactly as docs/researcher.md ("Webhooks") gives it."""
    docs = (Path(settings.BASE_DIR) / "docs" / "researcher.md").read_text()
    section = docs.split("\n## Webhooks\n", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(code, "docs/researcher.md#webhooks", "exec"), namespace)
    return namespace["verify"]


verify = _documented_verify()


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes

    @property
    def event(self) -> dict:
        return json.loads(self.body)

    def verifies(self, secret: str) -> bool:
        return verify(
            secret,
            self.headers["X-ToMLab-Timestamp"],
            self.headers["X-ToMLab-Signature"],
            self.body,
        )


@dataclass
class Receiver:
    """Answers each POST with the next status of ``script`` (200 once it is empty)."""

    url: str = ""
    requests: list[Received] = field(default_factory=list)
    script: list[int] = field(default_factory=list)
    delay_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait(self, n: int, timeout: float = 30) -> list[Received]:
        wait_for(lambda: len(self.requests) >= n, timeout=timeout, what=f"{n} webhook request(s)")
        return self.requests


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if state.delay_s:
                time.sleep(state.delay_s)
            with state.lock:
                state.requests.append(Received(dict(self.headers.items()), body))
                status = state.script.pop(0) if state.script else 200
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def dead_url() -> str:
    """A loopback port nothing listens on (connections are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def webhook_settings(settings):
    # The test receivers speak plain http on 127.0.0.1.
    settings.TOMLAB_WEBHOOK_ALLOW_HTTP = True
    settings.TOMLAB_WEBHOOK_MAX_ATTEMPTS = 6
    settings.TOMLAB_WEBHOOK_BACKOFF_S = 0.2
    settings.TOMLAB_WEBHOOK_TIMEOUT_S = 5
    return settings


@pytest.fixture
def eager():
    """Queued tasks run in this process as the message is sent (CELERY_TASK_ALWAYS_EAGER)."""
    from config.celery import app

    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


@pytest.fixture
def res_client(client, researcher):
    client.force_login(researcher)
    return client


def webhook_url(study: Study, name: str = "webhook") -> str:
    return reverse(f"studies:{name}", args=[study.pk])


def set_webhook(res_client, study: Study, hook_url: str) -> str:
    """Set the URL on the study's webhook page; the signing key shown this once."""
    response = res_client.post(webhook_url(study), {"webhook_url": hook_url})
    assert response.status_code == 200, response.content.decode()[:2000]
    assert "no-store" in response["Cache-Control"]
    study.refresh_from_db()
    assert study.webhook_url == hook_url
    secret = decrypt_secret(study.webhook_secret)
    assert secret and secret in response.content.decode()
    # Stored as ciphertext only (common.secrets), as backend keys are.
    assert study.webhook_secret.startswith("fernet:") and secret not in study.webhook_secret
    return secret


# -- events -------------------------------------------------------------------------------


def test_finishing_sends_one_signed_event(
    client, res_client, live_study, receiver, eager, django_capture_on_commit_callbacks
):
    """Through the rater's pages: the last scene, then the last page, which finishes."""
    secret = set_webhook(res_client, live_study, receiver.url)
    keep_scenes(live_study, 2)
    participant = invite(live_study, "Jane Doe")
    to_scenes(client, participant)
    with django_capture_on_commit_callbacks(execute=True):
        answer_all(client, participant)
        client.get(url("start", participant))  # coming back finishes nobody twice
    participant.refresh_from_db()
    assert participant.finished_at is not None

    (request,) = receiver.requests
    assert request.verifies(secret)
    assert not request.verifies(secret + "x")
    delivery = WebhookDelivery.objects.get()
    event = request.event
    assert event == {
        "event": "participant.finished",
        "study": live_study.pk,
        "participant": participant.pk,  # the exports' participant_id, never the label
        "at": participant.finished_at.isoformat(),
        "delivery": str(delivery.delivery_id),
    }
    assert request.headers["X-ToMLab-Event"] == "participant.finished"
    assert request.headers["X-ToMLab-Delivery"] == str(delivery.delivery_id)
    assert request.headers["Content-Type"] == "application/json"
    assert participant.token not in request.body.decode()
    assert "Jane" not in request.body.decode()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 1, 200)
    assert delivery.delivered_at is not None


def test_withdrawing_sends_one_signed_event(
    client, res_client, live_study, receiver, eager, django_capture_on_commit_callbacks
):
    """A researcher withdraws one participant; another withdraws their data, then the
    researcher withdraws them too: one event per participant."""
    secret = set_webhook(res_client, live_study, receiver.url)
    first, second = invite(live_study, "first"), invite(live_study, "second")
    withdraw = reverse("studies:withdraw", args=[live_study.pk, first.pk])
    with django_capture_on_commit_callbacks(execute=True):
        assert res_client.post(withdraw).status_code == 302
        assert client.post(url("withdraw", second)).status_code in (200, 302)
        res_client.post(reverse("studies:withdraw", args=[live_study.pk, second.pk]))
        res_client.post(withdraw)
    assert len(receiver.requests) == 2
    events = {r.event["participant"]: r for r in receiver.requests}
    assert set(events) == {first.pk, second.pk}
    for participant in (first, second):
        participant.refresh_from_db()
        request = events[participant.pk]
        assert request.verifies(secret)
        assert request.event["event"] == "participant.withdrawn"
        assert request.event["at"] == participant.withdrawn_at.isoformat()
    assert set(WebhookDelivery.objects.values_list("status", flat=True)) == {"delivered"}


def test_a_failing_receiver_gets_three_tries_and_the_delivery_ends_delivered(
    res_client, live_study, receiver, eager, django_capture_on_commit_callbacks
):
    secret = set_webhook(res_client, live_study, receiver.url)
    receiver.script = [500, 500, 200]
    participant = invite(live_study)
    with django_capture_on_commit_callbacks(execute=True):
        participation_services.participant_withdraw(participant=participant)
    assert len(receiver.requests) == 3
    assert len({r.body for r in receiver.requests}) == 1  # the same event each time
    assert len({r.headers["X-ToMLab-Delivery"] for r in receiver.requests}) == 1
    assert all(r.verifies(secret) for r in receiver.requests)
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 3, 200)
    assert delivery.last_error == ""


def test_a_dead_url_fails_after_six_tries_and_the_participant_never_notices(
    client, res_client, live_study, eager, django_capture_on_commit_callbacks
):
    set_webhook(res_client, live_study, dead_url())
    participant = invite(live_study)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url("withdraw", participant), follow=True)
    assert response.status_code == 200
    assert "Your data has been withdrawn" in response.content.decode()
    participant.refresh_from_db()
    assert participant.data_withdrawn_at is not None
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.max_attempts) == ("failed", 6, 6)
    assert delivery.last_status_code is None
    assert delivery.last_error.startswith("could not connect")
    assert delivery.delivered_at is None
    # The envelope of the job is finished, so no sweep sends it again.
    assert QueuedJob.objects.get(task=webhooks.WEBHOOK_TASK_NAME).finished_at is not None
    page = res_client.get(webhook_url(live_study)).content.decode()
    assert "badge-failed" in page and "could not connect" in page and "6 / 6" in page


def test_a_receiver_that_does_not_answer_in_time_fails_the_try(
    settings, res_client, live_study, receiver, eager, django_capture_on_commit_callbacks
):
    settings.TOMLAB_WEBHOOK_TIMEOUT_S = 0.3
    settings.TOMLAB_WEBHOOK_MAX_ATTEMPTS = 1
    set_webhook(res_client, live_study, receiver.url)
    receiver.delay_s = 1.5
    with django_capture_on_commit_callbacks(execute=True):
        participation_services.participant_withdraw(participant=invite(live_study))
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("failed", 1)
    assert delivery.last_error == "no answer within 0.3 s"


def test_the_backoff_doubles_and_stays_under_the_sweeps_requeue_age(settings):
    settings.TOMLAB_WEBHOOK_BACKOFF_S = 10
    settings.TOMLAB_REQUEUE_AFTER_S = 300
    assert [webhooks.retry_delay(n) for n in range(1, 7)] == [10, 20, 40, 80, 150, 150]


def test_send_test_event_and_a_new_key(
    res_client, live_study, receiver, eager, django_capture_on_commit_callbacks
):
    old = set_webhook(res_client, live_study, receiver.url)
    rotated = res_client.post(webhook_url(live_study, "webhook-rotate"))
    assert rotated.status_code == 200 and "no-store" in rotated["Cache-Control"]
    live_study.refresh_from_db()
    new = decrypt_secret(live_study.webhook_secret)
    assert new != old and new in rotated.content.decode() and old not in rotated.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = res_client.post(webhook_url(live_study, "webhook-test"), follow=True)
    assert "queued" in response.content.decode()
    (request,) = receiver.requests
    assert request.event["event"] == "webhook.test" and request.event["participant"] is None
    assert request.verifies(new) and not request.verifies(old)
    # Changing the URL keeps the key (and shows none).
    changed = res_client.post(
        webhook_url(live_study), {"webhook_url": receiver.url + "?v=2"}, follow=True
    )
    live_study.refresh_from_db()
    assert decrypt_secret(live_study.webhook_secret) == new
    assert new not in changed.content.decode()
    assert "the signing key is the same" in changed.content.decode()


def test_removing_the_webhook_stops_events(
    res_client, live_study, receiver, eager, django_capture_on_commit_callbacks
):
    set_webhook(res_client, live_study, receiver.url)
    queued = webhooks.webhook_event_record(study=live_study, event="webhook.test")
    res_client.post(webhook_url(live_study, "webhook-remove"))
    live_study.refresh_from_db()
    assert live_study.webhook_url == "" and live_study.webhook_secret == ""
    with django_capture_on_commit_callbacks(execute=True):
        participation_services.participant_withdraw(participant=invite(live_study))
    assert WebhookDelivery.objects.count() == 1  # no new event
    # A try still queued when the webhook went finds nothing to send to.
    webhooks.webhook_deliver(delivery_id=queued.pk)
    queued.refresh_from_db()
    assert queued.status == "failed" and queued.last_error == "the study has no webhook any more"
    assert receiver.requests == []
    page = res_client.post(webhook_url(live_study, "webhook-rotate"))
    assert page.status_code == 409 and "set a webhook URL first" in page.content.decode()


def test_a_study_without_a_webhook_costs_no_query_and_queues_nothing(
    live_study, django_assert_num_queries
):
    participant = Participant.objects.select_related("study").get(pk=invite(live_study).pk)
    with django_assert_num_queries(0):
        webhooks.on_participant_finished(None, participant=participant)
        webhooks.on_participant_withdrawn(None, participant=participant)
    participation_services.participant_withdraw(participant=participant)
    assert not WebhookDelivery.objects.exists()
    assert not QueuedJob.objects.filter(task=webhooks.WEBHOOK_TASK_NAME).exists()


def test_a_second_delivery_of_the_same_message_sends_nothing(
    res_client, live_study, receiver, eager
):
    set_webhook(res_client, live_study, receiver.url)
    delivery = webhooks.webhook_event_record(study=live_study, event="webhook.test")
    assert webhooks.webhook_deliver(delivery_id=delivery.pk).status == "delivered"
    assert webhooks.webhook_deliver(delivery_id=delivery.pk).status == "delivered"
    assert webhooks.webhook_deliver(delivery_id=0).status == "gone"
    assert len(receiver.requests) == 1


# -- the page -------------------------------------------------------------------------------


def test_the_study_page_loads_the_panel_and_the_table_polls_until_done(
    res_client, live_study, receiver
):
    detail = res_client.get(reverse("studies:detail", args=[live_study.pk])).content.decode()
    assert 'id="webhook"' in detail and f'href="{webhook_url(live_study)}"' in detail
    assert "Set up a webhook" in detail
    htmx = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "webhook"}
    panel = res_client.get(webhook_url(live_study), **htmx).content.decode()
    assert 'data-testid="webhook-panel"' in panel and "<html" not in panel
    assert "No events sent yet." in panel
    set_webhook(res_client, live_study, receiver.url)
    webhooks.webhook_event_record(study=live_study, event="webhook.test")  # not sent yet
    table = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "webhook-deliveries"}
    polling = res_client.get(webhook_url(live_study), **table)
    assert polling.status_code == 200 and 'hx-trigger="every 2s"' in polling.content.decode()
    assert "sending" in polling.content.decode()
    WebhookDelivery.objects.update(status="delivered", attempts=1, last_status_code=200)
    done = res_client.get(webhook_url(live_study), **table)
    assert done.status_code == 286 and "badge-succeeded" in done.content.decode()
    detail = res_client.get(reverse("studies:detail", args=[live_study.pk])).content.decode()
    assert receiver.url in detail


def test_setting_the_url_through_htmx_shows_the_key_in_the_panel(res_client, live_study):
    htmx = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "webhook"}
    response = res_client.post(
        webhook_url(live_study), {"webhook_url": "https://example.org/hook"}, **htmx
    )
    live_study.refresh_from_db()
    body = response.content.decode()
    assert response.status_code == 200 and "<html" not in body
    assert f'data-testid="webhook-secret">{decrypt_secret(live_study.webhook_secret)}<' in body
    assert "no-store" in response["Cache-Control"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("ftp://example.org/hook", "must start with http:// or https://"),
        ("not a url", "must start with http:// or https://"),
        ("javascript:alert(1)", "must start with http:// or https://"),
        ("https://", "must start with http:// or https://"),
        ("https://user:pw@example.org/", "must not hold a user name or password"),
        ("https://example.org/" + "a" * 500, "at most 500 characters"),
        ("", "This field is required."),
    ],
)
def test_invalid_urls_are_refused_with_a_form_error(res_client, live_study, value, message):
    response = res_client.post(webhook_url(live_study), {"webhook_url": value})
    assert response.status_code == 400
    body = response.content.decode()
    assert 'id="id_webhook_url_error"' in body and message in body
    htmx = res_client.post(webhook_url(live_study), {"webhook_url": value}, HTTP_HX_REQUEST="true")
    assert htmx.status_code == 200 and message in htmx.content.decode()
    live_study.refresh_from_db()
    assert live_study.webhook_url == "" and live_study.webhook_secret == ""


def test_plain_http_is_refused_unless_the_server_allows_it(settings, res_client, live_study):
    settings.TOMLAB_WEBHOOK_ALLOW_HTTP = False
    response = res_client.post(webhook_url(live_study), {"webhook_url": "http://example.org/h"})
    assert response.status_code == 400
    assert "must use https://" in response.content.decode()
    live_study.refresh_from_db()
    assert live_study.webhook_url == ""
    assert res_client.post(webhook_url(live_study), {"webhook_url": "https://example.org/h"})
    live_study.refresh_from_db()
    assert live_study.webhook_url == "https://example.org/h"


@pytest.mark.parametrize("who", ["anonymous", "rater", "annotator"])
def test_only_researchers_may_see_or_change_the_webhook(
    client, live_study, rater, annotator, receiver, who
):
    secret = "s3cret-" + uuid.uuid4().hex
    live_study.webhook_url = receiver.url
    live_study.webhook_secret = secret
    live_study.save(update_fields=["webhook_url", "webhook_secret"])
    if who != "anonymous":
        client.force_login(rater if who == "rater" else annotator)
    expected = 302 if who == "anonymous" else 403
    assert client.get(webhook_url(live_study)).status_code == expected
    posts = [
        ("webhook", {"webhook_url": "https://evil.example/"}),
        ("webhook-rotate", {}),
        ("webhook-remove", {}),
        ("webhook-test", {}),
    ]
    for name, data in posts:
        response = client.post(webhook_url(live_study, name), data)
        assert response.status_code == expected, name
        assert secret not in response.content.decode()
    live_study.refresh_from_db()
    assert (live_study.webhook_url, decrypt_secret(live_study.webhook_secret)) == (
        receiver.url,
        secret,
    )
    assert not WebhookDelivery.objects.exists()


def test_unknown_study_and_wrong_methods(res_client):
    assert res_client.get(reverse("studies:webhook", args=[999999])).status_code == 404
    assert res_client.get(reverse("studies:webhook-test", args=[999999])).status_code == 405
    assert res_client.post(reverse("studies:webhook-rotate", args=[999999])).status_code == 404


# -- the key is shown once ------------------------------------------------------------------


def test_the_key_never_appears_again(
    client,
    res_client,
    admin_client,
    live_study,
    receiver,
    eager,
    caplog,
    django_capture_on_commit_callbacks,
):
    """Not on the study's pages, the API, the exports, the admin, the deliveries' errors
    or the logs, once the page that made it is gone."""
    caplog.set_level(logging.DEBUG)
    secret = set_webhook(res_client, live_study, receiver.url)
    receiver.script = [500]
    keep_scenes(live_study, 2)
    participant = invite(live_study)
    to_scenes(client, participant)
    assignment = current(participant)  # one answer of two: the exports have a row
    client.post(
        url("scene-submit", participant, assignment_id=assignment.pk), full_form(assignment)
    )
    with django_capture_on_commit_callbacks(execute=True):
        res_client.post(reverse("studies:withdraw", args=[live_study.pk, participant.pk]))
        res_client.post(webhook_url(live_study, "webhook-test"))
    assert len(receiver.requests) == 3  # withdrawn (500, then 200), the test event
    pk = live_study.pk
    pages = [
        reverse("studies:detail", args=[pk]),
        reverse("studies:webhook", args=[pk]),
        reverse("studies:list"),
        reverse("studies:responses", args=[pk]),
        *(reverse(f"studies:{name}", args=[pk]) for name in ("raters-csv", "platform-ids-csv")),
        *(
            reverse(f"studies:{n}-{f}", args=[pk])
            for n in ("responses", "exit")
            for f in ("csv", "json")
        ),
        f"/api/studies/{pk}/responses/",
        f"/api/studies/{pk}/exit-answers/",
        "/api/studies/",
        f"/api/studies/{pk}/",
        f"/api/studies/{pk}/participants/",
        "/api/schema/",
    ]
    for page in pages:
        response = res_client.get(page)
        assert response.status_code < 500, page
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert secret not in body.decode(errors="replace"), page
    admin_pages = [
        reverse("admin:studies_study_changelist"),
        reverse("admin:studies_study_change", args=[pk]),
        reverse("admin:studies_webhookdelivery_changelist"),
        reverse("admin:studies_webhookdelivery_change", args=[WebhookDelivery.objects.first().pk]),
    ]
    for page in admin_pages:
        response = admin_client.get(page)
        assert response.status_code == 200, page
        assert secret not in response.content.decode(), page
    # The admin answers nothing about the key: no filter, ordering or search reaches it.
    probe = admin_client.get(
        reverse("admin:studies_study_changelist"), {"webhook_secret__startswith": secret[:1]}
    )
    assert probe.status_code == 400
    for row in WebhookDelivery.objects.all():
        assert secret not in row.body + row.last_error
    assert secret not in caplog.text
    assert caplog.text  # the flow did log (so the check above could fail)


def test_the_admin_cannot_edit_the_key(admin_client, live_study):
    response = admin_client.get(reverse("admin:studies_study_change", args=[live_study.pk]))
    assert 'name="webhook_url"' in response.content.decode()
    assert 'name="webhook_secret"' not in response.content.decode()


def test_a_copied_study_has_no_webhook(res_client, live_study, receiver):
    set_webhook(res_client, live_study, receiver.url)
    copy = services.study_duplicate(study=live_study)
    assert (copy.webhook_url, copy.webhook_secret) == ("", "")


# -- a real worker --------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_delivers_and_retries(friends, researcher, receiver, tmp_path):
    """Finishing and withdrawing, each announced once and signed, through the broker and
    a worker process; a receiver answering 500 once gets a second, delivered try."""
    study = services.study_go_live(
        study=services.study_create(
            name="Webhook study",
            benchmark="tvshowguess",
            works=[friends],
            overlap=2,
            created_by=researcher,
        )
    )
    secret = webhooks.webhook_set(study=study, url=receiver.url)
    finisher, leaver = participation_services.participants_invite(
        study=study, labels=["finisher", "leaver"]
    )
    receiver.script = [500]
    purge_queues()
    log = tmp_path / "worker.log"
    worker = start_worker(log, name="webhooks")
    try:
        participation_services.participant_finish(participant=finisher)
        participation_services.participant_withdraw(participant=leaver)
        wait_for(
            lambda: (
                WebhookDelivery.objects.filter(status="pending").count() == 0
                and WebhookDelivery.objects.count() == 2
            ),
            timeout=90,
            what="both deliveries done",
            log=log,
        )
    finally:
        stop_worker(worker)
    assert len(receiver.requests) == 3, log.read_text()[-3000:]
    assert all(r.verifies(secret) for r in receiver.requests)
    by_event = {d.event: d for d in WebhookDelivery.objects.all()}
    assert set(by_event) == {"participant.finished", "participant.withdrawn"}
    assert sorted(d.attempts for d in by_event.values()) == [1, 2]
    assert {d.status for d in by_event.values()} == {"delivered"}
    participants = {json.loads(d.body)["participant"] for d in by_event.values()}
    assert participants == {finisher.pk, leaver.pk}
    assert secret not in log.read_text()
