"""Drafts can be edited, duplicated and deleted (issue #28, part 6), and the
multiple-choice forms use their own words and settings.

Through the researcher's pages: a draft study made on the wrong film, or with the
wrong sample, is corrected or removed instead of closed and carried in every report.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from studies.choice import services as cs
from studies.models import Participant, Study, StudyItem
from studies.participation.services import participants_invite
from studies.services import StudyError, study_create, study_delete, study_update
from tests.factories import DynToMQuestionFactory, DynToMScenarioFactory, DynToMStageFactory
from tests.studies.test_choice_services import _books

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("friends")]


@pytest.fixture
def draft(friends, researcher) -> Study:
    return study_create(
        name="Friends draft",
        benchmark="tvshowguess",
        works=[friends],
        overlap=2,
        created_by=researcher,
        instructions="Guess who speaks.",
        sampling={"mode": "all"},
    )


@pytest.fixture
def rclient(client, researcher):
    client.force_login(researcher)
    return client


def _scene_form(study: Study, **changes) -> dict:
    """The edit form as a researcher posts it: the study's values, then ``changes``."""
    data = {
        "name": study.name,
        "works": [sw.work_id for sw in study.study_works.all()],
        "scenes": "all",
        "per_stratum": "",
        "seed": study.seed,
        "overlap": study.overlap,
        "min_seen": study.min_seen,
        "min_unseen": study.min_unseen,
        "reveal": study.reveal,
        "tags": "\n".join(study.tags),
        "instructions": study.instructions,
        "consent": study.consent,
    }
    return data | changes


def _items(study: Study) -> list[tuple[int | None, int]]:
    rows = StudyItem.objects.filter(study=study).order_by("scene_id", "qa_item_id", "stage_id")
    return list(rows.values_list("pk", "scene_id"))


# -- edit -------------------------------------------------------------------------------


def test_the_edit_form_is_the_new_study_form_filled_with_the_draft(rclient, draft):
    page = rclient.get(reverse("studies:edit", args=[draft.pk])).content.decode()

    assert "<h1>Edit draft study</h1>" in page
    assert 'value="Friends draft"' in page
    assert "Guess who speaks.</textarea>" in page
    assert ">Save settings</button>" in page
    assert "Raters per scene" in page  # the same form class as "new study"


def test_editing_settings_keeps_the_items_and_versions_the_texts(rclient, draft):
    before = _items(draft)
    response = rclient.post(
        reverse("studies:edit", args=[draft.pk]),
        _scene_form(
            draft,
            name="Friends, right film",
            overlap=3,
            min_unseen=1,
            reveal="after_scene",
            one_to_one="on",
            instructions="Guess who speaks, P0 first.",
        ),
    )

    assert response.status_code == 302
    draft.refresh_from_db()
    assert (draft.name, draft.overlap, draft.min_unseen) == ("Friends, right film", 3, 1)
    assert (draft.reveal, draft.one_to_one) == ("after_scene", True)
    assert draft.instructions == "Guess who speaks, P0 first."
    assert draft.instructions_version == 2  # a text change is a new version
    assert _items(draft) == before  # no sampling setting changed: the same rows


def test_changing_the_sample_draws_the_scenes_again_with_the_stored_seed(rclient, draft):
    everything = _items(draft)
    url = reverse("studies:edit", args=[draft.pk])
    form = _scene_form(draft, scenes="speakers", per_stratum=1, seed=7)

    assert rclient.post(url, form).status_code == 302
    draft.refresh_from_db()
    first = sorted(s for _, s in _items(draft))
    assert draft.seed == 7
    assert draft.sampling["mode"] == "stratified" and draft.sampling["per_stratum"] == 1
    assert 0 < len(first) < len(everything)

    # The same settings on another draft draw the same scenes: the seed decides.
    other = study_create(
        name="Friends other", benchmark="tvshowguess", works=[draft.study_works.get().work]
    )
    form_other = form | {"name": other.name}
    assert rclient.post(reverse("studies:edit", args=[other.pk]), form_other).status_code == 302
    assert sorted(s for _, s in _items(other)) == first

    # And back to every scene.
    assert rclient.post(url, _scene_form(draft, scenes="all", seed=7)).status_code == 302
    assert sorted(s for _, s in _items(draft)) == sorted(s for _, s in everything)


def test_bad_input_names_the_field_and_changes_nothing(rclient, draft):
    Study.objects.create(name="Taken", benchmark="tvshowguess")
    response = rclient.post(
        reverse("studies:edit", args=[draft.pk]),
        _scene_form(draft, name="taken", scenes="genre", per_stratum=""),
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert "a study with this name exists already" in page
    assert "a sample needs a number of scenes per stratum" in page
    draft.refresh_from_db()
    assert draft.name == "Friends draft"


def test_only_drafts_can_be_edited(rclient, live_study):
    url = reverse("studies:edit", args=[live_study.pk])
    response = rclient.post(url, _scene_form(live_study, overlap=5), follow=True)

    assert "Only a draft can be edited" in response.content.decode()
    live_study.refresh_from_db()
    assert live_study.overlap == 2
    with pytest.raises(StudyError, match="a live study cannot be edited"):
        study_update(study=live_study, name="x", instructions="", consent="", overlap=5)


def test_the_draft_buttons_are_on_the_study_page(rclient, draft, live_study):
    page = rclient.get(reverse("studies:detail", args=[draft.pk])).content.decode()
    assert reverse("studies:edit", args=[draft.pk]) in page
    assert reverse("studies:delete", args=[draft.pk]) in page
    assert reverse("studies:duplicate", args=[draft.pk]) in page

    page = rclient.get(reverse("studies:detail", args=[live_study.pk])).content.decode()
    assert reverse("studies:edit", args=[live_study.pk]) not in page
    assert reverse("studies:delete", args=[live_study.pk]) not in page
    assert reverse("studies:duplicate", args=[live_study.pk]) in page


# -- duplicate --------------------------------------------------------------------------


def test_any_study_duplicates_as_a_draft_with_its_settings_and_items(rclient, live_study):
    item = StudyItem.objects.filter(study=live_study).order_by("position").first()
    StudyItem.objects.filter(pk=item.pk).update(role=StudyItem.Role.PRACTICE)
    participants_invite(study=live_study, labels=["Ann"])

    response = rclient.post(reverse("studies:duplicate", args=[live_study.pk]))

    copy = Study.objects.get(name="Friends guessing (copy)")
    assert response.url == reverse("studies:detail", args=[copy.pk])
    assert copy.status == Study.Status.DRAFT and not copy.item_set_hash
    assert (copy.overlap, copy.min_unseen, copy.instructions) == (2, 1, "Guess who speaks.")
    assert not copy.participants.exists()

    def shape(study):
        return sorted(
            StudyItem.objects.filter(study=study).values_list(
                "scene_id", "role", "held_back", "position"
            )
        )

    assert shape(copy) == shape(live_study)
    assert StudyItem.objects.get(study=copy, scene_id=item.scene_id).role == "practice"

    rclient.post(reverse("studies:duplicate", args=[live_study.pk]))
    assert Study.objects.filter(name="Friends guessing (copy 2)").exists()


# -- delete -----------------------------------------------------------------------------


def test_a_draft_nobody_joined_is_deleted_after_a_confirmation(rclient, draft):
    url = reverse("studies:delete", args=[draft.pk])
    page = rclient.get(url).content.decode()
    assert "Delete “Friends draft”?" in page
    assert ">Delete the draft</button>" in page
    assert Study.objects.filter(pk=draft.pk).exists()  # the GET deleted nothing

    response = rclient.post(url, follow=True)

    assert not Study.objects.filter(pk=draft.pk).exists()
    assert not StudyItem.objects.filter(study_id=draft.pk).exists()
    assert "Study “Friends draft” deleted." in response.content.decode()


def test_a_draft_with_participants_or_a_live_study_is_not_deleted(rclient, draft, live_study):
    participants_invite(study=draft, labels=["Ann"])
    url = reverse("studies:delete", args=[draft.pk])
    page = rclient.get(url).content.decode()
    assert "This draft has <strong>1 participant</strong>" in page
    assert "Delete the draft</button>" not in page

    response = rclient.post(url, follow=True)
    assert "Not deleted: this draft has 1 participant" in response.content.decode()
    assert Study.objects.filter(pk=draft.pk).exists()

    rclient.post(reverse("studies:delete", args=[live_study.pk]))
    assert Study.objects.filter(pk=live_study.pk).exists()
    with pytest.raises(StudyError, match="a live study cannot be deleted"):
        study_delete(study=live_study)
    assert Participant.objects.filter(study=draft).count() == 1


# -- multiple-choice studies ------------------------------------------------------------


@pytest.fixture
def dyntom_draft() -> Study:
    stages = [DynToMStageFactory(work__key=f"trial{i}") for i in range(4)]
    for stage in stages:
        DynToMScenarioFactory(stage=stage, number=1)
        DynToMQuestionFactory(stage=stage, gold_letter="b")
    return cs.choice_study_create(
        name="DynToM baseline",
        benchmark="dyntom",
        works=[s.work for s in stages],
        stage_fraction=0.5,
        seed=3,
    ).study


def _choice_form(study: Study, **changes) -> dict:
    data = {
        "name": study.name,
        "benchmark": study.benchmark,
        "works": [sw.work_id for sw in study.study_works.all()],
        "stage_percent": 50,
        "overlap": study.overlap,
        "reveal": study.reveal,
        "seed": study.seed,
        "instructions": study.instructions,
        "consent": study.consent,
    }
    return data | changes


def test_a_multiple_choice_draft_edits_on_its_own_form(rclient, dyntom_draft):
    url = reverse("studies:edit", args=[dyntom_draft.pk])
    page = rclient.get(url).content.decode()
    assert "<h1>Edit draft multiple-choice study</h1>" in page
    assert "after each question (DynToM: after each stage)" in page
    assert "after each scene" not in page and "Scenes per sitting" not in page

    before = _items(dyntom_draft)
    assert rclient.post(url, _choice_form(dyntom_draft, overlap=3)).status_code == 302
    dyntom_draft.refresh_from_db()
    assert dyntom_draft.overlap == 3
    assert _items(dyntom_draft) == before

    assert rclient.post(url, _choice_form(dyntom_draft, stage_percent=100)).status_code == 302
    dyntom_draft.refresh_from_db()
    assert len(_items(dyntom_draft)) == 4
    assert dyntom_draft.sampling["stage_fraction"] == 1.0


def test_a_multiple_choice_draft_duplicates_and_deletes(rclient):
    works = _books(2, 2)
    study = cs.choice_study_create(
        name="CharToM study", benchmark="chartom-qa", works=works, seed=5, questions=3
    ).study

    rclient.post(reverse("studies:duplicate", args=[study.pk]))
    copy = Study.objects.get(name="CharToM study (copy)")
    assert sorted(copy.study_items.values_list("qa_item_id", flat=True)) == sorted(
        study.study_items.values_list("qa_item_id", flat=True)
    )
    assert (copy.min_seen, copy.min_unseen, copy.sampling) == (1, 1, study.sampling)

    rclient.post(reverse("studies:delete", args=[copy.pk]))
    assert not Study.objects.filter(pk=copy.pk).exists()


def test_choice_pages_show_only_their_own_settings(rclient, dyntom_draft, draft):
    new = rclient.get(reverse("studies:choice-new")).content.decode()
    assert "after each scene" not in new
    assert "after each question (DynToM: after each stage)" in new

    page = rclient.get(reverse("studies:detail", args=[dyntom_draft.pk])).content.decode()
    assert "Scenes per sitting" not in page and "Offer can't tell" not in page
    assert "Gold shown</dt><dd>at the end of the study" in page
    assert "computed from the words to read and the questions" in page

    scene_page = rclient.get(reverse("studies:detail", args=[draft.pk])).content.decode()
    assert "Scenes per sitting" in scene_page
    assert "computed from the words to read and the scenes" in scene_page
