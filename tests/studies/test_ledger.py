"""The participant ledger (issue 28, parts 1-2): one status per participant, the one
source of the study page's tiles and table, raters.csv and platform-ids.csv; the
exclusion rule (attention checks, too fast) with the researcher's override; and
"finished" written when a participant reaches the end (the exit questionnaire too).

Through the pages where a person acts, on the real Friends scenes.
"""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from studies import quality
from studies.errors import StudyError
from studies.models import Assignment, Participant, StudyItem
from studies.participation import ledger, recruitment
from studies.participation import services as participation_services
from studies.scene import services as scene_services
from tests.studies.quotas import quotas_set

from .test_rater_views import current, full_form, invite, keep_scenes, to_scenes, url

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("friends")]


@pytest.fixture
def res_client(client, researcher):
    client.force_login(researcher)
    return client


def detail(client, study, query: str = "") -> str:
    response = client.get(reverse("studies:detail", args=[study.pk]) + query)
    assert response.status_code == 200
    return response.content.decode()


def answer_all(client, participant, *, wrong_roles: tuple[str, ...] = ()) -> None:
    """Every scene the participant has, through the scene form (attention checks of
    ``wrong_roles`` answered wrong), then the last page."""
    while True:
        participant.refresh_from_db()
        step = scene_services.participant_next_step(participant=participant)
        if step.kind != "scene":
            break
        assignment = step.assignment
        right = assignment.study_item.role not in wrong_roles
        client.post(
            url("scene-submit", participant, assignment_id=assignment.pk),
            full_form(assignment, right=right),
        )
    client.get(url("start", participant))


def csv_rows(client, name: str, study) -> list[dict[str, str]]:
    response = client.get(reverse(f"studies:{name}", args=[study.pk]))
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(response.content.decode())))


# -- finished ------------------------------------------------------------------------


def test_finished_is_written_at_the_end_after_the_exit_questionnaire(
    client, res_client, live_study
):
    """The Finished tile stayed 0: nothing wrote ``finished_at``. Now the last page does."""
    keep_scenes(live_study, 2)
    live_study.exit_questions = recruitment.exit_questions_parse("Age: 18-30 | 31+")
    live_study.save(update_fields=["exit_questions"])
    participant = invite(live_study, "finisher")
    to_scenes(client, participant)
    answer_all(client, participant)
    participant.refresh_from_db()
    # Every scene done, the questionnaire not yet: still in progress.
    assert participant.finished_at is None
    assert (
        ledger.participant_status(ledger.study_ledger(study=live_study)[0].participant).key
        == "in_progress"
    )
    client.post(url("exit", participant), {"q1": "31+"})
    assert "you are done" in client.get(url("start", participant)).content.decode()
    participant.refresh_from_db()
    first = participant.finished_at
    assert first is not None
    client.get(url("start", participant))  # coming back keeps the first time
    participant.refresh_from_db()
    assert participant.finished_at == first

    page = detail(res_client, live_study)
    assert '<dd data-testid="count-finished">1</dd>' in page
    assert 'data-status="finished"' in page


def test_the_last_scene_finishes_a_participant_without_an_exit_questionnaire(live_study):
    """Answers through the services only (as the demo loads them): the last submit is
    the end when nothing else waits, so the ledger says finished, not in progress."""
    keep_scenes(live_study, 2)
    participant = invite(live_study, "services")
    participation_services.participant_consent(participant=participant)
    scene_services.familiarity_declare(
        participant=participant, study_work=live_study.study_works.get(), seen=False
    )
    assignments = list(participant.assignments.order_by("position"))
    for n, assignment in enumerate(assignments, start=1):
        scene_services.scene_submit(
            participant=participant,
            assignment_id=assignment.pk,
            answers={
                int(key.removeprefix("choice-")): {"choice": int(value)}
                for key, value in full_form(assignment).items()
                if key.startswith("choice-")
            },
        )
        participant.refresh_from_db()
        assert (participant.finished_at is not None) == (n == len(assignments))
    assert ledger.study_ledger(study=live_study)[0].status.key == "finished"


# -- the statuses ---------------------------------------------------------------------


def test_every_status_and_its_precedence(client, res_client, live_study):
    keep_scenes(live_study, 2)
    quotas_set(live_study, overlap=6, session_cap=1, idle_timeout_minutes=30)
    labels = ["invited", "consented", "declined", "breaking", "timed", "withdrawn", "both"]
    people = {p.label: p for p in participation_services.participants_invite(
        study=live_study, labels=labels
    )}  # fmt: skip
    participation_services.participant_consent(participant=people["consented"])
    client.post(url("refuse", people["declined"]))
    for label in ("breaking", "timed", "both"):
        to_scenes(client, people[label])
        assignment = current(people[label])
        client.post(
            url("scene-submit", people[label], assignment_id=assignment.pk),
            full_form(assignment),
        )
    long_ago = timezone.now() - timedelta(hours=2)
    Assignment.objects.filter(participant=people["timed"]).update(
        assigned_at=long_ago, first_shown_at=long_ago, last_event_at=long_ago, submitted_at=long_ago
    )
    recruitment.assignments_release_idle(study=live_study)
    participation_services.participant_withdraw(participant=people["withdrawn"])
    # Withdrawn wins over excluded.
    ledger.participant_exclusion_override(
        participant=people["both"], decision="exclude", reason="duplicate account"
    )
    participation_services.participant_withdraw(participant=people["both"])

    rows = {r.participant.label: r.status for r in ledger.study_ledger(study=live_study)}
    assert {label: s.key for label, s in rows.items()} == {
        "invited": "invited",
        "consented": "consented",
        "declined": "declined",
        "breaking": "on_break",
        "timed": "timed_out",
        "withdrawn": "withdrawn",
        "both": "withdrawn",
    }
    assert all(s.at is not None for s in rows.values())
    people["declined"].refresh_from_db()
    assert rows["declined"].at == people["declined"].refused_at

    page = detail(res_client, live_study)
    assert '<dd data-testid="count-declined">1</dd>' in page
    assert '<dd data-testid="count-withdrawn">2</dd>' in page
    assert '<dd data-testid="count-on_break">1</dd>' in page
    # The invite table shows the decline too, not "not yet".
    assert 'badge-ledger-declined">declined</span>' in page

    # The filter: declined only, as a page and as the htmx partial.
    only = detail(res_client, live_study, "?status=declined")
    table = only.split('data-testid="ledger"')[1].split("</table>")[0]
    assert ">declined<" in table and "consented</span>" not in table
    partial = res_client.get(
        reverse("studies:detail", args=[live_study.pk]) + "?status=timed_out",
        headers={"HX-Request": "true", "HX-Target": "participants"},
    ).content.decode()
    assert "<html" not in partial and 'data-status="timed_out"' in partial
    assert 'data-status="invited"' not in partial
    bad = res_client.get(reverse("studies:detail", args=[live_study.pk]) + "?status=lost")
    assert bad.status_code == 400 and b"status: unknown status 'lost'" in bad.content
    with pytest.raises(StudyError, match=r"^status:"):
        ledger.study_ledger(study=live_study, status="lost")


# -- exclusions -----------------------------------------------------------------------


def test_a_failed_attention_check_excludes_and_the_researcher_can_override(
    client, res_client, live_study
):
    keep_scenes(live_study, 3)
    items = list(live_study.study_items.filter(held_back=False).order_by("position"))
    recruitment.item_roles_set(study=live_study, practice=None, attention=[items[2]])
    careless = invite(live_study, "careless")
    to_scenes(client, careless)
    answer_all(client, careless, wrong_roles=(StudyItem.Role.ATTENTION,))
    careless.refresh_from_db()
    assert careless.excluded_at is not None
    assert careless.exclusion_source == Participant.ExclusionSource.RULE
    assert careless.exclusion_reason == "attention checks: 1 of 1 failed (allowed 0)"
    first = careless.excluded_at
    assert ledger.exclusions_refresh(study=live_study) == []  # idempotent
    careless.refresh_from_db()
    assert careless.excluded_at == first
    (row,) = ledger.study_ledger(study=live_study)
    assert row.status.key == "excluded" and row.status.detail.startswith("rule: attention")
    assert row.suggested_action == "reject"

    # A decision needs a reason, and says which field is missing.
    exclusion = reverse("studies:exclusion", args=[live_study.pk, careless.pk])
    page = res_client.post(exclusion, {"decision": "include", "reason": " "}, follow=True)
    assert "Reason: Say why you include or exclude this participant." in page.content.decode()
    careless.refresh_from_db()
    assert careless.excluded_at is not None and careless.exclusion_override == ""
    res_client.post(exclusion, {"decision": "include", "reason": "misread the check's wording"})
    careless.refresh_from_db()
    assert careless.excluded_at is None and careless.exclusion_override == "include"
    assert ledger.study_ledger(study=live_study)[0].status.key == "finished"
    res_client.post(exclusion, {"decision": "", "reason": ""})  # back to the rule
    careless.refresh_from_db()
    assert careless.excluded_at is not None and careless.exclusion_source == "rule"
    assert careless.exclusion_override == "" and careless.exclusion_override_reason == ""
    res_client.post(exclusion, {"decision": "exclude", "reason": "same person twice"})
    careless.refresh_from_db()
    assert careless.exclusion_source == "researcher"
    assert careless.exclusion_reason == "same person twice"
    (row,) = ledger.study_ledger(study=live_study)
    assert row.suggested_action == "return"  # not the attention rule: no rejection


def test_the_fast_rule_compares_with_the_cohorts_median(live_study):
    keep_scenes(live_study, 2)
    quotas_set(live_study, overlap=4, fast_exclusion_share=0.5)
    people = participation_services.participants_invite(
        study=live_study, labels=["slow", "steady", "fast", "gone"]
    )
    for p in people:
        participation_services.participant_consent(participant=p)
        scene_services.familiarity_declare(
            participant=p, study_work=live_study.study_works.get(), seen=False
        )
        for assignment in p.assignments.order_by("position"):
            scene_services.scene_submit(
                participant=p,
                assignment_id=assignment.pk,
                answers={
                    int(key.removeprefix("choice-")): {"choice": int(value)}
                    for key, value in full_form(assignment).items()
                    if key.startswith("choice-")
                },
            )
    for p, seconds in zip(people, (60, 40, 10, 1), strict=True):
        Assignment.objects.filter(participant=p).update(total_ms=seconds * 1000)
    participation_services.participant_withdraw(participant=people[3])  # not in the cohort
    changed = ledger.exclusions_refresh(study=live_study)
    # Cohort medians 60, 40, 10 -> 40; 10 < 0.5 x 40: only "fast" (the withdrawn 1 s
    # neither counts nor is judged).
    assert [p.label for p in changed] == ["fast"]
    fast = Participant.objects.get(pk=people[2].pk)
    assert fast.exclusion_reason == (
        "too fast: median 10.0 s per item, under 0.5 times the cohort's median of 40.0 s"
    )
    assert quality.below_share(10, 40, 0.5) and not quality.below_share(20, 40, 0.5)
    assert quality.cohort_median([5.0]) is None


def test_quality_ignores_practice_and_attention_answers(client, live_study):
    keep_scenes(live_study, 3)
    items = list(live_study.study_items.filter(held_back=False).order_by("position"))
    recruitment.item_roles_set(study=live_study, practice=items[0], attention=[items[2]])
    participant = invite(live_study, "p")
    to_scenes(client, participant)
    while True:  # practice and check wrong, the one test scene right
        participant.refresh_from_db()
        step = scene_services.participant_next_step(participant=participant)
        if step.kind != "scene":
            break
        right = step.assignment.study_item.role == StudyItem.Role.TEST
        client.post(
            url("scene-submit", participant, assignment_id=step.assignment.pk),
            full_form(step.assignment, right=right),
        )
    (row,) = quality.study_quality(live_study)
    assert row.scenes == 1 and row.accuracy == 1.0
    assert (row.attention_checks, row.attention_failed) == (1, 1)


# -- the CSVs -------------------------------------------------------------------------


def test_raters_and_platform_ids_csv_agree_with_the_tiles(client, res_client, live_study):
    keep_scenes(live_study, 2)
    quotas_set(live_study, overlap=4)
    recruitment.public_link_set(study=live_study, cap=4)
    public = reverse("rater:public", args=[live_study.public_token])
    people = {}
    for pid in ("done", "no", "left", "new"):
        client.post(f"{public}?PROLIFIC_PID={pid}&STUDY_ID=S1&SESSION_ID=s-{pid}")
        people[pid] = Participant.objects.get(platform_ids__participant=pid)
    to_scenes(client, people["done"])
    answer_all(client, people["done"])
    client.post(url("refuse", people["no"]))
    to_scenes(client, people["left"])
    participation_services.participant_withdraw(participant=people["left"])

    counts = ledger.ledger_counts(ledger.study_ledger(study=live_study))
    assert (counts["finished"], counts["declined"], counts["withdrawn"]) == (1, 1, 1)
    assert counts["invited"] == 1 and sum(counts.values()) == 4
    page = detail(res_client, live_study)
    for key, n in counts.items():
        testid = "no-work-count" if key == "no_work" else f"count-{key}"
        assert f'<dd data-testid="{testid}">{n}</dd>' in page
    assert reverse("studies:platform-ids-csv", args=[live_study.pk]) in page

    raters = csv_rows(res_client, "raters-csv", live_study)
    assert [r["participant"] for r in raters] == ["public 1", "public 2", "public 3", "public 4"]
    assert {r["platform_participant"]: r["status"] for r in raters} == {
        "done": "finished",
        "no": "declined",
        "left": "withdrawn",
        "new": "invited",
    }
    assert all(r["status_at"] for r in raters)
    assert raters[0]["scenes"] == "2" and raters[1]["scenes"] == "0"

    ids = csv_rows(res_client, "platform-ids-csv", live_study)
    assert list(ids[0]) == ledger.PLATFORM_COLUMNS
    assert {r["platform_participant"]: r["suggested_action"] for r in ids} == {
        "done": "approve",
        "no": "return",
        "left": "return",
        "new": "",
    }
    assert ids[0]["platform_study"] == "S1" and ids[0]["platform_session"] == "s-done"
    client.logout()
    assert client.get(reverse("studies:platform-ids-csv", args=[live_study.pk])).status_code in (
        302,
        403,
    )


def test_the_fast_share_is_set_on_the_study_page_and_applied_at_once(res_client, live_study):
    from studies.participation.forms import RunningForm

    running = reverse("studies:running", args=[live_study.pk])
    form = RunningForm.for_study(live_study)
    data = {k: v for k, v in form.initial.items() if v is not None and v is not False}
    page = res_client.post(running, data | {"fast_exclusion_share": "2"}, follow=True)
    assert (
        "Not saved: Exclude raters faster than this share of the cohort&#x27;s median time: "
        "Ensure this value is less than or equal to 1."
    ) in page.content.decode()
    live_study.refresh_from_db()
    assert live_study.fast_exclusion_share == 0
    keep = Participant.objects.create(study=live_study, token="t-keep", label="keep")
    Participant.objects.filter(pk=keep.pk).update(
        exclusion_override="exclude", exclusion_override_reason="tested twice"
    )
    res_client.post(running, data | {"fast_exclusion_share": "0.4"})
    live_study.refresh_from_db()
    keep.refresh_from_db()
    assert live_study.fast_exclusion_share == 0.4
    assert keep.excluded_at is not None and keep.exclusion_reason == "tested twice"


def test_a_multiple_choice_participant_is_finished_at_their_last_page(client, researcher):
    from studies.choice import services as cs
    from studies.services import study_launch
    from tests.studies.test_choice_services import _books

    works = _books(2, 2)
    study = cs.choice_study_create(
        name="CharToM ledger", benchmark="chartom-qa", works=works, seed=5
    ).study
    study_launch(study=study)
    a, b = participation_services.participants_invite(study=study, labels=["Ann", "Ben"])
    for p, read in ((a, works[0]), (b, works[1])):
        participation_services.participant_consent(participant=p)
        cs.books_declare(participant=p, read_work_ids={read.pk})
    cs.design_apply(study=study)
    for assignment in a.assignments.order_by("position"):
        cs.choice_record(participant=a, assignment_id=assignment.pk, action="submit", shown=0)
        cs.choice_record(participant=a, assignment_id=assignment.pk, action="keep")
    a.refresh_from_db()
    assert a.finished_at is None  # the last page has not been shown yet
    assert "Thank you" in client.get(url("start", a)).content.decode()
    a.refresh_from_db()
    assert a.finished_at is not None
    statuses = {r.participant.label: r.status.key for r in ledger.study_ledger(study=study)}
    assert statuses == {"Ann": "finished", "Ben": "in_progress"}
