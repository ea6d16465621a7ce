"""Researcher pages of multiple-choice studies: set-up, design, direct/indirect labels,
responses with both picks and their times, and the CSV/JSON exchange.

The study list, go-live/pause/close, invites and withdrawals are the pages every study
shares (``researcher_views``); its detail and responses pages hand a multiple-choice
study to :func:`detail` and :func:`responses` here.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.decorators import researcher_required as researcher_only
from common.request_params import BadNumber, optional_number, parse_number

from .. import api_services, selectors
from .. import services as study_services
from ..counting import counted_participants
from ..errors import StudyError
from ..forms import InviteForm, StudyTextsForm
from ..models import Assignment, ChoiceAnswer, Study, StudyItem
from ..participation import recruitment
from ..participation.forms import CsvInviteForm, RunningForm
from ..participation.ledger import STATUSES, ledger_counts, study_ledger
from ..participation.researcher_views import csv_response
from . import allocation, generic
from . import exchange as choice_exchange
from . import services as cs
from .forms import ChoiceStudyForm, InstructedItemForm

PER_PAGE = 100
researcher_required = researcher_only("Studies are for researchers only.")


def _choice_study(study_id: int) -> Study:
    return get_object_or_404(Study.objects.filter(benchmark__in=cs.CHOICE_BENCHMARKS), pk=study_id)


@require_http_methods(["GET", "POST"])
@researcher_required
def study_new(request: HttpRequest) -> HttpResponse:
    form = ChoiceStudyForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            created = api_services.choice_study_create(form=form, created_by=request.user)
        except StudyError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, api_services.choice_created_summary(created))
            return redirect("studies:detail", study_id=created.study.pk)
    status = 422 if form.is_bound and form.errors else 200
    return render(request, "studies/choice_study_new.html", {"form": form}, status=status)


def study_edit(request: HttpRequest, study: Study) -> HttpResponse:
    """Every setting of a multiple-choice draft (``researcher_views.study_edit``); the
    items are drawn again only when a sampling setting changed."""
    form = ChoiceStudyForm.for_study(study, request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        settings_ = form.study_settings()
        redraw = form.sampling_changed()
        try:
            if redraw:
                args = form.sample_args()
                sample = cs.choice_items_sample(**args)
                settings_ = sample.defaults | settings_
                settings_ |= {"benchmark": args["benchmark"], "seed": args["seed"]}
                settings_ |= {"works": args["works"], "items": sample.items}
                settings_["sampling"] = sample.sampling
            if data["benchmark"] == cs.GENERIC:
                settings_["sampling"] = _with_allocation(
                    form, study, settings_.get("sampling"), settings_.get("items")
                )
            study_services.study_update(
                study=study,
                name=data["name"],
                instructions=data.get("instructions") or "",
                consent=data.get("consent") or "",
                **settings_,
            )
        except StudyError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(
                request,
                "Settings saved; the items were drawn again."
                if redraw
                else "Settings saved; the items are unchanged.",
            )
            return redirect("studies:detail", study_id=study.pk)
    status = 422 if form.is_bound and form.errors else 200
    context = {"form": form, "study": study}
    return render(request, "studies/choice_study_new.html", context, status=status)


def _with_allocation(form: ChoiceStudyForm, study: Study, sampling, items) -> dict[str, Any]:
    """A generic draft's ``sampling`` with the form's allocation: an allocation setting
    alone never draws the items again (``items`` is None then: the study's are kept)."""
    sampling = dict(study.sampling if sampling is None else sampling)
    if items is None:
        tests = study.study_items.filter(role=StudyItem.Role.TEST).count()
    else:
        tests = sum(1 for _, f in items if f.get("role") == StudyItem.Role.TEST)
    sampling["allocation"] = allocation.allocation_settings(
        form.allocation_spec(),
        work=form.cleaned_data["works"][0],
        sampling=sampling,
        overlap=form.cleaned_data.get("overlap") or 1,
        test_items=tests,
    )
    return sampling


def detail(request: HttpRequest, study: Study) -> HttpResponse:
    """The study page of a multiple-choice study (``researcher_views.study_detail``)."""
    participants = selectors.study_participants(study)
    # Statuses and tiles from the ledger, as on the scene study page and in its CSVs.
    ledger = study_ledger(study=study)
    statuses = {row.participant.pk: row.status for row in ledger}
    picks = ChoiceAnswer.objects.filter(assignment__participant__study=study)
    items = StudyItem.objects.filter(study=study)
    # Final answers of the participants who count, as the reports count them: a
    # withdrawn or excluded participant's places are open again.
    final = Assignment.objects.filter(
        counted_participants(), study_item__study=study, status=Assignment.Status.SUBMITTED
    )
    per_item = 2 if study.benchmark == cs.CHARTOM else study.overlap
    if study.benchmark == cs.GENERIC:
        # Practice and attention items go to everyone, outside the quota: progress is of
        # the test items' answers.
        final = final.filter(study_item__role=StudyItem.Role.TEST)
        items_needed = items.filter(role=StudyItem.Role.TEST, held_back=False).count()
    else:
        items_needed = items.count()
    sampling = study.sampling or {}
    drawn = sampling.get("strata") or {}
    context = {
        "study": study,
        "raters": [(p, statuses[p.pk]) for p in participants],
        "tiles": [(key, STATUSES[key], n) for key, n in ledger_counts(ledger).items()],
        "invites": [
            {
                "participant": p,
                "url": request.build_absolute_uri(reverse("rater:start", args=[p.token])),
            }
            for p in participants
        ],
        "n_items": items.count(),
        # A mapped study's items per value, in the order the values were drawn: the
        # stored JSON object's keys may come back reordered (PostgreSQL's jsonb sorts them).
        "strata": [(v, drawn[v]) for v in sampling.get("category_values") or [] if v in drawn],
        "n_labelled": items.filter(qa_item__directness__isnull=False).count(),
        "n_picks": picks.count(),
        "n_final": final.count(),
        "n_needed": items_needed * per_item,
        "roles": {
            role: items.filter(role=role).count()
            for role in (StudyItem.Role.PRACTICE, StudyItem.Role.ATTENTION)
        },
        "n_no_work": sum(selectors.participant_has_no_work(p) for p in participants),
        "texts_form": StudyTextsForm(
            initial={"instructions": study.instructions, "consent": study.consent}
        ),
        "invite_form": InviteForm(),
        "csv_form": CsvInviteForm(),
        "running_form": RunningForm.for_study(study),
        "estimate": recruitment.study_estimate(study=study),
        "pilot_min": recruitment.PILOT_MIN,
        "public_url": (
            request.build_absolute_uri(reverse("rater:public", args=[study.public_token]))
            if study.public_cap and study.public_token
            else ""
        ),
        "editable": study.status in (Study.Status.DRAFT,),
    }
    if study.benchmark == cs.GENERIC:
        spec = allocation.study_allocation(study)
        context |= {
            "allocation": spec,
            "design_text": allocation.design_text(study, answers=context["n_needed"]),
            "strata_rows": allocation.stratum_rows(study),
            "n_instructed": cs.instructed_items_of(study).count(),
        }
    return render(request, "studies/choice_study_detail.html", context)


INSTRUCTED_PAGE = "studies/choice_instructed.html"


@require_http_methods(["GET", "POST"])
@researcher_required
def instructed(request: HttpRequest, study_id: int) -> HttpResponse:
    """The attention checks the researcher writes on a mapped benchmark's study: the
    list, a form that adds one, a button that removes one. A form that does not hold
    (an instructed answer that is none of the options…) comes back as typed (400),
    the error beside its field; a change once batches are taken is refused (409)."""
    study = get_object_or_404(Study.objects.filter(benchmark=cs.GENERIC), pk=study_id)
    form = InstructedItemForm(request.POST if "add" in request.POST else None)
    status = 200
    if request.method == "POST":
        try:
            if "remove" in request.POST:
                try:
                    item_id = parse_number(request.POST["remove"], name="remove")
                except BadNumber:
                    raise generic.GenericSpecError("item", "not an item number") from None
                cs.instructed_item_remove(study=study, item_id=item_id)
                messages.success(request, "Written check removed.")
                return redirect("studies:instructed", study_id=study.pk)
            if form.is_valid():
                data = form.cleaned_data["instructed"]
                cs.instructed_item_add(
                    study=study,
                    question=data["question"],
                    options=data["options"],
                    answer=data["options"][data["answer"]],
                )
                messages.success(request, "Written check added.")
                return redirect("studies:instructed", study_id=study.pk)
            status = 400
        except generic.GenericSpecError as exc:
            if exc.field in form.fields:
                form.add_error(exc.field, exc.reason)
            else:
                messages.error(request, f"Not saved: {exc.reason}.")
            status = 409
    context = {
        "study": study,
        "form": form,
        "items": [(item, generic.instructed_item(item)) for item in cs.instructed_items_of(study)],
    }
    return render(request, INSTRUCTED_PAGE, context, status=status)


@require_GET
@researcher_required
def strata_csv(request: HttpRequest, study_id: int) -> HttpResponse:
    """The study page's per-stratum table (``allocation.stratum_rows``) as CSV."""
    study = get_object_or_404(Study.objects.filter(benchmark=cs.GENERIC), pk=study_id)
    response, writer = csv_response(study, "strata")
    writer.writerow(allocation.STRATUM_COLUMNS)
    for row in allocation.stratum_rows(study):
        writer.writerow([row[c] for c in allocation.STRATUM_COLUMNS])
    return response


@require_http_methods(["GET", "POST"])
@researcher_required
def design(request: HttpRequest, study_id: int) -> HttpResponse:
    """The read/not-read design: preview from the declarations, then apply."""
    study = _choice_study(study_id)
    if study.benchmark != cs.CHARTOM:
        return redirect("studies:detail", study_id=study.pk)
    if request.method == "POST":
        try:
            view = cs.design_apply(study=study)
        except StudyError as exc:
            messages.error(request, str(exc))
        else:
            n = len(view.design.slots)
            messages.success(
                request,
                f"Design applied: {n} question slot{'s' if n != 1 else ''} handed out"
                + (
                    f"; {len(view.design.uncovered)} not covered (listed below)."
                    if view.design.uncovered
                    else "."
                ),
            )
        return redirect("studies:choice-design", study_id=study.pk)
    view = cs.design_preview(study=study)
    context = {"study": study, "view": view, "rows": view.rows(), "uncovered": view.uncovered()}
    return render(request, "studies/choice_design.html", context)


@require_http_methods(["GET", "POST"])
@researcher_required
def directness(request: HttpRequest, study_id: int) -> HttpResponse:
    """Quick review: label each question direct or indirect (paper 6.4)."""
    study = _choice_study(study_id)
    if request.method == "POST":
        try:
            item_id = optional_number(request.POST.get("item"), name="item")
            label = request.POST.get("directness", "")
            qa = cs.qa_directness_label(study=study, item_id=item_id or 0, directness=label)
        except (BadNumber, StudyError, ValueError) as exc:
            return HttpResponse(str(exc), status=422, content_type="text/plain; charset=utf-8")
        item = get_object_or_404(StudyItem, pk=item_id, study=study)
        item.qa_item = qa
        if request.htmx:
            return render(
                request, "studies/choice_directness.html#label-row", {"study": study, "item": item}
            )
        return redirect(reverse("studies:choice-directness", args=[study.pk]) + f"#item-{item.pk}")
    items = list(
        StudyItem.objects.filter(study=study, qa_item__isnull=False)
        .select_related("qa_item", "study_work__work")
        .order_by("position")
    )
    counts = {
        "direct": sum(1 for i in items if i.qa_item.directness == "direct"),
        "indirect": sum(1 for i in items if i.qa_item.directness == "indirect"),
    }
    counts["open"] = len(items) - counts["direct"] - counts["indirect"]
    return render(
        request,
        "studies/choice_directness.html",
        {"study": study, "items": items, "counts": counts},
    )


def responses(
    request: HttpRequest, study: Study, *, number: int | None, exports: dict[str, Any]
) -> HttpResponse:
    """Every pick with its time (``researcher_views.study_responses``, which reads the
    page number and the "include excluded" switch and its export links, ``exports``)."""
    assignments = Assignment.objects.filter(study_item__study=study, choices__isnull=False)
    if not exports["include_excluded"]:
        assignments = assignments.filter(participant__excluded_at__isnull=True)
    assignments = (
        assignments.distinct()
        .select_related(
            "participant", "study_item__qa_item", "study_item__stage__work", "study_item__mc_item"
        )
        .prefetch_related("choices__question")
        .order_by("participant_id", "position")
    )
    page = Paginator(assignments, PER_PAGE).get_page(number)
    rows = []
    for a in page:
        picks = sorted(
            a.choices.all(), key=lambda c: (c.question.position if c.question else 0, c.round)
        )
        if a.study_item.mc_item_id or a.study_item.instructed:
            item = generic.shown_item(a.study_item)
            language = generic.study_language(study.sampling, item)
            options = generic.generic_options(item, language)
            for c in picks:
                rows.append(
                    {
                        "assignment": a,
                        "question": item.text(language).get("question", ""),
                        "item_id": item.item_id,
                        "first": c,
                        "first_text": f"{generic.option_letter(c.option)}. {options[c.option]}",
                        "second": None,
                        "second_text": "",
                    }
                )
        elif a.study_item.qa_item_id:
            options = cs.chartom_options(a.study_item.qa_item)
            first = next((c for c in picks if c.round == 1), None)
            second = next((c for c in picks if c.round == 2), None)
            rows.append(
                {
                    "assignment": a,
                    "question": a.study_item.qa_item.question,
                    "first": first,
                    "first_text": options[first.option] if first else "",
                    "second": second,
                    "second_text": options[second.option] if second else "",
                }
            )
        else:
            for c in picks:
                rows.append(
                    {
                        "assignment": a,
                        "question": c.question.text,
                        "first": c,
                        "first_text": c.question.options[c.option],
                        "second": None,
                        "second_text": "",
                    }
                )
    return render(
        request,
        "studies/choice_responses.html",
        {
            "study": study,
            "page": page,
            "rows": rows,
            "n_no_work": selectors.study_no_work_count(study),
        }
        | exports,
    )


@require_POST
@researcher_required
def import_(request: HttpRequest, study_id: int) -> HttpResponse:
    """Responses from a CSV or JSON file; a refused file is the study page again with
    the reason (413 over the size limit, 422 for a bad row, 400 without a file)."""
    study = _choice_study(study_id)
    upload = request.FILES.get("file")
    if upload is None:
        messages.error(request, "Choose a CSV or JSON file of responses to import.")
        return _refused(request, study, 400)
    name = (upload.name or "upload")[:100]
    try:
        # The size is checked before anything is read (choice_exchange.upload_read).
        data = choice_exchange.upload_read(upload)
        rows = choice_exchange.rows_parse(data, filename=name)
        result = choice_exchange.rows_import(study=study, rows=rows)
    except choice_exchange.FileTooLarge as exc:
        messages.error(request, f"{name}: {exc}. Nothing was imported.")
        return _refused(request, study, 413)
    except StudyError as exc:
        messages.error(request, f"{name}: {exc}. Nothing was imported.")
        return _refused(request, study, 422)
    messages.success(
        request,
        f"{name}: {result.created} picks created, {result.unchanged} unchanged, "
        f"{result.participants_created} new participants.",
    )
    return redirect("studies:detail", study_id=study.pk)


def _refused(request: HttpRequest, study: Study, status: int) -> HttpResponse:
    """The study page with the error message just added, answering ``status``."""
    response = detail(request, study)
    response.status_code = status
    return response
