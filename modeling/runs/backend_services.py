"""Backends configured in the app: create, update, disable/enable, test the connection.

The backend pages and the admin both save through these, so the key handling (write
once, never shown) and the server's policy checks (``Backend.clean``) are the same
wherever a backend is edited. They live in ``modeling.runs`` because they touch the
``Backend`` row, which ``modeling.backends`` (plain config only) may not import.

"Disabled" is ``Backend.disabled_at``; the last connection test's redacted result is
``Backend.last_test``.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from common.tasks import task_send_on_commit

from ..backends import BackendError, ChatRequest
from ..backends.base import get_backend
from ..backends.secrets import mask_secrets
from ..credentials import backend_secret_values
from ..models import Backend

logger = logging.getLogger(__name__)

TEST_PROMPT = "Reply with the single word: ready"
TEST_MAX_TOKENS = 16
# A test should answer quickly or say why not; a run keeps the backend's own timeout.
# It runs on a Celery worker (a hanging server once held a web thread for 30 s), and a
# worker's slot is held no longer than this either.
TEST_TIMEOUT_S = 10.0
TEST_TASK_NAME = "modeling.backend_test"
# A test queued this long ago and not finished: the page says no worker has taken it.
TEST_WAIT_NOTICE_S = 30


@dataclass(frozen=True)
class ConnectionResult:
    ok: bool
    reply: str = ""
    latency_ms: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""
    # Queued for a worker, no answer yet (``at``: when it was queued).
    pending: bool = False
    at: str = ""

    @property
    def waiting_long(self) -> bool:
        """Pending for longer than ``TEST_WAIT_NOTICE_S``: no worker seems to be running."""
        if not self.pending or not self.at:
            return False
        try:
            queued = datetime.fromisoformat(self.at)
        except ValueError:
            return False
        return (timezone.now() - queued).total_seconds() > TEST_WAIT_NOTICE_S


def backend_is_disabled(backend: Backend) -> bool:
    return backend.disabled_at is not None


def backend_last_test(backend: Backend) -> ConnectionResult | None:
    """The last connection test's result, as stored (already redacted)."""
    stored = backend.last_test
    if not isinstance(stored, dict):
        return None
    fields = ConnectionResult.__dataclass_fields__
    return ConnectionResult(**{k: v for k, v in stored.items() if k in fields})


def backend_selectable() -> QuerySet[Backend]:
    """Backends a new run may use: every backend not disabled."""
    return Backend.objects.filter(disabled_at__isnull=True).order_by("name")


def backend_apply_key(*, backend: Backend, new_key: str, clear: bool = False) -> None:
    """Store ``new_key`` encrypted, or remove the stored key (``clear``); blank keeps
    the stored key. The caller saves."""
    if clear:
        backend.set_api_key("")
    elif new_key:
        backend.set_api_key(new_key)


@transaction.atomic
def backend_create(*, backend: Backend, created_by: Any) -> Backend:
    """Save a new backend (validated by the form; its key set by backend_apply_key)."""
    backend.created_by = created_by if getattr(created_by, "pk", None) else None
    backend.save()
    logger.info("backend %s created by %s", backend.name, created_by)
    return backend


@transaction.atomic
def backend_update(*, backend: Backend) -> list[str]:
    """Save an edited backend; returns what was dropped because the URL moved server."""
    backend.save()
    logger.info("backend %s updated", backend.name)
    return backend.dropped_secrets


@transaction.atomic
def backend_disable(*, backend: Backend) -> Backend:
    """Hide the backend from new runs; runs that used it keep it."""
    if backend.disabled_at is None:
        backend.disabled_at = timezone.now()
        backend.save(update_fields=["disabled_at"])
    return backend


@transaction.atomic
def backend_enable(*, backend: Backend) -> Backend:
    backend.disabled_at = None
    backend.save(update_fields=["disabled_at"])
    return backend


def backend_test_queue(*, backend: Backend) -> ConnectionResult:
    """Queue a connection test for a worker; the backend's ``last_test`` says pending
    until the worker records the outcome (``backend_test_connection``)."""
    pending = {"ok": False, "pending": True, "at": timezone.now().isoformat()}
    with transaction.atomic():
        Backend.objects.filter(pk=backend.pk).update(last_test=pending)
        task_send_on_commit(TEST_TASK_NAME, (backend.pk,))
    backend.refresh_from_db(fields=["last_test"])
    return backend_last_test(backend)


def backend_test_execute(*, backend_id: int) -> str:
    """The queued test (the task calls this): "tested", or "gone" for a deleted backend."""
    backend = Backend.objects.filter(pk=backend_id).first()
    if backend is None:
        return "gone"
    backend_test_connection(backend=backend)
    return "tested"


def backend_test_connection(*, backend: Backend) -> ConnectionResult:
    """Send one short prompt, once (no retries), and record the outcome on the backend.

    A transformers backend loads its model for this: it is local, and whether it loads
    is what the researcher wants to know.
    """
    probe = copy.copy(backend)
    probe.max_retries = 0
    probe.timeout_s = min(backend.timeout_s or TEST_TIMEOUT_S, TEST_TIMEOUT_S)
    request = ChatRequest.build(
        [{"role": "user", "content": TEST_PROMPT}],
        model=backend.default_model or backend.model_path,
        params={"max_tokens": TEST_MAX_TOKENS, "temperature": 0},
    )
    client = None
    try:
        client = get_backend(probe)
        reply = client.complete(request)
        result = ConnectionResult(
            ok=True,
            reply=mask_secrets(reply.text, backend_secret_values(backend)),
            latency_ms=reply.latency_ms,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
        )
    # Anything the client or server raised is the answer to "does it work?"; shown, not
    # raised, with every credential masked.
    except Exception as exc:
        text = str(exc) if isinstance(exc, BackendError) else f"{type(exc).__name__}: {exc}"
        result = ConnectionResult(
            ok=False, error=mask_secrets(text, backend_secret_values(backend))
        )
    finally:
        if client is not None:
            client.close()
    stored = asdict(result) | {"at": timezone.now().isoformat()}
    backend.last_test = stored
    Backend.objects.filter(pk=backend.pk).update(last_test=stored)
    logger.info("backend %s connection test: %s", backend.name, "ok" if result.ok else "failed")
    return result
