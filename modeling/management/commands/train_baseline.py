"""``train_baseline``: train and evaluate a ToM-in-AMC baseline as a run.

Runs here with a progress bar (Ctrl-C checkpoints and stops; ``--resume`` continues) or
is queued for a GPU worker with ``--background``. Random and Majority only count and
finish at once.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser
from tqdm import tqdm

from modeling.baselines.config import METHODS, BaselineConfig
from modeling.baselines.services import baseline_run_create
from modeling.models import Run
from modeling.runs.executor import run_execute
from modeling.runs.leases import RunLeased
from modeling.runs.recording import RunProgress

from .run_model import Command as RunModelCommand

# Shortcuts for the parameters changed most; any other goes through --param KEY=VALUE.
SHORTCUTS = ("epochs", "lr", "batch_size", "max_length", "seed", "device")


class Command(RunModelCommand):
    help = (
        "Train and evaluate a ToM-in-AMC baseline (random, majority, protonet, mtl, leopard) "
        "over the item bank; predictions are stored as a run beside the LLM runs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("method", nargs="?", choices=METHODS)
        parser.add_argument(
            "--benchmark", default="tom-in-amc", choices=["tom-in-amc", "tvshowguess"]
        )
        parser.add_argument("--train-split", default="train")
        parser.add_argument("--eval-split", default="dev")
        parser.add_argument(
            "--select-split", default="dev", help="split whose mean accuracy picks the epoch"
        )
        for part in ("train", "eval", "select"):
            parser.add_argument(
                f"--{part}-works",
                nargs="+",
                metavar="KEY",
                help=f"work keys instead of --{part}-split",
            )
        parser.add_argument(
            "--encoder", default="", help="local model directory (default: setting)"
        )
        parser.add_argument("--init-from", type=int, metavar="RUN_ID", help="LEOPARD: ProtoNet run")
        defaults = BaselineConfig()
        for name in SHORTCUTS:
            parser.add_argument(
                f"--{name.replace('_', '-')}",
                dest=name,
                type=type(getattr(defaults, name)),
                help=f"default {getattr(defaults, name)} (LEOPARD: its own paper values)",
            )
        parser.add_argument(
            "--param", action="append", default=[], metavar="KEY=VALUE",
            help="any other hyper-parameter, e.g. --param support_batches=3",
        )  # fmt: skip
        parser.add_argument("--name", default="")
        parser.add_argument("--background", action="store_true", help="queue for a GPU worker")
        parser.add_argument("--resume", type=int, metavar="RUN_ID", help="continue a run")
        parser.add_argument("--wait", action="store_true", help="with --resume: wait for a holder")

    def handle(self, *args, **opts) -> None:
        if opts["resume"]:
            self._resume(opts["resume"], background=opts["background"], wait=opts["wait"])
            return
        if not opts["method"]:
            raise CommandError("give a method: " + ", ".join(METHODS))
        try:
            run = baseline_run_create(
                method=opts["method"],
                benchmark=opts["benchmark"],
                train_split=opts["train_split"],
                eval_split=opts["eval_split"],
                select_split=opts["select_split"],
                train_works=opts["train_works"],
                eval_works=opts["eval_works"],
                select_works=opts["select_works"],
                encoder=opts["encoder"],
                init_from=opts["init_from"],
                params=self._params(opts),
                name=opts["name"],
                enqueue=opts["background"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if opts["background"]:
            self.stdout.write(f"run {run.pk} queued on the gpu queue: {run.name}")
            return
        self.stdout.write(f"run {run.pk}: {run.name}")
        self._execute(run.pk)

    def _params(self, opts: dict[str, Any]) -> dict[str, Any]:
        params = {name: opts[name] for name in SHORTCUTS if opts[name] is not None}
        for item in opts["param"]:
            key, sep, value = item.partition("=")
            if not sep:
                raise CommandError(f"--param {item!r}: expected KEY=VALUE")
            params[key.strip()] = value.strip()
        return params

    def _execute(self, run_id: int) -> None:
        bar = tqdm(total=None, desc=f"run {run_id}", unit="step", file=self.stderr)

        def progress(state: RunProgress) -> None:
            bar.total = state.total
            bar.n = state.done
            bar.refresh()

        try:
            with self._interruptible(run_id) as interrupt:
                status = run_execute(run_id=run_id, on_progress=progress, interrupt=interrupt)
        except RunLeased as exc:
            raise CommandError(f"{exc}; or pass --wait with --resume") from None
        finally:
            bar.close()
        run = Run.objects.get(pk=run_id)
        if status == "skipped":
            self.stdout.write(f"run {run.pk} is {run.status}: nothing to do")
            return
        for entry in run.metrics:
            dev = entry.get("dev_accuracy")
            self.stdout.write(
                f"  epoch {entry['epoch']}: train loss {entry.get('train_loss')}"
                + (f", dev accuracy {dev:.3f}" if dev is not None else "")
                + (" (kept)" if entry.get("kept") else "")
            )
        predictions = run.predictions.count()
        correct = run.predictions.filter(correct=True).count()
        accuracy = f"{correct / predictions:.3f}" if predictions else "n/a"
        self.stdout.write(
            f"run {run.pk} {status}: {predictions} predictions, accuracy {accuracy}"
            + (f" ({run.error})" if run.error else "")
        )
        if status == Run.Status.STOPPED:
            self.stdout.write(f"resume with: python manage.py train_baseline --resume {run.pk}")
        elif status == Run.Status.FAILED:
            raise CommandError(f"run {run.pk} failed: {run.error}")
