"""The training curve of a trained-baseline run (``Run.metrics``, one entry per epoch).

Two charts, since loss and accuracy have different scales: training loss by epoch, and
the mean accuracy over the selection split's movies (the early-stopping criterion).
"""

from __future__ import annotations

from typing import Any

from reports.report_types import Chart, Report, Table

EPOCHS_TABLE = "epochs"
COLUMNS = ["Epoch", "Training loss", "Dev accuracy %", "Instances/s", "Seconds"]


def training_report(
    *, run_id: int, name: str, benchmark: str, metrics: list[dict[str, Any]]
) -> Report:
    """A report holding the epoch table and its two line charts."""
    rows = []
    for entry in metrics:
        dev = entry.get("dev_accuracy")
        rows.append(
            [
                entry.get("epoch"),
                entry.get("train_loss"),
                round(100 * dev, 2) if dev is not None else None,
                entry.get("instances_per_s"),
                entry.get("seconds"),
            ]
        )
    table = Table(EPOCHS_TABLE, f"Training of run #{run_id} {name}", COLUMNS, rows)
    charts = [
        Chart(
            "loss",
            "Training loss by epoch",
            "line",
            EPOCHS_TABLE,
            x="Epoch",
            series=["Training loss"],
        ),
        Chart(
            "accuracy",
            "Mean dev accuracy by epoch",
            "line",
            EPOCHS_TABLE,
            x="Epoch",
            series=["Dev accuracy %"],
        ),
    ]
    return Report(benchmark=benchmark, title=table.title, tables=[table], charts=charts)
