"""Choosing a study's test scenes: all of them, or a stratified sample.

Pure functions over :class:`SceneRow` (no database): the same rows, stratum key,
size and seed always give the same sample, whatever order the rows came in. A
stratum is either the work's genre (its first listed genre, ``"unknown"`` when it
has none) or the number of masked speakers in the scene. Each stratum contributes
``min(per_stratum, its size)`` scenes, drawn with a random generator seeded by the
study seed *and* the stratum name, so adding a work with a new genre does not
reshuffle the other strata.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

ALL = "all"
BY_GENRE = "genre"
BY_SPEAKERS = "speakers"
MODES = (ALL, BY_GENRE, BY_SPEAKERS)


@dataclass(frozen=True)
class SceneRow:
    """One candidate test scene: what sampling needs to know about it."""

    scene_id: int
    work_key: str
    position: int
    genres: tuple[str, ...] = field(default=())
    speakers: int = 0


def stratum_of(row: SceneRow, by: str) -> str:
    if by == BY_GENRE:
        return row.genres[0].strip().lower() if row.genres and row.genres[0].strip() else "unknown"
    if by == BY_SPEAKERS:
        return str(row.speakers)
    raise ValueError(f"unknown stratum {by!r}; choose {BY_GENRE} or {BY_SPEAKERS}")


def _canonical(rows: Iterable[SceneRow]) -> list[SceneRow]:
    # Sorting first makes the sample independent of the order the database returned.
    return sorted(rows, key=lambda r: (r.work_key, r.position, r.scene_id))


def strata(rows: Iterable[SceneRow], *, by: str) -> dict[str, list[SceneRow]]:
    """Rows grouped by stratum, strata in natural order (speaker counts numerically)."""
    groups: dict[str, list[SceneRow]] = defaultdict(list)
    for row in _canonical(rows):
        groups[stratum_of(row, by)].append(row)

    def order(key: str) -> tuple[int, int | str]:
        return (0, int(key)) if key.isdigit() else (1, key)

    return {key: groups[key] for key in sorted(groups, key=order)}


@dataclass(frozen=True)
class Sample:
    rows: list[SceneRow]
    # stratum -> (chosen, available)
    counts: dict[str, tuple[int, int]]


def sample_scenes(
    rows: Sequence[SceneRow], *, by: str, per_stratum: int | None = None, seed: int = 0
) -> Sample:
    """All rows (``by="all"``) or up to ``per_stratum`` rows from each stratum.

    The result keeps the canonical order (work, then position), so raters still
    meet a work's scenes in story order.
    """
    if by == ALL:
        chosen = _canonical(rows)
        return Sample(rows=chosen, counts={ALL: (len(chosen), len(chosen))})
    if per_stratum is None or per_stratum < 1:
        raise ValueError("a stratified sample needs a per-stratum size of at least 1")
    picked: set[int] = set()
    counts: dict[str, tuple[int, int]] = {}
    for key, group in strata(rows, by=by).items():
        rng = random.Random(f"{seed}:{by}:{key}")
        take = rng.sample(group, min(per_stratum, len(group)))
        picked.update(r.scene_id for r in take)
        counts[key] = (len(take), len(group))
    chosen = [r for r in _canonical(rows) if r.scene_id in picked]
    return Sample(rows=chosen, counts=counts)
