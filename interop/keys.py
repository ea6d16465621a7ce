"""The item key a harness sample carries as its id: ``<benchmark>:<work>:<item>``.

``tombench@1.0`` item ``false-belief-task-12`` is ``generic:tombench@1.0:false-belief-task-12``;
DynToM stage ``trial50`` question ``type_d_why_3`` is ``dyntom:trial50:type_d_why_3``.
The work key may not hold a colon (export refuses one); the item part may, so a key
splits on its first two colons only. The same key reads back to the same item on any
server holding the same item set, which is what lets a harness run elsewhere come
back to these items.
"""

from __future__ import annotations

from benchmarks.models import Benchmark

SEPARATOR = ":"
# The benchmarks whose items export as harness samples (multiple choice, one item each).
EXPORTABLE = (Benchmark.GENERIC, Benchmark.DYNTOM)


class ItemKeyError(ValueError):
    pass


def item_key(benchmark: str, work: str, item: str) -> str:
    if benchmark not in EXPORTABLE:
        raise ItemKeyError(f"{benchmark!r} items do not export as harness samples")
    if SEPARATOR in work:
        raise ItemKeyError(f"work key {work!r} holds {SEPARATOR!r}; it cannot name an item")
    if not item:
        raise ItemKeyError("an item key needs the item's id")
    return SEPARATOR.join((benchmark, work, item))


def parse_item_key(value: object) -> tuple[str, str, str] | None:
    """``(benchmark, work, item)`` for one of our keys, None for anything else (an
    integer id, another task's string): the caller lists those as not ours."""
    if not isinstance(value, str):
        return None
    parts = value.split(SEPARATOR, 2)
    if len(parts) != 3 or parts[0] not in EXPORTABLE or not parts[1] or not parts[2]:
        return None
    return parts[0], parts[1], parts[2]
