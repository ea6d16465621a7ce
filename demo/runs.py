"""The demo's finished model runs: predictions we wrote, imported like any made elsewhere.

``fixtures/demo/predictions/`` holds one JSONL file per benchmark of the demo, in the
format of ``import_predictions`` (docs/predictions-jsonl.md), all of one made-up model,
``demo-recorded``. Importing them gives each benchmark a succeeded run over the demo
items, so every report shows a model beside the demo studies' human answers.
CharToM-QA's file holds multiple-choice picks with both plot windows and generative
answers with the judge's verdicts, so it gives three runs (one per task and window).

``fixtures/demo/harness/`` holds a real Inspect log: Inspect itself ran the Mini ToM
item set, exported as a task, with its scripted ``mockllm/model`` over two epochs
(``scripts/make_demo_inspect_log.py``). It is imported as a lab's own log would be, so
the runs page shows a run from Inspect and the Mini ToM report puts it beside people.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.models import Benchmark
from interop.inspect_import import inspect_logs_import
from modeling.models import Run
from modeling.runs.prediction_import import RunSummary, predictions_import

RUN_NAME = "Demo: recorded answers"
INSPECT_RUN_NAME = "Demo: Inspect log (mockllm)"
INSPECT_LOGS = ("mini-tom-mockllm.eval",)
FILES = (
    (Benchmark.TOM_IN_AMC, "tom_in_amc.jsonl"),
    (Benchmark.CHARTOM_QA, "chartom_qa.jsonl"),
    (Benchmark.DYNTOM, "dyntom.jsonl"),
    (Benchmark.GENERIC, "generic.jsonl"),
)


def demo_runs_ensure(folder: Path) -> list[RunSummary]:
    """Import every demo predictions file under ``RUN_NAME`` (nothing new a second time)."""
    summaries: list[RunSummary] = []
    for benchmark, name in FILES:
        result = predictions_import(path=Path(folder) / name, name=RUN_NAME, benchmark=benchmark)
        summaries.extend(result.runs)
    harness = Path(folder).parent / "harness"
    result = inspect_logs_import(paths=[harness / n for n in INSPECT_LOGS], name=INSPECT_RUN_NAME)
    summaries.extend(result.runs)
    return summaries


def demo_generative_run_ids() -> list[int]:
    """The demo's CharToM-QA runs with generative answers (what experts judge)."""
    return list(
        Run.objects.filter(
            benchmark=Benchmark.CHARTOM_QA, name__startswith=f"{RUN_NAME} (generative"
        ).values_list("pk", flat=True)
    )
