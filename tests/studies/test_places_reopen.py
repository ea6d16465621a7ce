"""Places reopen after an exclusion (issue 49, item 1).

Seen on a scene study of 8 scenes x 2 raters: one of two finishers was excluded by the
attention-check rule, yet the study page still said "16 / 16 scene answers" and the
next participant was told everything had all the participants it needs. Now an
excluded or withdrawn participant's places go back to the pool (scene slots and
multiple-choice quotas), the study page counts what the report counts
(``studies.counting``), an exclusion lifted takes places back only where still free
(and says how many were not), and the public link's cap counts the participants who
count, under a ceiling on sign-ups the researcher sets.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from reports.selectors import human_guess_rows
from studies import selectors
from studies.choice import services as cs
from studies.counting import counted_participants, counted_people
from studies.errors import StudyError
from studies.models import Assignment, Participant, SceneSlot, StudyItem
from studies.participation import ledger, recruitment
from studies.participation.forms import RunningForm
from studies.participation.services import participant_consent, participant_withdraw
from studies.scene import services as scene_services
from studies.services import study_launch
from tests.factories import DynToMQuestionFactory, DynToMStageFactory

from .test_ledger import answer_all
from .test_rater_views import invite, keep_scenes, to_scenes

pytestmark = pytest.mark.django_db


def progress(study) -> selectors.ProgressSummary:
    return selectors.progress_summary(
        study, ledger.study_ledger(study=study), selectors.study_item_progress(study)
    )


def report_answers(study) -> int:
    """The report's "Scene answers" of the study: its counted (rater, scene) responses."""
    return len({row["assignment_id"] for row in human_guess_rows([study.pk])})


def assigned(study) -> list[int]:
    """Places held on each scene not held back (the study page's "Assigned" column)."""
    return [s.n_assigned for s in selectors.study_item_progress(study) if not s.held_back]


def declare(study, label: str) -> Participant:
    """A rater who consented and said "not seen" to the study's work: their scenes."""
    rater = participant_consent(participant=invite(study, label))
    scene_services.familiarity_declare(
        participant=rater, study_work=study.study_works.get(), seen=False
    )
    return rater


def exclude(participant: Participant, decision: str = "exclude") -> Participant:
    return ledger.participant_exclusion_override(
        participant=participant, decision=decision, reason="test"
    )


# -- scene studies ------------------------------------------------------------------------


def test_an_attention_check_exclusion_frees_the_scenes_for_the_next_rater(client, live_study):
    """The issue's case: 2 test scenes x 2 raters, one finisher excluded by the rule."""
    keep_scenes(live_study, 3)
    items = list(live_study.study_items.filter(held_back=False).order_by("position"))
    recruitment.item_roles_set(study=live_study, practice=None, attention=[items[2]])
    good, careless = invite(live_study, "good"), invite(live_study, "careless")
    for rater, wrong in ((good, ()), (careless, (StudyItem.Role.ATTENTION,))):
        to_scenes(client, rater)
        answer_all(client, rater, wrong_roles=wrong)
    careless.refresh_from_db()
    assert careless.excluded_at is not None and careless.exclusion_source == "rule"
    assert not SceneSlot.objects.filter(assignment__participant=careless).exists()

    # The page counts what the report counts: the excluded rater's answers are not there.
    summary = progress(live_study)
    assert (summary.submitted, summary.needed) == (2, 4)
    assert (summary.scenes_full, summary.open_scenes) == (0, 2)
    assert summary.submitted == report_answers(live_study)
    assert [
        s.n_submitted
        for s in selectors.study_item_progress(live_study)
        if s.role == "test" and not s.held_back
    ] == [1, 1]

    # The next rater gets both freed scenes (and the check, which everyone gets).
    fourth = invite(live_study, "fourth")
    to_scenes(client, fourth)
    roles = sorted(fourth.assignments.values_list("study_item__role", flat=True))
    assert roles == ["attention", "test", "test"]
    answer_all(client, fourth)
    summary = progress(live_study)
    assert (summary.submitted, summary.scenes_full) == (4, 2)
    assert summary.submitted == report_answers(live_study)

    # Now every place is taken by someone who counts: a fifth rater gets nothing.
    fifth = declare(live_study, "fifth")
    assert not fifth.assignments.exists()


def test_a_researcher_exclusion_frees_places_and_lifting_it_says_what_was_taken(live_study):
    keep_scenes(live_study, 2)
    first, second = declare(live_study, "first"), declare(live_study, "second")
    assert first.assignments.count() == second.assignments.count() == 2
    assert not declare(live_study, "third").assignments.exists()  # full

    second = exclude(second)
    assert second.places_short == 0
    assert assigned(live_study) == [1, 1]
    fourth = declare(live_study, "fourth")
    assert fourth.assignments.count() == 2
    # The excluded rater may still answer the scenes they have open; none counts.
    assert scene_services.participant_next_step(participant=second).kind == "scene"

    # Taken back in: both scenes went to the fourth meanwhile, and the page shows three.
    second = exclude(second, "include")
    assert second.excluded_at is None and second.places_short == 2
    assert not SceneSlot.objects.filter(assignment__participant=second).exists()
    assert assigned(live_study) == [3, 3]


def test_an_exclusion_lifted_before_anyone_came_takes_the_places_back(client, res_client_view):
    study = res_client_view
    keep_scenes(study, 2)
    declare(study, "first")
    second = declare(study, "second")
    page = client.post(
        reverse("studies:exclusion", args=[study.pk, second.pk]),
        {"decision": "exclude", "reason": "same person twice"},
        follow=True,
    ).content.decode()
    assert "second is excluded now. Their places are open to the next participants." in page
    assert (
        SceneSlot.objects.filter(assignment__isnull=True, study_item__held_back=False).count() == 2
    )
    page = client.post(
        reverse("studies:exclusion", args=[study.pk, second.pk]),
        {"decision": "include", "reason": "it was not"},
        follow=True,
    ).content.decode()
    assert "second is included now." in page and "one answer more" not in page
    assert SceneSlot.objects.filter(assignment__participant=second).count() == 2
    assert not declare(study, "third").assignments.exists()  # full again


def test_a_withdrawal_frees_the_places(live_study):
    keep_scenes(live_study, 2)
    first, _ = declare(live_study, "first"), declare(live_study, "second")
    participant_withdraw(participant=first)
    assert assigned(live_study) == [1, 1]
    assert declare(live_study, "third").assignments.count() == 2


def test_the_study_page_shows_the_counted_answers(client, res_client_view):
    study = res_client_view
    keep_scenes(study, 3)
    items = list(study.study_items.filter(held_back=False).order_by("position"))
    recruitment.item_roles_set(study=study, practice=None, attention=[items[2]])
    raters = [invite(study, "good"), invite(study, "careless")]
    for rater, wrong in zip(raters, ((), (StudyItem.Role.ATTENTION,)), strict=True):
        to_scenes(client, rater)
        answer_all(client, rater, wrong_roles=wrong)
    page = client.get(reverse("studies:detail", args=[study.pk])).content.decode()
    assert '<strong data-testid="answers-done">2</strong> / 4 scene answers' in page
    assert "<dt>Scenes complete</dt><dd>0 / 2</dd>" in page


# -- multiple-choice studies --------------------------------------------------------------


@pytest.fixture
def res_client_view(client, researcher, live_study):
    """``live_study``, with ``client`` logged in as its researcher."""
    client.force_login(researcher)
    return live_study


@pytest.fixture
def dyntom():
    stage = DynToMStageFactory()
    question = DynToMQuestionFactory(stage=stage, gold_letter="a")
    study = cs.choice_study_create(
        name="Stages", benchmark="dyntom", works=[stage.work], stage_fraction=1, overlap=1
    ).study
    study_launch(study=study)
    return study, question


def take(study, label: str) -> Participant:
    participant = participant_consent(participant=invite(study, label))
    open_stage = cs.dyntom_stage_open(participant)
    if open_stage is not None:
        cs.dyntom_stage_take(participant=participant, study_work_id=open_stage.pk)
    return participant


def test_a_multiple_choice_exclusion_frees_the_place(client, researcher, dyntom):
    study, question = dyntom
    first = take(study, "first")
    assignment = first.assignments.get()
    cs.choice_record(
        participant=first,
        assignment_id=assignment.pk,
        action="submit",
        shown=0,
        question_id=question.pk,
    )
    assert not take(study, "late").assignments.exists()  # the one place is taken

    client.force_login(researcher)
    detail = reverse("studies:detail", args=[study.pk])
    assert (
        '<strong data-testid="answers-done">1</strong> / 1' in client.get(detail).content.decode()
    )
    first = exclude(first)
    assert (
        '<strong data-testid="answers-done">0</strong> / 1' in client.get(detail).content.decode()
    )
    assert cs.dyntom_stage_open(first) is None  # no new place for the excluded
    later = take(study, "later")
    assert later.assignments.count() == 1

    # Taken back in: the place went to "later" meanwhile, and that is said.
    first = exclude(first, "include")
    assert first.places_short == 1


def test_a_multiple_choice_withdrawal_frees_the_place(dyntom):
    study, _ = dyntom
    first = take(study, "first")
    participant_withdraw(participant=first)
    assert take(study, "next").assignments.count() == 1


# -- the public link's cap and ceiling ----------------------------------------------------


def test_the_public_cap_counts_participants_who_count_under_a_ceiling(live_study):
    recruitment.public_link_set(study=live_study, cap=1)
    live_study.signup_ceiling = 2
    live_study.save(update_fields=["signup_ceiling"])
    first = recruitment.public_participant(study=live_study, params={"PROLIFIC_PID": "a"})
    with pytest.raises(StudyError, match="every place has been taken"):
        recruitment.public_link_check(study=live_study, params={"PROLIFIC_PID": "b"})
    exclude(first)
    assert recruitment.public_places(live_study) == (0, 1)
    assert recruitment.public_link_check(study=live_study, params={"PROLIFIC_PID": "b"}) is None
    second = recruitment.public_participant(study=live_study, params={"PROLIFIC_PID": "b"})
    assert second.label == "public 2"
    participant_withdraw(participant=second)
    # A place is free again, but two have signed up: the ceiling.
    with pytest.raises(StudyError, match="all the sign-ups it can take"):
        recruitment.public_participant(study=live_study, params={"PROLIFIC_PID": "c"})
    assert Participant.objects.filter(study=live_study).count() == 2


def test_the_ceiling_is_set_on_the_recruitment_form(client, res_client_view):
    study = res_client_view
    base = {
        "public_cap": "5",
        "session_cap": "0",
        "idle_timeout_minutes": "0",
        "attention_max_failures": "0",
    }
    form = RunningForm({**base, "signup_ceiling": "3"}, study=study)
    assert not form.is_valid()
    assert "must be at least the places on the public link" in str(form.errors["signup_ceiling"])
    page = client.get(reverse("studies:detail", args=[study.pk])).content.decode()
    assert "Most sign-ups on the public link" in page
    client.post(reverse("studies:running", args=[study.pk]), {**base, "signup_ceiling": "8"})
    study.refresh_from_db()
    assert (study.public_cap, study.signup_ceiling) == (5, 8)
    page = client.get(reverse("studies:detail", args=[study.pk])).content.decode()
    assert "5 places for participants who count, at most 8 sign-ups in all" in page


# -- the counting rule --------------------------------------------------------------------


def test_one_rule_counts_participants(live_study):
    keep, excluded, gone = (invite(live_study, label) for label in ("keep", "excluded", "gone"))
    exclude(excluded)
    participant_withdraw(participant=gone)
    people = Participant.objects.filter(study=live_study)
    assert list(people.filter(counted_people()).values_list("label", flat=True)) == ["keep"]
    assert set(
        people.filter(counted_people(include_excluded=True)).values_list("label", flat=True)
    ) == {"keep", "excluded"}
    declare_keep = participant_consent(participant=keep)
    scene_services.familiarity_declare(
        participant=declare_keep, study_work=live_study.study_works.get(), seen=False
    )
    rows = Assignment.objects.filter(participant__study=live_study)
    assert rows.filter(counted_participants()).count() == rows.count() > 0
