"""Researcher pages for human studies: set-up, go-live, invites, live progress, leak
check, name perturbation and responses.

Every view checks the researcher role itself (raters and annotators get 403,
anonymous users the login page). The detail page's progress region polls itself
every 2 s with htmx and gets 286 (stop polling) once the study is closed. Pages work
without JavaScript: every action is a plain POST that redirects back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.db import transaction
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    StreamingHttpResponse,
)
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from accounts.decorators import researcher_required as researcher_only
from benchmarks.models import Character
from benchmarks.services import character_aliases_set, character_gender_set
from common.csv_safe import csv_stream
from common.request_params import BadNumber, optional_number
from studies import errors
from studies.participation import services as participation_services

from . import api_services, exports, quality, selectors, services
from .choice import researcher_views as choice_researcher_views
from .choice import services as choice_services
from .forms import AliasForm, GenderForm, InviteForm, StudyCreateForm, StudyTextsForm
from .models import Assignment, Participant, Study, StudyItem, StudyWork
from .participation import recruitment
from .participation.forms import CsvInviteForm, ExclusionOverrideForm, ItemRolesForm, RunningForm
from .participation.ledger import STATUSES, study_ledger
from .scene.leaks import (
    EDITABLE_STATUSES,
    excerpt,
    flagged_scenes_hold,
    highlight,
    is_blocking,
    leaks_check,
    scene_hold,
)
from .scene.perturbation import gender_for, name_forms_table, name_maps_build

PROGRESS_PARTIAL = "studies/study_detail.html#progress"
PARTICIPANTS_PARTIAL = "studies/study_detail.html#participants"
researcher_required = researcher_only("Studies are for researchers only.")
RESPONSES_PER_PAGE = 100


def _bad_request(exc: BadNumber) -> HttpResponse:
    return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")


def _study(study_id: int) -> Study:
    return get_object_or_404(Study.objects.select_related("created_by"), pk=study_id)


def invite_url(request: HttpRequest, token: str) -> str:
    """The rater's invite link, absolute, for the researcher to send."""
    try:
        path = reverse("rater:start", args=[token])
    except NoReverseMatch:  # the rater pages are not mounted (yet)
        path = f"/s/{token}/"
    return request.build_absolute_uri(path)


# -- list and create --------------------------------------------------------------------


@require_GET
@researcher_required
def study_list(request: HttpRequest) -> HttpResponse:
    return render(request, "studies/study_list.html", {"studies": selectors.study_list()})


@require_http_methods(["GET", "POST"])
@researcher_required
def study_new(request: HttpRequest) -> HttpResponse:
    form = StudyCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            # The API creates through the same function with the same form.
            created = api_services.scene_study_create(form=form, created_by=request.user)
        except errors.StudyError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, created.summary())
            return redirect("studies:detail", study_id=created.study.pk)
    return render(request, "studies/study_new.html", {"form": form})


# -- drafts: edit, duplicate, delete ------------------------------------------------------


@require_http_methods(["GET", "POST"])
@researcher_required
def study_edit(request: HttpRequest, study_id: int) -> HttpResponse:
    """Every setting of a draft, on the new-study form; the items are drawn again only
    when a sampling setting changed."""
    study = _study(study_id)
    if study.status != Study.Status.DRAFT:
        messages.error(request, "Only a draft can be edited: duplicate it to change settings.")
        return _back(study)
    if study.benchmark in choice_services.CHOICE_BENCHMARKS:
        return choice_researcher_views.study_edit(request, study)
    form = StudyCreateForm.for_study(study, request.POST or None)
    if request.method == "POST" and form.is_valid():
        settings_ = form.study_settings()
        redraw = form.sampling_changed()
        if redraw:
            works = list(form.cleaned_data["works"])
            scenes, settings_["sampling"] = api_services.scene_sample(form)
            settings_ |= {"works": works, "items": services.scene_items(works, scenes)}
        try:
            services.study_update(study=study, name=form.cleaned_data["name"], **settings_)
        except errors.StudyError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(
                request,
                "Settings saved; the scenes were drawn again and the leak check re-run."
                if redraw
                else "Settings saved; the scenes are unchanged.",
            )
            return _back(study)
    return render(request, "studies/study_new.html", {"form": form, "study": study})


@require_POST
@researcher_required
def study_duplicate(request: HttpRequest, study_id: int) -> HttpResponse:
    copy = services.study_duplicate(study=_study(study_id), created_by=request.user)
    messages.success(request, f"“{copy.name}” is a new draft with the same settings and items.")
    return _back(copy)


@require_http_methods(["GET", "POST"])
@researcher_required
def study_delete(request: HttpRequest, study_id: int) -> HttpResponse:
    """GET: what deleting does (or why it cannot); POST: delete. One click never deletes."""
    study = _study(study_id)
    if request.method == "POST":
        try:
            name = services.study_delete(study=study)
        except errors.StudyError as exc:
            messages.error(request, f"Not deleted: {exc}.")
            return _back(study)
        messages.success(request, f"Study “{name}” deleted.")
        return redirect("studies:list")
    context = {
        "study": study,
        "participants": study.participants.count(),
        "items": study.study_items.count(),
    }
    return render(request, "studies/study_delete.html", context)


# -- detail and live progress -----------------------------------------------------------


def _progress_context(study: Study, status: str = "") -> dict[str, Any]:
    """The polled region's context: the ledger (every participant's status) and scenes.

    ``status`` filters the participants table; the tiles always count everyone.
    """
    ledger = study_ledger(study=study)
    scenes = selectors.study_item_progress(study)
    summary = selectors.progress_summary(study, ledger, scenes)
    return {
        "study": study,
        "raters": [row.participant for row in ledger],
        "ledger": ledger,
        "ledger_rows": [row for row in ledger if not status or row.status.key == status],
        "status": status,
        "tiles": [(key, STATUSES[key], n) for key, n in summary.statuses.items()],
        "override_form": ExclusionOverrideForm(),
        "scenes": scenes,
        "summary": summary,
    }


def _names_context(study: Study, works: list[StudyWork]) -> list[dict[str, Any]]:
    """Per work: each main character's gender (and why), its override field, shown name;
    and every name form the work's map replaces."""
    out = []
    for sw in works:
        form = GenderForm(characters=sw.work.main_characters, prefix=f"w{sw.pk}")
        rows = []
        for c in sw.work.main_characters:
            gender, why = gender_for(c)
            rows.append(
                {
                    "character": c,
                    "gender": gender,
                    "why": why,
                    "field": form[f"gender_{c.pk}"],
                    "shown": sw.name_map.get(c.name, ""),
                }
            )
        forms = (
            name_forms_table(sw.name_map, list(Character.objects.filter(work=sw.work)))
            if sw.name_map
            else []
        )
        # Names alone (the Friends scenes) are the table above already.
        if all(row["form"] == row["character"] for row in forms):
            forms = []
        out.append({"study_work": sw, "rows": rows, "forms": forms})
    return out


@require_GET
@researcher_required
def study_detail(request: HttpRequest, study_id: int) -> HttpResponse:
    study = _study(study_id)
    if study.benchmark in choice_services.CHOICE_BENCHMARKS:
        return choice_researcher_views.detail(request, study)
    status = request.GET.get("status", "")
    if status and status not in STATUSES:
        return HttpResponseBadRequest(
            f"status: unknown status {status!r}; use one of {', '.join(STATUSES)}",
            content_type="text/plain; charset=utf-8",
        )
    if request.htmx:
        # The participants table's filter swaps only that table; the poll, the progress.
        filtering = request.htmx.target == "participants"
        partial = PARTICIPANTS_PARTIAL if filtering else PROGRESS_PARTIAL
        response = render(request, partial, _progress_context(study, status))
        if study.status == Study.Status.CLOSED and partial == PROGRESS_PARTIAL:
            # 286: htmx swaps this last copy in and stops polling.
            return HttpResponseStopPolling(response.content)
        return response
    works = selectors.study_works(study)
    context = _progress_context(study, status)
    invites = [{"participant": p, "url": invite_url(request, p.token)} for p in context["raters"]]
    context |= {
        "works": works,
        "names": _names_context(study, works) if study.perturb_names else [],
        "leaks": selectors.leak_counts(study),
        "texts_form": StudyTextsForm(
            initial={"instructions": study.instructions, "consent": study.consent}
        ),
        "invite_form": InviteForm(),
        "invites": invites,
        "editable": study.status in EDITABLE_STATUSES,
        "running_form": RunningForm.for_study(study),
        "estimate": recruitment.study_estimate(study=study),
        "pilot_min": recruitment.PILOT_MIN,
        "roles_form": ItemRolesForm(study=study),
        "csv_form": CsvInviteForm(),
        "quality": quality.study_quality(study, context["raters"]),
        "public_url": (
            request.build_absolute_uri(reverse("rater:public", args=[study.public_token]))
            if study.public_cap and study.public_token
            else ""
        ),
    }
    return render(request, "studies/study_detail.html", context)


def _back(study: Study) -> HttpResponse:
    return redirect("studies:detail", study_id=study.pk)


@require_POST
@researcher_required
def study_go_live(request: HttpRequest, study_id: int) -> HttpResponse:
    """Draft -> live: name maps built and the leak check re-run first. Paused -> live."""
    study = _study(study_id)
    try:
        launched = services.study_launch(study=study)
    except errors.StudyError as exc:
        messages.error(request, str(exc))
    else:
        messages.info(request, launched.summary())
        messages.success(request, "The study is live.")
    return _back(study)


def _transition(request: HttpRequest, study_id: int, service, done: str) -> HttpResponse:
    study = _study(study_id)
    try:
        service(study=study)
    except errors.StudyError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, done)
    return _back(study)


@require_POST
@researcher_required
def study_pause(request: HttpRequest, study_id: int) -> HttpResponse:
    return _transition(request, study_id, services.study_pause, "The study is paused.")


@require_POST
@researcher_required
def study_resume(request: HttpRequest, study_id: int) -> HttpResponse:
    return _transition(request, study_id, services.study_launch, "The study is live again.")


@require_http_methods(["GET", "POST"])
@researcher_required
def study_close(request: HttpRequest, study_id: int) -> HttpResponse:
    """GET: what closing does, and a button; POST: close. One click never closes."""
    if request.method == "POST":
        return _transition(request, study_id, services.study_close, "The study is closed.")
    study = _study(study_id)
    open_count = Assignment.objects.filter(
        participant__study=study, status=Assignment.Status.ASSIGNED
    ).count()
    context = {"study": study, "open_count": open_count}
    return render(request, "studies/study_close.html", context)


@require_POST
@researcher_required
def study_texts(request: HttpRequest, study_id: int) -> HttpResponse:
    study = _study(study_id)
    form = StudyTextsForm(request.POST)
    if form.is_valid():
        before = study.instructions_version
        study = services.study_update_texts(study=study, **form.cleaned_data)
        if study.instructions_version != before:
            messages.success(
                request, f"Instructions and consent saved as version {study.instructions_version}."
            )
        else:
            messages.info(request, "Nothing changed.")
    else:
        messages.error(request, "The texts could not be saved.")
    return _back(study)


@require_POST
@researcher_required
def study_invite(request: HttpRequest, study_id: int) -> HttpResponse:
    study = _study(study_id)
    form = InviteForm(request.POST)
    # A closed study is refused before the form is read (the API does the same).
    if study.status != Study.Status.CLOSED and not form.is_valid():
        messages.error(request, " ".join(e for errs in form.errors.values() for e in errs))
        return _back(study)
    try:
        created = api_services.invites_create(study=study, form=form)
    except errors.StudyError as exc:
        messages.error(request, str(exc))
        return _back(study)
    messages.success(
        request, f"{len(created)} invite link{'s' if len(created) != 1 else ''} created."
    )
    return redirect(reverse("studies:detail", args=[study.pk]) + "#invites")


@require_POST
@researcher_required
def participant_withdraw(request: HttpRequest, study_id: int, participant_id: int) -> HttpResponse:
    study = _study(study_id)
    participant = get_object_or_404(Participant, pk=participant_id, study=study)
    participation_services.participant_withdraw(participant=participant)
    messages.success(request, f"{participant} is withdrawn; their answers are kept but excluded.")
    return redirect(reverse("studies:detail", args=[study.pk]) + "#invites")


# -- leak check -------------------------------------------------------------------------


LEAK_SCENES_PER_PAGE = 20
LEAK_SNIPPETS = 3  # flagged lines shown per scene; the rest are in its folded full text


@require_GET
@researcher_required
def study_leaks(request: HttpRequest, study_id: int) -> HttpResponse:
    study = _study(study_id)
    try:
        number = optional_number(request.GET.get("page"), name="page")
    except BadNumber as exc:
        return _bad_request(exc)
    kind = request.GET.get("kind", "")
    kind = kind if kind in selectors.LEAK_KINDS else ""
    page = Paginator(selectors.leaking_scenes(study, kind), LEAK_SCENES_PER_PAGE).get_page(number)
    scenes = [_leak_scene(s) for s in page]
    works = selectors.study_works(study)
    alias_forms = [
        {
            "study_work": sw,
            "form": AliasForm(characters=sw.work.main_characters, prefix=f"w{sw.pk}"),
        }
        for sw in works
    ]
    context = {
        "study": study,
        "page": page,
        "scenes": scenes,
        "counts": selectors.leak_counts(study),
        "kind": kind,
        "alias_forms": alias_forms,
        "editable": study.status in EDITABLE_STATUSES,
    }
    return render(request, "studies/study_leaks.html", context)


def _leak_scene(s: StudyItem) -> dict[str, Any]:
    """One scene of the leak page, compact: what it names where (one tag per name), the
    first few flagged lines as snippets (lines that hold the scene back first), and the
    whole scene with every flagged line highlighted, for a fold the page keeps closed.
    All 20 scenes of a page with every flagged line in full made a page 10,000 px long."""
    by_line: dict[int, list[dict]] = {}
    for f in s.leaks:
        by_line.setdefault(f["line"], []).append(f)
    lines = [
        {
            "index": i,
            "title": _line_title(s, i),
            "pieces": highlight(fs[0]["text"], fs),
            # One label per distinct (match, character, place) on the line.
            "labels": list(
                dict.fromkeys((f["kind"], f["match"], f["character"], f["where"]) for f in fs)
            ),
            "blocking": any(is_blocking(f) for f in fs),
        }
        for i, fs in sorted(by_line.items())
    ]
    # Blocking lines first, then names outside dialogue, then dialogue; each in scene order.
    ranked = sorted(
        lines,
        key=lambda line: (
            not line["blocking"],
            all(where == "speech" for *_, where in line["labels"]),
            line["index"],
        ),
    )
    snippets = [
        {**line, "pieces": excerpt(line["pieces"])}
        for line in sorted(ranked[:LEAK_SNIPPETS], key=lambda line: line["index"])
    ]
    names: dict[tuple[str, str], dict[str, Any]] = {}
    for f in s.leaks:
        name = names.setdefault(
            (f["match"].casefold(), f["character"]),
            {"match": f["match"], "character": f["character"], "places": {}, "blocking": False},
        )
        name["outside"] = name.get("outside", False) or f["where"] != "speech"
        place = "unmasked speaker" if f["kind"] == "cue" else f["where"]
        name["places"][place] = name["places"].get(place, 0) + 1
        name["blocking"] |= is_blocking(f)
    flagged = {line["index"]: line for line in lines}
    scene = s.scene
    full = [flagged.get(-1) or {"index": -1, "title": "heading", "text": scene.heading}]
    full += [
        flagged.get(i) or {"index": i, "title": _line_title(s, i), "text": line.get("text", "")}
        for i, line in enumerate(scene.lines)
    ]
    return {
        "row": s,
        "names": list(names.values()),
        "snippets": snippets,
        "more": len(lines) - len(snippets),
        "flagged_lines": len(lines),
        "full": [line for line in full if line.get("pieces") or line.get("text")],
        "blocking": any(is_blocking(f) for f in s.leaks),
        # Names outside speech that this benchmark's task shows anyway (TVShowGuess).
        "shown": any(f.get("where") != "speech" for f in s.leaks),
    }


def _line_title(study_item: StudyItem, index: int) -> str:
    if index < 0:
        return "heading"
    line = study_item.scene.lines[index]
    return line.get("title") if line.get("type") == "dialog" else "narration"


def _leaks_back(study: Study, anchor: str = "", page: int | None = None) -> HttpResponse:
    query = f"?page={page}" if page else ""
    return redirect(reverse("studies:leaks", args=[study.pk]) + query + anchor)


@require_POST
@researcher_required
def study_leaks_check(request: HttpRequest, study_id: int) -> HttpResponse:
    study = _study(study_id)
    try:
        report = leaks_check(study=study)
    except errors.StudyError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Checked: {report.summary()}.")
    return _leaks_back(study)


@require_POST
@researcher_required
def scene_hold_view(request: HttpRequest, study_id: int, scene_id: int) -> HttpResponse:
    study = _study(study_id)
    study_item = get_object_or_404(StudyItem, pk=scene_id, study=study)
    held = request.POST.get("held_back") == "1"
    try:
        # Read before acting: a malformed page must refuse the request, not follow a
        # hold that was already applied with a 500.
        page = optional_number(request.POST.get("page"), name="page")
    except BadNumber as exc:
        return _bad_request(exc)
    try:
        scene_hold(study_item=study_item, held_back=held)
    except errors.StudyError as exc:
        messages.error(request, str(exc))
    else:
        verb = "held back" if held else "released"
        messages.success(request, f"Scene {study_item.scene.source_id} {verb}.")
    return _leaks_back(study, f"#scene-{study_item.pk}", page)


@require_POST
@researcher_required
def leaks_hold_all(request: HttpRequest, study_id: int) -> HttpResponse:
    """Hold back or release every scene the check flagged (findings outside dialogue)."""
    study = _study(study_id)
    held = request.POST.get("held_back") == "1"
    try:
        changed = flagged_scenes_hold(study=study, held_back=held)
    except errors.StudyError as exc:
        messages.error(request, str(exc))
    else:
        verb = "held back" if held else "released"
        messages.success(request, f"{changed} flagged scenes {verb}.")
    return _leaks_back(study)


def _study_work_characters(
    study_id: int, study_work_id: int
) -> tuple[Study, StudyWork, list[Character]]:
    """The study, one of its works and that work's main characters (forms on them)."""
    study = _study(study_id)
    sw = get_object_or_404(StudyWork.objects.select_related("work"), pk=study_work_id, study=study)
    return study, sw, list(Character.objects.filter(work=sw.work, is_main=True))


@require_POST
@researcher_required
def aliases_save(request: HttpRequest, study_id: int, study_work_id: int) -> HttpResponse:
    """Save a work's alias table (shared by every study of the work) and re-check."""
    study, sw, characters = _study_work_characters(study_id, study_work_id)
    form = AliasForm(request.POST, characters=characters, prefix=f"w{sw.pk}")
    if form.is_valid():
        with transaction.atomic():
            for character, aliases in form.aliases():
                if aliases != character.aliases:
                    character_aliases_set(character=character, aliases=aliases)
        messages.success(request, f"Aliases of {sw.work.title} saved.")
        if study.status in EDITABLE_STATUSES:
            report = leaks_check(study=study)
            messages.info(
                request,
                f"Leak check re-run: {report.flagged} flagged, {report.held_back} held back.",
            )
    return _leaks_back(study, f"#aliases-{sw.pk}")


# -- name perturbation ------------------------------------------------------------------


@require_POST
@researcher_required
def genders_save(request: HttpRequest, study_id: int, study_work_id: int) -> HttpResponse:
    """Override characters' genders; a draft study's name map is rebuilt to match."""
    study, sw, characters = _study_work_characters(study_id, study_work_id)
    form = GenderForm(request.POST, characters=characters, prefix=f"w{sw.pk}")
    if form.is_valid():
        with transaction.atomic():
            for character, gender in form.overrides():
                character_gender_set(character=character, gender=gender)
            if study.perturb_names and not study.item_set_hash:
                name_maps_build(study=study, force=True)
        messages.success(request, "Genders saved.")
    return redirect(reverse("studies:detail", args=[study.pk]) + "#names")


@require_POST
@researcher_required
def names_build(request: HttpRequest, study_id: int) -> HttpResponse:
    study = _study(study_id)
    try:
        built = name_maps_build(study=study, force=True)
    except ValueError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Name maps drawn for {len(built)} works.")
    return redirect(reverse("studies:detail", args=[study.pk]) + "#names")


# -- responses --------------------------------------------------------------------------


def _include_excluded(request: HttpRequest) -> bool:
    """``?include_excluded=1``: excluded participants' rows too (left out by default)."""
    flag = request.GET.get("include_excluded", "")
    if flag not in ("", "0", "1"):
        raise BadNumber(f"include_excluded: 1 or 0, got {flag[:24]!r}")
    return flag == "1"


def _exports_context(study: Study, include_excluded: bool) -> dict[str, Any]:
    """The responses pages' "include excluded" switch and export links."""
    return {
        "include_excluded": include_excluded,
        "n_excluded": selectors.excluded_left_out(study),
        "export_query": "?include_excluded=1" if include_excluded else "",
    }


@require_GET
@researcher_required
def study_responses(request: HttpRequest, study_id: int) -> HttpResponse:
    study = _study(study_id)
    try:
        number = optional_number(request.GET.get("page"), name="page")
        include_excluded = _include_excluded(request)
    except BadNumber as exc:
        return _bad_request(exc)
    links = _exports_context(study, include_excluded)
    if study.benchmark in choice_services.CHOICE_BENCHMARKS:
        return choice_researcher_views.responses(request, study, number=number, exports=links)
    answers = selectors.study_responses(study, include_excluded=include_excluded)
    page = Paginator(answers, RESPONSES_PER_PAGE).get_page(number)
    context = {"study": study, "page": page, "n_no_work": selectors.study_no_work_count(study)}
    return render(request, "studies/study_responses.html", context | links)


EXPORTS = {
    "responses": exports.response_export,
    "exit": exports.exit_export,
    "exit-wide": exports.exit_wide_export,
    "exit-codebook": exports.exit_codebook,
}


@require_GET
@researcher_required
def study_export(request: HttpRequest, study_id: int, name: str, fmt: str) -> HttpResponse:
    """responses.csv/.json (one row per answer: masked speaker or pick), exit.csv/.json
    (one row per exit question answered), exit-wide.csv/.json (one row per participant,
    one column per item) and exit-codebook.csv/.json (each column's question);
    ``?include_excluded=1`` adds excluded participants, marked. The API serves the same
    rows (``studies.api``)."""
    study = _study(study_id)
    if fmt not in ("csv", "json"):
        raise Http404("exports are .csv or .json")
    try:
        include_excluded = _include_excluded(request)
    except BadNumber as exc:
        return _bad_request(exc)
    export = EXPORTS[name](study, include_excluded=include_excluded)
    stamp = timezone.now().strftime("%Y%m%d-%H%M")
    if fmt == "json":

        def chunks() -> Iterator[str]:
            yield "["
            for i, row in enumerate(export.rows):
                yield ("," if i else "") + "\n" + json.dumps(row, ensure_ascii=False)
            yield "\n]\n"

        response = StreamingHttpResponse(chunks(), content_type="application/json")
    else:
        response = StreamingHttpResponse(
            csv_stream(export.rows, export.columns), content_type="text/csv; charset=utf-8"
        )
    response["Content-Disposition"] = (
        f'attachment; filename="study-{study.pk}-{name}-{stamp}.{fmt}"'
    )
    return response
