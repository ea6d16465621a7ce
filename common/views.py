from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET, require_POST


@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})


# config/urls.py wraps these views (common sits below accounts and cannot import it):
# the list in operator_required (it shows every workspace's jobs), the re-queue, which
# a job's own page offers, in researcher_required.
def queued_jobs(request: HttpRequest) -> HttpResponse:
    """Every job no worker has taken yet, with Re-queue."""
    from django.conf import settings
    from django.shortcuts import render

    from .queueing import queued_jobs_waiting

    return render(
        request,
        "common/queued_jobs.html",
        {"jobs": queued_jobs_waiting(), "requeue_after_s": settings.TOMLAB_REQUEUE_AFTER_S},
    )


@require_POST
def queued_job_requeue(request: HttpRequest, pk: int) -> HttpResponse:
    """Send a waiting job again now; back to the page the button was on."""
    from django.contrib import messages
    from django.shortcuts import redirect
    from django.urls import reverse
    from django.utils.http import url_has_allowed_host_and_scheme

    from .queueing import queued_job_requeue as requeue

    job = requeue(pk)
    if job is None:
        messages.info(request, "A worker has already taken that job (or it is gone).")
    else:
        messages.success(request, f"Re-queued {job.task} {tuple(job.args)}.")
    target = request.POST.get("next", "")
    # A path on this site only: redirect() would read any other string as a view name.
    if not target.startswith("/") or not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        target = reverse("queued-jobs")
    return redirect(target)


# Seconds a client waits before trying again while the database cannot be reached.
RETRY_AFTER_S = 5


def server_error(request: HttpRequest) -> HttpResponse:
    """Django's 500, except while the database cannot be reached (restarting, a network
    blip, "database is locked"): then 503 with ``Retry-After``, which the rater page's
    script and any client take as "try again", not "your answer is lost"."""
    import sys

    from django.db import InterfaceError, OperationalError
    from django.views.defaults import server_error as django_server_error

    if isinstance(sys.exc_info()[1], OperationalError | InterfaceError):
        response = HttpResponse(
            "The server cannot reach its database for a moment; nothing you sent was lost. "
            "Try again in a few seconds.",
            status=503,
            content_type="text/plain; charset=utf-8",
        )
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response
    return django_server_error(request)
