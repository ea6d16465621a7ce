"""Run pages for researchers: list, new run (preview or start), detail with live progress,
cancel/resume, and prompt templates with their versions.

Every view checks the researcher role itself; raters and annotators get 403 on every
page, whatever the templates show. The detail page's progress region polls itself
with htmx, bringing the calls panel along out of band, and gets 286 (stop polling)
once the run is finished.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from accounts.decorators import researcher_required as researcher_only
from benchmarks.perturbation import name_forms_table
from modeling.runs import prompt_templates

from ..baselines.services import baseline_run_create
from ..models import PromptTemplate, Run
from ..pipelines import get_pipeline, pipeline_benchmarks
from . import selectors, services
from .forms import BaselineRunForm, RunForm, TemplateReviseForm
from .outcome import run_first_reply, run_status_label

RUNS_PER_PAGE = 50
CALLS_PER_PAGE = 50
# The newest other runs of the benchmark offered in "Compare with…"; any run can be
# typed on the compare page itself.
COMPARE_CHOICES = 50
PROGRESS_PARTIAL = "modeling/run_detail.html#run-progress"
CALLS_PARTIAL = "modeling/run_detail.html#run-calls"
researcher_required = researcher_only("Model runs are for researchers only.")


@require_GET
@researcher_required
def run_list(request: HttpRequest) -> HttpResponse:
    page = Paginator(selectors.run_list(), RUNS_PER_PAGE).get_page(request.GET.get("page"))
    rows = [(run, run_status_label(run=run), selectors.run_origin(run)) for run in page]
    return render(request, "modeling/run_list.html", {"page": page, "rows": rows})


@require_http_methods(["GET", "POST"])
@researcher_required
def run_new(request: HttpRequest) -> HttpResponse:
    """GET: the form. POST "preview": the dry-run plan, nothing saved. POST "start": the run."""
    if request.method == "GET":
        form = RunForm(initial=RunForm.initial_for(request.GET.get("benchmark")))
        return render(request, "modeling/run_new.html", {"form": form})
    form = RunForm(request.POST)
    plan = None
    if form.is_valid():
        try:
            if request.POST.get("action") == "start":
                run = services.run_create(
                    **form.service_kwargs(),
                    name=form.cleaned_data["name"],
                    budget_tokens=form.cleaned_data["budget_tokens"],
                    budget_cost=form.cleaned_data["budget_cost"],
                    created_by=request.user,
                )
                messages.success(request, f"Run {run.pk} queued.")
                return redirect("modeling:run-detail", run_id=run.pk)
            plan = services.run_plan(**form.service_kwargs())
        except ValueError as exc:
            form.add_error(None, str(exc))
    return render(request, "modeling/run_new.html", {"form": form, "plan": plan})


@require_http_methods(["GET", "POST"])
@researcher_required
def baseline_run_new(request: HttpRequest) -> HttpResponse:
    """GET: the form. POST: record a trained-baseline run and queue it on the gpu queue."""
    if request.method == "GET":
        return render(request, "modeling/baseline_run_new.html", {"form": BaselineRunForm()})
    form = BaselineRunForm(request.POST)
    if form.is_valid():
        try:
            run = baseline_run_create(**form.service_kwargs(), created_by=request.user)
        except ValueError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Run {run.pk} queued for a GPU worker.")
            return redirect("modeling:run-detail", run_id=run.pk)
    return render(request, "modeling/baseline_run_new.html", {"form": form})


def _progress_context(run: Run) -> dict[str, Any]:
    # The polled region shows the prediction summary too, so it is computed here for
    # both the full page and the htmx partial.
    percent = round(100 * run.done_calls / run.total_calls) if run.total_calls else 0
    status_label = run_status_label(run=run)
    return {
        "run": run,
        "percent": percent,
        "summary": selectors.run_prediction_summary(run=run),
        # The explorer's own counts, each linking to its filtered list.
        "prediction_counts": selectors.prediction_status_counts(run=run),
        "cached_calls": selectors.run_cached_calls(run=run),
        "status_label": status_label,
        # What the model said when nothing it said could be read: the first thing to look at.
        "first_reply": run_first_reply(run=run) if status_label.no_parseable_reply else "",
        # A job above the engine makes a direct run's calls itself, one at a time: only
        # that job can resume it, and while it waits (for annotators, say) the run stays
        # running with every call so far done.
        "direct_calls": bool((run.params or {}).get(services.DIRECT_CALLS)),
        "direct_owner": selectors.direct_run_owner(run),
    }


def _calls_context(request: HttpRequest, run: Run) -> dict[str, Any]:
    calls = Paginator(selectors.run_calls(run=run), CALLS_PER_PAGE).get_page(
        request.GET.get("calls_page")
    )
    return {"run": run, "calls": calls}


@require_GET
@researcher_required
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(selectors.run_list(), pk=run_id)
    if request.htmx:
        return _poll_response(request, run)
    context = {
        **_progress_context(run),
        **_calls_context(request, run),
        "has_mental_states": run.mental_states.exists(),
        "compare_runs": selectors.runs_to_compare_with(run=run)[:COMPARE_CHOICES],
        "name_forms": _name_forms(run),
        "params": setting_rows(run.params),
        "origin": selectors.run_origin(run),
        # An imported run's selection is where it came from (the file, a harness's
        # task, versions and ids), shown under names a person reads.
        "selection": [] if run.imported else setting_rows(run.selection),
        "provenance": provenance_rows(run.selection) if run.imported else [],
    }
    return render(request, "modeling/run_detail.html", context)


def setting_rows(settings_: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """A run's nested parameters as (dotted key, value) rows, keys sorted, lists joined:
    ``{"options": {"perturb_names": True}}`` -> ``[("options.perturb_names", "true")]``."""
    rows: list[tuple[str, str]] = []
    for key in sorted(settings_ or {}):
        value = settings_[key]
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            rows += setting_rows(value, f"{name}.")
        elif isinstance(value, list | tuple):
            rows.append((name, ", ".join(map(_setting_text, value)) or "none"))
        else:
            rows.append((name, _setting_text(value)))
    return rows


# An imported run's provenance keys (prediction_import and the harness importers), in
# the order shown; any other key follows under its own name.
PROVENANCE_LABELS = {
    "source": "File",
    "task": "Task",
    "task_version": "Task version",
    "inspect_version": "Inspect version",
    "lm_eval_version": "lm-eval version",
    # Inspect's eval id; an lm-eval import's own id of the samples file.
    "origin_id": "Origin id",
    "run_id": "Harness run id",
    "epochs": "Epochs",
    "num_fewshot": "Few-shot examples",
    "model_type": "Model type",
    "dataset": "Dataset",
    "log_status": "Log status",
    "created": "Created",
}
# Ids the import set aside can run to a thousand: the page names the first few.
PROVENANCE_LIST_SHOWN = 10


def provenance_rows(selection: dict[str, Any]) -> list[tuple[str, str, str]]:
    """An imported run's provenance as (label, key, value) rows: the known keys first,
    in :data:`PROVENANCE_LABELS` order, then the rest as :func:`setting_rows` lists
    them. ``origin`` is left out: the page says it as the run's origin."""
    selection = selection or {}
    labels = dict(PROVENANCE_LABELS)
    if selection.get("origin") == "inspect":
        labels["origin_id"] = "Eval id"
    rows = [
        (label, key, _provenance_text(selection[key]))
        for key, label in labels.items()
        if selection.get(key) not in (None, "")
    ]
    for key in sorted(set(selection) - set(PROVENANCE_LABELS) - {"origin"}):
        value = selection[key]
        if isinstance(value, dict):
            rows += [(name, name, text) for name, text in setting_rows(value, f"{key}.")]
        else:
            rows.append((key, key, _provenance_text(value)))
    return rows


def _provenance_text(value: Any) -> str:
    if isinstance(value, list) and len(value) > PROVENANCE_LIST_SHOWN:
        shown = ", ".join(map(_setting_text, value[:PROVENANCE_LIST_SHOWN]))
        return f"{shown} … ({len(value)} in all)"
    if isinstance(value, list):
        return ", ".join(map(_setting_text, value)) or "none"
    return _setting_text(value)


def _setting_text(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)  # true / false / null, as typed in --param
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _name_forms(run: Run) -> list[dict[str, Any]]:
    """Per work a perturbed run shows under other names: the forms it replaced."""
    # Trained baselines and construction batches (chartom-qa-build) have no pipeline
    # that renames anyone.
    if run.kind == Run.Kind.TRAINED or run.benchmark not in pipeline_benchmarks():
        return []
    return [
        {"work": work, "rows": name_forms_table(name_map, characters)}
        for work, name_map, characters in get_pipeline(run.benchmark).name_maps(run=run)
    ]


def _poll_response(request: HttpRequest, run: Run) -> HttpResponse:
    """The progress region and, swapped out of band, the calls panel: calls are created
    and finished while the page is open, and the last poll must show them all.

    Once the run is finished the region comes without its trigger, with 286: htmx swaps
    it in and stops polling.
    """
    calls = _calls_context(request, run)
    html = render_to_string(PROGRESS_PARTIAL, {**_progress_context(run), **calls}, request)
    if run.kind != Run.Kind.TRAINED:
        html += render_to_string(CALLS_PARTIAL, {**calls, "oob": True}, request)
    if run.is_finished:
        return HttpResponseStopPolling(html)
    return HttpResponse(html)


MENTAL_STATES_PER_PAGE = 100


@require_GET
@researcher_required
def run_mental_states(request: HttpRequest, run_id: int) -> HttpResponse:
    """ToMPro's stage-1 records (and character-memory descriptions), one row per
    character per scene, filterable by character."""
    run = get_object_or_404(Run, pk=run_id)
    characters = selectors.run_mental_state_characters(run=run)
    chosen = request.GET.get("character")
    character_id = int(chosen) if chosen and chosen.isdigit() else None
    page = Paginator(
        selectors.run_mental_states(run=run, character_id=character_id), MENTAL_STATES_PER_PAGE
    ).get_page(request.GET.get("page"))
    context = {
        "run": run,
        "characters": characters,
        "character_id": character_id,
        "page": page,
    }
    return render(request, "modeling/run_mental_states.html", context)


def _after_action(request: HttpRequest, run: Run, *, error: str = "") -> HttpResponse:
    """htmx gets the refreshed progress region (polling again if the run restarted),
    with a refusal shown inside it; a plain form post is redirected with a message."""
    if request.htmx:
        return render(request, PROGRESS_PARTIAL, {**_progress_context(run), "action_error": error})
    if error:
        messages.error(request, error)
    return redirect("modeling:run-detail", run_id=run.pk)


@require_POST
@researcher_required
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    get_object_or_404(Run, pk=run_id)
    run = services.run_cancel(run_id=run_id)
    return _after_action(request, run)


@require_POST
@researcher_required
def run_resume(request: HttpRequest, run_id: int) -> HttpResponse:
    """Queue the run again; a run whose holder is gone is taken over at once, one held by
    a live process is refused with a line saying who holds it and when to retry.
    ``send_again=1`` asks the model again for the replies that came from the cache."""
    get_object_or_404(Run, pk=run_id)
    error = ""
    try:
        services.run_resume(run_id=run_id, send_again=request.POST.get("send_again") == "1")
    except ValueError as exc:  # RunLeased included
        error = str(exc)
    run = selectors.run_list().get(pk=run_id)
    return _after_action(request, run, error=error)


@require_GET
@researcher_required
def template_list(request: HttpRequest) -> HttpResponse:
    return render(
        request, "modeling/template_list.html", {"templates": selectors.prompt_template_list()}
    )


def _template_page(
    request: HttpRequest, template: PromptTemplate, form: TemplateReviseForm
) -> HttpResponse:
    context = {
        "template": template,
        "versions": selectors.prompt_template_versions(template=template),
        "form": form,
    }
    return render(request, "modeling/template_detail.html", context)


@require_GET
@researcher_required
def template_detail(request: HttpRequest, template_id: int) -> HttpResponse:
    template = get_object_or_404(PromptTemplate, pk=template_id)
    form = TemplateReviseForm(
        template=template,
        initial={"system": template.system, "user": template.user},
    )
    return _template_page(request, template, form)


@require_POST
@researcher_required
def template_revise(request: HttpRequest, template_id: int) -> HttpResponse:
    """Save the edited texts as a new version; runs keep the version they used."""
    template = get_object_or_404(PromptTemplate, pk=template_id)
    form = TemplateReviseForm(request.POST, template=template)
    if not form.is_valid():
        return _template_page(request, template, form)
    revised = prompt_templates.prompt_template_revise(template=template, **form.cleaned_data)
    messages.success(request, f"Saved {revised}.")
    return redirect("modeling:template-detail", template_id=revised.pk)
