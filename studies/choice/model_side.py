"""The model side of a ``widest comparison`` design: runs on a mapped benchmark's items.

Studies never import the run engine (``modeling``; the layers in ``.importlinter``), yet
the ``widest`` allocation design compares people with runs the researcher names. An app
above both (``reports``) registers a :class:`ModelSide` at start-up, as upload formats
are registered with the item bank; the study form and go-live ask it for the runs of a
benchmark and for their accuracy on each item.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSide:
    # A mapped benchmark's work id -> its runs (those with a prediction on one of its
    # items) as (run id, label), oldest first.
    runs: Callable[[int], list[tuple[int, str]]]
    # Run ids and a work id -> per MCItem id, the runs' mean accuracy (each run's share
    # of correct samples; a missing, refused or unparseable answer is wrong, as the
    # report counts it).
    accuracy: Callable[[Sequence[int], int], dict[int, float]]


_SIDES: list[ModelSide] = []


def model_side_register(side: ModelSide) -> None:
    """Set the provider (the last registered wins); called by the app that owns runs."""
    _SIDES[:] = [side]


def model_side() -> ModelSide | None:
    return _SIDES[0] if _SIDES else None


def runs_of(work_id: int) -> list[tuple[int, str]]:
    side = model_side()
    return side.runs(work_id) if side else []


def accuracy_of(run_ids: Sequence[int], work_id: int) -> dict[int, float]:
    side = model_side()
    return side.accuracy(run_ids, work_id) if side and run_ids else {}
