"""Training throughput and peak memory of the trained baselines (a script; pytest does not
collect it).

Imports two real movies from the shared data into a throwaway SQLite database (Big
Fish as the training split, Dead Poets Society as dev) and trains each method for one
epoch through the real code path (``baseline_run_create`` + the run engine), each in a
fresh process so its peak memory is its own. Prints, per method, the training
instances (masked characters) per second of that epoch, the epoch's wall seconds, the
process's peak resident memory and, on CUDA, the peak GPU memory torch allocated.

The encoder is a tiny random Longformer built here (hidden 32, 2 layers) unless
``--encoder`` names a local model directory (e.g. longformer-base-4096):

    .venv/bin/python tests/benchmarks/bench_baseline_training.py [--methods mtl protonet leopard]
    .venv/bin/python tests/benchmarks/bench_baseline_training.py \\
        --encoder /models/longformer-base-4096 --device cuda --max-length 2000 \\
        --attention-window 256
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MOVIES = (("screenplays/big_fish.fountain", "train"), ("screenplays/dead_poets_society.txt", "dev"))


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def measure(args: argparse.Namespace) -> dict:
    """In the child: import the movies, train ``args.method`` for one epoch, report."""
    workdir = Path(args.workdir)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ["DATABASE_URL"] = f"sqlite:///{workdir / f'{args.method}.sqlite3'}"
    os.environ["TOMLAB_BASELINE_CHECKPOINT_DIR"] = str(workdir / f"checkpoints-{args.method}")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    import torch
    from django.conf import settings
    from django.core.management import call_command

    from modeling.baselines.services import baseline_run_create
    from modeling.models import Run
    from modeling.runs.executor import run_execute

    if args.threads:
        torch.set_num_threads(args.threads)
    call_command("migrate", verbosity=0)
    for path, split in MOVIES:
        call_command(
            "import_benchmark",
            "screenplay",
            str(settings.TOMLAB_SHARED_DATA / path),
            "--split",
            split,
            verbosity=0,
        )
    params = {
        "epochs": 1,
        "max_length": args.max_length,
        "attention_window": args.attention_window,
        "batch_size": args.batch_size,
        "device": args.device,
        "checkpoint_every": 10_000,  # one epoch: measure training, not checkpoint writes
    }
    if args.max_steps:
        params["max_steps"] = args.max_steps
    run = baseline_run_create(
        method=args.method, encoder=args.encoder, params=params, enqueue=False
    )
    started = time.perf_counter()
    status = run_execute(run_id=run.pk)
    total = time.perf_counter() - started
    run = Run.objects.get(pk=run.pk)
    epoch = run.metrics[0] if run.metrics else {}
    result = {
        "method": args.method,
        "status": status,
        "error": run.error,
        "instances": epoch.get("instances"),
        "epoch_s": epoch.get("seconds"),
        "instances_per_s": epoch.get("instances_per_s"),
        "run_s": round(total, 2),
        "peak_rss_mb": round(_peak_mb(), 1),
    }
    if args.device.startswith("cuda"):
        result["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        result["gpu"] = torch.cuda.get_device_name()
    return result


def build_encoder(directory: Path) -> Path:
    sys.path.insert(0, str(ROOT))
    from tests.tiny_longformer import build_tiny_longformer

    data = Path(os.environ.get("TOMLAB_SHARED_DATA", ROOT.parent / "shared" / "data"))
    texts = []
    for path, _ in MOVIES:
        text = (data / path).read_text(encoding="utf-8", errors="replace")
        texts += [line.strip() for line in text.splitlines() if line.strip()]
    return build_tiny_longformer(directory, texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["mtl", "protonet", "leopard"])
    parser.add_argument("--encoder", default="", help="local model directory (default: tiny)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--attention-window", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-steps", type=int, default=0, help="mini-batches per epoch (0: all)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--method", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args)))
        return
    with tempfile.TemporaryDirectory(prefix="bench-baselines-") as tmp:
        encoder = args.encoder or str(build_encoder(Path(tmp) / "tiny-longformer"))
        print(
            f"encoder {Path(encoder).name}, device {args.device}, max length {args.max_length}, "
            f"window {args.attention_window}, batch {args.batch_size}, one epoch per method"
        )
        header = f"{'method':<10}{'instances':>10}{'epoch s':>10}{'inst/s':>10}{'peak RSS MB':>13}"
        print(header + ("  peak GPU MB" if args.device.startswith("cuda") else ""))
        for method in args.methods:
            command = [
                sys.executable, __file__, "--child", "--method", method, "--workdir", tmp,
                "--encoder", encoder, "--device", args.device,
                "--max-length", str(args.max_length),
                "--attention-window", str(args.attention_window),
                "--batch-size", str(args.batch_size), "--max-steps", str(args.max_steps),
                "--threads", str(args.threads),
            ]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            if done.returncode or not lines:
                print(f"{method}: failed\n{done.stderr[-2000:]}")
                continue
            r = json.loads(lines[-1])
            if r["status"] != "succeeded":
                print(f"{method}: {r['status']} {r['error']}")
                continue
            line = (
                f"{method:<10}{r['instances']:>10}{r['epoch_s']:>10.1f}"
                f"{r['instances_per_s']:>10.1f}{r['peak_rss_mb']:>13.0f}"
            )
            print(line + (f"  {r['peak_gpu_mb']:>11.0f}" if "peak_gpu_mb" in r else ""))


if __name__ == "__main__":
    main()
