"""What both demo test modules use: one call of load_demo and what it should leave."""

from __future__ import annotations

from io import StringIO

from django.contrib.auth import get_user_model
from django.core.management import call_command

from annotation.chartom.models import (
    AnnotationTask,
    Construction,
    FieldChange,
    JudgementSample,
    NoteBatch,
    QualificationAttempt,
    QualificationSet,
    TaskAssignment,
)
from benchmarks.models import (
    Character,
    DynToMQuestion,
    DynToMScenario,
    DynToMStage,
    QAItem,
    Scene,
    SpeakerInstance,
    Work,
)
from modeling.models import CachedResponse, Prediction, Run, RunCall
from studies.models import Assignment, ChoiceAnswer, Guess, Participant, Study

LOGINS = {
    "researcher": "tomlab-researcher",
    "annotator": "tomlab-annotator",
    "rater": "tomlab-rater",
}
# The works' rows, with their last-modified times: a second load changes none.
MODELS = (
    Work,
    Character,
    Scene,
    SpeakerInstance,
    QAItem,
    DynToMStage,
    DynToMScenario,
    DynToMQuestion,
)
# Every other part of the demo, counted: a second load adds none, a refused one leaves none.
COUNTED = (
    Study,
    Participant,
    Assignment,
    ChoiceAnswer,
    Guess,
    Run,
    Prediction,
    RunCall,
    CachedResponse,
    NoteBatch,
    Construction,
    FieldChange,
    AnnotationTask,
    TaskAssignment,
    QualificationSet,
    QualificationAttempt,
    JudgementSample,
)


def run_demo(*args: str) -> str:
    """``load_demo`` with ``args``; what it printed."""
    out = StringIO()
    call_command("load_demo", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def snapshot() -> dict[str, list[tuple]]:
    """Every demo row with its last-modified time, and every user's password hash."""
    rows = {
        model.__name__: sorted(model.objects.values_list("pk", "updated_at")) for model in MODELS
    }
    rows["users"] = sorted(get_user_model().objects.values_list("username", "password"))
    return rows
