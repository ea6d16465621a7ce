"""Name perturbation (ToM-in-AMC, Appendix A): one implementation for raters and models.

Every main character (lead) of a work is shown under a gender-matched common first
name and, when the work knows a surname for it, a common US surname, with one
consistent mapping per work: a study stores it on its ``StudyWork``
(``studies.scene.perturbation``) so reports know exactly what each rater saw, and a
model run builds the same map for its prompts (``modeling.pipelines.speaker_guess``).
It lives here, beside the characters it reads, so both apps import it and neither
imports the other. First names come from the paper's Table 7 first and then from a
longer list of common names; a name used by any character of the work (or one of
their aliases) is never chosen. The draw is deterministic: seeded by a seed (the
study's or the run's) and the work key.

Every form a lead goes by is replaced (:func:`name_forms`): the given name, the
surname, the full name ("Edward Bloom" -> "David Hayes"), title + surname
("Mr. Keating" -> "Mr. Ortiz"), and every alias of the alias table (the one the leak
check reads and researchers edit; the screenplay importer fills it with the full and
titled names the script uses). A surname maps to one new surname for the whole work,
so a family stays a family (Edward, Will and Sandra Bloom become Hayeses) and a minor
character who shares a lead's surname ("Mr. Perry", Neil Perry's father) is renamed
too, since otherwise it still gives the lead away. A lead the script calls by its
surname ("KEATING", "MR. NOLAN") is shown under its new surname.

Gender: the researcher's override (``Character.gender`` with ``gender_source``
"manual", or gender from the source data) wins; otherwise ``gender-guesser`` on the
first name. Its ``mostly_male``/``mostly_female`` answers count as male/female (the
paper gives no rule; the guess is shown on the study page and can be overridden),
``andy`` (androgynous) and ``unknown`` get an androgynous name. Titles settle the
gender of names like "Mr. Geller" or "Mrs. Robinson"; a lead named by its surname
alone ("keating") takes the gender of its aliases ("MR. KEATING", "JOHN KEATING").

:func:`display_text` applies a map to any text a rater or a model sees (history
scenes, masked scenes, candidates): whole words, case-insensitive, keeping the text's
capitalisation style ("RACHEL" -> "EMILY", "Rachel's" -> "Emily's").
:func:`redact_titles` removes a work's title from such text (the paper redacts movie
titles in the in-context-learning prompts).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache

from .importers.screenplay_parser import AGE_WORDS
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

# Common US surnames (census) that are no everyday English word ("Walker", "Hill"),
# no first name gender-guesser knows ("Nelson", "Murphy") and no famous fictional
# surname ("Holmes", "Watson", "Simpson", "Myers").
SURNAMES = [
    "Williams", "Garcia", "Rodriguez", "Martinez", "Hernandez", "Lopez", "Gonzalez",
    "Thompson", "Sanchez", "Ramirez", "Robinson", "Nguyen", "Adams", "Rivera", "Gomez",
    "Phillips", "Evans", "Diaz", "Collins", "Morales", "Gutierrez", "Ortiz", "Peterson",
    "Richardson", "Chavez", "Mendoza", "Ruiz", "Hughes", "Alvarez", "Sanders", "Jimenez",
    "Jenkins", "Simmons", "Patterson", "Reynolds", "Hayes", "Gibson", "Owens", "Fernandez",
    "McDonald", "Schmidt", "Stevens", "Perkins", "Hoffman", "Andrews", "Delgado",
]  # fmt: skip
# Words that are never part of a person's name: "THE CAPTAIN" or "LUKE'S VOICE" is an
# alias, not a given name and a surname.
_FUNCTION_WORDS = """a an the and or but nor of to in on at by for with from into onto
as is was are were be been has had have his her its their our your my he she it they we
you i me him them us this that then than so if when while who whom what where why how not
no all voice"""
FUNCTION_WORDS = frozenset(_FUNCTION_WORDS.split())

# Titles that go before a given name ("Princess Leia", "Uncle Owen"), not a surname.
GIVEN_NAME_TITLES = frozenset(
    {"sir", "lady", "lord", "king", "queen", "prince", "princess", "uncle", "aunt", "auntie",
     "mother", "father", "sister", "brother", "master", "dame"}
)  # fmt: skip

_WORD = re.compile(r"[^\W\d_]+(?:['\u2019-][^\W\d_]+)*")
# A word with its full stop: the stop tells "MR." from "MR" when a title is shown.
_TOKEN = re.compile(r"[^\W\d_]+(?:['\u2019-][^\W\d_]+)*\.?")
_POSSESSIVE = re.compile(r"['\u2019][sS]$")


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
    if answer == "unknown":
        # "keating": the script's "MR. KEATING" or "JOHN KEATING" knows better.
        for alias in character.aliases:
            alias_pool, alias_answer = guess_gender(alias)
            if alias_pool != ANDROGYNOUS:
                return alias_pool, f"gender-guesser: {alias_answer} (alias {alias})"
    return pool, f"gender-guesser: {answer}"


GIVEN, SURNAME, FULL, TITLED, ALIAS = "given", "surname", "full", "title + surname", "alias"


@dataclass(frozen=True)
class NameForm:
    """One way the work names a character, and which parts of it are renamed."""

    character: str  # the character's name
    kind: str  # GIVEN, SURNAME, FULL, TITLED or ALIAS
    text: str  # as the name or alias table writes it: "EDWARD BLOOM", "MR. NOLAN"
    lead: bool  # a main character's form (else a minor one sharing a lead's surname)
    title: str = ""  # "MR." of a titled form
    given: str = ""  # the given name of a full form
    surname: str = ""  # of a surname, full or titled form


@dataclass(frozen=True)
class _Parsed:
    title: str
    words: tuple[str, ...]
    plain: bool  # only name words: no age word, possessive, function word or digit


def _is_title(word: str) -> bool:
    return word.casefold() in TITLES or word.casefold() in GIVEN_NAME_TITLES


def _parse(text: str) -> _Parsed:
    tokens = _TOKEN.findall(text)
    title, aged, start = "", False, 0
    for token in tokens:
        bare = token.rstrip(".")
        if bare.upper() in AGE_WORDS:
            aged = True
        elif _is_title(bare):
            title = token
        else:
            break
        start += 1
    words = tuple(token.rstrip(".") for token in tokens[start:])
    plain = (
        not aged
        and bool(words)
        and not re.sub(r"[\s.]", "", _TOKEN.sub("", text))
        and not any(
            _POSSESSIVE.search(w)
            or w.casefold() in FUNCTION_WORDS
            or _is_title(w)
            or w.upper() in AGE_WORDS
            for w in words
        )
    )
    return _Parsed(title=title, words=words, plain=plain)


def _before_given(parsed: _Parsed) -> bool:
    return parsed.title.rstrip(".").casefold() in GIVEN_NAME_TITLES


def _surname_of(parsed: _Parsed) -> str:
    """The surname a plain form states: a full name's last word, or the word after a
    title that goes with surnames ("Mr. Keating", not "Uncle Owen")."""
    if not parsed.plain:
        return ""
    if len(parsed.words) < 2 and (not parsed.title or _before_given(parsed)):
        return ""
    return parsed.words[-1]


def _shape(parsed: _Parsed, surnames: set[str]) -> str:
    """TITLED, FULL or SURNAME by a plain form's shape; "" for a one-word given name."""
    if not parsed.plain:
        return ""
    if len(parsed.words) >= 2:
        return FULL
    if parsed.title and not _before_given(parsed):
        return TITLED
    return SURNAME if parsed.words[0].casefold() in surnames else ""


def _form(character: str, kind: str, text: str, parsed: _Parsed, *, lead: bool) -> NameForm:
    return NameForm(
        character=character,
        kind=kind,
        text=text,
        lead=lead,
        title=parsed.title if kind in (GIVEN, TITLED, FULL) else "",
        given=parsed.words[0] if kind == FULL else "",
        surname=parsed.words[-1] if kind in (TITLED, FULL, SURNAME) else "",
    )


def name_forms(characters: list[Character]) -> list[NameForm]:
    """Every form the work's leads go by, and every minor character's form that carries
    a lead's surname, in a fixed order (leads by position, then their name and aliases).

    A lead's forms: its name and each alias (an alias with an age word, a possessive or
    a function word, "YOUNG EDWARD", "LUKE'S VOICE", is an alias as a whole), the given
    name of each of its full names alone ("JOHN" of "JOHN KEATING") when no other
    character's name or alias uses that word, and each surname alone. A surname is
    what a full name ends with or a title precedes; a lead's one-word name that is also
    one of its surnames ("KEATING" beside "MR. KEATING") is a surname.
    """
    ordered = sorted(characters, key=lambda c: (not c.is_main, c.position, c.name))
    spelled = {c.name: [(text, _parse(text)) for text in _spellings(c)] for c in ordered}
    owners: dict[str, set[str]] = {}
    for c in ordered:
        for _, parsed in spelled[c.name]:
            for word in parsed.words:
                owners.setdefault(word.casefold(), set()).add(c.name)
    surnames_of: dict[str, dict[str, str]] = {}  # lead -> casefold -> as first written
    for c in ordered:
        if c.is_main:
            surnames_of[c.name] = {}
            for _, parsed in spelled[c.name]:
                if surname := _surname_of(parsed):
                    surnames_of[c.name].setdefault(surname.casefold(), surname)
    lead_surnames = {s for names in surnames_of.values() for s in names}
    forms: list[NameForm] = []
    for c in ordered:
        if not c.is_main:
            for text, parsed in spelled[c.name]:
                kind = _shape(parsed, lead_surnames)
                if kind and parsed.words[-1].casefold() in lead_surnames:
                    forms.append(_form(c.name, kind, text, parsed, lead=False))
            continue
        surnames = surnames_of[c.name]
        for text, parsed in spelled[c.name]:
            # A one-word plain form that is no surname is the given name; anything else
            # ("ADULT EDWARD", "LUKE'S VOICE") is an alias, shown as the lead's name.
            kind = _shape(parsed, set(surnames)) or (
                GIVEN if parsed.plain or text == c.name else ALIAS
            )
            forms.append(_form(c.name, kind, text, parsed, lead=True))
        forms.extend(
            NameForm(character=c.name, kind=GIVEN, text=form.given, lead=True)
            for form in list(forms)
            if form.character == c.name
            and form.kind == FULL
            and len(form.given) > 1
            and owners.get(form.given.casefold()) == {c.name}
        )
        forms.extend(
            NameForm(character=c.name, kind=SURNAME, text=s, lead=True, surname=s)
            for s in surnames.values()
        )
    return _unique(forms)


def _spellings(character: Character) -> list[str]:
    """The name, then each alias, once each whatever the case ("keating", "KEATING")."""
    seen: dict[str, str] = {}
    for text in [character.name, *character.aliases]:
        if text.strip():
            seen.setdefault(text.strip().casefold(), text.strip())
    return list(seen.values())


def _unique(forms: list[NameForm]) -> list[NameForm]:
    # One row per character and spelling: "Keating" the name and "KEATING" the cue
    # are one form; the first (the name) is kept.
    seen: set[tuple[str, str]] = set()
    out = []
    for form in forms:
        key = (form.character, form.text.casefold())
        if key not in seen:
            seen.add(key)
            out.append(form)
    return out


def _title_case(word: str) -> str:
    return "-".join(part[:1].upper() + part[1:].lower() for part in word.split("-"))


def build_name_map(*, characters: list[Character], seed: int, work_key: str) -> dict[str, str]:
    """original -> shown for every form of :func:`name_forms`.

    ``characters`` are all characters of the work; only main ones are renamed (and
    minor ones only where they carry a lead's surname), but every name and alias of
    the work is excluded from the pools.
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
    # A stream of its own: first names draw as they did before surnames were renamed.
    surname_pool = [n for n in SURNAMES if n.casefold() not in used]
    random.Random(f"{seed}:{work_key}:surnames").shuffle(surname_pool)
    main = sorted((c for c in characters if c.is_main), key=lambda c: (c.position, c.name))
    given: dict[str, str] = {}
    for character in main:
        gender, _ = gender_for(character)
        pool = pools[gender] or pools[ANDROGYNOUS] or pools[MALE] or pools[FEMALE]
        if not pool:
            raise ValueError(f"no unused name left for {character.name}")
        shown = pool.pop(0)
        for other in pools.values():
            if shown in other:
                other.remove(shown)
        given[character.name] = shown
    forms = name_forms(characters)
    surnames: dict[str, str] = {}
    for form in forms:
        if form.surname and form.surname.casefold() not in surnames:
            if not surname_pool:
                raise ValueError(f"no unused surname left for {form.surname}")
            surnames[form.surname.casefold()] = surname_pool.pop(0)

    def shown(form: NameForm) -> str:
        title = _title_case(form.title) if form.title else ""
        surname = surnames.get(form.surname.casefold(), "")
        if form.kind == SURNAME:
            return surname
        if form.kind == TITLED:
            return f"{title} {surname}"
        if form.kind == FULL:
            first = given[form.character] if form.lead else _title_case(form.given)
            return " ".join(part for part in (title, first, surname) if part)
        return " ".join(part for part in (title, given[form.character]) if part)

    by_name = {f.character: shown(f) for f in forms if f.lead and f.text == f.character}
    mapping: dict[str, str] = {}
    for form in forms:
        text = by_name[form.character] if form.kind == ALIAS else shown(form)
        mapping.setdefault(form.text, text)
    return mapping


def name_forms_table(name_map: dict[str, str], characters: list[Character]) -> list[dict[str, str]]:
    """The rows of a work's "forms replaced" table: character, form, kind, shown as.

    Read from ``name_map`` as stored (a study's map is what its raters saw, whatever
    this module draws today); a form the map has no entry for shows what
    :func:`display_text` makes of it.
    """
    lookup = {k.casefold(): v for k, v in name_map.items()}
    return [
        {
            "character": form.character,
            "kind": form.kind,
            "form": form.text,
            "shown": lookup.get(form.text.casefold()) or display_text(form.text, name_map),
        }
        for form in name_forms(characters)
    ]


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
