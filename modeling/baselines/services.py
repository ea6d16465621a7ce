"""Creating trained-baseline runs; the run engine (``modeling.runs.executor.run_execute``)
executes, stops and resumes them like any other run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from benchmarks.models import Benchmark, Work
from modeling.models import Run

from .config import METHODS, TRAINED_METHODS, BaselineConfig

SPEAKER_BENCHMARKS = (Benchmark.TOM_IN_AMC, Benchmark.TVSHOWGUESS)


def _works_exist(benchmark: str, split: str, works: list[str] | None, what: str) -> None:
    qs = Work.objects.filter(benchmark=benchmark)
    if works:
        missing = sorted(set(works) - set(qs.filter(key__in=works).values_list("key", flat=True)))
        if missing:
            raise ValueError(f"{what}: no {benchmark} work {', '.join(map(repr, missing))}")
    elif not qs.filter(split=split).exists():
        raise ValueError(f"{what}: no {benchmark} work in split {split!r}")


@transaction.atomic
def baseline_run_create(
    *,
    method: str,
    benchmark: str = Benchmark.TOM_IN_AMC,
    train_split: str = "train",
    eval_split: str = "dev",
    select_split: str = "dev",
    train_works: list[str] | None = None,
    eval_works: list[str] | None = None,
    select_works: list[str] | None = None,
    encoder: str = "",
    init_from: int | None = None,
    params: dict[str, Any] | None = None,
    name: str = "",
    created_by=None,
    enqueue: bool = True,
) -> Run:
    """Record a trained-baseline run (kind ``trained``) and, once committed, queue it on
    the ``gpu`` queue. ``params`` override the paper's hyper-parameters (see
    :class:`~modeling.baselines.config.BaselineConfig`). ``init_from`` names a finished
    ProtoNet run whose encoder LEOPARD starts from. Raises ``ValueError`` with what is wrong.
    """
    if method not in METHODS:
        raise ValueError(f"unknown baseline {method!r}; expected one of {', '.join(METHODS)}")
    if benchmark not in SPEAKER_BENCHMARKS:
        raise ValueError(
            f"baselines guess masked speakers: benchmark must be one of {SPEAKER_BENCHMARKS}"
        )
    config = BaselineConfig.for_method(method, params)
    _works_exist(benchmark, eval_split, eval_works, "evaluation")
    trained = method in TRAINED_METHODS
    run_params: dict[str, Any] = {"config": config.as_params()}
    model = method
    if trained:
        _works_exist(benchmark, train_split, train_works, "training")
        if init_from is not None:
            if method != "leopard":
                raise ValueError("--init-from is for LEOPARD (it starts from a ProtoNet encoder)")
            source = Run.objects.filter(
                pk=init_from, kind=Run.Kind.TRAINED, method="protonet"
            ).first()
            if source is None:
                raise ValueError(f"run {init_from} is not a ProtoNet run")
            if source.status != Run.Status.SUCCEEDED:
                raise ValueError(f"ProtoNet run {init_from} has not finished ({source.status})")
            encoder = encoder or source.params.get("encoder", "")
            run_params["init_from"] = init_from
        encoder = encoder or settings.TOMLAB_BASELINE_ENCODER
        if not encoder:
            raise ValueError(
                "no encoder: set TOMLAB_BASELINE_ENCODER or pass the directory of a local "
                "Longformer (e.g. allenai/longformer-base-4096 saved with save_pretrained)"
            )
        if not Path(encoder).is_dir():
            raise ValueError(f"encoder directory {encoder!r} does not exist")
        run_params["encoder"] = str(Path(encoder).resolve())
        model = Path(encoder).name
    # A works list replaces its split; a split may be "" (works imported without one).
    selection: dict[str, Any] = {}
    parts = [("eval", eval_split, eval_works)]
    if trained:
        parts += [("train", train_split, train_works), ("select", select_split, select_works)]
    for part, split, works in parts:
        if works:
            selection[f"{part}_works"] = list(works)
        else:
            selection[f"{part}_split"] = split
    run = Run.objects.create(
        name=name or f"{benchmark} {method}" + (f" {model}" if trained else ""),
        kind=Run.Kind.TRAINED,
        benchmark=benchmark,
        method=method,
        model=model,
        params=run_params,
        selection=selection,
        created_by=created_by,
    )
    if enqueue:
        from modeling.runs.services import run_enqueue

        run_enqueue(run)
    return run
