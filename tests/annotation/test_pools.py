"""``manage.py load_dyntom_pools`` on the real pools in ../shared/data/dyntom-pools.

Broken copies are made in ``tmp_path``; the real files are never copied into the repo.
"""

from __future__ import annotations

import json
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.models import (
    EducationLevel,
    GivenName,
    Location,
    LocationCategory,
    Occupation,
    PersonalityType,
    Surname,
)

pytestmark = pytest.mark.django_db


def _load(directory: Path) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("load_dyntom_pools", str(directory), stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def pools_dir(shared_data: Path) -> Path:
    return shared_data / "dyntom-pools"


@pytest.fixture
def pools_copy(pools_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "pools"
    shutil.copytree(pools_dir, copy)
    for path in copy.iterdir():
        path.chmod(0o644)  # the shared files are read-only
    return copy


def test_loads_every_pool_with_the_files_counts(pools_dir: Path) -> None:
    out, err = _load(pools_dir)
    raw = json.loads((pools_dir / "social_setting.json").read_text())
    assert len(raw["raw_list"]) == 261
    assert LocationCategory.objects.count() == 13
    # 261 in raw_list, plus the two that only a category lists (reported as warnings).
    assert Location.objects.count() == 263
    assert set(Location.objects.values_list("name", flat=True)) >= set(raw["raw_list"])
    assert "'border checkpoint' is not in raw_list" in err
    assert "'nightclub' is not in raw_list" in err
    assert Location.objects.filter(categories__isnull=True).count() == 37
    miscellaneous = LocationCategory.objects.get(name="Miscellaneous")
    assert miscellaneous.locations.count() == 81
    # Locations may belong to several categories, as in the file.
    assert set(Location.objects.get(name="arcade").categories.values_list("name", flat=True)) == {
        "Shopping and Retail",
        "Entertainment and Leisure",
    }
    assert GivenName.objects.count() == 200
    assert GivenName.objects.get(gender="man", rank=1).name == "James"
    assert GivenName.objects.get(gender="woman", rank=100).name == "Tiffany"
    assert Surname.objects.count() == 500
    assert Surname.objects.values("group").distinct().count() == 5
    assert Occupation.objects.filter(gender="woman").count() == 50
    assert Occupation.objects.filter(gender="man").count() == 50
    assert list(EducationLevel.objects.values_list("name", flat=True)) == [
        "Primary Education",
        "middle school",
        "high school",
        "bachelor's degree",
        "master's degree",
        "doctorate degree",
    ]
    assert PersonalityType.objects.count() == 16
    assert PersonalityType.objects.get(code="isfp").label == "The Composer"
    assert "locations: 263 created" in out


def test_second_run_creates_nothing_and_keeps_admin_edits(pools_dir: Path) -> None:
    _load(pools_dir)
    location = Location.objects.get(name="bakery")
    location.is_active = False
    location.save()
    PersonalityType.objects.filter(code="istj").update(label="edited by a researcher")
    counts = [m.objects.count() for m in (Location, GivenName, Surname, Occupation)]

    out, _ = _load(pools_dir)

    assert out.strip().endswith("0 created")
    assert [m.objects.count() for m in (Location, GivenName, Surname, Occupation)] == counts
    assert not Location.objects.get(name="bakery").is_active
    assert PersonalityType.objects.get(code="istj").label == "edited by a researcher"


def test_a_broken_file_loads_nothing_and_names_file_record_field(pools_copy: Path) -> None:
    path = pools_copy / "occupations.json"
    data = json.loads(path.read_text())
    data["man"][3] = 42
    path.write_text(json.dumps(data))

    with pytest.raises(CommandError) as info:
        _load(pools_copy)

    message = str(info.value)
    assert "occupations.json" in message
    assert "field 'man'" in message
    assert "item 4" in message
    # Files read before the broken one wrote nothing either.
    assert Location.objects.count() == 0
    assert GivenName.objects.count() == 0


def test_bad_rank_is_located_by_line(pools_copy: Path) -> None:
    path = pools_copy / "100_given_name.csv"
    lines = path.read_text().splitlines()
    lines[5] = "six\tJohn\tLinda"
    path.write_text("\n".join(lines))

    with pytest.raises(CommandError, match=r"100_given_name\.csv: record line 6: field 'Rank'"):
        _load(pools_copy)


def test_invalid_json_and_missing_category_key(pools_copy: Path) -> None:
    (pools_copy / "mbti.json").write_text('{"istj": "The Inspector",}')
    with pytest.raises(CommandError, match=r"mbti\.json: invalid JSON at line 1"):
        _load(pools_copy)

    path = pools_copy / "social_setting.json"
    data = json.loads(path.read_text())
    del data["classfication"]
    path.write_text(json.dumps(data))
    with pytest.raises(CommandError, match=r"social_setting\.json: field 'classfication'"):
        _load(pools_copy)
    assert LocationCategory.objects.count() == 0


def test_pools_are_editable_in_the_admin(pools_dir: Path, admin_client) -> None:
    _load(pools_dir)
    location = Location.objects.get(name="bakery")
    page = admin_client.get(f"/admin/annotation/location/{location.pk}/change/")
    assert page.status_code == 200
    response = admin_client.post(
        f"/admin/annotation/location/{location.pk}/change/",
        {
            "name": "village bakery",
            "categories": [LocationCategory.objects.get(name="Food and Beverage").pk],
            "is_active": "",
        },
    )
    assert response.status_code == 302
    location.refresh_from_db()
    assert (location.name, location.is_active) == ("village bakery", False)
    assert list(location.categories.values_list("name", flat=True)) == ["Food and Beverage"]
    for model in (
        "locationcategory",
        "givenname",
        "surname",
        "occupation",
        "educationlevel",
        "personalitytype",
        "generationjob",
        "generatedstage",
    ):
        assert admin_client.get(f"/admin/annotation/{model}/").status_code == 200
