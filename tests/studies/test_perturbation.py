"""Name perturbation (ToM-in-AMC Appendix A): gender-matched, consistent, deterministic."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from benchmarks.models import Character, Work
from benchmarks.perturbation import SURNAMES
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
    name_forms_table,
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


def test_multi_word_names_map_given_name_and_surname_a_shared_surname_once():
    chars = _chars(("Ethan Hunt", True, []), ("Jim Phelps", True, []), ("Claire Phelps", True, []))
    mapping = build_name_map(characters=chars, seed=0, work_key="mi")
    assert mapping["Ethan"] in MALE_NAMES and mapping["Hunt"] in SURNAMES
    assert mapping["Ethan Hunt"] == f"{mapping['Ethan']} {mapping['Hunt']}"
    assert mapping["Jim Phelps"] == f"{mapping['Jim']} {mapping['Phelps']}"
    # A surname two characters share is one family under one new surname.
    assert mapping["Claire Phelps"] == f"{mapping['Claire']} {mapping['Phelps']}"
    text = "ETHAN HUNT meets Jim. Hunt's plan; Claire Phelps waits."
    shown = display_text(text, mapping)
    assert shown == (
        f"{mapping['Ethan Hunt'].upper()} meets {mapping['Jim']}. {mapping['Hunt']}'s plan; "
        f"{mapping['Claire Phelps']} waits."
    )


def _family() -> list[Character]:
    # As the screenplay importer stores Big Fish and Dead Poets: cue spellings, then the
    # full and titled names the script uses.
    return _chars(
        ("edward", True, ["EDWARD", "ADULT EDWARD", "YOUNG EDWARD", "EDWARD BLOOM"]),
        ("will", True, ["WILL", "YOUNG WILL", "WILL BLOOM"]),
        ("sandra", True, ["SANDRA", "SANDRA TEMPLETON", "SANDRA BLOOM"]),
        ("keating", True, ["KEATING", "MR. KEATING", "JOHN KEATING"]),
        ("mr. nolan", True, ["MR. NOLAN", "MR NOLAN"]),
        ("mr. bloom", False, ["MR. BLOOM"]),  # a minor character of the family
        ("don price", False, ["DON PRICE"]),
        ("karl", False, ["KARL"]),
    )


def test_a_family_keeps_one_new_surname_in_every_form():
    mapping = build_name_map(characters=_family(), seed=4, work_key="big-fish")
    bloom = mapping["BLOOM"]
    assert bloom in SURNAMES
    assert mapping["EDWARD BLOOM"] == f"{mapping['edward']} {bloom}"
    assert mapping["WILL BLOOM"] == f"{mapping['will']} {bloom}"
    assert mapping["SANDRA BLOOM"] == f"{mapping['sandra']} {bloom}"
    # Sandra's maiden name is a surname of its own.
    assert mapping["SANDRA TEMPLETON"] == f"{mapping['sandra']} {mapping['TEMPLETON']}"
    assert mapping["TEMPLETON"] in SURNAMES and mapping["TEMPLETON"] != bloom
    # Aliases with an age word are the lead's name as a whole.
    assert mapping["YOUNG EDWARD"] == mapping["ADULT EDWARD"] == mapping["edward"]
    text = "EDWARD BLOOM: Will Bloom's father. (to Mrs. Bloom) Sandra Templeton, Mr Bloom!"
    assert display_text(text, mapping) == (
        f"{mapping['edward'].upper()} {bloom.upper()}: {mapping['will']} {bloom}'s father. "
        f"(to Mrs. {bloom}) {mapping['sandra']} {mapping['TEMPLETON']}, Mr {bloom}!"
    )


def test_a_minor_character_sharing_a_leads_surname_is_renamed_too():
    mapping = build_name_map(characters=_family(), seed=4, work_key="big-fish")
    assert mapping["mr. bloom"] == f"Mr. {mapping['BLOOM']}"
    assert display_name("mr. bloom", mapping) == f"Mr. {mapping['BLOOM']}"
    assert display_text("MR. BLOOM: Son!", mapping) == f"MR. {mapping['BLOOM'].upper()}: Son!"
    # Other minor characters keep their names.
    assert "don price" not in mapping and "karl" not in mapping and "PRICE" not in mapping


def test_title_and_surname_and_a_lead_called_by_its_surname():
    mapping = build_name_map(characters=_family(), seed=4, work_key="dead-poets")
    walker = mapping["keating"]
    assert walker in SURNAMES  # KEATING is a surname beside MR. KEATING: shown as one
    assert mapping["MR. KEATING"] == f"Mr. {walker}"
    john = mapping["JOHN"]
    assert john in MALE_NAMES  # the title settles the gender of "keating"
    assert mapping["JOHN KEATING"] == f"{john} {walker}"
    assert gender_for(_family()[3]) == (MALE, "gender-guesser: title MR (alias MR. KEATING)")
    # A titled lead is shown under its title and new surname.
    assert mapping["mr. nolan"] == f"Mr. {mapping['nolan']}" and mapping["MR NOLAN"] == (
        f"Mr {mapping['nolan']}"
    )
    assert display_name("keating", mapping) == walker
    assert display_text("Mrs. Keating met Mr. Nolan and KEATING.", mapping) == (
        f"Mrs. {walker} met {mapping['mr. nolan']} and {walker.upper()}."
    )


def test_surnames_are_seeded_and_avoid_the_works_names():
    chars = [*_family(), *_chars(("Garcia", False, []), ("Hayes", False, ["MRS. HAYES"]))]
    mapping = build_name_map(characters=chars, seed=9, work_key="big-fish")
    assert build_name_map(characters=chars, seed=9, work_key="big-fish") == mapping
    # Nothing depends on the order the characters come in.
    assert build_name_map(characters=chars[::-1], seed=9, work_key="big-fish") == mapping
    surnames = {mapping[s] for s in ("BLOOM", "TEMPLETON", "keating", "nolan")}
    assert len(surnames) == 4 and surnames <= set(SURNAMES) - {"Garcia", "Hayes"}
    draws = {
        build_name_map(characters=chars, seed=seed, work_key="big-fish")["BLOOM"]
        for seed in range(8)
    }
    assert len(draws) > 1


def test_forms_table_rows_follow_the_stored_map():
    characters = _family()
    mapping = build_name_map(characters=characters, seed=4, work_key="big-fish")
    rows = name_forms_table(mapping, characters)
    assert {"character": "edward", "kind": "full", "form": "EDWARD BLOOM"}.items() <= rows[
        3
    ].items()
    kinds = {(r["character"], r["form"]): (r["kind"], r["shown"]) for r in rows}
    assert kinds[("edward", "edward")] == ("given", mapping["edward"])
    assert kinds[("edward", "YOUNG EDWARD")] == ("alias", mapping["edward"])
    assert kinds[("will", "BLOOM")] == ("surname", mapping["BLOOM"])
    assert kinds[("keating", "keating")] == ("surname", mapping["keating"])
    assert kinds[("keating", "MR. KEATING")] == ("title + surname", f"Mr. {mapping['keating']}")
    assert kinds[("keating", "JOHN")] == ("given", mapping["JOHN"])
    assert kinds[("mr. bloom", "mr. bloom")] == ("title + surname", mapping["mr. bloom"])
    assert not any(r["character"] in ("karl", "don price") for r in rows)
    # A map stored before surnames were renamed shows what it did to each form.
    old = {"edward": "David", "EDWARD BLOOM": "David"}
    old_rows = {(r["character"], r["form"]): r["shown"] for r in name_forms_table(old, characters)}
    assert old_rows[("edward", "EDWARD BLOOM")] == "David"
    assert old_rows[("edward", "BLOOM")] == "BLOOM"


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


def test_study_page_shows_the_forms_replaced(client, researcher, shared_data):
    call_command(
        "import_benchmark",
        "screenplay",
        str(shared_data / "screenplays" / "big_fish.fountain"),
        "--no-progress",
        verbosity=0,
    )
    work = Work.objects.get()
    study = study_create(
        name="fish", benchmark="tom-in-amc", works=[work], perturb_names=True, seed=5
    )
    (study_work,) = name_maps_build(study=study)
    mapping = study_work.name_map
    client.force_login(researcher)

    html = client.get(reverse("studies:detail", args=[study.pk])).content.decode()

    table = html[html.index('data-testid="name-forms"') :]
    table = table[: table.index("</table>")]
    row = re.search(r"<td>EDWARD BLOOM</td>\s*<td>full</td>\s*<td><strong>([^<]+)</strong>", table)
    assert (
        row and row.group(1) == mapping["EDWARD BLOOM"] == f"{mapping['edward']} {mapping['BLOOM']}"
    )
    assert re.search(rf"<td>BLOOM</td>\s*<td>surname</td>\s*<td><strong>{mapping['BLOOM']}<", table)
