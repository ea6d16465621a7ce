"""Load the DynToM generator's pools (``data/profile_data/`` of the release) as rows.

Files read from one directory, all checked before anything is written:

- ``social_setting.json``: ``{"raw_list": [location, …], "classfication": {category:
  [location, …]}}`` (the key is spelled so in the release). Every listed location is
  a Location; a location may sit in several categories or in none.
- ``100_given_name.csv``: tab-separated ``Rank, Boy Name, Girl Name``.
- ``surname_list.json``: ``{group: [surname, …]}``.
- ``occupations.json``: ``{"woman": [...], "man": [...]}``.
- ``education.json``: ``{"eductaion": [...]}`` (also spelled so; any single key is read).
- ``mbti.json``: ``{code: label}``.

Loading is idempotent: rows are matched on their natural keys and only missing ones
are created, so a second run creates nothing and edits made in the admin stay.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction

from benchmarks.importers.base import ImportDataError

from ...models import (
    EducationLevel,
    Gender,
    GivenName,
    Location,
    LocationCategory,
    Occupation,
    PersonalityType,
    Surname,
)

POOL_FILES = (
    "social_setting.json",
    "100_given_name.csv",
    "surname_list.json",
    "occupations.json",
    "education.json",
    "mbti.json",
)
# The release's spelling first; the correct one is accepted too.
_CATEGORY_KEYS = ("classfication", "classification")
_GIVEN_NAME_COLUMNS = {"Boy Name": Gender.MAN, "Girl Name": Gender.WOMAN}


@dataclass
class Pools:
    """The pools as read from the files, validated."""

    locations: list[str] = field(default_factory=list)
    categories: dict[str, list[str]] = field(default_factory=dict)
    given_names: list[tuple[str, str, int]] = field(default_factory=list)  # name, gender, rank
    surnames: list[tuple[str, str]] = field(default_factory=list)  # name, group
    occupations: list[tuple[str, str]] = field(default_factory=list)  # name, gender
    education: list[str] = field(default_factory=list)
    personalities: list[tuple[str, str]] = field(default_factory=list)  # code, label
    warnings: list[str] = field(default_factory=list)


def _json(path: Path) -> Any:
    if not path.is_file():
        raise ImportDataError("pool file missing", path=path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ImportDataError(f"not UTF-8 text: {exc}", path=path) from None
    except json.JSONDecodeError as exc:
        raise ImportDataError(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", path=path
        ) from None


def _strings(value: Any, *, path: Path, record: str | None, field_name: str) -> list[str]:
    """A list of non-empty strings, stripped; anything else is a located error."""
    if not isinstance(value, list):
        raise ImportDataError(
            f"expected a list of strings, got {type(value).__name__}",
            path=path,
            record=record,
            field=field_name,
        )
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise ImportDataError(
                f"item {i + 1}: expected a non-empty string, got {item!r}",
                path=path,
                record=record,
                field=field_name,
            )
        out.append(item.strip())
    return out


def _object(value: Any, *, path: Path, field_name: str | None = None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ImportDataError(
            f"expected a JSON object, got {type(value).__name__}", path=path, field=field_name
        )
    return value


def read_pools(directory: Path) -> Pools:
    """Read and check every pool file; raises ImportDataError naming file, record, field."""
    if not directory.is_dir():
        raise ImportDataError("not a directory (expected the pools folder)", path=directory)
    pools = Pools()

    path = directory / "social_setting.json"
    data = _object(_json(path), path=path)
    raw = _strings(data.get("raw_list"), path=path, record=None, field_name="raw_list")
    key = next((k for k in _CATEGORY_KEYS if k in data), None)
    if key is None:
        raise ImportDataError(
            "required object missing (categories of locations)", path=path, field="classfication"
        )
    categories = _object(data[key], path=path, field_name=key)
    for name, members in categories.items():
        pools.categories[name.strip()] = _strings(members, path=path, record=key, field_name=name)
    # Categorised locations missing from raw_list (two in the release) are locations
    # too: the file lists them under a category. Each is reported.
    seen: dict[str, None] = dict.fromkeys(raw)
    for category, members in pools.categories.items():
        for name in members:
            if name not in seen:
                seen[name] = None
                pools.warnings.append(
                    f"{path}: record {key}, field {category}: location {name!r} is not in "
                    "raw_list; added"
                )
    pools.locations = list(seen)

    path = directory / "100_given_name.csv"
    if not path.is_file():
        raise ImportDataError("pool file missing", path=path)
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t")
        missing = {"Rank", *_GIVEN_NAME_COLUMNS} - set(reader.fieldnames or [])
        if missing:
            raise ImportDataError(
                f"header lacks column(s) {', '.join(sorted(missing))} (tab-separated)",
                path=path,
                record="header",
            )
        for line, row in enumerate(reader, start=2):
            try:
                rank = int(row["Rank"])
            except (TypeError, ValueError):
                raise ImportDataError(
                    f"expected an integer rank, got {row['Rank']!r}",
                    path=path,
                    record=f"line {line}",
                    field="Rank",
                ) from None
            for column, gender in _GIVEN_NAME_COLUMNS.items():
                name = (row[column] or "").strip()
                if not name:
                    raise ImportDataError(
                        "empty name", path=path, record=f"line {line}", field=column
                    )
                pools.given_names.append((name, gender, rank))

    path = directory / "surname_list.json"
    for group, names in _object(_json(path), path=path).items():
        pools.surnames.extend(
            (name, group.strip())
            for name in _strings(names, path=path, record=None, field_name=group)
        )

    path = directory / "occupations.json"
    data = _object(_json(path), path=path)
    for gender in Gender.values:
        if gender not in data:
            raise ImportDataError("required list missing", path=path, field=gender)
        pools.occupations.extend(
            (name, gender)
            for name in _strings(data[gender], path=path, record=None, field_name=gender)
        )

    path = directory / "education.json"
    data = _object(_json(path), path=path)
    if len(data) != 1:
        raise ImportDataError(
            f"expected one key holding the list of levels, found {len(data)}", path=path
        )
    ((name, levels),) = data.items()
    pools.education = _strings(levels, path=path, record=None, field_name=name)

    path = directory / "mbti.json"
    for code, label in _object(_json(path), path=path).items():
        if len(code.strip()) != 4 or not isinstance(label, str):
            raise ImportDataError(
                f"expected a four-letter type with a text label, got {code!r}: {label!r}",
                path=path,
                field=code,
            )
        pools.personalities.append((code.strip().lower(), label.strip()))

    for name, rows in (
        ("locations", pools.locations),
        ("given names", pools.given_names),
        ("surnames", pools.surnames),
        ("occupations", pools.occupations),
        ("education levels", pools.education),
        ("personality types", pools.personalities),
    ):
        if not rows:
            raise ImportDataError(f"no {name} found", path=directory)
    return pools


@dataclass
class PoolLoadReport:
    created: dict[str, int] = field(default_factory=dict)
    total: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def created_count(self) -> int:
        return sum(self.created.values())

    def summary_lines(self) -> list[str]:
        return [
            f"{name}: {self.created[name]} created, {self.total[name]} in the file(s)"
            for name in self.total
        ]


def _create_missing(model: type, rows: list[dict[str, Any]], keys: tuple[str, ...]) -> int:
    existing = set(model.objects.values_list(*keys))
    new = []
    for row in rows:
        key = tuple(row[k] for k in keys)
        if key not in existing:  # also drops a repeat within the file
            existing.add(key)
            new.append(model(**row))
    model.objects.bulk_create(new)
    return len(new)


@transaction.atomic
def pools_load(*, directory: Path | str) -> PoolLoadReport:
    """Load the pools from ``directory``: atomic, idempotent (a second run creates 0).

    Raises :class:`~benchmarks.importers.base.ImportDataError` naming the file, the
    record and the field of the first problem; nothing is written then.
    """
    pools = read_pools(Path(directory))
    report = PoolLoadReport(warnings=pools.warnings)

    def count(name: str, created: int, total: int) -> None:
        report.created[name] = created
        report.total[name] = total

    count(
        "location categories",
        _create_missing(LocationCategory, [{"name": n} for n in pools.categories], keys=("name",)),
        len(pools.categories),
    )
    count(
        "locations",
        _create_missing(Location, [{"name": n} for n in pools.locations], keys=("name",)),
        len(pools.locations),
    )
    category_ids = dict(LocationCategory.objects.values_list("name", "pk"))
    location_ids = dict(Location.objects.values_list("name", "pk"))
    through = Location.categories.through
    links = set(through.objects.values_list("location_id", "locationcategory_id"))
    new_links = {
        (location_ids[location], category_ids[category])
        for category, members in pools.categories.items()
        for location in members
    } - links
    through.objects.bulk_create(
        [through(location_id=loc, locationcategory_id=cat) for loc, cat in sorted(new_links)]
    )
    count("location-category links", len(new_links), sum(map(len, pools.categories.values())))
    count(
        "given names",
        _create_missing(
            GivenName,
            [{"name": n, "gender": g, "rank": r} for n, g, r in pools.given_names],
            keys=("name", "gender"),
        ),
        len(pools.given_names),
    )
    count(
        "surnames",
        _create_missing(
            Surname, [{"name": n, "group": g} for n, g in pools.surnames], keys=("name", "group")
        ),
        len(pools.surnames),
    )
    count(
        "occupations",
        _create_missing(
            Occupation,
            [{"name": n, "gender": g} for n, g in pools.occupations],
            keys=("name", "gender"),
        ),
        len(pools.occupations),
    )
    count(
        "education levels",
        _create_missing(
            EducationLevel,
            [{"name": n, "position": i} for i, n in enumerate(pools.education)],
            keys=("name",),
        ),
        len(pools.education),
    )
    count(
        "personality types",
        _create_missing(
            PersonalityType,
            [{"code": c, "label": label} for c, label in pools.personalities],
            keys=("code",),
        ),
        len(pools.personalities),
    )
    return report
