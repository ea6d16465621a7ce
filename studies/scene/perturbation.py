"""Name perturbation for a study's raters (ToM-in-AMC, Appendix A).

For a study with ``perturb_names``, every main character of a work is shown under a
gender-matched common first name (and a common surname, for every form the work calls
it by): one consistent mapping per work, stored on
:class:`~studies.models.StudyWork` (``name_map``, original -> shown) so reports know
exactly what each rater saw. The mapping itself is ``benchmarks.perturbation``, which
model runs use too; it is re-exported here for the study code.
"""

from __future__ import annotations

from django.db import transaction

from benchmarks.models import Character
from benchmarks.perturbation import (
    ANDROGYNOUS,
    FEMALE,
    MALE,
    MORE_NAMES,
    TABLE_7,
    TITLES,
    build_name_map,
    display_name,
    display_text,
    gender_for,
    guess_gender,
    name_forms_table,
    name_parts,
    name_words,
)

from ..models import Study, StudyWork

__all__ = [
    "ANDROGYNOUS",
    "FEMALE",
    "MALE",
    "MORE_NAMES",
    "TABLE_7",
    "TITLES",
    "build_name_map",
    "display_name",
    "display_text",
    "gender_for",
    "guess_gender",
    "name_forms_table",
    "name_maps_build",
    "name_parts",
    "name_words",
]


@transaction.atomic
def name_maps_build(*, study: Study, force: bool = False) -> list[StudyWork]:
    """Store a name map on each of the study's works that has none (or all, with force).

    Once the study has gone live the maps are what raters saw, so they are frozen.
    """
    if not study.perturb_names:
        return []
    if force and study.item_set_hash:
        raise ValueError("the study has gone live: its name maps are what raters saw")
    built = []
    for study_work in (
        StudyWork.objects.select_for_update(of=("self",)).filter(study=study).select_related("work")
    ):
        if study_work.name_map and not force:
            continue
        study_work.name_map = build_name_map(
            characters=list(Character.objects.filter(work=study_work.work)),
            seed=study.seed,
            work_key=study_work.work.key,
        )
        study_work.save(update_fields=["name_map"])
        built.append(study_work)
    return built
