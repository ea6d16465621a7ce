"""Instructed-response attention checks in scene studies (issue 49, item 2): the
researcher writes the checks' instruction on the study page ("select '{name}' for this
speaker"); each masked speaker of a check shows it with that speaker's name, no other
scene ever does, and failed checks count under the instructed-response threshold with
its own reason in the ledger and the exports.

Through the pages where a person acts, on the real Friends scenes.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from benchmarks.models import Character
from studies import services
from studies.models import Assignment, Participant, StudyItem, StudyTextVersion
from studies.participation import ledger, recruitment
from studies.scene import services as scene_services
from studies.scene.views import display_name

from .test_ledger import answer_all
from .test_rater_views import instances, invite, keep_scenes, to_scenes, url, without_csrf
from .test_screening import csv_rows

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("friends")]

INSTRUCTION = "Attention check: select '{name}' for this speaker."


def roles_post(client, study, instruction: str, *, check: StudyItem, follow: bool = True):
    """The study page's "Practice and attention checks" form: ``check`` as the one check."""
    data = {"practice": "", "attention": [check.pk], "attention_instruction": instruction}
    return client.post(reverse("studies:roles", args=[study.pk]), data, follow=follow)


@pytest.fixture
def checked(client, researcher, live_study):
    """Three scenes, the third an attention check with the instruction, set on the page;
    any failed attention check would be allowed (5), no failed instructed item (0)."""
    keep_scenes(live_study, 3)
    items = list(live_study.study_items.filter(held_back=False).order_by("position"))
    live_study.attention_max_failures = 5
    live_study.save(update_fields=["attention_max_failures"])
    client.force_login(researcher)
    page = roles_post(client, live_study, f"  {INSTRUCTION} ", check=items[2]).content.decode()
    assert "Practice scene and attention checks saved. With the instruction, more than 0" in page
    client.logout()
    live_study.refresh_from_db()
    assert live_study.attention_instruction == INSTRUCTION  # outer spaces cut
    return live_study


def scene_page(client, participant) -> tuple[Assignment | None, str]:
    """The scene the participant is at (None when none is left) and its page."""
    participant.refresh_from_db()
    step = scene_services.participant_next_step(participant=participant)
    page = without_csrf(client.get(url("start", participant)).content.decode())
    return (step.assignment if step.kind == "scene" else None), page


def submit(client, participant, assignment: Assignment, names: dict[int, int]) -> None:
    """Submit the scene with candidate index ``names[instance id]`` for each speaker."""
    data = {"history_needed-sent": "1"} | {f"choice-{k}": str(v) for k, v in names.items()}
    response = client.post(url("scene-submit", participant, assignment_id=assignment.pk), data)
    assert response.status_code == 302


def test_the_instruction_names_each_speaker_on_the_check_and_nowhere_else(client, checked):
    participant = invite(checked, "reader")
    to_scenes(client, participant)
    seen_check = False
    while True:
        assignment, page = scene_page(client, participant)
        if assignment is None:
            break
        speakers = instances(assignment)
        if assignment.study_item.role == StudyItem.Role.ATTENTION:
            seen_check = True
            for instance in speakers:
                name = display_name(instance.gold_character.name, {})
                said = INSTRUCTION.replace("{name}", name)
                shown = f'id="instruction-{instance.pk}" data-testid="attention-instruction">'
                assert shown + said in page.replace("&#x27;", "'")
            assert page.count('data-testid="attention-instruction"') == len(speakers)
            assert "{name}" not in page
        else:
            # A test scene shows no instruction, and its gold moved to another candidate
            # changes no byte of the page: nothing on it depends on the gold.
            assert "attention-instruction" not in page and "Attention check" not in page
            for instance in speakers:
                other = next(c for c in instance.candidates if c != instance.gold_character.name)
                instance.gold_character = Character.objects.get(
                    work=instance.scene.work, name=other
                )
                instance.save(update_fields=["gold_character"])
            assert scene_page(client, participant)[1] == page
        # Whatever the page says, answer the instruction's name (the gold as it stands).
        submit(
            client,
            participant,
            assignment,
            {i.pk: i.candidates.index(i.gold_character.name) for i in instances(assignment)},
        )
    assert seen_check


def test_without_an_instruction_a_check_says_nothing(client, live_study):
    """Today's behaviour: a check is a scene scored against the gold, nothing said."""
    keep_scenes(live_study, 2)
    items = list(live_study.study_items.filter(held_back=False).order_by("position"))
    recruitment.item_roles_set(study=live_study, practice=None, attention=[items[1]])
    participant = invite(live_study, "reader")
    to_scenes(client, participant)
    roles = []
    while (at := scene_page(client, participant))[0] is not None:
        assignment, page = at
        roles.append(assignment.study_item.role)
        assert "attention-instruction" not in page and "Who is" in page
        submit(client, participant, assignment, {i.pk: 0 for i in instances(assignment)})
    assert sorted(roles) == [StudyItem.Role.ATTENTION, StudyItem.Role.TEST]


def test_ignoring_the_instruction_excludes_with_its_own_reason_following_it_keeps(
    client, researcher, checked
):
    careless, careful = invite(checked, "careless"), invite(checked, "careful")
    for participant, wrong in ((careless, (StudyItem.Role.ATTENTION,)), (careful, ())):
        to_scenes(client, participant)
        answer_all(client, participant, wrong_roles=wrong)
        participant.refresh_from_db()
        assert participant.finished_at is not None
    # 1 failed check: under the attention threshold (5), over the instructed one (0).
    reason = "instructed-response items: 1 of 1 failed (allowed 0)"
    assert careless.excluded_at is not None
    assert careless.exclusion_source == Participant.ExclusionSource.RULE
    assert careless.exclusion_reason == reason
    assert careful.excluded_at is None and careful.exclusion_reason == ""
    rows = {r.participant.label: r for r in ledger.study_ledger(study=checked)}
    assert rows["careless"].status.detail == f"rule: {reason}"
    assert rows["careless"].suggested_action == "reject"  # a failed check: platforms accept it
    assert rows["careful"].status.key == "finished"

    client.force_login(researcher)
    page = client.get(reverse("studies:detail", args=[checked.pk])).content.decode()
    assert f"rule: {reason}" in page
    for name in ("raters-csv", "platform-ids-csv"):
        got = {r["participant"]: r for r in csv_rows(client, name, checked)}
        assert (got["careless"]["status"], got["careless"]["exclusion_reason"]) == (
            "excluded",
            reason,
        )
        assert got["careful"]["status"] == "finished" and got["careful"]["exclusion_reason"] == ""
    raters = {r["participant"]: r for r in csv_rows(client, "raters-csv", checked)}
    assert (raters["careless"]["attention_checks"], raters["careless"]["attention_failed"]) == (
        "1",
        "1",
    )
    answers = csv_rows(client, "responses-csv", checked)
    assert answers and {r["participant"] for r in answers} == {"careful"}
    # The check's answers record the texts' version: the one with the instruction.
    checked.refresh_from_db()
    versions = {r["instructions_version"] for r in answers if r["role"] == "attention"}
    assert versions == {str(checked.instructions_version)} == {"2"}
    response = client.get(
        reverse("studies:responses-csv", args=[checked.pk]) + "?include_excluded=1"
    )
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert reason in body.decode()

    # Without the instruction the same failure counts as an attention check, under 5.
    checked.attention_instruction = ""
    checked.save(update_fields=["attention_instruction"])
    ledger.exclusions_refresh(study=checked)
    careless.refresh_from_db()
    assert careless.excluded_at is None


def test_the_form_names_the_field_and_versions_the_instruction(client, researcher, live_study):
    keep_scenes(live_study, 2)
    check = live_study.study_items.filter(held_back=False).order_by("position").last()
    client.force_login(researcher)
    page = roles_post(client, live_study, "Select the right one.", check=check)
    assert (
        "Not saved: Attention-check instruction: Write {name} where the name to select goes"
        in page.content.decode()
    )
    page = roles_post(client, live_study, "{name} " + "x" * 300, check=check)
    assert "Not saved: Attention-check instruction: Ensure this value has at most 300" in (
        page.content.decode()
    )
    live_study.refresh_from_db()
    check.refresh_from_db()
    # Nothing saved: neither the instruction nor the roles.
    assert (live_study.attention_instruction, live_study.instructions_version) == ("", 1)
    assert check.role == StudyItem.Role.TEST
    with pytest.raises(services.StudyError, match=r"^attention_instruction: at most 300"):
        services.study_attention_instruction_set(study=live_study, instruction="{name}" * 60)

    # Saved: a new version of the texts, each kept; the page's form shows it, and the
    # settings now offer the instructed-response threshold instead of the checks'.
    roles_post(client, live_study, INSTRUCTION, check=check)
    live_study.refresh_from_db()
    assert (live_study.attention_instruction, live_study.instructions_version) == (INSTRUCTION, 2)
    detail = client.get(reverse("studies:detail", args=[live_study.pk]))
    assert detail.context["roles_form"].initial["attention_instruction"] == INSTRUCTION
    running = detail.context["running_form"].fields
    assert "instructed_max_failures" in running and "attention_max_failures" not in running

    # Once scenes are handed out it can be reworded (a new version), not removed.
    to_scenes(client, invite(live_study, "first"))
    reworded = "Please pick {name} here."
    roles_post(client, live_study, reworded, check=check)
    page = roles_post(client, live_study, "", check=check).content.decode()
    assert (
        "Not saved: Attention-check instruction: scenes have been handed out: the "
        "instruction can be reworded now, not added or removed" in page
    )
    live_study.refresh_from_db()
    assert (live_study.attention_instruction, live_study.instructions_version) == (reworded, 3)
    kept = StudyTextVersion.objects.filter(study=live_study, kind="attention_instruction")
    assert [(v.version, v.content) for v in kept] == [(2, INSTRUCTION), (3, reworded)]
    # A multiple-choice study's instruction is set with its items, not here.
    live_study.benchmark = "dyntom"
    with pytest.raises(services.StudyError, match=r"^attention_instruction: only a scene"):
        services.study_attention_instruction_set(study=live_study, instruction=INSTRUCTION + "!")


def test_with_perturbed_names_the_instruction_names_the_shown_character(client, friends):
    """The name to select is the one the rater sees among the candidates."""
    study = services.study_create(
        name="perturbed checks", benchmark="tvshowguess", works=[friends], perturb_names=True
    )
    keep_scenes(study, 2)
    items = list(study.study_items.filter(held_back=False).order_by("position"))
    recruitment.item_roles_set(study=study, practice=None, attention=[items[1]])
    services.study_attention_instruction_set(study=study, instruction=INSTRUCTION)
    study = services.study_go_live(study=study)
    name_map = study.study_works.get().name_map
    participant = invite(study, "reader")
    to_scenes(client, participant)
    checks = 0
    while (at := scene_page(client, participant))[0] is not None:
        assignment, page = at
        if assignment.study_item.role == StudyItem.Role.ATTENTION:
            checks += 1
            page = page.replace("&#x27;", "'")
            for instance in instances(assignment):
                gold = instance.gold_character.name
                shown = display_name(gold, name_map)
                assert shown.casefold() != gold.casefold()
                assert INSTRUCTION.replace("{name}", shown) in page
                assert INSTRUCTION.replace("{name}", display_name(gold, {})) not in page
        submit(client, participant, assignment, {i.pk: 0 for i in instances(assignment)})
    assert checks == 1
