"""Step 1's social context: a location and two characters drawn from the pools.

One :class:`random.Random` per stage, seeded from the job's seed and the stage's
index, so a stage draws the same context whether it is generated alone or with others,
and the same seed gives the same contexts again (while the pools are unchanged). Only
active pool rows are drawn, in a fixed order, so admin edits take effect predictably.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from annotation.models import (
    EducationLevel,
    Gender,
    GivenName,
    Location,
    Occupation,
    PersonalityType,
    Surname,
)

CHARACTERS_PER_STAGE = 2


class PoolsEmpty(ValueError):
    """A pool has no active rows: load them with ``load_dyntom_pools`` first."""


@dataclass(frozen=True)
class SocialContext:
    location: str
    location_category: str
    characters: list[dict[str, Any]]  # main character first


def context_rng(seed: int, index: int) -> random.Random:
    # A string seed is hashed with SHA-512, independent of PYTHONHASHSEED.
    return random.Random(f"dyntom-generation:{seed}:{index}")


def _rows(queryset, what: str) -> list:
    rows = list(queryset)
    if not rows:
        raise PoolsEmpty(
            f"the {what} pool has no active rows; run manage.py load_dyntom_pools DIR "
            "(e.g. ../shared/data/dyntom-pools) or activate some in the admin"
        )
    return rows


def context_sample(*, seed: int, index: int) -> SocialContext:
    """Draw stage ``index``'s location and characters from the active pool rows."""
    rng = context_rng(seed, index)
    locations = _rows(
        Location.objects.filter(is_active=True).prefetch_related("categories").order_by("name"),
        "location",
    )
    location = rng.choice(locations)
    categories = sorted(c.name for c in location.categories.all())
    category = rng.choice(categories) if categories else ""

    surnames = _rows(Surname.objects.filter(is_active=True).order_by("group", "name"), "surname")
    education = _rows(EducationLevel.objects.filter(is_active=True), "education")
    personalities = _rows(PersonalityType.objects.filter(is_active=True), "personality")
    characters: list[dict[str, Any]] = []
    used_names: set[str] = set()
    for _ in range(CHARACTERS_PER_STAGE):
        gender = rng.choice(Gender.values)
        given = _rows(
            GivenName.objects.filter(is_active=True, gender=gender).order_by("rank", "name"),
            f"given name ({gender})",
        )
        occupations = _rows(
            Occupation.objects.filter(is_active=True, gender=gender).order_by("name"),
            f"occupation ({gender})",
        )
        # Two characters never share a first name: dialogue speakers must be told apart.
        choices = [g for g in given if g.name not in used_names] or given
        first = rng.choice(choices)
        surname = rng.choice(surnames)
        personality = rng.choice(personalities)
        used_names.add(first.name)
        characters.append(
            {
                "given_name": first.name,
                "surname": surname.name,
                "full_name": f"{first.name} {surname.name}",
                "gender": gender,
                "race": surname.group,
                "occupation": rng.choice(occupations).name,
                "education": rng.choice(education).name,
                "personality": personality.code,
                "personality_label": personality.label,
            }
        )
    return SocialContext(location=location.name, location_category=category, characters=characters)


def profile_text(character: dict[str, Any]) -> str:
    """One character's profile line; it starts "Full Name, gender," as the release's do,
    which is what the importer reads the name and gender from."""
    label = f" ({character['personality_label']})" if character.get("personality_label") else ""
    return (
        f"{character['full_name']}, {character['gender']}, occupation: "
        f"{character['occupation']}. Family background: {character['race']}. Education: "
        f"{character['education']}. Personality: {character['personality'].upper()}{label}."
    )


def characters_information(characters: list[dict[str, Any]]) -> str:
    """The story's ``characters information``, with the release's section markers."""
    main, *supporting = characters
    text = f"**Main Character**: {profile_text(main)}**Supporting Characters**:"
    for number, character in enumerate(supporting, start=1):
        text += f"- **{number}**: {profile_text(character)}"
    return text
