"""What the study pages and the studies API both do between a valid form and a service:
draw a scene study's sample, create a study of either kind from its bound create form,
and create invite links from a bound invite form.

The page (``studies.views``) and the API (``studies.api.views``) call these with the
same forms, so the two cannot drift apart: what one accepts, the other does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from benchmarks.models import Scene

from . import selectors, services
from .choice import services as choice_services
from .choice.forms import ChoiceStudyForm
from .errors import StudyError
from .forms import InviteForm, StudyCreateForm
from .models import Participant, Study
from .participation.services import participants_invite
from .scene.leaks import LeakReport, leaks_check
from .scene.sampling import ALL, sample_scenes

INVITES_CLOSED = "The study is closed: it takes no new invites."


def scene_sample(form: StudyCreateForm) -> tuple[list[Scene] | None, dict[str, Any]]:
    """The scenes a valid create form's sampling settings draw (None: all), and how, for
    the study's ``sampling`` field."""
    mode = form.cleaned_data["scenes"]
    sample = sample_scenes(
        selectors.scene_rows(list(form.cleaned_data["works"])),
        by=mode,
        per_stratum=form.cleaned_data["per_stratum"],
        seed=form.cleaned_data["seed"],
    )
    sampling: dict[str, Any] = {"mode": "all" if mode == ALL else "stratified"}
    if mode == ALL:
        return None, sampling
    sampling |= {
        "by": mode,
        "per_stratum": form.cleaned_data["per_stratum"],
        "strata": {k: list(v) for k, v in sample.counts.items()},
    }
    scenes = list(Scene.objects.filter(pk__in=[r.scene_id for r in sample.rows]))
    return scenes, sampling


@dataclass(frozen=True)
class SceneStudyCreated:
    study: Study
    leaks: LeakReport  # the first leak check, run as the draft is made

    def summary(self) -> str:
        """The page's message (the API returns it too)."""
        return (
            f"Study created with {self.leaks.scenes} scenes. The leak check held back "
            f"{self.leaks.held_back} of them; review them before going live."
        )


@transaction.atomic
def scene_study_create(*, form: StudyCreateForm, created_by: Any) -> SceneStudyCreated:
    """A draft scene study from a valid :class:`StudyCreateForm`, leak-checked at once.

    One transaction: a refused leak check leaves no draft behind. Raises
    :class:`StudyError` (the form's non-field error on the page, a 400 in the API).
    """
    works = list(form.cleaned_data["works"])
    scenes, sampling = scene_sample(form)
    study = services.study_create(
        name=form.cleaned_data["name"],
        benchmark=works[0].benchmark,
        works=works,
        scenes=scenes,
        created_by=created_by,
        sampling=sampling,
        **form.study_settings(),
    )
    return SceneStudyCreated(study=study, leaks=leaks_check(study=study))


def choice_study_create(
    *, form: ChoiceStudyForm, created_by: Any
) -> choice_services.ChoiceStudyCreated:
    """A draft multiple-choice study from a valid :class:`ChoiceStudyForm` (the arguments
    ``choice.researcher_views.study_new`` passes). Raises :class:`StudyError`."""
    data = form.cleaned_data
    return choice_services.choice_study_create(
        name=data["name"],
        created_by=created_by,
        instructions=data.get("instructions") or "",
        consent=data.get("consent") or "",
        **form.sample_args(),
        **form.study_settings(),
        allocation_spec=form.allocation_spec()
        if data["benchmark"] == choice_services.GENERIC
        else None,
    )


def choice_created_summary(created: choice_services.ChoiceStudyCreated) -> str:
    """The multiple-choice page's message: the items drawn and those left out, and why."""
    skipped = "; ".join(f"{n} {why}" for why, n in created.skipped.items())
    return f"Study created with {created.items} items." + (
        f" Left out: {skipped}." if skipped else ""
    )


def invites_create(*, study: Study, form: InviteForm) -> list[Participant]:
    """The invite links a valid :class:`InviteForm` asks for: one participant per label
    (or ``rater N`` for a count). A closed study takes none (:class:`StudyError`)."""
    if study.status == Study.Status.CLOSED:
        raise StudyError(INVITES_CLOSED)
    return participants_invite(study=study, labels=form.labels_for(study.participants.count()))
