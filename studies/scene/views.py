"""The rater's pages: invite link -> consent -> "seen it?" -> history -> scenes -> report.

The invite token in the URL is the rater's only credential: an unknown token is a
plain 404 that says nothing about why. ``start`` is the one address a rater needs —
it asks ``scene_services.participant_next_step`` where they are and renders that step, so
closing the tab and opening the link again resumes exactly there. Every other view is
a POST that calls one service and redirects back to ``start`` (or, for the answer
fields, returns a small "saved" partial to htmx).

Gold answers are only read by ``scene_services.scene_submit`` and by the result/report pages,
which are served only after the scene is submitted and the study's reveal setting
allows it. Nothing here selects ``gold_character`` for a scene that is still open; the
one exception is an attention check whose study has an instruction, which names the
character to select on purpose (``scene_services.attention_names``).
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.validators import ProhibitNullCharactersValidator
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from benchmarks.models import Scene
from common.request_params import BadNumber, optional_number, parse_number
from studies.participation import services as participation_services
from studies.scene import services as scene_services

from ..errors import StudyError, SubmitIncomplete
from ..models import Assignment, Guess, Participant, Study, StudyItem, StudyWork, WorkSession
from ..participation import recruitment
from ..participation import views as participant_views
from ..services import attention_instruction_text
from .cache import code_order, scene_body, scene_rendered, scene_speakers

SCENE_PAGE = "studies/rater_scene.html"
SAVE_STATUS = "studies/rater_scene.html#save-status"
SPEAKERS_FORM = "studies/rater_scene.html#speakers-form"
HISTORY_PAGE = "studies/rater_history.html"
HISTORY_PANEL = "studies/rater_history.html#history-scenes"
MESSAGE_PAGE = "studies/rater_message.html"
# Answer fields as the scene form names them: choice-<instance id>, tags-<id>, …
# The id part is matched loosely and then parsed strictly, so a malformed one is an
# error the rater sees, not a field silently dropped or a 500.
ANSWER_FIELD = re.compile(r"^(choice|tags|evidence)-(.*)$", re.DOTALL)
TAGS_SENT_FIELD = re.compile(r"^tags-(.*)-sent$", re.DOTALL)
MASK_CODE = re.compile(r"^P\d+$")
_no_nul = ProhibitNullCharactersValidator()


# -- lookups ------------------------------------------------------------------------------


def _participant(token: str) -> Participant:
    """The token's participant, or a 404 that gives nothing away."""
    try:
        return Participant.objects.select_related("study").get(token=token)
    except Participant.DoesNotExist:
        raise Http404("no such page") from None


def _own_assignment(participant: Participant, assignment_id: int) -> Assignment | None:
    """One of this participant's assignments; another rater's id is simply not found."""
    return (
        Assignment.objects.select_related("session__study_work__work", "study_item__scene")
        .filter(pk=assignment_id, participant=participant)
        .first()
    )


def _not_yours(request: HttpRequest, participant: Participant) -> HttpResponse:
    """The same answer whether the scene belongs to another rater or does not exist."""
    return _message(
        request,
        "Scene not found",
        "There is no such scene in your assignments.",
        status=404,
        participant=participant,
    )


def _own_session(participant: Participant, session_id: int) -> WorkSession:
    try:
        return WorkSession.objects.select_related("study_work__work").get(
            pk=session_id, participant=participant
        )
    except WorkSession.DoesNotExist:
        raise Http404("no such work in your study") from None


# -- display (real or perturbed names) ------------------------------------------------------


def _name_map(study: Study, study_work: StudyWork) -> dict[str, str]:
    return dict(study_work.name_map or {}) if study.perturb_names else {}


def display_text(text: str, name_map: dict[str, str]) -> str:
    """``text`` with the study's display names; unchanged when names are not perturbed.

    The perturbation module is optional (a study without perturbed names needs none),
    so it is imported lazily and its absence leaves the text as it is.
    """
    if not name_map or not text:
        return text
    try:
        from studies.scene.perturbation import display_text as perturbed
    except ImportError:
        return text
    return perturbed(text, name_map)


def display_name(name: str, name_map: dict[str, str]) -> str:
    """A character's name as the rater sees it: mapped, and capitalised if stored lower-case."""
    folded = name.casefold()
    shown = next((v for k, v in name_map.items() if k.casefold() == folded), name)
    return shown.title() if shown == shown.lower() else shown


def _lines(scene: Scene, name_map: dict[str, str]) -> list[dict[str, Any]]:
    """Scene lines for the template: masked speakers stay codes, others get display names."""
    rows = []
    for line in scene.lines or []:
        title = line.get("title") or ""
        if line.get("type") == "dialog":
            masked = bool(MASK_CODE.match(title))
            speaker = title if masked else display_name(display_text(title, name_map), {})
            rows.append(
                {
                    "dialog": True,
                    "speaker": speaker,
                    "masked": masked,
                    "text": display_text(line.get("text", ""), name_map),
                }
            )
        else:
            rows.append({"dialog": False, "text": display_text(line.get("text", ""), name_map)})
    return rows


def _history(study: Study, study_work: StudyWork) -> list[dict[str, Any]]:
    """The work's training scenes, in order, with display names."""
    name_map = _name_map(study, study_work)
    scenes = Scene.objects.filter(work_id=study_work.work_id, part=Scene.Part.TRAINING).order_by(
        "position"
    )
    return [
        {
            "number": number,
            "heading": display_text(scene.heading, name_map),
            "lines": _lines(scene, name_map),
        }
        for number, scene in enumerate(scenes, start=1)
    ]


def _work_noun(study_work: StudyWork) -> str:
    kind = study_work.work.kind
    return {"tv_show": "show", "movie": "movie", "book": "book"}.get(kind, "story")


# -- the scene page -----------------------------------------------------------------------


@dataclass
class Speaker:
    """One masked speaker as the form shows it; never carries the gold, but for the
    instruction of an attention check, which gives it away on purpose."""

    instance_id: int
    code: str
    candidates: list[tuple[int, str]]  # (index, display name)
    chosen: int | str | None = None  # a candidate's index, or "cant" (can't tell)
    tags: list[str] = field(default_factory=list)
    evidence: str = ""
    instruction: str = ""  # an attention check's, with the name to select


def _speakers(
    study: Study, assignment: Assignment, name_map: dict[str, str], *, first_showing: bool = False
) -> list[Speaker]:
    # The scene's speakers (without the gold) come from the cache; only the rater's
    # own guesses are read, and not on the scene's first showing: every way a guess is
    # written starts the scene's clock first (scene_services.answers_record, scene_submit).
    instances = scene_speakers(scene_id=assignment.study_item.scene_id, version=study.item_set_hash)
    guesses = (
        {}
        if first_showing
        else {
            g.instance_id: g
            for g in Guess.objects.filter(assignment=assignment).only(
                "instance_id", "answer", "cant_tell", "tags", "evidence"
            )
        }
    )
    names = scene_services.attention_names(study=study, study_item=assignment.study_item)
    speakers = []
    for instance in instances:
        guess = guesses.get(instance.instance_id)
        chosen = None
        if guess is not None and guess.cant_tell:
            chosen = "cant"
        elif guess is not None and guess.answer in instance.candidates:
            chosen = instance.candidates.index(guess.answer)
        speakers.append(
            Speaker(
                instance_id=instance.instance_id,
                code=instance.code,
                candidates=[
                    (index, display_name(name, name_map))
                    for index, name in enumerate(instance.candidates)
                ],
                chosen=chosen,
                tags=list(guess.tags) if guess else [],
                evidence=guess.evidence if guess else "",
                instruction=attention_instruction_text(
                    study.attention_instruction,
                    display_name(names[instance.instance_id], name_map),
                )
                if instance.instance_id in names
                else "",
            )
        )
    return speakers


def _scene_body(study: Study, scene_id: int, name_map: dict[str, str]) -> dict[str, str]:
    """The scene's heading and lines as shown under ``name_map``, rendered once and cached."""

    def render(scene: Scene) -> dict[str, str]:
        return {
            "heading": display_text(scene.heading, name_map),
            "lines_html": render_to_string(
                "studies/rater_lines.html", {"lines": _lines(scene, name_map)}
            ),
        }

    return scene_body(
        scene_id=scene_id, version=study.item_set_hash, name_map=name_map, render=render
    )


# Stands for the save URL in the cached blank form: URL-safe, so escaping keeps it as it is.
_SAVE_URL_SLOT = "/s/SAVE-URL-SLOT/"


def _speakers_html(
    study: Study,
    assignment: Assignment,
    name_map: dict[str, str],
    speakers: list[Speaker],
    save_url: str,
) -> str:
    """The speakers' fields as ``rater_scene.html#speakers-form`` renders them, from the
    cache when nothing is answered yet (a scene's first showing, the usual case); ""
    when something is, and the page renders them itself."""
    if any(s.chosen is not None or s.tags or s.evidence for s in speakers):
        return ""

    def render() -> dict[str, str]:
        context = {"speakers": speakers, "study": study, "save_url": _SAVE_URL_SLOT}
        return {"html": render_to_string(SPEAKERS_FORM, context)}

    blank = scene_rendered(
        kind="form",
        scene_id=assignment.study_item.scene_id,
        version=study.item_set_hash,
        variant=[name_map, study.tags, study.allow_cant_tell, [s.instruction for s in speakers]],
        render=render,
    )
    # Our own template's escaped output; the URL is made of URL-safe characters.
    return mark_safe(blank["html"].replace(_SAVE_URL_SLOT, save_url))


def _scene_context(
    participant: Participant,
    assignment: Assignment,
    error: str = "",
    *,
    first_showing: bool = False,
) -> dict[str, Any]:
    study = participant.study
    session = assignment.session
    study_work = session.study_work
    name_map = _name_map(study, study_work)
    body = _scene_body(study, assignment.study_item.scene_id, name_map)
    speakers = _speakers(study, assignment, name_map, first_showing=first_showing)
    save_url = reverse(
        "rater:scene-save", kwargs={"token": participant.token, "assignment_id": assignment.pk}
    )
    return {
        "participant": participant,
        "study": study,
        "study_work": study_work,
        "session": session,
        "assignment": assignment,
        "heading": body["heading"],
        "lines_html": mark_safe(body["lines_html"]),  # our own template escaped it
        "speakers": speakers,
        "speakers_html": _speakers_html(study, assignment, name_map, speakers, save_url),
        "candidate_names": speakers[0].candidates if speakers else [],
        "error": error,
    }


def _render_scene(
    request: HttpRequest,
    participant: Participant,
    assignment: Assignment,
    *,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    first_showing = assignment.first_shown_at is None
    scene_services.scene_shown(participant=participant, assignment=assignment)
    context = _scene_context(participant, assignment, error, first_showing=first_showing)
    context |= participant_views.scene_extras(request, assignment)
    if context["missing"]:  # the cached blank form cannot mark the unanswered speakers
        context["speakers_html"] = ""
    return render(request, SCENE_PAGE, context, status=status)


def _message(
    request: HttpRequest,
    title: str,
    text: str,
    *,
    status: int = 200,
    participant: Participant | None = None,
) -> HttpResponse:
    context = {"title": title, "text": text, "participant": participant}
    return render(request, MESSAGE_PAGE, context, status=status)


# -- the report -----------------------------------------------------------------------


def _results(participant: Participant, assignments: list[Assignment]) -> list[dict]:
    """Per-scene results of submitted scenes (with the gold): only for revealed pages."""
    guesses = (
        Guess.objects.filter(assignment__in=assignments)
        .select_related("instance__gold_character")
        .order_by("assignment_id")
    )
    by_assignment: dict[int, list[Guess]] = {}
    for guess in guesses:
        by_assignment.setdefault(guess.assignment_id, []).append(guess)
    session_totals = dict(
        Assignment.objects.filter(session_id__in={a.session_id for a in assignments})
        .order_by()
        .values("session_id")
        .annotate(n=Count("pk"))
        .values_list("session_id", "n")
    )
    rows = []
    for assignment in assignments:
        name_map = _name_map(participant.study, assignment.session.study_work)
        speakers = [
            {
                "code": g.instance.code,
                "answer": display_name(g.answer, name_map),
                "gold": display_name(g.instance.gold_character.name, name_map),
                "correct": bool(g.correct),
            }
            for g in sorted(
                by_assignment.get(assignment.pk, []), key=lambda g: code_order(g.instance.code)
            )
        ]
        rows.append(
            {
                "assignment": assignment,
                "work": assignment.session.study_work.work,
                "place": recruitment.scene_place(
                    assignment=assignment, session_total=session_totals[assignment.session_id]
                ),
                "attention": assignment.study_item.role == StudyItem.Role.ATTENTION,
                "speakers": speakers,
                "all_correct": bool(speakers) and all(s["correct"] for s in speakers),
                "history_needed": assignment.history_needed,
            }
        )
    return rows


def _render_done(request: HttpRequest, participant: Participant) -> HttpResponse:
    if not participant.assignments.filter(status=Assignment.Status.SUBMITTED).exists():
        # Nothing answered and nothing left: no completion code for no work.
        reason = (
            Participant.NoWork.ALL_TAKEN
            if participant.study.status == Study.Status.LIVE
            else Participant.NoWork.CLOSED
        )
        return participant_views.no_work(request, participant, reason)
    # A closed study sends an unfinished rater here too; "at_end" still waits for the
    # rater's own end, so the score and the gold are shown only when that is reached.
    revealed = scene_services.participant_reveal_allowed(participant=participant)
    submitted = []
    if revealed:
        submitted = list(
            Assignment.objects.filter(participant=participant, status=Assignment.Status.SUBMITTED)
            .select_related("session__study_work__work", "study_item")
            .order_by("session__started_at", "position")
        )
    finished = scene_services.participant_finished(participant=participant)
    if finished:  # the exit questionnaire, if any, is behind them: ``start`` showed it first
        participation_services.participant_finish(participant=participant)
    context = {
        "participant": participant,
        "study": participant.study,
        "revealed": revealed,
        "score": scene_services.participant_score(participant=participant) if revealed else None,
        "results": _results(participant, submitted),
        "finished": finished,
    }
    return render(request, "studies/rater_done.html", context)


# -- views ----------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@login_required
def join(request: HttpRequest, study_id: int) -> HttpResponse:
    """A logged-in rater's entry: their participation, then their own invite URL.

    Who may join is decided by ``participation_services.participant_for_user``; anyone else gets a
    403 that says why (a draft study is not found at all). Joining is a POST with the
    CSRF token: a GET only resumes an existing participation or shows the Join button.
    """
    study = get_object_or_404(Study.objects.exclude(status=Study.Status.DRAFT), pk=study_id)
    try:
        if request.method == "POST":
            participant = participation_services.participant_for_user(
                study=study, user=request.user
            )
        else:
            participant = participation_services.participant_join_check(
                study=study, user=request.user
            )
    except participation_services.JoinRefused as exc:
        return _message(request, "You cannot join this study", f"Sorry: {exc}.", status=403)
    if participant is None:
        return participant_views.join_page(request, study, action=request.path)
    return redirect("rater:start", token=participant.token)


@require_GET
def start(request: HttpRequest, token: str) -> HttpResponse:
    """Render whatever step the rater is at; the same URL always resumes there."""
    # The common case first, in one query: a rater answering scenes of a live study.
    assignment = scene_services.rater_open_assignment(token=token)
    if assignment is not None:
        participant = assignment.participant
        if (
            participant.study.status == Study.Status.LIVE
            and participant.withdrawn_at is None
            and participant.consented_at is not None
            and assignment.session.history_confirmed_at is not None
            # Screens that come before a scene take the full path below.
            and not request.GET
            and not participant.released_count
            and not participant.study.session_cap
        ):
            return _render_scene(request, participant, assignment)
    # Any other step: the rater on their own (with the study's texts, which the
    # query above leaves out), then wherever ``participant_next_step`` says.
    participant = _participant(token)
    study = participant.study
    if request.GET:  # a recruiting platform's ids on the invite link
        try:
            recruitment.platform_ids_capture(participant=participant, params=request.GET)
        except recruitment.BadPlatformId as exc:
            return _message(request, "This link is not valid", f"Sorry: {exc}.", status=400)
    if (last_page := participant_views.ended(request, participant)) is not None:
        return last_page
    if participant.withdrawn_at is not None:
        return _message(
            request,
            "You have been withdrawn",
            "You have been withdrawn from this study. Your answers so far are kept; "
            "thank you for your time.",
            status=403,
        )
    if study.status == Study.Status.DRAFT:
        return _message(request, "Not open yet", "This study has not started yet.")
    if study.status == Study.Status.PAUSED:
        return _message(
            request,
            "Study paused",
            "This study is paused at the moment. Your answers so far are saved; "
            "open this same link again later to continue where you left off.",
        )
    if study.benchmark in ("chartom-qa", "dyntom", "generic"):
        from ..choice import views as choice_views

        return choice_views.step(request, participant)
    step = scene_services.participant_next_step(participant=participant, open_assignment=assignment)
    if study.status == Study.Status.CLOSED and step.kind != "done":
        return _message(
            request, "Study closed", "This study is closed. Thank you for your interest."
        )
    if (screen := participant_views.interstitial(request, participant, step)) is not None:
        return screen
    if step.kind == "consent":
        context = {
            "participant": participant,
            "study": study,
            "estimate": recruitment.study_estimate_for_participants(study=study),
        }
        return render(request, "studies/rater_consent.html", context)
    if step.kind == "familiarity":
        context = {
            "participant": participant,
            "study": study,
            "study_work": step.study_work,
            "noun": _work_noun(step.study_work),
        }
        return render(request, "studies/rater_familiarity.html", context)
    if step.kind == "history":
        scene_services.history_view_log(session=step.session, where="reader")
        return render(request, HISTORY_PAGE, _history_context(participant, step.session))
    if step.kind == "scene":
        return _render_scene(request, participant, step.assignment)
    return _render_done(request, participant)


def _history_context(participant: Participant, session: WorkSession) -> dict[str, Any]:
    return {
        "participant": participant,
        "study": participant.study,
        "session": session,
        "study_work": session.study_work,
        "noun": _work_noun(session.study_work),
        "scenes": _history(participant.study, session.study_work),
        "total": recruitment.session_scenes(session_id=session.pk),
        "practice": recruitment.practice_count(session_id=session.pk),
    }


def _after_post(request: HttpRequest, participant: Participant, call) -> HttpResponse:
    """Run one service; back to ``start`` on success, the message page on StudyError."""
    try:
        call()
    except StudyError as exc:
        return _message(request, "That did not work", str(exc), status=400, participant=participant)
    return redirect("rater:start", token=participant.token)


@require_POST
def consent(request: HttpRequest, token: str) -> HttpResponse:
    participant = _participant(token)
    return _after_post(
        request,
        participant,
        lambda: participation_services.participant_consent(participant=participant),
    )


@require_POST
def familiarity(request: HttpRequest, token: str, study_work_id: int) -> HttpResponse:
    participant = _participant(token)
    study_work = get_object_or_404(
        StudyWork.objects.select_related("work", "study"),
        pk=study_work_id,
        study_id=participant.study_id,
    )
    seen = request.POST.get("seen")
    if seen not in ("yes", "no"):
        return _message(
            request,
            "Please answer the question",
            "Say whether you have seen it: yes or no.",
            status=400,
            participant=participant,
        )
    if participant.consented_at is None:
        return redirect("rater:start", token=participant.token)
    return _after_post(
        request,
        participant,
        lambda: scene_services.familiarity_declare(
            participant=participant, study_work=study_work, seen=seen == "yes"
        ),
    )


@require_GET
def history(request: HttpRequest, token: str, session_id: int) -> HttpResponse:
    """The history again while answering: the side panel (htmx) or a page of its own."""
    participant = _participant(token)
    session = _own_session(participant, session_id)
    try:
        assignment_id = optional_number(request.GET.get("assignment"), name="assignment")
    except BadNumber as exc:
        return _message(request, "Bad request", str(exc), status=400, participant=participant)
    assignment = None
    if assignment_id is not None:
        assignment = Assignment.objects.filter(
            pk=assignment_id, participant=participant, session=session
        ).first()
    scene_services.history_view_log(session=session, where="panel", assignment=assignment)
    context = _history_context(participant, session)
    context["panel"] = True
    context["back"] = reverse("rater:start", kwargs={"token": participant.token})
    template = HISTORY_PANEL if request.htmx else HISTORY_PAGE
    return render(request, template, context)


@require_POST
def history_confirm(request: HttpRequest, token: str, session_id: int) -> HttpResponse:
    participant = _participant(token)
    session = _own_session(participant, session_id)
    return _after_post(
        request,
        participant,
        lambda: scene_services.history_confirm(participant=participant, session=session),
    )


def _text(key: str, value: str) -> str:
    """Refuse a NUL byte (PostgreSQL cannot store one) with Django's own form validator."""
    try:
        _no_nul(value)
    except ValidationError:
        raise StudyError(f"{_field_name(key)}: null characters are not allowed") from None
    return value


def _field_name(key: str) -> str:
    return ascii(key) if len(key) <= 40 else ascii(key[:40] + "…")


def _instance_id(key: str, raw: str) -> int:
    try:
        return parse_number(raw, name=f"field {_field_name(key)}")
    except BadNumber as exc:
        raise StudyError(str(exc)) from None


def _answers(post: QueryDict) -> tuple[dict[int, dict[str, Any]], bool | None]:
    """The answer fields of a POST, per instance id, and the history flag if it was sent.

    Tags are multi-valued checkboxes, so an empty selection only counts when the
    form says the tag group was sent (``tags-<id>-sent``). Malformed ids or choices and
    NUL bytes raise StudyError before anything is stored.
    """
    per_instance: dict[int, dict[str, Any]] = {}
    for key in post:
        if match := TAGS_SENT_FIELD.match(key):
            per_instance.setdefault(_instance_id(key, match[1]), {}).setdefault("tags", [])
            continue
        match = ANSWER_FIELD.match(key)
        if not match:
            continue
        kind, instance_id = match[1], _instance_id(key, match[2])
        values = per_instance.setdefault(instance_id, {})
        if kind == "choice" and post.get(key) == "cant":
            values["choice"] = scene_services.CANT_TELL
        elif kind == "choice":
            try:
                values["choice"] = parse_number(post.get(key), name=_field_name(key))
            except BadNumber:
                # Not an index at all: the service refuses it like any index out of
                # range, with the number of candidates in the message.
                values["choice"] = -1
        elif kind == "evidence":
            # Browsers post textarea line breaks as CRLF; store them as "\n".
            values["evidence"] = _text(key, post.get(key, "")).replace("\r\n", "\n")
        else:
            values["tags"] = [_text(key, tag) for tag in post.getlist(key)]
    flag = None
    if "history_needed-sent" in post:
        flag = post.get("history_needed") in ("1", "on", "true")
    return per_instance, flag


def _save(participant: Participant, assignment_id: int, post: QueryDict) -> int:
    """Store every answer field in ``post`` at once: all of them or, on error, none."""
    per_instance, flag = _answers(post)
    scene_services.answers_record(
        participant=participant,
        assignment_id=assignment_id,
        answers=per_instance,
        history_needed=flag,
    )
    return len(per_instance) + (flag is not None)


@require_POST
def scene_save(request: HttpRequest, token: str, assignment_id: int) -> HttpResponse:
    """One answer field, saved as it changes (htmx); answers with a small status partial.

    Rejected input (another rater's scene, an instance not in it, a choice outside the
    candidates, a submitted scene) stores nothing and answers 422 with the message;
    ``static/js/rater_saves.js`` lets htmx show it. Without htmx the page is rendered again.
    An unknown token is a plain 404, as everywhere.
    """
    try:
        per_instance, flag = _answers(request.POST)
        scene_services.answers_record(
            token=token, assignment_id=assignment_id, answers=per_instance, history_needed=flag
        )
        saved = len(per_instance) + (flag is not None)
    except StudyError as exc:
        participant = _participant(token)  # only now: the error page needs it
        if request.htmx:
            return render(request, SAVE_STATUS, {"error": str(exc)}, status=422)
        return _message(request, "Not saved", str(exc), status=400, participant=participant)
    if request.htmx:
        return render(request, SAVE_STATUS, {"saved": saved})
    return redirect("rater:start", token=token)


@require_POST
def scene_submit(request: HttpRequest, token: str, assignment_id: int) -> HttpResponse:
    """Save the whole form (the no-JS path; with JS it is already saved), then submit.

    Idempotent: a second submit of a submitted scene changes nothing and moves on. The
    service reads the rater and the scene in its one locked query; the rater is read
    on its own only on the way to an error page.
    """
    if request.POST.get("confidence"):
        participant = _participant(token)
        # A submitted scene keeps its rating; the submit below says whatever else is wrong.
        with contextlib.suppress(StudyError):
            if participant.study.ask_confidence:
                recruitment.confidence_record(
                    participant=participant,
                    assignment_id=assignment_id,
                    value=request.POST["confidence"],
                )
    try:
        # One call, one lock: a submit that raced another tab's finds the scene
        # submitted and lands where a replay lands, below.
        per_instance, flag = _answers(request.POST)
        assignment = scene_services.scene_submit(
            token=token, assignment_id=assignment_id, answers=per_instance, history_needed=flag
        )
    except scene_services.AssignmentNotFound:
        return _not_yours(request, _participant(token))
    except StudyError as exc:
        participant = _participant(token)
        assignment = _own_assignment(participant, assignment_id)
        if assignment is None:
            return _not_yours(request, participant)
        if assignment.status == Assignment.Status.SUBMITTED:
            pass  # a replay whose form did not parse: it lands where a replay lands
        elif (
            participant.study.status != Study.Status.LIVE
            or participant.withdrawn_at
            or not isinstance(exc, SubmitIncomplete)  # tampered
        ):
            return _message(request, "Not saved", str(exc), status=400, participant=participant)
        else:
            # Answers that were valid stay saved; the page (a GET, so a reload does not
            # post again) marks what is still missing.
            return participant_views.submit_refused(participant, exc)
    participant = assignment.participant
    practice = assignment.study_item.role == assignment.study_item.Role.PRACTICE
    if participant.study.reveal == Study.Reveal.AFTER_SCENE or practice:
        return redirect("rater:scene-result", token=token, assignment_id=assignment.pk)
    return redirect("rater:start", token=token)


@require_GET
def scene_result(request: HttpRequest, token: str, assignment_id: int) -> HttpResponse:
    """One submitted scene's result: after submission, and only if the study reveals it."""
    participant = _participant(token)
    assignment = _own_assignment(participant, assignment_id)
    if assignment is None:
        return _not_yours(request, participant)
    practice = assignment.study_item.role == assignment.study_item.Role.PRACTICE
    if assignment.status != Assignment.Status.SUBMITTED or not (
        practice or scene_services.participant_reveal_allowed(participant=participant)
    ):
        raise Http404("no result to show yet")
    (result,) = _results(participant, [assignment])
    context = {
        "participant": participant,
        "study": participant.study,
        "result": result,
        "next_url": reverse("rater:start", kwargs={"token": participant.token}),
    }
    return render(request, "studies/rater_result.html", context)
