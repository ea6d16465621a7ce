"""Participant pages of the multiple-choice studies (CharToM-QA, DynToM, mapped
benchmarks), under /s/<token>/.

``rater_views.start`` hands a multiple-choice study's participant to :func:`step`
after the checks every study shares (unknown token, withdrawn, draft, paused). Every
other view here is a POST that calls one service and redirects back to ``start``, so a
reload resumes where the participant is. Refused input answers 422 with the reason,
a replay 409, and stores nothing. Gold is only shown from submitted assignments, and
only when the study's reveal setting allows it (a practice item's, always: practice
gives feedback).
"""

from __future__ import annotations

import re
from typing import Any

from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from benchmarks.models import DynToMScenario, MCItem, QAItem
from common.request_params import BadNumber, optional_number
from studies.scene import services as scene_services

from ..errors import StudyError
from ..models import Assignment, ChoiceAnswer, Participant, Study, StudyItem, StudyWork
from ..participation import recruitment
from ..participation import services as participation_services
from ..participation import views as participant_views
from ..participation.services import check_active
from ..scene.services import NextStep
from . import generic
from . import services as cs

QUESTION_PAGE = "studies/choice_question.html"
STAGE_PAGE = "studies/choice_stage.html"
ITEM_PAGE = "studies/choice_item.html"
SAVE_STATUS = "studies/rater_scene.html#save-status"


def _pick_key(assignment_id: int) -> str:
    return f"studies:choice-pick:{assignment_id}"


def _participant(token: str) -> Participant:
    """The token's participant, or the same plain 404 as every rater page."""
    try:
        return Participant.objects.select_related("study").get(token=token)
    except Participant.DoesNotExist:
        raise Http404("no such page") from None


def _message(request, title: str, text: str, *, status: int = 200, participant=None):
    context = {"title": title, "text": text, "participant": participant}
    return render(request, "studies/rater_message.html", context, status=status)


def _next_open(participant: Participant) -> Assignment | None:
    return (
        Assignment.objects.filter(participant=participant, status=Assignment.Status.ASSIGNED)
        .select_related(
            "study_item__qa_item",
            "study_item__stage__work",
            "study_item__mc_item",
            "session__study_work__work",
        )
        .order_by("position", "pk")
        .first()
    )


def finished(participant: Participant) -> bool:
    """Whether the participant has nothing left to answer (the study's "at the end")."""
    if participant.study.benchmark == cs.CHARTOM:
        return (
            participant.study.design_applied_at is not None
            and participant.work_sessions.exists()
            and _next_open(participant) is None
        )
    if participant.study.benchmark == cs.GENERIC:
        return participant.work_sessions.exists() and _next_open(participant) is None
    return _next_open(participant) is None and cs.dyntom_stage_open(participant) is None


def _reveal(participant: Participant) -> bool:
    if participant.study.reveal == Study.Reveal.AFTER_SCENE:
        return True
    return finished(participant)


def step(request: HttpRequest, participant: Participant) -> HttpResponse:
    """Render the step the participant is at (called by ``rater_views.start``)."""
    study = participant.study
    context: dict[str, Any] = {"participant": participant, "study": study}
    if participant.consented_at is None:
        context["estimate"] = recruitment.study_estimate_for_participants(study=study)
        return render(request, "studies/rater_consent.html", context)
    assignment = _next_open(participant)
    if study.benchmark == cs.CHARTOM:
        if not participant.work_sessions.exists():
            if participant.no_work_reason:  # declared every book or none: refused
                return participant_views.no_work(request, participant, participant.no_work_reason)
            if study.status != Study.Status.LIVE:
                return _done(request, participant)
            works = StudyWork.objects.filter(study=study).select_related("work")
            return render(request, "studies/choice_books.html", context | {"works": works})
        if assignment is None and study.design_applied_at is None:
            return _message(
                request,
                "Thank you: you are registered",
                "The questions are shared out once everyone has said which books they have "
                "read. Open this same link again later to start.",
                participant=participant,
            )
    if (
        study.benchmark == cs.GENERIC
        and assignment is None
        and study.status == Study.Status.LIVE
        and not participant.work_sessions.exists()
        and cs.generic_has_room(participant)
    ):
        return _batch_offer(request, participant)
    if assignment is not None:
        scene_services.scene_shown(participant=participant, assignment=assignment)
        if assignment.study_item.qa_item_id:
            return _question(request, participant, assignment)
        if assignment.study_item.mc_item_id or assignment.study_item.instructed:
            return _item(request, participant, assignment)
        return _stage(request, participant, assignment)
    if study.benchmark == cs.DYNTOM and study.status == Study.Status.LIVE:
        study_work = cs.dyntom_stage_open(participant)
        if study_work is not None:
            done = participant.assignments.filter(status=Assignment.Status.SUBMITTED).count()
            n = len(cs.dyntom_questions(study_work.items.first()))
            return render(
                request,
                "studies/choice_stage_offer.html",
                context | {"study_work": study_work, "questions": n, "done": done},
            )
    return _done(request, participant)


def _batch_offer(request: HttpRequest, participant: Participant) -> HttpResponse:
    """What a mapped benchmark's participant will answer, and the button that takes it."""
    study = participant.study
    open_items = StudyItem.objects.filter(study=study, held_back=False)
    batch = (study.sampling or {}).get("items_per_participant") or 0
    tests = open_items.filter(role=StudyItem.Role.TEST).count()
    context = {
        "participant": participant,
        "study": study,
        "items": min(batch, tests) if batch else tests,
        "practice": open_items.filter(role=StudyItem.Role.PRACTICE).count(),
        "attention": open_items.filter(role=StudyItem.Role.ATTENTION).count(),
        "estimate": recruitment.study_estimate_for_participants(study=study),
    }
    return render(request, "studies/choice_batch_offer.html", context)


def _progress(participant: Participant) -> tuple[int, int]:
    mine = participant.assignments.all()
    return mine.filter(status=Assignment.Status.SUBMITTED).count() + 1, mine.count()


def paragraphs(text: str | None) -> list[str]:
    """A passage as paragraphs: blank lines split them, the book's hard wraps do not."""
    blocks = re.split(r"\n\s*\n", (text or "").replace("\r\n", "\n").strip())
    return [" ".join(line.strip() for line in b.splitlines()) for b in blocks if b.strip()]


def _question(request, participant: Participant, assignment: Assignment, **extra) -> HttpResponse:
    item: QAItem = assignment.study_item.qa_item
    options = cs.chartom_options(item)
    order = cs.option_order(assignment.option_seed or 0, len(options))
    first = assignment.choices.filter(round=ChoiceAnswer.Round.FIRST).first()
    number, total = _progress(participant)
    context = {
        "participant": participant,
        "study": participant.study,
        "assignment": assignment,
        "item": item,
        "passage": paragraphs(item.context_2000 if first is not None else item.context_0),
        "book": assignment.session.study_work.work,
        "options": [(shown, options[index]) for shown, index in enumerate(order)],
        "first": first,
        "revising": first is not None,
        "number": number,
        "total": total,
        **extra,
    }
    return render(request, QUESTION_PAGE, context, status=extra.get("status", 200))


def _item(request, participant: Participant, assignment: Assignment, **extra) -> HttpResponse:
    """A mapped benchmark's item: its story and question in the study's language, the
    options in the assignment's order with keys A, B, C… (no gold: it is read only
    when the answer is final, in ``cs.choice_record``)."""
    study = participant.study
    # A bank item, or an attention check the researcher wrote (its question says what
    # to pick, so it needs no instruction of its own).
    item = generic.shown_item(assignment.study_item)
    language = generic.study_language(study.sampling, item)
    text = item.text(language)
    options = generic.generic_options(item, language)
    order = cs.generic_order(study, assignment, len(options))
    role = assignment.study_item.role
    # Practice items come first and are not counted: "Item 3 of 10" is of the rest.
    is_practice = Q(study_item__role=StudyItem.Role.PRACTICE)
    done = Q(status=Assignment.Status.SUBMITTED)
    progress = participant.assignments.aggregate(
        practice_total=Count("pk", filter=is_practice),
        practice_done=Count("pk", filter=is_practice & done),
        total=Count("pk", filter=~is_practice),
        done=Count("pk", filter=~is_practice & done),
    )
    context = {
        "participant": participant,
        "study": study,
        "assignment": assignment,
        "language": language,
        "benchmark": assignment.session.study_work.work,
        "passage": paragraphs(text.get("context")),
        "question": text.get("question", ""),
        "instruction": (
            generic.attention_instruction(study.sampling, item, language)
            if role == StudyItem.Role.ATTENTION and isinstance(item, MCItem)
            else ""
        ),
        "options": [
            (shown, generic.option_letter(shown), options[index])
            for shown, index in enumerate(order)
        ],
        "last_letter": generic.option_letter(len(order) - 1),
        "practice": role == StudyItem.Role.PRACTICE,
        "practice_number": progress["practice_done"] + 1,
        "practice_total": progress["practice_total"],
        "number": progress["done"] + 1,
        "total": progress["total"],
        **extra,
    }
    return render(request, ITEM_PAGE, context, status=extra.get("status", 200))


def _stage(request, participant: Participant, assignment: Assignment, **extra) -> HttpResponse:
    item = assignment.study_item
    stage = item.stage
    questions = cs.dyntom_questions(item)
    answered = {c.question_id for c in assignment.choices.all()}
    current = next((q for q in questions if q.pk not in answered), None)
    # The pick made before "Submit answer" (``pick``), shown again after a reload.
    saved = request.session.get(_pick_key(assignment.pk)) or {}
    context = {
        "participant": participant,
        "study": participant.study,
        "assignment": assignment,
        "stage": stage,
        "scenarios": [
            {"number": s.number, "background": s.background, "turns": s.dialogue}
            for s in DynToMScenario.objects.filter(stage=stage).order_by("number")
        ],
        "question": current,
        "picked": saved.get("option") if current and saved.get("question") == current.pk else None,
        "number": len(answered) + 1,
        "total": len(questions),
        **extra,
    }
    return render(request, STAGE_PAGE, context, status=extra.get("status", 200))


def _no_work_reason(participant: Participant) -> str:
    study = participant.study
    if study.status != Study.Status.LIVE:
        return Participant.NoWork.CLOSED
    if study.benchmark == cs.CHARTOM and participant.work_sessions.exists():
        return Participant.NoWork.DESIGN_FULL
    return Participant.NoWork.ALL_TAKEN


def _done(request: HttpRequest, participant: Participant) -> HttpResponse:
    if not participant.assignments.filter(status=Assignment.Status.SUBMITTED).exists():
        # Nothing answered and nothing left: no completion code for no work.
        return participant_views.no_work(request, participant, _no_work_reason(participant))
    # The exit questionnaire, when the study has one, comes before the last page.
    screen = participant_views.interstitial(request, participant, NextStep("done"))
    if screen is not None:
        return screen
    done = finished(participant)
    if done:
        participation_services.participant_finish(participant=participant)
    revealed = _reveal(participant)
    rows = []
    if revealed:
        # Practice is a warm-up and checks test attention: neither is part of the score.
        rows = [r for r in _results(participant) if r["role"] == StudyItem.Role.TEST]
    context = {
        "participant": participant,
        "study": participant.study,
        "revealed": revealed,
        "rows": rows,
        "correct": sum(1 for r in rows if r["correct"]),
        "finished": done,
    }
    return render(request, "studies/choice_done.html", context)


def _results(
    participant: Participant, *, assignment: Assignment | None = None
) -> list[dict[str, Any]]:
    """The participant's own final picks, with the gold: only from submitted assignments."""
    picks = ChoiceAnswer.objects.filter(
        assignment__participant=participant, assignment__status=Assignment.Status.SUBMITTED
    )
    if assignment is not None:
        picks = picks.filter(assignment=assignment)
    out = []
    picks = picks.select_related("qa_item", "question", "mc_item", "assignment__study_item")
    for c in picks.order_by("assignment__position", "question__position", "round"):
        if c.mc_item_id or c.assignment.study_item.instructed:
            item = generic.shown_item(c.assignment.study_item)
            language = generic.study_language(participant.study.sampling, item)
            options = generic.generic_options(item, language)
            text = item.text(language).get("question", "")
            picked = f"{generic.option_letter(c.shown)}. {options[c.option]}"
            # The correct option under the letter it had on this participant's screen.
            order = cs.generic_order(participant.study, c.assignment, len(options))
            gold = " / ".join(
                f"{generic.option_letter(order.index(a))}. {options[a]}"
                for a in item.answers or []
                if 0 <= a < len(options)
            )
        elif c.qa_item_id:
            if c.round != ChoiceAnswer.Round.REVISION:
                continue
            options = cs.chartom_options(c.qa_item)
            text, picked, gold = c.qa_item.question, options[c.option], options[0]
        else:
            text = c.question.text
            picked = c.question.options[c.option]
            gold = c.question.options[cs.dyntom_gold_index(c.question)]
        out.append(
            {
                "question": text,
                "picked": picked,
                "gold": gold,
                "correct": c.correct,
                "role": c.assignment.study_item.role,
            }
        )
    return out


# -- POSTs --------------------------------------------------------------------------------


def _refused(request, participant, exc: StudyError) -> HttpResponse:
    if isinstance(exc, cs.ChoiceReplay):
        return _message(request, "Already answered", str(exc), status=409, participant=participant)
    return _message(request, "Not saved", str(exc), status=422, participant=participant)


@require_POST
def books(request: HttpRequest, token: str) -> HttpResponse:
    participant = _participant(token)
    if participant.study.benchmark != cs.CHARTOM or participant.consented_at is None:
        return redirect("rater:start", token=participant.token)
    try:
        read = {int(v) for v in request.POST.getlist("read")}
    except ValueError:
        return _message(request, "Not saved", "Unknown book.", status=422, participant=participant)
    return _after(
        request, participant, lambda: cs.books_declare(participant=participant, read_work_ids=read)
    )


@require_POST
def batch_take(request: HttpRequest, token: str) -> HttpResponse:
    """A mapped benchmark's participant takes their batch of items (once)."""
    participant = _participant(token)
    if participant.study.benchmark != cs.GENERIC or participant.consented_at is None:
        return redirect("rater:start", token=participant.token)
    return _after(request, participant, lambda: cs.generic_batch_take(participant=participant))


@require_POST
def stage_take(request: HttpRequest, token: str, study_work_id: int) -> HttpResponse:
    participant = _participant(token)
    return _after(
        request,
        participant,
        lambda: cs.dyntom_stage_take(participant=participant, study_work_id=study_work_id),
    )


def _after(request, participant: Participant, call) -> HttpResponse:
    """Run one service; back to the participant's step, or the refusal with its reason."""
    try:
        call()
    except StudyError as exc:
        return _refused(request, participant, exc)
    return redirect("rater:start", token=participant.token)


@require_POST
def answer(request: HttpRequest, token: str, assignment_id: int) -> HttpResponse:
    """One pick: the first answer, a keep/change revision, or a DynToM question's answer."""
    participant = _participant(token)
    try:
        shown = optional_number(request.POST.get("option"), name="option")
        question_id = optional_number(request.POST.get("question"), name="question")
    except BadNumber as exc:
        return _message(request, "Not saved", str(exc), status=422, participant=participant)
    action = request.POST.get("action", "submit")
    try:
        saved = cs.choice_record(
            participant=participant,
            assignment_id=assignment_id,
            action=action,
            shown=shown,
            question_id=question_id,
        )
    except StudyError as exc:
        return _refused(request, participant, exc)
    request.session.pop(_pick_key(assignment_id), None)  # answered: the draft pick is done
    assignment = saved.assignment
    if assignment.status == Assignment.Status.SUBMITTED and (
        participant.study.reveal == Study.Reveal.AFTER_SCENE
        or assignment.study_item.role == StudyItem.Role.PRACTICE
    ):
        return redirect("rater:choice-result", token=participant.token, assignment_id=assignment.pk)
    return redirect("rater:start", token=participant.token)


@require_POST
def pick(request: HttpRequest, token: str, assignment_id: int) -> HttpResponse:
    """A DynToM question's pick as it is made, before "Submit answer" (htmx).

    Kept in the participant's session, not as an answer: the answer is what "Submit
    answer" sends (``answer``), timed from the question being shown to then. The stage
    page checks the kept pick again, so a reload loses nothing. Refused input answers
    422 with the reason, naming the field, and keeps nothing.
    """
    participant = _participant(token)
    try:
        shown = optional_number(request.POST.get("option"), name="option")
        question_id = optional_number(request.POST.get("question"), name="question")
        _pick_check(participant, assignment_id, question_id, shown)
    except (BadNumber, StudyError) as exc:
        return render(request, SAVE_STATUS, {"error": str(exc)}, status=422)
    request.session[_pick_key(assignment_id)] = {"question": question_id, "option": shown}
    return render(request, SAVE_STATUS, {"saved": 1})


def _pick_check(
    participant: Participant, assignment_id: int, question_id: int | None, shown: int | None
) -> None:
    """Raise StudyError unless ``shown`` is an option of the stage's question still open."""
    check_active(participant)
    assignment = (
        participant.assignments.filter(
            pk=assignment_id, status=Assignment.Status.ASSIGNED, study_item__stage__isnull=False
        )
        .select_related("study_item")
        .first()
    )
    if assignment is None:
        raise StudyError("no such open story in your assignments")
    question = next(
        (q for q in cs.dyntom_questions(assignment.study_item) if q.pk == question_id), None
    )
    if question is None:
        raise StudyError("question: not a question of this story")
    if assignment.choices.filter(question=question).exists():
        raise StudyError("question: already answered; your answer stands")
    if shown is None or not 0 <= shown < len(question.options):
        raise StudyError(f"option: choose one of the {len(question.options)} options")


@require_GET
def result(request: HttpRequest, token: str, assignment_id: int) -> HttpResponse:
    """The gold of one submitted assignment, when the study reveals after each item."""
    participant = _participant(token)
    assignment = (
        participant.assignments.filter(pk=assignment_id, status=Assignment.Status.SUBMITTED)
        .select_related("study_item")
        .first()
    )
    practice = assignment is not None and assignment.study_item.role == StudyItem.Role.PRACTICE
    if assignment is None or not (practice or _reveal(participant)):
        return _message(
            request,
            "Not available",
            "There is no answered question with that number in your study, or its answer "
            "is not shown yet.",
            status=404,
            participant=participant,
        )
    rows = _results(participant, assignment=assignment)
    return render(
        request,
        "studies/choice_result.html",
        {
            "participant": participant,
            "study": participant.study,
            "rows": rows,
            "practice": practice,
        },
    )
