"""A study's webhook: finishing and withdrawing participants announced to a URL.

Like GitHub's and Stripe's webhooks. The researcher gives a study a URL; ToMLab makes a
signing key (``secrets.token_urlsafe(32)``), shows it once and never again. When a
participant finishes or withdraws, :func:`webhook_event_record` writes a
:class:`~studies.models.WebhookDelivery` with the event's JSON body, in the participant's
transaction, and queues the delivery task once that commits. The task
(``studies.tasks``) makes one try per run, :func:`webhook_deliver`, and tries again with
exponential backoff up to ``max_attempts`` tries. A receiver checks

    X-ToMLab-Signature: sha256=<hex HMAC-SHA256 of "<X-ToMLab-Timestamp>.<body>">

with the key (docs/researcher.md, "Webhooks"). Nothing here runs inside a participant's
request but the row and the queueing: a slow, dead or failing receiver never changes
what the participant sees.

Settings (``getattr`` with defaults until they are in ``config/settings``):
``TOMLAB_WEBHOOK_ALLOW_HTTP`` (plain http URLs; default: DEBUG),
``TOMLAB_WEBHOOK_MAX_ATTEMPTS`` (6), ``TOMLAB_WEBHOOK_BACKOFF_S`` (10: the wait before
the second try, doubled each time), ``TOMLAB_WEBHOOK_TIMEOUT_S`` (5).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import secrets
import ssl
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from common import egress
from common.queueing import queued_job_create, queued_job_send
from common.secrets import CredentialUnreadable, decrypt_secret
from studies.errors import StudyError
from studies.models import Participant, Study, WebhookDelivery

logger = logging.getLogger(__name__)

WEBHOOK_TASK_NAME = "studies.webhook_deliver"
SIGNATURE_HEADER = "X-ToMLab-Signature"
TIMESTAMP_HEADER = "X-ToMLab-Timestamp"
EVENT_HEADER = "X-ToMLab-Event"
DELIVERY_HEADER = "X-ToMLab-Delivery"
RECENT = 10  # deliveries shown on the study page


def _setting(name: str) -> Any:
    return getattr(settings, name)


def http_allowed() -> bool:
    """Whether plain http URLs are accepted: in development and tests, or when the
    deployment says so (``TOMLAB_WEBHOOK_ALLOW_HTTP``); https otherwise."""
    return bool(settings.TOMLAB_WEBHOOK_ALLOW_HTTP)


class WebhookError(StudyError):
    """A webhook setting refused; the message names what is wrong (safe to show)."""


# -- the researcher's settings ------------------------------------------------------------


def webhook_url_check(url: str) -> str:
    """The URL stripped, or :class:`WebhookError` saying why it cannot be used."""
    url = (url or "").strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        schemes = "http:// or https://" if http_allowed() else "https://"
        raise WebhookError(f"the webhook URL must start with {schemes} and name a host")
    if parts.scheme == "http" and not http_allowed():
        raise WebhookError(
            "the webhook URL must use https:// (plain http is refused on this server; "
            "TOMLAB_WEBHOOK_ALLOW_HTTP allows it)"
        )
    if parts.username or parts.password:
        # Credentials in the URL would show on the study page and in the admin.
        raise WebhookError("the webhook URL must not hold a user name or password")
    if len(url) > Study._meta.get_field("webhook_url").max_length:
        raise WebhookError("the webhook URL is longer than 500 characters")
    if reason := egress.refusal(url):
        raise WebhookError(f"the webhook URL: {reason}")
    return url


def _new_secret() -> str:
    return secrets.token_urlsafe(32)


@transaction.atomic
def webhook_set(*, study: Study, url: str) -> str | None:
    """Set or change the study's webhook URL.

    Returns the new signing key when the study had none (shown once to the researcher),
    else None: changing the URL keeps the key, as the receiver may be the same.
    """
    url = webhook_url_check(url)
    study = Study.objects.select_for_update().get(pk=study.pk)
    secret = None if study.webhook_secret else _new_secret()
    fields = {"webhook_url": url, "updated_at": timezone.now()}
    if secret:
        fields["webhook_secret"] = secret
    Study.objects.filter(pk=study.pk).update(**fields)
    return secret


@transaction.atomic
def webhook_secret_rotate(*, study: Study) -> str:
    """A new signing key (returned, to be shown once); the old one stops working now."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    if not study.webhook_url:
        raise WebhookError("set a webhook URL first: a study without one has no key")
    secret = _new_secret()
    Study.objects.filter(pk=study.pk).update(webhook_secret=secret, updated_at=timezone.now())
    return secret


@transaction.atomic
def webhook_remove(*, study: Study) -> None:
    """No more events: the URL and the key are forgotten; past deliveries stay listed.
    Tries still queued find no URL and end failed."""
    Study.objects.filter(pk=study.pk).update(
        webhook_url="", webhook_secret="", updated_at=timezone.now()
    )


def webhook_deliveries_recent(*, study: Study, limit: int = RECENT) -> list[WebhookDelivery]:
    """The study's newest deliveries, newest first."""
    return list(
        WebhookDelivery.objects.filter(study=study)
        .defer("body")
        .order_by("-created_at", "-pk")[:limit]
    )


# -- events -------------------------------------------------------------------------------


def _body(
    *, event: str, study_id: int, participant_id: int | None, at: datetime, delivery_id: str
) -> str:
    # The participant is the id the exports' participant_id column holds: never the
    # invite token, the label (which may be a name), the account or the platform's id.
    payload = {
        "event": event,
        "study": study_id,
        "participant": participant_id,
        "at": at.isoformat(),
        "delivery": delivery_id,
    }
    return json.dumps(payload, separators=(",", ":"))


def _queue(delivery: WebhookDelivery) -> None:
    # common.tasks.task_send_on_commit, but robust: a broker that is down must not turn
    # a participant's finish or withdraw page into an error. The envelope is written in
    # this transaction, so the sweep (common.queueing) sends it later.
    job = queued_job_create(WEBHOOK_TASK_NAME, [delivery.pk])
    transaction.on_commit(lambda: queued_job_send(job), robust=True)


def webhook_event_record(
    *,
    study: Study,
    event: str,
    participant: Participant | None = None,
    at: datetime | None = None,
) -> WebhookDelivery | None:
    """Write the event's delivery and queue it after commit; None when the study has no
    webhook, or (for a participant's event) when it was announced already.

    Not atomic as a whole: on a study without a webhook (most) the caller's transaction
    sees not even a savepoint.
    """
    if not study.webhook_url:
        return None
    delivery_id = str(uuid.uuid4())
    body = _body(
        event=event,
        study_id=study.pk,
        participant_id=participant.pk if participant else None,
        at=at or timezone.now(),
        delivery_id=delivery_id,
    )
    try:
        with transaction.atomic():  # a savepoint: the participant's transaction goes on
            delivery = WebhookDelivery.objects.create(
                study_id=study.pk,
                participant=participant,
                event=event,
                delivery_id=delivery_id,
                body=body,
                max_attempts=max(1, int(_setting("TOMLAB_WEBHOOK_MAX_ATTEMPTS"))),
            )
    except IntegrityError:
        return None  # this participant's event was announced already (one per kind)
    _queue(delivery)
    return delivery


def webhook_test_send(*, study: Study) -> WebhookDelivery:
    """A test event (``webhook.test``, no participant), so the researcher can check the
    receiver and its signature check from the study page."""
    study.refresh_from_db(fields=["webhook_url"])
    delivery = webhook_event_record(study=study, event=WebhookDelivery.Event.TEST)
    if delivery is None:
        raise WebhookError("set a webhook URL first")
    return delivery


def _study_of(participant: Participant) -> Study:
    """The participant's study with its webhook URL, reusing a loaded one: a study
    without a webhook then costs the finishing or withdrawing request no query."""
    study = participant.study if Participant.study.is_cached(participant) else None
    if study is None or "webhook_url" in study.get_deferred_fields():
        study = Study.objects.only("pk", "webhook_url").get(pk=participant.study_id)
    return study


def on_participant_finished(sender: Any, *, participant: Participant, **kwargs: Any) -> None:
    """Receiver of ``participant_finished`` (connected in ``signals``)."""
    webhook_event_record(
        study=_study_of(participant),
        event=WebhookDelivery.Event.FINISHED,
        participant=participant,
        at=participant.finished_at,
    )


def on_participant_withdrawn(sender: Any, *, participant: Participant, **kwargs: Any) -> None:
    """Receiver of ``participant_withdrawn`` (a withdrawal, or "withdraw my data")."""
    webhook_event_record(
        study=_study_of(participant),
        event=WebhookDelivery.Event.WITHDRAWN,
        participant=participant,
        at=participant.withdrawn_at,
    )


# -- delivery -----------------------------------------------------------------------------


def webhook_signature(*, secret: str, timestamp: int | str, body: str) -> str:
    """``sha256=`` and the hex HMAC-SHA256 of ``"<timestamp>.<body>"`` under ``secret``."""
    message = f"{timestamp}.{body}".encode()
    return "sha256=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int | None, str]:
    """POST once: (HTTP status or None, error text or "").

    http.client rather than urllib: the headers go out spelled as documented (urllib
    would send ``X-tomlab-signature``), and a 3xx is the receiver's answer, recorded as a
    failure, never followed to a place the researcher did not name.
    """
    parts = urlsplit(url)
    timeout = float(_setting("TOMLAB_WEBHOOK_TIMEOUT_S"))
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        # Checked again at each try (common.egress): the name may point elsewhere now.
        connection = egress.http_connection(url, timeout=timeout)
    except egress.EgressRefused as exc:
        return None, str(exc)
    try:
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        response.read(65536)
        status = response.status
    except TimeoutError:
        return None, f"no answer within {timeout:g} s"
    except ssl.SSLError as exc:
        return None, f"TLS failed: {exc.reason or exc}"
    except http.client.HTTPException as exc:  # connected, but no HTTP answer came back
        return None, f"no valid HTTP answer ({type(exc).__name__})"
    except (OSError, ValueError) as exc:  # refused or reset, unknown host, bad port
        return None, f"could not connect: {exc or type(exc).__name__}"
    finally:
        connection.close()
    if 200 <= status < 300:
        return status, ""
    return status, f"HTTP {status} {response.reason}".strip()


@dataclass(frozen=True)
class Attempt:
    """What one run of the task did: the delivery's status now, and when to try again
    (seconds; None: no further try)."""

    status: str
    retry_in: float | None = None


def retry_delay(attempts: int) -> float:
    """Seconds before the next try after ``attempts`` tries: the backoff doubled each
    time, kept under the sweep's requeue age so the sweep never sends a waiting try again."""
    delay = float(_setting("TOMLAB_WEBHOOK_BACKOFF_S")) * 2 ** max(0, attempts - 1)
    return min(delay, settings.TOMLAB_REQUEUE_AFTER_S / 2)


def webhook_deliver(*, delivery_id: int) -> Attempt:
    """Make one try of a pending delivery: POST its body, signed, to the study's URL.

    The try is claimed with one conditional UPDATE of ``attempts``, so a second copy of
    the message finds it taken. A 2xx answer delivers it; anything else (another status,
    a refused connection, no answer in time) fails the try: another follows after
    :func:`retry_delay` until ``max_attempts``, then the delivery is failed. The study's
    current URL and key are used, so a rotated key signs the next try.
    """
    row = (
        WebhookDelivery.objects.select_related("study")
        .only(
            "pk",
            "status",
            "attempts",
            "max_attempts",
            "event",
            "delivery_id",
            "body",
            "study__webhook_url",
            "study__webhook_secret",
        )
        .filter(pk=delivery_id)
        .first()
    )
    if row is None or row.status != WebhookDelivery.Status.PENDING:
        return Attempt(status=row.status if row else "gone")
    now = timezone.now()
    claimed = WebhookDelivery.objects.filter(
        pk=row.pk, status=WebhookDelivery.Status.PENDING, attempts=row.attempts
    ).update(attempts=F("attempts") + 1, last_attempt_at=now, next_attempt_at=None)
    if not claimed:
        return Attempt(status="taken")
    attempts = row.attempts + 1
    url, stored = row.study.webhook_url, row.study.webhook_secret
    try:
        secret = decrypt_secret(stored)
    except CredentialUnreadable as exc:
        WebhookDelivery.objects.filter(pk=row.pk).update(
            status=WebhookDelivery.Status.FAILED,
            last_status_code=None,
            last_error=f"the signing key is unreadable: {exc}",
        )
        return Attempt(status=WebhookDelivery.Status.FAILED)
    if not url or not secret:
        WebhookDelivery.objects.filter(pk=row.pk).update(
            status=WebhookDelivery.Status.FAILED,
            last_status_code=None,
            last_error="the study has no webhook any more",
        )
        return Attempt(status=WebhookDelivery.Status.FAILED)
    timestamp = int(time.time())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "ToMLab-Webhook/1",
        EVENT_HEADER: row.event,
        DELIVERY_HEADER: str(row.delivery_id),
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: webhook_signature(secret=secret, timestamp=timestamp, body=row.body),
    }
    status_code, error = _post(url, row.body.encode(), headers)
    # Whatever a library put in the message, the key never reaches the row or a log.
    error = error.replace(secret, "[redacted]")[:500]
    done = timezone.now()
    if status_code is not None and 200 <= status_code < 300:
        WebhookDelivery.objects.filter(pk=row.pk).update(
            status=WebhookDelivery.Status.DELIVERED,
            last_status_code=status_code,
            last_error="",
            delivered_at=done,
        )
        return Attempt(status=WebhookDelivery.Status.DELIVERED)
    if not error:
        error = f"HTTP {status_code}"
    if attempts >= row.max_attempts:
        WebhookDelivery.objects.filter(pk=row.pk).update(
            status=WebhookDelivery.Status.FAILED, last_status_code=status_code, last_error=error
        )
        logger.warning(
            "webhook delivery %s (study %s) failed after %d tries: %s",
            row.delivery_id,
            row.study_id,
            attempts,
            error,
        )
        return Attempt(status=WebhookDelivery.Status.FAILED)
    delay = retry_delay(attempts)
    WebhookDelivery.objects.filter(pk=row.pk).update(
        last_status_code=status_code,
        last_error=error,
        next_attempt_at=done + timedelta(seconds=delay),
    )
    return Attempt(status=WebhookDelivery.Status.PENDING, retry_in=delay)
