"""Name perturbation (ToM-in-AMC, Appendix A): one implementation for raters and models.

Every main character of a work is shown under a gender-matched common first name,
with one consistent mapping per work: a study stores it on its ``StudyWork``
(``studies.scene.perturbation``) so reports know exactly what each rater saw, and a model run
builds the same map for its prompts (``modeling.pipelines.speaker_guess``). It lives
here, beside the characters it reads, so both apps import it and neither imports the
other. Names come from the paper's Table 7 first and then from a longer list of common
names; a name used by any character of the work (or one of their aliases) is never
chosen. The draw is deterministic: seeded by a seed (the study's or the run's) and
the work key.

Gender: the researcher's override (``Character.gender`` with ``gender_source``
"manual", or gender from the source data) wins; otherwise ``gender-guesser`` on the
first name. Its ``mostly_male``/``mostly_female`` answers count as male/female (the
paper gives no rule; the guess is shown on the study page and can be overridden),
``andy`` (androgynous) and ``unknown`` get an androgynous name. Titles settle the
gender of names like "Mr. Geller" or "Mrs. Robinson".

:func:`display_text` applies a map to any text a rater or a model sees (history
scenes, masked scenes, candidates): whole words, case-insensitive, keeping the text's
capitalisation style ("RACHEL" -> "EMILY", "Rachel's" -> "Emily's").
:func:`redact_titles` removes a work's title from such text (the paper redacts movie
titles in the in-context-learning prompts).
"""

from __future__ import annotations

import random
import re
from functools import lru_cache

from .models import Character

MALE, FEMALE, ANDROGYNOUS = "male", "female", "androgynous"

# Table 7 of the paper, then further common (US census) first names for works with
# more main characters of one gender than the table has, or whose names collide.
TABLE_7 = {
    MALE: ["David", "James", "John", "Michael", "Robert"],
    FEMALE: ["Elizabeth", "Emily", "Jennifer", "Linda", "Mary"],
    ANDROGYNOUS: ["Alex", "Casey", "Jordan", "Morgan", "Taylor"],
}
MORE_NAMES = {
    MALE: ["William", "Richard", "Thomas", "Charles", "Daniel", "Matthew", "Anthony",
           "Steven", "Paul", "Andrew", "Kevin", "Brian", "George", "Edward", "Peter"],
    FEMALE: ["Patricia", "Barbara", "Susan", "Jessica", "Sarah", "Karen", "Nancy", "Lisa",
             "Margaret", "Sandra", "Ashley", "Donna", "Michelle", "Laura", "Helen"],
    ANDROGYNOUS: ["Riley", "Jamie", "Avery", "Quinn", "Parker", "Rowan", "Drew", "Robin",
                  "Charlie", "Sam", "Kendall", "Reese", "Emerson", "Finley", "Sage"],
}  # fmt: skip

TITLES = {
    "mr": MALE, "sir": MALE, "lord": MALE, "king": MALE, "prince": MALE, "father": MALE,
    "uncle": MALE, "mrs": FEMALE, "ms": FEMALE, "miss": FEMALE, "lady": FEMALE,
    "queen": FEMALE, "princess": FEMALE, "mother": FEMALE, "aunt": FEMALE, "dr": "",
    "doctor": "", "captain": "", "capt": "", "professor": "", "prof": "", "officer": "",
    "detective": "", "agent": "", "general": "", "colonel": "", "major": "", "sergeant": "",
}  # fmt: skip

_WORD = re.compile(r"[^\W\d_]+(?:['\u2019-][^\W\d_]+)*")


@lru_cache(maxsize=1)
def _detector():
    # Loading the name table takes ~0.3 s, so one detector per process.
    import gender_guesser.detector as gender_detector

    return gender_detector.Detector(case_sensitive=False)


def name_words(name: str) -> list[str]:
    """The words of a character name without titles: "Mr. Geller" -> ["Geller"]."""
    return [w for w in _WORD.findall(name) if w.casefold() not in TITLES]


def name_parts(name: str) -> list[str]:
    """First and last word of a multi-word name ("Mr. Geller" -> ["Geller"]), no titles."""
    words = name_words(name)
    if not words or len(_WORD.findall(name)) < 2:
        return []
    return list(dict.fromkeys([words[0], words[-1]]))


def guess_gender(name: str) -> tuple[str, str]:
    """(pool, detector answer) for a name: pool is male, female or androgynous."""
    words = _WORD.findall(name)
    if words and (title := TITLES.get(words[0].casefold())):
        return title, f"title {words[0]}"
    first = next(iter(name_words(name)), "")
    if not first:
        return ANDROGYNOUS, "unknown"
    answer = _detector().get_gender(first.capitalize())
    pool = {"male": MALE, "mostly_male": MALE, "female": FEMALE, "mostly_female": FEMALE}
    return pool.get(answer, ANDROGYNOUS), answer


def gender_for(character: Character) -> tuple[str, str]:
    """(pool, why): the stored gender when a person or the source set it, else a guess."""
    if (
        character.gender_source
        in (
            Character.GenderSource.MANUAL,
            Character.GenderSource.SOURCE,
        )
        and character.gender != Character.Gender.UNKNOWN
    ):
        pool = {Character.Gender.MALE: MALE, Character.Gender.FEMALE: FEMALE}
        return pool.get(character.gender, ANDROGYNOUS), character.get_gender_source_display()
    pool, answer = guess_gender(character.name)
    return pool, f"gender-guesser: {answer}"


def build_name_map(*, characters: list[Character], seed: int, work_key: str) -> dict[str, str]:
    """original -> shown for every main character (and its aliases and name parts).

    ``characters`` are all characters of the work; only main ones are renamed, but
    every name and alias of the work is excluded from the pool.
    """
    used = {
        word.casefold()
        for c in characters
        for text in [c.name, *c.aliases]
        for word in _WORD.findall(text)
    }
    rng = random.Random(f"{seed}:{work_key}")
    pools: dict[str, list[str]] = {}
    for gender in (MALE, FEMALE, ANDROGYNOUS):
        first, more = list(TABLE_7[gender]), list(MORE_NAMES[gender])
        rng.shuffle(first)
        rng.shuffle(more)
        pools[gender] = [n for n in first + more if n.casefold() not in used]
    main = sorted((c for c in characters if c.is_main), key=lambda c: (c.position, c.name))
    # A name part ("Ethan" of "Ethan Hunt") is renamed only if no other character shares it.
    part_owners: dict[str, set[str]] = {}
    for c in characters:
        for word in name_words(c.name):
            part_owners.setdefault(word.casefold(), set()).add(c.name)
    mapping: dict[str, str] = {}
    for character in main:
        gender, _ = gender_for(character)
        pool = pools[gender] or pools[ANDROGYNOUS] or pools[MALE] or pools[FEMALE]
        if not pool:
            raise ValueError(f"no unused name left for {character.name}")
        shown = pool.pop(0)
        for other in pools.values():
            if shown in other:
                other.remove(shown)
        mapping[character.name] = shown
        for word in name_parts(character.name):
            if part_owners.get(word.casefold()) == {character.name} and len(word) > 1:
                mapping.setdefault(word, shown)
        for alias in character.aliases:
            if alias.strip():
                mapping.setdefault(alias.strip(), shown)
    return mapping


@lru_cache(maxsize=256)
def _pattern(keys: tuple[str, ...]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)


def _styled(shown: str, matched: str) -> str:
    if matched.isupper() and any(ch.isalpha() for ch in matched) and len(matched) > 1:
        return shown.upper()
    if matched.islower():
        return shown.lower()
    return shown


def display_text(text: str, name_map: dict[str, str], *, keep_case: bool = True) -> str:
    """``text`` with every mapped name replaced, whole words, case-insensitively.

    ``keep_case=False`` writes the replacement as the map spells it (mask codes such
    as ``P0`` must stay upper case whatever the name's case was).
    """
    if not name_map or not text:
        return text
    lookup = {k.casefold(): v for k, v in name_map.items() if k.strip()}
    if not lookup:
        return text
    pattern = _pattern(tuple(sorted(lookup)))
    if not keep_case:
        return pattern.sub(lambda m: lookup[m.group(0).casefold()], text)
    return pattern.sub(lambda m: _styled(lookup[m.group(0).casefold()], m.group(0)), text)


def display_name(name: str, name_map: dict[str, str]) -> str:
    """A candidate's name as shown: the mapped name as written in the map, else ``name``."""
    for original, shown in name_map.items():
        if original.casefold() == name.casefold():
            return shown
    return name


TITLE_REDACTED = "[title withheld]"


def redact_titles(text: str, titles: list[str], *, replacement: str = TITLE_REDACTED) -> str:
    """``text`` with every whole-word occurrence of the ``titles`` replaced, any case.

    A title that is also an everyday word ("Friends") is redacted wherever it stands:
    a leak costs more than a lost word.
    """
    keys = tuple(sorted({" ".join(t.split()) for t in titles if t and t.strip()}))
    if not keys or not text:
        return text
    # Spacing inside a title may vary in scene text ("BIG  FISH").
    alternatives = "|".join(
        r"\s+".join(re.escape(w) for w in k.split()) for k in sorted(keys, key=len, reverse=True)
    )
    return re.sub(rf"(?<!\w)(?:{alternatives})(?!\w)", replacement, text, flags=re.IGNORECASE)
