"""The home page: what each of the signed-in user's roles can do next.

It lives in ``reports``, the top app, because it reads the item bank and the live
studies; ``config`` holds only settings, the URLconf, wsgi and celery.
"""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from accounts.roles import ANNOTATOR, RATER, RESEARCHER, has_role
from benchmarks.selectors import item_bank_counts
from common.scoping import scoped_to


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    roles = [r for r in (RESEARCHER, ANNOTATOR, RATER) if has_role(request.user, r)]
    context = {"roles": roles}
    if RESEARCHER in roles:
        context["counts"] = item_bank_counts()
    if RATER in roles:
        from studies.models import Study

        # Open to every rater account, whichever workspace runs the study.
        with scoped_to(None):
            context["open_studies"] = Study.objects.filter(
                status=Study.Status.LIVE, imported=False, open_join=True
            ).order_by("name")
    return render(request, "home.html", context)
