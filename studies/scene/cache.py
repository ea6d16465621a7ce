"""Per-scene data the rater's requests read on every call, kept in Django's cache.

A live study's scenes do not change (the item set is hashed when it goes live), so
each scene's masked speakers, their gold and the scene body as the rater sees it
(per name map) are read from the database once and then served from the cache:
Redis when ``CACHE_URL`` points at it (shared by every web process), otherwise each
process's own LocMem cache. Keys carry the study's item-set hash, so a study over
re-imported scenes never meets another item set's entries, and a timeout bounds
how long anything stale could live.

The gold is a separate entry read only by ``services.scene_submit``: pages never get
it, and the speakers entry the pages use does not contain it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.core.cache import cache

from benchmarks.models import Scene, SpeakerInstance

if TYPE_CHECKING:
    from collections.abc import Callable

# Long enough that a study's scenes stay cached through a session of raters, short
# enough that a scene re-imported under a study that has no item-set hash (imported
# annotations) is seen again within the hour.
TIMEOUT_S = 3600
_PREFIX = "tomlab:scene:"


@dataclass(frozen=True)
class SceneSpeaker:
    """One masked speaker of a scene, without its gold."""

    instance_id: int
    code: str
    candidates: tuple[str, ...]


def code_order(code: str) -> tuple[int, str]:
    """P2 before P10: masked codes in numeric order."""
    return (int(code[1:]) if code[1:].isdigit() else 10**6, code)


def _key(kind: str, scene_id: int, version: str, extra: str = "") -> str:
    return f"{_PREFIX}{kind}:{scene_id}:{version[:16]}{':' + extra if extra else ''}"


def scene_speakers(*, scene_id: int, version: str = "") -> list[SceneSpeaker]:
    """The scene's masked speakers in code order (P0, P1, …); ``version``: item-set hash."""
    key = _key("speakers", scene_id, version)
    speakers = cache.get(key)
    if speakers is None:
        # only(): the gold_character column is not even read here.
        rows = SpeakerInstance.objects.filter(scene_id=scene_id).only("pk", "code", "candidates")
        speakers = sorted(
            (SceneSpeaker(i.pk, i.code, tuple(i.candidates)) for i in rows),
            key=lambda s: code_order(s.code),
        )
        cache.set(key, speakers, TIMEOUT_S)
    return speakers


def scene_gold(*, scene_id: int, version: str = "") -> dict[int, str]:
    """instance id -> the gold character's name; for scoring a submitted scene only."""
    key = _key("gold", scene_id, version)
    gold = cache.get(key)
    if gold is None:
        gold = dict(
            SpeakerInstance.objects.filter(scene_id=scene_id).values_list(
                "pk", "gold_character__name"
            )
        )
        cache.set(key, gold, TIMEOUT_S)
    return gold


def scene_rendered(
    *,
    kind: str,
    scene_id: int,
    version: str,
    variant: object,
    render: Callable[[], dict[str, str]],
) -> dict[str, str]:
    """Strings rendered for a scene (its body, its blank answer form), cached per variant.

    ``variant`` is everything else the strings depend on (name map, tags…), JSON-able;
    ``render`` makes them on a miss.
    """
    digest = hashlib.sha256(json.dumps(variant, sort_keys=True).encode()).hexdigest()[:16]
    key = _key(kind, scene_id, version, digest)
    rendered = cache.get(key)
    if rendered is None:
        rendered = render()
        cache.set(key, rendered, TIMEOUT_S)
    return rendered


def scene_body(
    *,
    scene_id: int,
    version: str,
    name_map: dict[str, str],
    render: Callable[[Scene], dict[str, str]],
) -> dict[str, str]:
    """The scene as the rater sees it under ``name_map``, rendered once by ``render``.

    ``render`` gets the Scene row and returns strings (e.g. heading and the lines'
    HTML); the result is cached per (scene, name map).
    """
    return scene_rendered(
        kind="body",
        scene_id=scene_id,
        version=version,
        variant=name_map,
        render=lambda: render(Scene.objects.only("pk", "heading", "lines").get(pk=scene_id)),
    )
