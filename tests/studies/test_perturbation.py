"""Name perturbation (ToM-in-AMC Appendix A): gender-matched, consistent, deterministic."""

from __future__ import annotations

import pytest

from benchmarks.models import Character
from benchmarks.services import character_gender_set
from studies.scene.perturbation import (
    ANDROGYNOUS,
    FEMALE,
    MALE,
    MORE_NAMES,
    TABLE_7,
    build_name_map,
    display_name,
    display_text,
    gender_for,
    guess_gender,
    name_maps_build,
)
from studies.services import study_create, study_go_live

FEMALE_NAMES = set(TABLE_7[FEMALE] + MORE_NAMES[FEMALE])
MALE_NAMES = set(TABLE_7[MALE] + MORE_NAMES[MALE])
ANDRO_NAMES = set(TABLE_7[ANDROGYNOUS] + MORE_NAMES[ANDROGYNOUS])


def _chars(*specs) -> list[Character]:
    return [
        Character(name=name, position=i, is_main=main, aliases=list(aliases))
        for i, (name, main, aliases) in enumerate(specs)
    ]


def test_gender_guesser_with_titles_and_the_mostly_and_andy_answers():
    assert guess_gender("rachel") == (FEMALE, "female")  # lower case as in TVShowGuess
    assert guess_gender("Joey") == (MALE, "male")
    assert guess_gender("chandler") == (MALE, "mostly_male")
    assert guess_gender("Mrs. Geller")[0] == FEMALE
    assert guess_gender("Mr. Heckles")[0] == MALE
    assert guess_gender("Dr. Miranda Bailey") == (FEMALE, "female")  # a neutral title
    assert guess_gender("Kong") == (ANDROGYNOUS, "andy")
    assert guess_gender("Zorgblatt") == (ANDROGYNOUS, "unknown")


def test_a_manual_gender_wins_over_the_guess():
    c = Character(name="rachel", gender="male", gender_source="manual")
    assert gender_for(c) == (MALE, "manual")
    c = Character(name="rachel", gender="male", gender_source="guessed")
    assert gender_for(c)[0] == FEMALE  # a stored guess is guessed again
    c = Character(name="joey", gender="other", gender_source="manual")
    assert gender_for(c)[0] == ANDROGYNOUS


def test_map_is_gender_matched_avoids_the_works_names_and_is_deterministic():
    chars = _chars(
        ("rachel", True, ["Rach"]),
        ("monica", True, []),
        ("joey", True, []),
        ("ross", True, []),
        ("Kong", True, []),
        # Secondary characters are not renamed, but their names are never drawn.
        *[(n, False, []) for n in ["Emily", "Linda", "Mary", "Elizabeth", "David", "James"]],
    )
    mapping = build_name_map(characters=chars, seed=1, work_key="friends")
    assert mapping["rachel"] in FEMALE_NAMES and mapping["monica"] in FEMALE_NAMES
    assert mapping["joey"] in MALE_NAMES and mapping["ross"] in MALE_NAMES
    assert mapping["Kong"] in ANDRO_NAMES
    assert mapping["Rach"] == mapping["rachel"]  # aliases follow their character
    shown = {mapping[n] for n in ["rachel", "monica", "joey", "ross", "Kong"]}
    assert len(shown) == 5
    assert not shown & {"Emily", "Linda", "Mary", "Elizabeth", "David", "James"}
    # Only Table 7 female name left unused is Jennifer: it comes first.
    assert "Jennifer" in {mapping["rachel"], mapping["monica"]}
    assert build_name_map(characters=chars, seed=1, work_key="friends") == mapping
    draws = {
        tuple(sorted(build_name_map(characters=chars, seed=s, work_key="friends").items()))
        for s in range(8)
    }
    assert len(draws) > 1


def test_multi_word_names_map_their_first_and_last_name_unless_shared():
    chars = _chars(("Ethan Hunt", True, []), ("Jim Phelps", True, []), ("Claire Phelps", True, []))
    mapping = build_name_map(characters=chars, seed=0, work_key="mi")
    assert mapping["Ethan"] == mapping["Hunt"] == mapping["Ethan Hunt"]
    assert mapping["Jim"] == mapping["Jim Phelps"]
    assert "Phelps" not in mapping  # shared by two characters: ambiguous
    text = "ETHAN HUNT meets Jim. Hunt's plan; Claire Phelps waits."
    shown = display_text(text, mapping)
    assert shown == (
        f"{mapping['Ethan Hunt'].upper()} meets {mapping['Jim']}. {mapping['Hunt']}'s plan; "
        f"{mapping['Claire Phelps']} waits."
    )


def test_display_text_whole_words_case_styles_and_possessives():
    name_map = {"rachel": "Emma", "ross": "David", "Rach": "Emma"}
    assert display_text("RACHEL", name_map) == "EMMA"
    assert display_text("Rachel's coat", name_map) == "Emma's coat"
    assert display_text("rachel and ross", name_map) == "emma and david"
    assert display_text("Hi Rach! (To Ross) Rossi's Rachelle", name_map) == (
        "Hi Emma! (To David) Rossi's Rachelle"
    )
    assert display_text("Rachel", {}) == "Rachel"
    assert display_name("rachel", name_map) == "Emma"
    assert display_name("RACHEL", name_map) == "Emma"
    assert display_name("gunther", name_map) == "gunther"


def test_name_maps_built_for_a_study_and_frozen_once_live(friends, researcher):
    character_gender_set(character=friends.characters.get(name="chandler"), gender="female")
    study = study_create(
        name="perturbed",
        benchmark="tvshowguess",
        works=[friends],
        perturb_names=True,
        seed=11,
        created_by=researcher,
    )
    (study_work,) = name_maps_build(study=study)
    mapping = study_work.name_map
    assert set(mapping) == {"phoebe", "rachel", "chandler", "monica", "ross", "joey"}
    assert mapping["chandler"] in FEMALE_NAMES  # the manual override
    assert mapping["joey"] in MALE_NAMES and mapping["phoebe"] in FEMALE_NAMES
    assert name_maps_build(study=study) == []  # already there: kept
    study_go_live(study=study)
    with pytest.raises(ValueError, match="raters saw"):
        name_maps_build(study=study, force=True)
    plain = study_create(name="plain", benchmark="tvshowguess", works=[friends])
    assert name_maps_build(study=plain) == []
