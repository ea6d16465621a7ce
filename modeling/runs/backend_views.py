"""Backend pages for researchers, mounted under /runs/backends/: list, new, edit,
disable/enable and test connection (an htmx partial; a full page without JavaScript).

New and edit honour ``?next=`` (the run form's "Add a backend" sends the researcher
back to New run); only a local path is followed. Editing someone else's backend needs
what the admin needs (``Backend.may_be_changed_by``).
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from accounts.decorators import forbidden
from accounts.decorators import researcher_required as researcher_only

from ..backends.policy import origin
from ..models import Backend
from . import backend_services as services
from .backend_forms import BackendForm

researcher_required = researcher_only("Backends are for researchers only.")
TEST_PARTIAL = "modeling/backend_list.html#backend-test"


def _next_url(request: HttpRequest) -> str:
    url = request.POST.get("next") or request.GET.get("next") or ""
    allowed = url_has_allowed_host_and_scheme(
        url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return url if allowed else ""


def _host(base_url: str) -> str:
    """host[:port] of ``base_url``, never its user:password part."""
    if not base_url:
        return ""
    _scheme, host, port = origin(base_url)
    return f"{host}:{port}" if port else host


def _rows(backends: list[Backend]) -> list[dict]:
    return [
        {
            "backend": b,
            "host": _host(b.base_url),
            "disabled": services.backend_is_disabled(b),
            "last_test": services.backend_last_test(b),
        }
        for b in backends
    ]


@require_GET
@researcher_required
def backend_list(request: HttpRequest) -> HttpResponse:
    rows = _rows(list(Backend.objects.order_by("name")))
    return render(request, "modeling/backend_list.html", {"rows": rows})


@require_http_methods(["GET", "POST"])
@researcher_required
def backend_new(request: HttpRequest) -> HttpResponse:
    next_url = _next_url(request)
    form = BackendForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        backend = services.backend_create(backend=form.save(commit=False), created_by=request.user)
        messages.success(request, f"Backend {backend.name} saved.")
        return redirect(next_url or "modeling:backend-list")
    return render(request, "modeling/backend_form.html", {"form": form, "next": next_url})


@require_http_methods(["GET", "POST"])
@researcher_required
def backend_edit(request: HttpRequest, backend_id: int) -> HttpResponse:
    backend = get_object_or_404(Backend, pk=backend_id)
    if not backend.may_be_changed_by(request.user):
        return forbidden(request, "Only the backend's creator or an administrator may edit it.")
    next_url = _next_url(request)
    form = BackendForm(request.POST or None, instance=backend)
    if request.method == "POST" and form.is_valid():
        dropped = services.backend_update(backend=form.save(commit=False))
        messages.success(request, f"Backend {backend.name} saved.")
        if dropped:
            messages.warning(
                request,
                f"The base URL now points at another server, so {' and '.join(dropped)} "
                "were removed: enter them again for the new server.",
            )
        return redirect(next_url or "modeling:backend-list")
    context = {"form": form, "next": next_url, "backend": backend}
    return render(request, "modeling/backend_form.html", context)


@require_POST
@researcher_required
def backend_toggle(request: HttpRequest, backend_id: int) -> HttpResponse:
    backend = get_object_or_404(Backend, pk=backend_id)
    if not backend.may_be_changed_by(request.user):
        return forbidden(request, "Only the backend's creator or an administrator may change it.")
    if request.POST.get("action") == "enable":
        services.backend_enable(backend=backend)
        messages.success(request, f"Backend {backend.name} enabled.")
    else:
        services.backend_disable(backend=backend)
        messages.success(request, f"Backend {backend.name} disabled: new runs cannot use it.")
    return redirect("modeling:backend-list")


@require_POST
@researcher_required
def backend_test(request: HttpRequest, backend_id: int) -> HttpResponse:
    """Queue a connection test; the cell polls ``backend_test_status`` for its outcome."""
    backend = get_object_or_404(Backend, pk=backend_id)
    result = services.backend_test_queue(backend=backend)
    if request.htmx:
        return render(request, TEST_PARTIAL, {"backend": backend, "result": result})
    rows = _rows(list(Backend.objects.order_by("name")))
    context = {"rows": rows, "tested": backend, "result": result}
    return render(request, "modeling/backend_list.html", context)


@require_GET
@researcher_required
def backend_test_status(request: HttpRequest, backend_id: int) -> HttpResponse:
    """The test's cell as it stands (htmx polls it while the test is pending)."""
    backend = get_object_or_404(Backend, pk=backend_id)
    result = services.backend_last_test(backend)
    response = render(request, TEST_PARTIAL, {"backend": backend, "result": result})
    if request.htmx and not (result and result.pending):
        return HttpResponseStopPolling(response.content)
    return response
