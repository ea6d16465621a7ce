"""Participant pages around the answers, for every study kind: the public link, refusing
consent, the break and "your scenes were passed on" screens, the exit questionnaire,
"withdraw my data", and what the scene page adds (practice, can't tell, confidence,
the unanswered speakers after a refused submit).

``rater_views.start`` stays the one address: it asks ``ended`` and ``interstitial``
here whether one of these screens comes before the step it would render.
"""

from __future__ import annotations

import re
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_http_methods, require_POST

from ..errors import StudyError, SubmitIncomplete
from ..models import Assignment, Participant, Study
from . import questionnaire, recruitment
from .recruitment import study_work_has_history

MESSAGE_PAGE = "studies/rater_message.html"
JOIN_PAGE = "studies/rater_join.html"
NO_WORK_PAGE = "studies/rater_no_work.html"
MASK_CODE = re.compile(r"^P\d{1,3}$")
PROBLEMS = {
    "missing": "choose a character for every masked speaker first",
    "history": "say whether you needed earlier scenes",
    "one_to_one": "each masked speaker must be a different character",
}


def _participant(token: str) -> Participant:
    try:
        return Participant.objects.select_related("study").get(token=token)
    except Participant.DoesNotExist:
        raise Http404("no such page") from None


def _message(
    request: HttpRequest, title: str, text: str, *, status: int = 200, **extra: Any
) -> HttpResponse:
    return render(request, MESSAGE_PAGE, {"title": title, "text": text, **extra}, status=status)


def _start(participant: Participant) -> HttpResponse:
    return redirect("rater:start", token=participant.token)


# -- screens that come before the step ----------------------------------------------------


def ended(request: HttpRequest, participant: Participant) -> HttpResponse | None:
    """The last page of a participant who refused consent or withdrew their data."""
    if participant.data_withdrawn_at is not None:
        return _message(
            request,
            "Your data has been withdrawn",
            "Your answers have been deleted, as you asked. Thank you for your time.",
            study=participant.study,
        )
    if participant.refused_at is not None:
        return _message(
            request,
            "Thank you",
            "You chose not to take part, and nothing else about you has been recorded. "
            "You can close this page.",
            study=participant.study,
        )
    return None


def interstitial(request: HttpRequest, participant: Participant, step) -> HttpResponse | None:
    """A screen before ``step``: released scenes, the break, the exit questionnaire."""
    study = participant.study
    context = {"participant": participant, "study": study}
    if participant.released_count:
        return render(request, "studies/rater_released.html", context)
    if step.kind == "scene" and recruitment.break_due(participant=participant):
        context["cap"] = study.session_cap
        context["done"] = recruitment.scenes_submitted(participant=participant)
        return render(request, "studies/rater_break.html", context)
    if (
        step.kind == "done"
        and study.exit_questions
        and participant.exit_done_at is None
        and participant.assignments.filter(status=Assignment.Status.SUBMITTED).exists()
    ):
        return _exit_page(request, participant)
    return None


def scene_extras(request: HttpRequest, assignment: Assignment) -> dict[str, Any]:
    """What the scene page shows beyond the answers: practice label, history, problems."""
    session = assignment.session
    place = recruitment.scene_place(
        assignment=assignment, session_total=getattr(assignment, "session_total", None)
    )
    problem = request.GET.get("problem", "")
    missing = [c for c in request.GET.get("missing", "").split(",") if MASK_CODE.match(c)]
    error = PROBLEMS.get(problem, "")
    if problem == "missing" and missing:
        error = f"choose a character for {', '.join(missing)} first"
    return {
        "practice": place.practice,
        "number": place.number,
        "total": place.total,
        "has_history": study_work_has_history(session.study_work_id),
        "missing": missing,
        "error": error,
        "confidence_levels": [
            (1, "not at all"),
            (2, "a little"),
            (3, "fairly"),
            (4, "very"),
            (5, "completely"),
        ],
    }


def submit_refused(participant: Participant, exc: StudyError) -> HttpResponse:
    """Back to the scene (a GET), with why and which speakers, never the message text."""
    query: dict[str, str] = {}
    if isinstance(exc, SubmitIncomplete):
        query["problem"] = exc.code
        if exc.missing:
            query["missing"] = ",".join(exc.missing)
    else:
        query["problem"] = "missing"
    url = reverse("rater:start", kwargs={"token": participant.token})
    # No #fragment: scrolling to one after load takes the focus off the speaker.
    return redirect(f"{url}?{urlencode(query)}")


# -- views --------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
def public_join(request: HttpRequest, public_token: str) -> HttpResponse:
    """The study's public link: a participant per arrival (the same one for the same
    platform id), up to the cap; then on to their own address.

    GET writes nothing: it resumes a platform id that already has a participant, and
    otherwise shows a page whose Join button POSTs (with the CSRF token) to this same
    address and query string, which carries the platform's ids.
    """
    study = Study.objects.filter(public_token=public_token).first()
    if study is None or not study.public_cap:
        raise Http404("no such page")
    try:
        if request.method == "POST":
            participant = recruitment.public_participant(study=study, params=request.GET)
        else:
            participant = recruitment.public_link_check(study=study, params=request.GET)
    except recruitment.BadPlatformId as exc:
        return _message(request, "This link is not valid", f"Sorry: {exc}.", status=400)
    except StudyError as exc:
        return _message(request, "Sorry", f"{exc}.", status=403, study=study)
    if participant is not None:
        return _start(participant)
    context = {
        "study": study,
        "action": request.get_full_path(),
        "estimate": recruitment.study_estimate_for_participants(study=study),
    }
    return render(request, JOIN_PAGE, context)


def join_page(request: HttpRequest, study: Study, *, action: str) -> HttpResponse:
    """The page whose Join button POSTs to ``action`` (``scene.views.join`` too)."""
    return render(request, JOIN_PAGE, {"study": study, "action": action})


NO_WORK_TEXT = {
    Participant.NoWork.READ_ALL: (
        "You have read every book in this study. The study compares answers from people "
        "who have read a book with answers from people who have not, and gives each person "
        "as many questions of one kind as of the other, so it has no questions for someone "
        "who has read all of its books."
    ),
    Participant.NoWork.READ_NONE: (
        "You have not read any of the books in this study. The study compares answers from "
        "people who have read a book with answers from people who have not, and gives each "
        "person as many questions of one kind as of the other, so it has no questions for "
        "someone who has read none of its books."
    ),
    Participant.NoWork.DESIGN_FULL: (
        "Every question that keeps the study's balance between people who have read a book "
        "and people who have not has already been given to someone else."
    ),
    Participant.NoWork.ALL_TAKEN: (
        "Everything in this study already has all the participants it needs."
    ),
    Participant.NoWork.CLOSED: "This study is closed and takes no more answers.",
}


def no_work(request: HttpRequest, participant: Participant, reason: str) -> HttpResponse:
    """The last page of a participant with nothing to answer: why, and the way back to
    the platform, but no completion code. Recorded in the ledger while the study is live."""
    study = participant.study
    if study.status == Study.Status.LIVE:
        recruitment.participant_no_work_record(participant=participant, reason=reason)
    context = {
        "participant": participant,
        "study": study,
        "explanation": NO_WORK_TEXT[Participant.NoWork(reason)],
        "return_url": recruitment.no_work_return_url(study),
    }
    return render(request, NO_WORK_PAGE, context)


@require_POST
def refuse(request: HttpRequest, token: str) -> HttpResponse:
    participant = _participant(token)
    try:
        recruitment.participant_refuse(participant=participant)
    except StudyError as exc:
        return _message(request, "That did not work", str(exc), status=400)
    return _start(participant)


@require_POST
def sitting_continue(request: HttpRequest, token: str) -> HttpResponse:
    participant = _participant(token)
    recruitment.sitting_resume(participant=participant)
    return _start(participant)


@require_POST
def released_acknowledge(request: HttpRequest, token: str) -> HttpResponse:
    participant = _participant(token)
    recruitment.released_acknowledge(participant=participant)
    return _start(participant)


def _exit_page(
    request: HttpRequest,
    participant: Participant,
    refused: questionnaire.AnswersInvalid | None = None,
) -> HttpResponse:
    """The exit questionnaire; after a refused send, each error by its question and
    every answer kept."""
    questions = participant.study.exit_questions
    context = {
        "participant": participant,
        "study": participant.study,
        "items": questionnaire.form_items(
            questions,
            submitted=refused.submitted if refused else None,
            errors=refused.errors if refused else None,
        ),
        "errors": refused.errors if refused else {},
        "all_optional": not any(q.get("required") for q in questions),
    }
    return render(request, "studies/rater_exit.html", context, status=400 if refused else 200)


@require_POST
def exit_answers(request: HttpRequest, token: str) -> HttpResponse:
    participant = _participant(token)
    if participant.exit_done_at is not None:
        return _start(participant)  # sent already (a second tab, the back button)
    skip = "skip" in request.POST
    answers = {} if skip else {name: request.POST.getlist(name) for name in request.POST}
    try:
        recruitment.exit_answers_record(participant=participant, answers=answers)
    except questionnaire.AnswersInvalid as exc:
        return _exit_page(request, participant, exc)
    return _start(participant)


@require_http_methods(["GET", "POST"])
def withdraw_data(request: HttpRequest, token: str) -> HttpResponse:
    """GET: what withdrawing does, and a button. POST: the answers are deleted."""
    participant = _participant(token)
    if request.method == "POST":
        recruitment.participant_data_withdraw(participant=participant)
        return _start(participant)
    if participant.data_withdrawn_at is not None:
        return _start(participant)
    context = {"participant": participant, "study": participant.study}
    return render(request, "studies/rater_withdraw.html", context)


@require_POST
def confidence(request: HttpRequest, token: str, assignment_id: int) -> HttpResponse:
    """The scene's confidence rating (1 to 5), saved as it is chosen."""
    participant = _participant(token)
    try:
        recruitment.confidence_record(
            participant=participant,
            assignment_id=assignment_id,
            value=request.POST.get("confidence", ""),
        )
    except StudyError as exc:
        if request.htmx:
            return render(
                request, "studies/rater_scene.html#save-status", {"error": str(exc)}, status=422
            )
        return _message(request, "Not saved", str(exc), status=400)
    if request.htmx:
        return render(request, "studies/rater_scene.html#save-status", {"saved": 1})
    return _start(participant)
