"""Researcher pages for running a study with recruited participants: recruitment and
pacing settings, the public link, CSV invites, practice and attention-check scenes,
per-rater quality (page section and CSV), the ledger's platform-id CSV and exclusion
overrides, the study's webhook (URL, signing key, test event, recent deliveries), and a
preview as a participant that stores nothing. Each view checks the researcher role
itself, like ``researcher_views``.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_cache_control
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from accounts.decorators import researcher_required
from common.csv_safe import csv_writer
from common.request_params import BadNumber, optional_number

from .. import quality
from ..errors import StudyError
from ..models import Assignment, Participant, Study, StudyItem, WebhookDelivery, WorkSession
from . import ledger, questionnaire, recruitment, webhooks
from .forms import (
    CsvInviteForm,
    ExclusionOverrideForm,
    ExitQuestionsForm,
    ItemRolesForm,
    RunningForm,
    WebhookForm,
)

researcher_only = researcher_required("Studies are for researchers only.")


def _study(study_id: int) -> Study:
    return get_object_or_404(Study, pk=study_id)


def _back(study: Study, anchor: str) -> HttpResponse:
    return redirect(reverse("studies:detail", args=[study.pk]) + anchor)


def _form_errors(form: Any) -> str:
    """A form's errors for a message, each after its field's label ("Seed: …")."""
    return "; ".join(
        f"{form.fields[k].label or k}: {' '.join(v)}" if k in form.fields else " ".join(v)
        for k, v in form.errors.items()
    )


@require_POST
@researcher_only
def study_running(request: HttpRequest, study_id: int) -> HttpResponse:
    study = _study(study_id)
    form = RunningForm(request.POST, study=study)
    if not form.is_valid():
        messages.error(request, f"Not saved: {_form_errors(form)}")
        return _back(study, "#running")
    recruitment.study_running_update(study=study, **form.study_fields())
    recruitment.public_link_set(study=study, cap=form.cleaned_data["public_cap"])
    ledger.exclusions_refresh(study=study)  # the rule may have changed
    messages.success(request, "Recruitment and pacing settings saved.")
    return _back(study, "#running")


EXIT_EDITOR = "studies/study_exit_questions.html"


@require_http_methods(["GET", "POST"])
@researcher_only
def study_exit_questions(request: HttpRequest, study_id: int) -> HttpResponse:
    """The exit questionnaire's editor: its text, the syntax, a preview as participants
    see it. A text that does not parse comes back as typed (400), its lines named;
    "Preview" shows the parsed questions without saving them."""
    study = _study(study_id)
    form = ExitQuestionsForm(request.POST) if request.method == "POST" else None
    if form is None:
        form = ExitQuestionsForm.for_study(study)
        questions = study.exit_questions
    elif not form.is_valid():
        context = {"study": study, "form": form, "items": []}
        return render(request, EXIT_EDITOR, context, status=400)
    elif "preview" in request.POST:
        questions = form.cleaned_data["text"]
    else:
        before = study.exit_questions_version
        study = recruitment.exit_questions_save(study=study, questions=form.cleaned_data["text"])
        if study.exit_questions_version == before:
            messages.info(request, "Nothing changed.")
        else:
            messages.success(
                request, f"Exit questionnaire saved as version {study.exit_questions_version}."
            )
        return redirect(reverse("studies:exit-questions", args=[study.pk]))
    context = {
        "study": study,
        "form": form,
        "items": questionnaire.form_items(questions),
        "previewing": request.method == "POST",
    }
    return render(request, EXIT_EDITOR, context)


@require_POST
@researcher_only
def study_invite_csv(request: HttpRequest, study_id: int) -> HttpResponse:
    study = _study(study_id)
    form = CsvInviteForm(request.POST, request.FILES)
    if study.status == Study.Status.CLOSED:
        messages.error(request, "The study is closed: it takes no new invites.")
    elif not form.is_valid():
        messages.error(request, "Choose a CSV file.")
    else:
        upload = form.cleaned_data["file"]
        try:
            data = upload.read(recruitment.MAX_CSV_INVITE_BYTES + 1)
            created = recruitment.invites_from_csv(study=study, data=data)
        except StudyError as exc:
            messages.error(request, f"{upload.name}: {exc}.")
        else:
            messages.success(request, f"{len(created)} invite links created from {upload.name}.")
    return _back(study, "#invites")


@require_POST
@researcher_only
def study_item_roles(request: HttpRequest, study_id: int) -> HttpResponse:
    study = _study(study_id)
    form = ItemRolesForm(request.POST, study=study)
    if not form.is_valid():
        messages.error(request, f"Not saved: {_form_errors(form)}")
        return _back(study, "#roles")
    try:
        study = recruitment.attention_checks_set(
            study=study,
            practice=form.cleaned_data["practice"],
            attention=list(form.cleaned_data["attention"]),
            instruction=form.cleaned_data["attention_instruction"],
        )
    except StudyError as exc:
        # "attention_instruction: …" from the service, worded as the form names it.
        name, _, text = str(exc).partition(": ")
        label = form.fields[name].label if name in form.fields else ""
        messages.error(request, f"Not saved: {label}: {text}" if label else str(exc))
    else:
        threshold = (
            f" With the instruction, more than {study.instructed_max_failures} failed "
            "checks exclude a participant (“Exclude participants failing more than … "
            "instructed-response items” above)."
            if study.attention_instruction
            else ""
        )
        messages.success(request, f"Practice scene and attention checks saved.{threshold}")
    return _back(study, "#roles")


def csv_response(study: Study, name: str) -> tuple[HttpResponse, Any]:
    stamp = timezone.now().strftime("%Y%m%d-%H%M")
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="study-{study.pk}-{name}-{stamp}.csv"'
    return response, csv_writer(response)


@require_GET
@researcher_only
def study_quality_csv(request: HttpRequest, study_id: int) -> HttpResponse:
    """Every participant: quality figures (the study page's table) and ledger status."""
    study = _study(study_id)
    response, writer = csv_response(study, "raters")
    writer.writerow(quality.QUALITY_COLUMNS)
    for values in ledger.raters_csv_rows(study=study):
        writer.writerow([values[c] for c in quality.QUALITY_COLUMNS])
    return response


@require_GET
@researcher_only
def study_platform_ids_csv(request: HttpRequest, study_id: int) -> HttpResponse:
    """Platform ids by ledger status, with the action to take on the recruiting platform
    (approve, reject, return): what a researcher needs to settle every submission."""
    study = _study(study_id)
    response, writer = csv_response(study, "platform-ids")
    writer.writerow(ledger.PLATFORM_COLUMNS)
    for row in ledger.study_ledger(study=study):
        values = ledger.ledger_csv_fields(row)
        writer.writerow([values[c] for c in ledger.PLATFORM_COLUMNS])
    return response


@require_POST
@researcher_only
def participant_exclusion(request: HttpRequest, study_id: int, participant_id: int) -> HttpResponse:
    """The researcher's override of one participant's exclusion, with a reason."""
    study = _study(study_id)
    participant = get_object_or_404(Participant, pk=participant_id, study=study)
    form = ExclusionOverrideForm(request.POST)
    if not form.is_valid():
        errors = "; ".join(
            f"{form.fields[k].label or k.capitalize()}: {' '.join(v)}"
            for k, v in form.errors.items()
        )
        messages.error(request, f"{participant}: not saved. {errors}")
        return _back(study, "#participants")
    try:
        participant = ledger.participant_exclusion_override(
            participant=participant,
            decision=form.cleaned_data["decision"],
            reason=form.cleaned_data["reason"],
        )
    except StudyError as exc:
        messages.error(request, f"{participant}: not saved. {exc}")
        return _back(study, "#participants")
    if participant.excluded_at:
        note = " Their places are open to the next participants."
    else:
        note = ""
        if short := participant.places_short:
            note = (
                f" {short} of their item{'s' if short != 1 else ''} had been given to others "
                f"meanwhile and now {'have' if short != 1 else 'has'} one answer more than "
                "the quota."
            )
    state = "excluded" if participant.excluded_at else "included"
    messages.success(request, f"{participant} is {state} now.{note}")
    return _back(study, "#participants")


# -- the webhook ---------------------------------------------------------------------------

WEBHOOK_PAGE = "studies/webhook.html"


def _webhook_render(
    request: HttpRequest,
    study: Study,
    *,
    form: WebhookForm | None = None,
    new_secret: str = "",
    notice: str = "",
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    """The webhook page, or (htmx) its panel, which the study page loads in place.

    A form error answers an htmx request 200, since htmx swaps in no 4xx answer.
    """
    study.refresh_from_db(fields=["webhook_url"])
    deliveries = webhooks.webhook_deliveries_recent(study=study)
    context = {
        "study": study,
        "webhook_form": form or WebhookForm(initial={"webhook_url": study.webhook_url}),
        "deliveries": deliveries,
        "pending": any(d.status == WebhookDelivery.Status.PENDING for d in deliveries),
        "new_secret": new_secret,
        "notice": notice,
        "error": error,
    }
    if request.htmx:
        response = render(request, f"{WEBHOOK_PAGE}#panel", context)
    else:
        response = render(request, WEBHOOK_PAGE, context, status=status)
    if new_secret:
        # The key is on this page only: no cache (browser or proxy) may keep a copy.
        patch_cache_control(response, no_store=True, private=True)
    return response


def _webhook_done(request: HttpRequest, study: Study, notice: str) -> HttpResponse:
    if request.htmx:
        return _webhook_render(request, study, notice=notice)
    messages.success(request, notice)
    return redirect("studies:webhook", study_id=study.pk)


@require_http_methods(["GET", "POST"])
@researcher_only
def study_webhook(request: HttpRequest, study_id: int) -> HttpResponse:
    """GET: the URL, the key's state, buttons and the last deliveries. POST: set or
    change the URL; the first time, the new signing key is shown, this once."""
    study = _study(study_id)
    if request.method == "GET":
        if request.htmx and request.htmx.target == "webhook-deliveries":
            deliveries = webhooks.webhook_deliveries_recent(study=study)
            pending = any(d.status == WebhookDelivery.Status.PENDING for d in deliveries)
            context = {"study": study, "deliveries": deliveries, "pending": pending}
            response = render(request, f"{WEBHOOK_PAGE}#deliveries", context)
            # 286: htmx swaps this last copy in and stops polling.
            return response if pending else HttpResponseStopPolling(response.content)
        return _webhook_render(request, study)
    form = WebhookForm(request.POST)
    if not form.is_valid():
        return _webhook_render(request, study, form=form, status=400)
    had_url = bool(study.webhook_url)
    secret = webhooks.webhook_set(study=study, url=form.cleaned_data["webhook_url"])
    if secret:
        notice = "Webhook set. Copy the signing key now: it is shown only this once."
        return _webhook_render(request, study, new_secret=secret, notice=notice)
    notice = "Webhook URL changed; the signing key is the same." if had_url else "Webhook set."
    return _webhook_done(request, study, notice)


@require_POST
@researcher_only
def study_webhook_rotate(request: HttpRequest, study_id: int) -> HttpResponse:
    """A new signing key, shown once; the old one signs nothing from now on."""
    study = _study(study_id)
    try:
        secret = webhooks.webhook_secret_rotate(study=study)
    except webhooks.WebhookError as exc:
        return _webhook_render(request, study, error=f"No new key: {exc}.", status=409)
    notice = "New signing key made: copy it now, it is shown only this once. The old key is void."
    return _webhook_render(request, study, new_secret=secret, notice=notice)


@require_POST
@researcher_only
def study_webhook_remove(request: HttpRequest, study_id: int) -> HttpResponse:
    study = _study(study_id)
    webhooks.webhook_remove(study=study)
    return _webhook_done(request, study, "Webhook removed: no more events are sent.")


@require_POST
@researcher_only
def study_webhook_test(request: HttpRequest, study_id: int) -> HttpResponse:
    """Queue a ``webhook.test`` event; the deliveries table shows how it went."""
    study = _study(study_id)
    try:
        delivery = webhooks.webhook_test_send(study=study)
    except webhooks.WebhookError as exc:
        return _webhook_render(request, study, error=f"No test event sent: {exc}.", status=409)
    return _webhook_done(request, study, f"Test event {delivery.delivery_id} queued.")


@require_http_methods(["GET", "POST"])
@researcher_only
def study_preview(request: HttpRequest, study_id: int) -> HttpResponse:
    """What a participant sees, from the consent page on, with nothing stored.

    Nothing is created (no participant, assignment or answer): the pages are rendered
    from unsaved rows. The consent page's buttons are plain links here ("I agree" to the
    first scene, "I do not agree" to the refusal page); the scene page's answer fields
    do not save (htmx is off inside it) and "Submit" only moves to the next scene.
    Without ``n`` the preview starts where a participant starts: at the consent page.
    """
    from ..scene.views import MESSAGE_PAGE, SCENE_PAGE, _scene_context

    study = _study(study_id)
    here = reverse("studies:preview", args=[study.pk])
    fake = Participant(pk=0, study=study, token="preview", label="preview")
    if request.GET.get("step") == "refused":
        context = {
            "study": study,
            "preview": True,
            "title": "Thank you",
            "text": "You chose not to take part, and nothing else about you has been "
            "recorded. You can close this page.",
            "preview_restart": here,
        }
        return render(request, MESSAGE_PAGE, context)
    if "n" not in request.GET:
        context = {
            "participant": fake,
            "study": study,
            "estimate": recruitment.study_estimate(study=study),
            "preview": True,
            "preview_agree": f"{here}?n=0",
            "preview_refuse": f"{here}?step=refused",
        }
        return render(request, "studies/rater_consent.html", context)
    items = list(
        StudyItem.objects.filter(study=study, held_back=False, scene__isnull=False)
        .select_related("scene", "study_work__work")
        .order_by("study_work__position", "-role", "position")
    )
    if not items:
        messages.error(request, "No scene to preview: every scene is held back.")
        return _back(study, "")
    try:
        n = optional_number(request.GET.get("n"), name="n") or 0
    except BadNumber:
        n = 0
    n = min(n, len(items) - 1)
    item = items[n]
    session = WorkSession(pk=0, participant=fake, study_work=item.study_work, seen=False, seed=0)
    assignment = Assignment(
        pk=0, participant=fake, session=session, study_item=item, position=n, seen=False
    )
    context = _scene_context(fake, assignment)
    # Numbered as a participant sees them: practice scenes are not counted.
    counted = [i for i in items if i.role != StudyItem.Role.PRACTICE]
    practice = item.role == StudyItem.Role.PRACTICE
    context |= {
        "preview": True,
        "practice": practice,
        "number": 0 if practice else counted.index(item) + 1,
        "total": len(counted),
        "has_history": recruitment.study_work_has_history(item.study_work_id),
        "missing": [],
        "preview_next": f"{here}?n={(n + 1) % len(items)}",
        "confidence_levels": [(v, str(v)) for v in range(1, 6)],
    }
    return render(request, SCENE_PAGE, context)
