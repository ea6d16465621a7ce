"""Pausing CPython's cyclic garbage collector around work that builds many objects."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic collector for a big parse or build, then restore it.

    CPython 3.11 runs a collection after a set number of allocations, and the older
    generations' collections walk every live object; work that keeps hundreds of
    thousands of objects alive therefore spends time growing with the square of its
    input (a 16 MB script: 18 s instead of 11 s; a CharToM-QA report over 100,000
    predictions: 0.7 s of 2.5 s). Such work makes no reference cycles worth
    collecting early, and reference counting still frees everything. Nested or
    concurrent uses leave the collector enabled once the one that paused it ends.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
