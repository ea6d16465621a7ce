"""Human studies on a mapped benchmark's items (issue 47, part 3), through the services:
the draw by category, the overlap quota and batches, the stored option seeds, practice
and attention items, exclusions, the time estimate, duplicate and go-live.

The benchmark is the demo's twelve items (``tests.generic_items``): four abilities of
three items each, and an order field (first/second).
"""

from __future__ import annotations

from collections import Counter

import pytest
from django.core.management import call_command

from studies.choice import services as cs
from studies.choice.generic import GenericSpec, GenericSpecError, option_letter
from studies.models import Assignment, ChoiceAnswer, Participant, Study, StudyItem
from studies.participation import recruitment
from studies.participation.services import participant_consent, participants_invite
from studies.services import item_set_hash, study_duplicate, study_launch
from tests.generic_items import make_generic_benchmark

pytestmark = pytest.mark.django_db

ABILITIES = ("False belief", "Hidden emotions", "Discrepant desires")


def _create(work, name="Mini ToM study", seed=3, overlap=1, **spec):
    return cs.choice_study_create(
        name=name,
        benchmark=cs.GENERIC,
        works=[work],
        generic=GenericSpec(**spec),
        seed=seed,
        overlap=overlap,
    ).study


def _test_items(study):
    return list(
        StudyItem.objects.filter(study=study, role=StudyItem.Role.TEST)
        .select_related("mc_item")
        .order_by("position")
    )


def _joined(study, n):
    people = participants_invite(study=study, labels=[f"p{i}" for i in range(n)])
    for p in people:
        participant_consent(participant=p)
    return [Participant.objects.get(pk=p.pk) for p in people]


def test_every_chosen_ability_gets_its_share_and_the_same_seed_the_same_items(mini):
    study = _create(
        mini,
        language="en",
        category_field="ability",
        category_values=ABILITIES,
        per_category=2,
    )
    items = _test_items(study)
    assert Counter(i.mc_item.categories["ability"] for i in items) == dict.fromkeys(ABILITIES, 2)
    assert study.sampling["strata"] == dict.fromkeys(ABILITIES, 2)
    assert study.sampling["language"] == "en"
    assert study.benchmark == "generic" and study.status == Study.Status.DRAFT

    again = _create(
        mini,
        name="again",
        category_field="ability",
        category_values=ABILITIES,
        per_category=2,
    )
    assert [i.mc_item.item_id for i in _test_items(again)] == [i.mc_item.item_id for i in items]
    # Another seed draws (here) other items, still two of each ability.
    other = [
        _create(
            mini,
            name=f"seed {s}",
            seed=s,
            category_field="ability",
            category_values=ABILITIES,
            per_category=2,
        )
        for s in (11, 12, 13)
    ]
    drawn = {tuple(i.mc_item.item_id for i in _test_items(o)) for o in other}
    assert len(drawn | {tuple(i.mc_item.item_id for i in items)}) > 1


def test_items_in_all_are_shared_among_the_values_as_evenly_as_they_allow(mini):
    study = _create(mini, category_field="ability", category_values=ABILITIES[:2], items=5)
    counts = Counter(i.mc_item.categories["ability"] for i in _test_items(study))
    assert sorted(counts.values()) == [2, 3] and sum(counts.values()) == 5
    assert study.sampling["strata"] == dict(counts)
    # No field: every item is a candidate.
    whole = _create(mini, name="all", items=4)
    assert len(_test_items(whole)) == 4 and whole.sampling["strata"] == {}


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        ({"language": "fr"}, "language", "has no 'fr' texts; its languages are en"),
        ({"category_field": "task"}, "category_field", "no category field 'task'"),
        (
            {"category_field": "ability", "category_values": ("Irony",)},
            "category_values",
            "ability has no value 'Irony'",
        ),
        (
            {"category_field": "ability", "per_category": 4},
            "per_category",
            "has 3 items with a en text; ask for at most 3 per value",
        ),
        ({"category_field": "ability", "items": 3}, "items", "ask for at least 4"),
        ({"items": 13}, "items", "ask for at most that many"),
        ({"attention_ids": ("mt-99",)}, "attention_ids", "no item 'mt-99'"),
        (
            {"attention": 1, "attention_instruction": "Pick B."},
            "attention_instruction",
            "{option}",
        ),
        ({"category_field": "ability", "per_category": 3, "practice": 1}, "practice", "at most 0"),
    ],
)
def test_settings_the_benchmark_cannot_meet_are_named_and_write_nothing(mini, spec, field, words):
    with pytest.raises(GenericSpecError) as caught:
        _create(mini, **spec)
    assert caught.value.field == field
    assert words in str(caught.value)
    assert not Study.objects.exists() and not StudyItem.objects.exists()


def test_a_study_of_two_benchmarks_is_refused(mini):
    other = make_generic_benchmark(name="Other ToM")
    with pytest.raises(cs.StudyError, match="choose one mapped benchmark"):
        cs.choice_study_create(name="two", benchmark=cs.GENERIC, works=[mini, other])


def test_a_bilingual_benchmark_is_asked_in_the_chosen_language(client):
    work = make_generic_benchmark(bilingual=True)
    study = _create(work, language="zh", per_category=1, category_field="ability", overlap=1)
    study_launch(study=study)
    (p,) = _joined(study, 1)
    cs.generic_batch_take(participant=p)
    assignment = p.assignments.order_by("position").first()
    page = client.get(f"/s/{p.token}/").content.decode()
    text = assignment.study_item.mc_item.texts["zh"]
    assert f">{text['question']}</legend>" in page and 'lang="zh"' in page
    # (The test's Chinese is the English marked as such: the English alone is not shown.)
    assert f">{assignment.study_item.mc_item.texts['en']['question']}</legend>" not in page


def test_batches_fill_the_overlap_evenly_and_never_twice(mini):
    study = _create(mini, category_field="ability", per_category=1, overlap=2)  # 4 test items
    study.sampling["items_per_participant"] = 3
    study.save(update_fields=["sampling"])
    study_launch(study=study)
    people = _joined(study, 4)
    # 4 items x overlap 2 = 8 places: batches of 3, then what is left (2), then none.
    for p, expected in zip(people, (3, 3, 2, 0), strict=True):
        given = cs.generic_batch_take(participant=p)
        assert len(given) == expected
        assert len({a.study_item_id for a in given}) == expected  # never an item twice
        # A second take (double click, second tab) gives nothing new.
        assert [a.pk for a in cs.generic_batch_take(participant=p)] == [a.pk for a in given]
    live = Counter(
        Assignment.objects.filter(study_item__study=study).values_list("study_item", flat=True)
    )
    assert sorted(live.values()) == [2, 2, 2, 2]
    # The second participant got the item the first did not: the least filled go first.
    first, second = (set(p.assignments.values_list("study_item", flat=True)) for p in people[:2])
    assert len(first | second) == 4
    late = people[3]
    assert not cs.generic_has_room(late) and not late.work_sessions.exists()


def test_options_are_shuffled_per_participant_from_the_stored_seed(mini):
    study = _create(mini, category_field="ability", per_category=3, overlap=5)
    study_launch(study=study)
    people = _joined(study, 5)
    orders = set()
    for p in people:
        cs.generic_batch_take(participant=p)
        for a in p.assignments.select_related("study_item__mc_item"):
            assert a.option_seed is not None
            order = cs.option_order(a.option_seed, 4)
            assert cs.generic_order(study, a, 4) == order
            orders.add(tuple(order))
    assert len(orders) > 1  # 60 seeded shuffles are not all the same
    # The pick is stored in the item's own order, and where it was shown.
    a = people[0].assignments.order_by("position").first()
    order = cs.generic_order(study, a, 4)
    answer = cs.choice_record(participant=people[0], assignment_id=a.pk, action="submit", shown=2)
    assert (answer.option, answer.shown) == (order[2], 2)
    assert answer.correct == (order[2] in a.study_item.mc_item.answers)


def test_fixed_options_keep_the_benchmarks_order(mini):
    study = _create(mini, per_category=1, category_field="ability", shuffle_options=False)
    study_launch(study=study)
    (p,) = _joined(study, 1)
    cs.generic_batch_take(participant=p)
    a = p.assignments.first()
    assert a.option_seed is None and cs.generic_order(study, a, 4) == [0, 1, 2, 3]


def test_an_answer_is_stored_once_scored_once_and_final(mini):
    study = _create(mini, per_category=1, category_field="ability")
    study_launch(study=study)
    (p,) = _joined(study, 1)
    cs.generic_batch_take(participant=p)
    a = p.assignments.order_by("position").first()
    with pytest.raises(cs.StudyError, match="choose one of the 4 options"):
        cs.choice_record(participant=p, assignment_id=a.pk, action="submit", shown=4)
    with pytest.raises(cs.StudyError, match="answered once"):
        cs.choice_record(participant=p, assignment_id=a.pk, action="keep")
    assert not ChoiceAnswer.objects.exists()
    cs.choice_record(participant=p, assignment_id=a.pk, action="submit", shown=0)
    with pytest.raises(cs.ChoiceReplay):
        cs.choice_record(participant=p, assignment_id=a.pk, action="submit", shown=1)
    (answer,) = ChoiceAnswer.objects.all()
    a.refresh_from_db()
    assert a.status == Assignment.Status.SUBMITTED and answer.correct is not None
    assert answer.mc_item_id == a.study_item.mc_item_id and answer.round == 1
    assert a.version["option_seed"] == a.option_seed


def test_practice_first_checks_among_the_items_and_a_failed_check_excludes(mini):
    study = _create(
        mini,
        category_field="ability",
        category_values=ABILITIES,
        per_category=2,
        practice=1,
        attention_ids=("mt-12",),  # not among the abilities drawn: a named item
        overlap=2,
    )
    roles = Counter(StudyItem.objects.filter(study=study).values_list("role", flat=True))
    assert roles == {"test": 6, "practice": 1, "attention": 1}
    attention = StudyItem.objects.get(study=study, role=StudyItem.Role.ATTENTION)
    assert attention.mc_item.item_id == "mt-12"
    Study.objects.filter(pk=study.pk).update(attention_max_failures=0)
    study_launch(study=study)
    careful, careless = _joined(study, 2)
    for p in (careful, careless):
        given = cs.generic_batch_take(participant=p)
        roles = [a.study_item.role for a in given]
        assert roles[0] == StudyItem.Role.PRACTICE
        assert roles.count(StudyItem.Role.ATTENTION) == 1
        assert given[1].study_item.role == StudyItem.Role.TEST  # a check never comes first
    for p, right in ((careful, True), (careless, False)):
        for a in p.assignments.select_related("study_item__mc_item").order_by("position"):
            order = cs.generic_order(study, a, 4)
            gold = a.study_item.mc_item.answers[0]
            shown = order.index(gold) if right else order.index((gold + 1) % 4)
            cs.choice_record(participant=p, assignment_id=a.pk, action="submit", shown=shown)
    careful.refresh_from_db()
    careless.refresh_from_db()
    assert careful.excluded_at is None
    assert careless.excluded_at is not None
    assert careless.exclusion_reason.startswith("instructed-response items: 1 of 1 failed")
    # The instruction names the option to choose, in the study's language.
    from studies.choice.generic import attention_instruction

    text = attention_instruction(study.sampling, attention.mc_item, "en")
    assert f"“{attention.mc_item.texts['en']['options'][0]}”" in text


def test_the_estimate_reads_one_batch_and_the_extra_items(mini):
    study = _create(mini, category_field="ability", per_category=2, practice=1, attention=1)
    study.sampling["items_per_participant"] = 4
    study.save(update_fields=["sampling"])
    estimate = recruitment.study_estimate(study=study)
    items = list(StudyItem.objects.filter(study=study).select_related("mc_item"))

    def words(item):
        text = item.mc_item.texts["en"]
        return sum(len(t.split()) for t in [text["context"], text["question"], *text["options"]])

    tests = [words(i) for i in items if i.role == "test"]
    extras = sum(words(i) for i in items if i.role != "test")
    # A batch of 4 and the attention check; the practice item is told apart (issue 49).
    assert (estimate.items, estimate.practice, estimate.noun) == (4 + 1, 1, "item")
    assert estimate.words == round(sum(tests) / len(tests) * 4) + extras
    assert estimate.item_seconds == recruitment.ANSWER_SECONDS["generic"]


def test_duplicate_and_go_live_keep_the_items_and_fix_their_hash(mini):
    study = _create(mini, category_field="ability", per_category=1, practice=1)
    copy = study_duplicate(study=study)
    pairs = lambda s: list(  # noqa: E731
        StudyItem.objects.filter(study=s).order_by("position").values_list("mc_item", "role")
    )
    assert pairs(copy) == pairs(study) and all(mc for mc, _ in pairs(copy))
    launched = study_launch(study=study)
    assert launched.study.item_set_hash == item_set_hash(study)
    assert len(launched.study.item_set_hash) == 64
    assert "no leak check" in launched.summary()
    zh = _create(
        make_generic_benchmark(name="Bi", bilingual=True),
        name="bi",
        category_field="ability",
        per_category=1,
    )
    en_hash = item_set_hash(zh)
    zh.sampling["language"] = "zh"
    assert item_set_hash(zh) != en_hash


def test_create_study_makes_a_generic_study_from_the_command_line(mini, capsys):
    call_command(
        "create_study",
        "--benchmark=generic",
        f"--work={mini.key}",
        "--name=From the shell",
        "--language=en",
        "--category-field=ability",
        "--category-value=False belief",
        "--category-value=Hidden emotions",
        "--per-category=2",
        "--items-per-participant=3",
        "--overlap=2",
        "--attention=1",
        "--live",
        "--invite=2",
    )
    out = capsys.readouterr().out
    study = Study.objects.get(name="From the shell")
    assert study.status == Study.Status.LIVE and study.overlap == 2
    assert study.sampling["strata"] == {"False belief": 2, "Hidden emotions": 2}
    assert "False belief 2, Hidden emotions 2" in out and "3 items per participant" in out
    assert out.count("/s/") == 2
    with pytest.raises(Exception, match="category_values: ability has no value 'Irony'"):
        call_command(
            "create_study",
            "--benchmark=generic",
            f"--work={mini.key}",
            "--name=Bad",
            "--category-field=ability",
            "--category-value=Irony",
        )
    assert not Study.objects.filter(name="Bad").exists()


def test_option_letters_run_a_to_z_then_numbers():
    assert [option_letter(i) for i in (0, 1, 3, 25, 26)] == ["A", "B", "D", "Z", "27"]
