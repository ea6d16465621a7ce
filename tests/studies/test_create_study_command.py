"""``manage.py create_study``: a live study with invite links, and the imported annotations."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from studies.models import Guess, Participant, Study
from studies.participation.services import participant_consent
from studies.scene.services import familiarity_declare, history_confirm, participant_next_step

pytestmark = pytest.mark.django_db


def _run(*args: str) -> str:
    out = StringIO()
    call_command("create_study", *args, stdout=out)
    return out.getvalue()


def test_live_study_with_invite_links_raters_can_take(friends, researcher):
    out = _run(
        "--benchmark", "tvshowguess", "--work", "friends", "--name", "Friends",
        "--overlap", "3", "--min-seen", "1", "--min-unseen", "1",
        "--live", "--invite", "5", "--created-by", "res",
    )  # fmt: skip
    study = Study.objects.get(name="Friends")
    assert (study.status, study.overlap, study.min_seen, study.min_unseen) == ("live", 3, 1, 1)
    assert study.created_by == researcher and len(study.item_set_hash) == 64
    assert study.study_items.count() == 53  # every friends.raw scene
    assert f"created study {study.pk} 'Friends' (live): 53 scenes from friends" in out
    tokens = re.findall(r"^  invite \d: /s/([\w-]+)/$", out, flags=re.MULTILINE)
    assert len(tokens) == 5
    assert sorted(tokens) == sorted(
        Participant.objects.filter(study=study).values_list("token", flat=True)
    )
    assert all(len(t) >= 43 for t in tokens)  # 32 random bytes

    # The first invitee can take a masked friends.raw scene.
    rater = participant_consent(participant=Participant.objects.get(token=tokens[0]))
    step = participant_next_step(participant=rater)
    assert step.kind == "familiarity" and step.study_work.work.key == "friends"
    session = familiarity_declare(participant=rater, study_work=step.study_work, seen=True)
    history_confirm(participant=rater, session=session)
    step = participant_next_step(participant=rater)
    assert step.kind == "scene"
    scene = step.assignment.study_item.scene
    assert scene.work.key == "friends" and scene.instances.count() >= 1
    assert {ln["title"] for ln in scene.lines if ln["type"] == "dialog"} & {"P0", "P1"}


def test_draft_study_and_base_url(friends):
    out = _run(
        "--work", "friends", "--name", "Draft", "--invite", "1", "--base-url", "https://x.org/"
    )
    study = Study.objects.get(name="Draft")
    assert study.status == "draft" and not study.item_set_hash
    token = study.participants.get().token
    assert f"invite 1: https://x.org/s/{token}/" in out
    assert "the study is a draft" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--work", "nope", "--name", "x"], "no tvshowguess work nope"),
        (["--work", "friends"], "--name is required"),
        (["--work", "friends", "--name", "x", "--overlap", "2", "--min-seen", "2",
          "--min-unseen", "1"], "min-seen \\+ min-unseen <= overlap"),
        (["--work", "friends", "--name", "x", "--created-by", "ghost"], "no user ghost"),
        (["--work", "friends", "--from-annotations", "tbbt.tsv"], "no tbbt.tsv annotations"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused_and_nothing_created(friends, args, message):
    with pytest.raises(CommandError, match=message):
        _run(*args)
    assert not Study.objects.exists()


def test_from_annotations_is_idempotent(friends):
    first = _run("--from-annotations", "friends.tsv", "--work", "friends")
    assert first.startswith("imported: study ")
    assert "53 scenes, 149 speakers (89 with a guessed name, 87 correct)" in first
    assert "skipped friends.tsv rows 150, 151: their scene is not in friends.raw" in first
    again = _run("--from-annotations", "friends.tsv", "--work", "friends")
    assert again.startswith("already imported: study ")
    assert Study.objects.filter(imported=True).count() == 1
    assert Guess.objects.count() == 149
