"""Training and evaluation of the baselines for one run, resumable from checkpoints.

A run trains on the tasks of its training split, picks the epoch with the best mean
accuracy over the selection split's movies (early stopping, §5.2), and writes one
prediction per masked speaker of its evaluation split's movies.

Determinism and resumption: the order of an epoch's mini-batches and every random draw
of a mini-batch (support sampling, dropout) are seeded from (seed, epoch, batch), never
from a running generator, so a run resumed from a checkpoint takes exactly the steps an
uninterrupted run takes (on CPU, bit for bit). A checkpoint (``last.pt``, written to a
temporary file and renamed) holds the weights, the optimizer, where in which epoch, the
gradients accumulated so far and the metrics. It is written every
``checkpoint_every`` optimizer steps, at each epoch's end and when the run is stopped.

On CUDA (``device=cuda``) the forward passes run under bf16 autocast and the encoder
uses gradient checkpointing; the code is otherwise the same as on CPU.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from django.conf import settings
from django.db import transaction
from torch import nn
from torch.nn import functional as F

from metrics import majority_choice
from modeling.models import Prediction, Run

from .config import BaselineConfig
from .data import Task, tasks_load
from .learners import (
    ABSENT,
    LeopardHead,
    MultiTaskHeads,
    cosine_logits,
    prototypes,
    restrict,
)
from .longformer_p import EncodedScene, SceneTokenizer, collate, load_encoder

logger = logging.getLogger(__name__)

PROGRESS_INTERVAL_S = 2.0
PREDICTION_CHUNK = 500


@dataclass
class Hooks:
    """What the run engine gives a training run: ``keep_going()`` renews the lease and is
    False once the run is stopped or cancelled; ``progress(done, total)`` reports work."""

    keep_going: Callable[[], bool] = lambda: True
    progress: Callable[[int, int], None] = lambda done, total: None


@dataclass
class Outcome:
    stopped: bool = False
    message: str = ""


def checkpoint_dir(run_id: int) -> Path:
    return Path(settings.TOMLAB_BASELINE_CHECKPOINT_DIR) / f"run-{run_id}"


def _save(obj: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)  # a kill mid-write leaves the previous checkpoint whole


def _load(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    return torch.load(path, map_location="cpu", weights_only=False)


def _seed(config: BaselineConfig, epoch: int, index: int) -> int:
    return (config.seed * 1_000_003 + epoch * 10_007 + index) % (2**31)


# --- selection of tasks -----------------------------------------------------------------


@dataclass
class TaskSets:
    train: list[Task]
    select: list[Task]
    evaluate: list[Task]

    @property
    def all(self) -> list[Task]:
        seen: dict[int, Task] = {}
        for task in [*self.train, *self.select, *self.evaluate]:
            seen.setdefault(task.work_id, task)
        return list(seen.values())


def task_sets(run: Run) -> TaskSets:
    selection = run.selection
    benchmark = run.benchmark

    def load(split_key: str, works_key: str) -> list[Task]:
        works = selection.get(works_key) or None
        if not works and split_key not in selection:
            return []
        return tasks_load(benchmark=benchmark, splits=[selection.get(split_key, "")], works=works)

    return TaskSets(
        train=load("train_split", "train_works"),
        select=load("select_split", "select_works"),
        evaluate=load("eval_split", "eval_works"),
    )


# --- counting baselines -----------------------------------------------------------------


def _predict_counting(run: Run, config: BaselineConfig, tasks: list[Task], hooks: Hooks) -> Outcome:
    total = sum(len(t.test_examples) for t in tasks)
    rows: list[Prediction] = []
    for task in tasks:
        counts = Counter(e.label for e in task.history_examples)
        for example in task.test_examples:
            if run.method == "random":
                # Keyed by what names the instance in any install, not its row id, so a
                # re-import elsewhere (a replication package) draws the same guesses.
                rng = random.Random(f"{config.seed}:{task.key}/{example.natural_key}")
                label = rng.choice(example.candidates)
                details = {}
            else:
                label = majority_choice(example.candidates, counts)
                details = {"history_count": counts[label]}
            rows.append(_prediction(run, task, example, label, details))
    _write_predictions(rows)
    hooks.progress(total, total)
    return Outcome()


def _prediction(run: Run, task: Task, example, label: int, details: dict[str, Any]) -> Prediction:
    return Prediction(
        run=run,
        speaker_instance_id=example.instance_id,
        parsed_answer=task.classes[label],
        parse_status=Prediction.ParseStatus.OK,
        correct=label == example.label,
        details=details,
        model=run.model,
    )


def _write_predictions(rows: list[Prediction]) -> None:
    # The unique constraint per (run, instance, sample) makes a rerun after a crash
    # during evaluation add only what is missing.
    for start in range(0, len(rows), PREDICTION_CHUNK):
        with transaction.atomic():
            Prediction.objects.bulk_create(
                rows[start : start + PREDICTION_CHUNK], ignore_conflicts=True
            )


# --- trained learners -------------------------------------------------------------------


@dataclass
class Spec:
    """One mini-batch: a task and its scenes, from its history or its tests."""

    task: Task
    scenes: list[int]
    part: str  # "history" or "tests"


@dataclass
class State:
    epoch: int = 0
    batch: int = 0
    steps: int = 0
    loss_sum: float = 0.0
    loss_count: int = 0
    instances: int = 0
    seconds: float = 0.0
    metrics: list[dict[str, Any]] = field(default_factory=list)
    best_score: float | None = None
    best_epoch: int | None = None
    stale: int = 0
    finished: bool = False  # training over (all epochs, or stopped early)
    resumed_at: list[list[int]] = field(default_factory=list)


class Learner(nn.Module):
    """Longformer-P plus the method's own parameters, trained by :class:`Trainer`."""

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder


class Trainer:
    """The loop shared by the three methods; subclasses give batches, loss and scores."""

    method = ""

    def __init__(self, run: Run, config: BaselineConfig, tasks: TaskSets, hooks: Hooks) -> None:
        self.run = run
        self.config = config
        self.tasks = tasks
        self.hooks = hooks
        self.directory = checkpoint_dir(run.pk)
        self.device = torch.device(config.device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError("device cuda was asked for, but this worker has no CUDA device")
        self.cuda = self.device.type == "cuda"
        # New rows of the embedding matrix ([P_x], [SPLIT]) and the heads start random:
        # seeded, so two runs with the same seed start from the same weights.
        torch.manual_seed(config.seed)
        tokenizer, encoder = load_encoder(
            run.params["encoder"],
            attention_window=config.attention_window,
            max_length=config.max_length,
            gradient_checkpointing=self.cuda,
        )
        self.tokenizer: SceneTokenizer = tokenizer
        self.model = self.build(encoder).to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.lr)
        self._encoded: dict[int, EncodedScene] = {}
        self._progress_at = 0.0
        self.done = 0
        self.total = 0

    # -- what subclasses provide

    def build(self, encoder: nn.Module) -> Learner:
        return Learner(encoder)

    def specs(self, epoch: int) -> list[Spec]:
        raise NotImplementedError

    def loss(self, spec: Spec, rng: random.Random) -> torch.Tensor | None:
        raise NotImplementedError

    def scores(self, task: Task) -> torch.Tensor:
        """(tests, classes) logits for ``task.test_examples``, candidates not yet applied."""
        raise NotImplementedError

    # -- shared pieces

    def autocast(self):
        if self.cuda:
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def encode(self, task: Task, scene_id: int) -> EncodedScene:
        encoded = self._encoded.get(scene_id)
        if encoded is None:
            encoded = self._encoded[scene_id] = self.tokenizer.encode(task.scenes[scene_id])
        return encoded

    def embed(self, task: Task, scene_ids: list[int], part: str) -> tuple[torch.Tensor, list]:
        """Embeddings (N, D) of every masked character of ``scene_ids`` and their examples."""
        examples_of = task.history if part == "history" else task.tests
        scenes = [self.encode(task, sid) for sid in scene_ids]
        rows, examples = [], []
        for i, sid in enumerate(scene_ids):
            for example in examples_of[sid]:
                rows.append((i, example.code))
                examples.append(example)
        batch = collate(scenes, rows, pad_id=self.tokenizer.pad_id).to(self.device)
        with self.autocast():
            embeddings = self.model.encoder(batch)
        return embeddings.float(), examples

    def embed_all(self, task: Task, part: str, scene_ids: list[int] | None = None):
        """Embeddings of many scenes, in mini-batches, without gradients."""
        scene_ids = (
            list(task.history if part == "history" else task.tests)
            if scene_ids is None
            else scene_ids
        )
        chunks, examples = [], []
        with torch.no_grad():
            for start in range(0, len(scene_ids), self.config.batch_size):
                emb, ex = self.embed(task, scene_ids[start : start + self.config.batch_size], part)
                chunks.append(emb)
                examples += ex
        if not chunks:
            return torch.zeros((0, self.model.encoder.dim), device=self.device), []
        return torch.cat(chunks), examples

    def labels(self, examples: list) -> torch.Tensor:
        return torch.tensor([e.label for e in examples], dtype=torch.long, device=self.device)

    def chunked(self, task: Task, part: str, rng: random.Random) -> list[Spec]:
        scenes = list(task.history if part == "history" else task.tests)
        rng.shuffle(scenes)
        size = self.config.batch_size
        return [Spec(task, scenes[i : i + size], part) for i in range(0, len(scenes), size)]

    def epoch_specs(self, epoch: int) -> list[Spec]:
        specs = self.specs(epoch)
        random.Random(f"order:{self.config.seed}:{epoch}").shuffle(specs)
        if self.config.max_steps:
            specs = specs[: self.config.max_steps]
        return specs

    # -- checkpoints

    def save(self, state: State, *, with_grads: bool = False) -> None:
        grads = None
        if with_grads:
            grads = [
                None if p.grad is None else p.grad.detach().cpu() for p in self.model.parameters()
            ]
        _save(
            {
                "state": state.__dict__,
                "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "grads": grads,
            },
            self.directory / "last.pt",
        )

    def restore(self) -> State:
        saved = _load(self.directory / "last.pt")
        if saved is None:
            return State()
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        if saved.get("grads"):
            for p, g in zip(self.model.parameters(), saved["grads"], strict=True):
                p.grad = None if g is None else g.to(self.device)
        state = State(**saved["state"])
        state.resumed_at.append([state.epoch, state.batch])
        logger.info("run %s: resumed at epoch %s, batch %s", self.run.pk, state.epoch, state.batch)
        return state

    # -- the loop

    def report(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._progress_at >= PROGRESS_INTERVAL_S:
            self._progress_at = now
            self.hooks.progress(self.done, self.total)

    def train(self) -> Outcome:
        config = self.config
        state = self.restore()
        per_epoch = len(self.epoch_specs(0))
        eval_items = sum(len(t.test_examples) for t in self.tasks.evaluate)
        self.total = per_epoch * config.epochs + eval_items
        self.done = min(per_epoch * state.epoch + state.batch, per_epoch * config.epochs)
        if state.finished:
            self.done = per_epoch * config.epochs
        while not state.finished and state.epoch < config.epochs:
            specs = self.epoch_specs(state.epoch)
            self.model.train()
            started = time.monotonic()
            for index in range(state.batch, len(specs)):
                if not self.hooks.keep_going():
                    state.batch = index
                    state.seconds += time.monotonic() - started
                    self.save(state, with_grads=True)
                    return Outcome(True, f"stopped at epoch {state.epoch + 1}, batch {index}")
                seed = _seed(config, state.epoch, index)
                torch.manual_seed(seed)
                spec = specs[index]
                loss = self.loss(spec, random.Random(seed))
                if loss is not None:
                    (loss / config.update_every).backward()
                    state.loss_sum += float(loss.detach())
                    state.loss_count += 1
                state.instances += sum(len(self._examples(spec, sid)) for sid in spec.scenes)
                if (index + 1) % config.update_every == 0 or index + 1 == len(specs):
                    self.optimizer.step()
                    self.optimizer.zero_grad(set_to_none=True)
                    state.steps += 1
                    if state.steps % config.checkpoint_every == 0 and index + 1 < len(specs):
                        state.batch = index + 1
                        state.seconds += time.monotonic() - started
                        started = time.monotonic()
                        self.save(state)
                self.done += 1
                self.report()
            state.seconds += time.monotonic() - started
            self.end_epoch(state)
        final = _load(self.directory / "best.pt") if state.best_epoch is not None else None
        if final is not None:
            self.model.load_state_dict(final["model"])
        self.predict()
        # Which epoch's weights made the predictions: the best on the selection split,
        # else the last.
        kept = state.best_epoch or (state.metrics[-1]["epoch"] if state.metrics else None)
        metrics = [{**m, "kept": m["epoch"] == kept} for m in state.metrics]
        Run.objects.filter(pk=self.run.pk).update(metrics=metrics)
        return Outcome()

    def _examples(self, spec: Spec, scene_id: int) -> list:
        return (spec.task.history if spec.part == "history" else spec.task.tests)[scene_id]

    def end_epoch(self, state: State) -> None:
        entry: dict[str, Any] = {
            "epoch": state.epoch + 1,
            "train_loss": round(state.loss_sum / state.loss_count, 6) if state.loss_count else None,
            "steps": state.steps,
            "instances": state.instances,
            "seconds": round(state.seconds, 3),
            "instances_per_s": round(state.instances / state.seconds, 3) if state.seconds else None,
        }
        if self.tasks.select:
            score = self.accuracy(self.tasks.select)
            entry["dev_accuracy"] = round(score, 6)
            if state.best_score is None or score > state.best_score:
                state.best_score, state.best_epoch, state.stale = score, state.epoch + 1, 0
                _save({"model": self.model.state_dict()}, self.directory / "best.pt")
            else:
                state.stale += 1
        resumed = [b for e, b in state.resumed_at if e == state.epoch and b]
        if resumed:
            entry["resumed_at_batch"] = resumed[-1]
        state.metrics.append(entry)
        state.epoch += 1
        state.batch = 0
        state.loss_sum, state.loss_count, state.instances, state.seconds = 0.0, 0, 0, 0.0
        if self.config.patience and state.stale >= self.config.patience:
            state.finished = True
        if state.epoch >= self.config.epochs:
            state.finished = True
        self.save(state)
        Run.objects.filter(pk=self.run.pk).update(metrics=state.metrics)

    def accuracy(self, tasks: list[Task]) -> float:
        """Mean over tasks of instance accuracy (the paper's "averaged performance")."""
        self.model.eval()
        accuracies = []
        for task in tasks:
            if not task.tests:
                continue
            predicted = self.predicted(task)
            gold = [e.label for e in task.test_examples]
            accuracies.append(sum(p == g for p, g in zip(predicted, gold, strict=True)) / len(gold))
        self.model.train()
        return sum(accuracies) / len(accuracies) if accuracies else 0.0

    def predicted(self, task: Task) -> list[int]:
        logits = restrict(self.scores(task), [e.candidates for e in task.test_examples])
        return logits.argmax(dim=-1).tolist()

    def predict(self) -> None:
        self.model.eval()
        for task in self.tasks.evaluate:
            if not task.tests:
                continue
            examples = task.test_examples
            logits = restrict(self.scores(task), [e.candidates for e in examples])
            probabilities = torch.softmax(logits, dim=-1)
            rows = []
            for example, p in zip(examples, probabilities.tolist(), strict=True):
                label = max(example.candidates, key=lambda c: p[c])
                details = {"scores": {task.classes[c]: round(p[c], 4) for c in example.candidates}}
                rows.append(_prediction(self.run, task, example, label, details))
            _write_predictions(rows)
            self.done += len(examples)
            self.report()
        self.report(force=True)


class MTLTrainer(Trainer):
    """§5.2: every task's history (and the training tasks' tests) through per-task heads."""

    method = "mtl"

    def build(self, encoder: nn.Module) -> Learner:
        learner = Learner(encoder)
        learner.heads = MultiTaskHeads(
            encoder.dim, {t.work_id: len(t.classes) for t in self.tasks.all}
        )
        return learner

    def specs(self, epoch: int) -> list[Spec]:
        rng = random.Random(f"mtl:{self.config.seed}:{epoch}")
        train_ids = {t.work_id for t in self.tasks.train}
        specs = []
        for task in self.tasks.all:
            specs += self.chunked(task, "history", rng)
            if task.work_id in train_ids:
                specs += self.chunked(task, "tests", rng)
        return specs

    def loss(self, spec: Spec, rng: random.Random) -> torch.Tensor | None:
        embeddings, examples = self.embed(spec.task, spec.scenes, spec.part)
        logits = self.model.heads(embeddings, spec.task.work_id)
        return F.cross_entropy(logits, self.labels(examples))

    def scores(self, task: Task) -> torch.Tensor:
        embeddings, _ = self.embed_all(task, "tests")
        with torch.no_grad():
            return self.model.heads(embeddings, task.work_id).float()


class EpisodicTrainer(Trainer):
    """ProtoNet and LEOPARD: an episode is a query mini-batch of one training task's
    tests with a support set sampled from that task's history."""

    def specs(self, epoch: int) -> list[Spec]:
        rng = random.Random(f"episodes:{self.config.seed}:{epoch}")
        return [s for t in self.tasks.train if t.history for s in self.chunked(t, "tests", rng)]

    def support(self, task: Task, rng: random.Random) -> list[int]:
        scenes = list(task.history)
        limit = self.config.support_batches * self.config.batch_size
        return scenes if len(scenes) <= limit else rng.sample(scenes, limit)


class ProtoNetTrainer(EpisodicTrainer):
    method = "protonet"

    def loss(self, spec: Spec, rng: random.Random) -> torch.Tensor | None:
        task = spec.task
        # B.2: the support branch is frozen (no gradient) to bound memory.
        support, support_examples = self.embed_all(task, "history", self.support(task, rng))
        protos, present = prototypes(support, self.labels(support_examples), len(task.classes))
        queries, examples = self.embed(task, spec.scenes, "tests")
        keep = [i for i, e in enumerate(examples) if present[e.label]]
        if not keep:
            return None
        logits = cosine_logits(queries[keep], protos, present, scale=self.config.cosine_scale)
        kept = [examples[i] for i in keep]
        logits = restrict(logits, [e.candidates for e in kept])
        return F.cross_entropy(logits, self.labels(kept))

    def scores(self, task: Task) -> torch.Tensor:
        support, support_examples = self.embed_all(task, "history")
        queries, _ = self.embed_all(task, "tests")
        if not support_examples:
            return torch.full((queries.shape[0], len(task.classes)), ABSENT, device=self.device)
        protos, present = prototypes(support, self.labels(support_examples), len(task.classes))
        return cosine_logits(queries, protos, present, scale=self.config.cosine_scale)


class LeopardTrainer(EpisodicTrainer):
    method = "leopard"

    def build(self, encoder: nn.Module) -> Learner:
        learner = Learner(encoder)
        learner.leopard = LeopardHead(
            encoder.dim, hidden=self.config.generator_hidden, out_dim=self.config.leopard_dim
        )
        init_from = self.run.params.get("init_from")
        if init_from:
            # B.3: "initialized with a trained prototypical network".
            saved = _load(checkpoint_dir(int(init_from)) / "final.pt")
            if saved is None:
                raise ValueError(f"run {init_from} has no final checkpoint to start LEOPARD from")
            weights = {k: v for k, v in saved["model"].items() if k.startswith("encoder.")}
            missing, _ = learner.load_state_dict(weights, strict=False)
            if any(k.startswith("encoder.") for k in missing):
                raise ValueError(f"run {init_from}'s encoder does not fit this encoder directory")
        return learner

    def loss(self, spec: Spec, rng: random.Random) -> torch.Tensor | None:
        task = spec.task
        support_ids = self.support(task, rng)
        support, support_examples = self.embed(task, support_ids, "history")
        head = self.model.leopard
        weight, bias, present = head.adapt(
            support,
            self.labels(support_examples),
            len(task.classes),
            steps=self.config.inner_steps,
            lr=self.config.inner_lr,
            first_order=self.config.first_order,
        )
        queries, examples = self.embed(task, spec.scenes, "tests")
        keep = [i for i, e in enumerate(examples) if present[e.label]]
        if not keep:
            return None
        kept = [examples[i] for i in keep]
        logits = head.logits(head.mapper(queries[keep]), weight, bias, present)
        return F.cross_entropy(restrict(logits, [e.candidates for e in kept]), self.labels(kept))

    def scores(self, task: Task) -> torch.Tensor:
        support, support_examples = self.embed_all(task, "history")
        queries, _ = self.embed_all(task, "tests")
        if not support_examples:
            return torch.full((queries.shape[0], len(task.classes)), ABSENT, device=self.device)
        head = self.model.leopard
        with torch.no_grad():
            weight, bias, present = head.adapt(
                support,
                self.labels(support_examples),
                len(task.classes),
                steps=self.config.inner_steps,
                lr=self.config.inner_lr,
                first_order=True,
            )
            return head.logits(head.mapper(queries), weight, bias, present)


TRAINERS: dict[str, type[Trainer]] = {
    "mtl": MTLTrainer,
    "protonet": ProtoNetTrainer,
    "leopard": LeopardTrainer,
}


def baseline_train(*, run: Run, hooks: Hooks | None = None) -> Outcome:
    """Train (or resume) and evaluate the baseline ``run`` describes; write its predictions."""
    hooks = hooks or Hooks()
    config = BaselineConfig.for_method(run.method, run.params.get("config"))
    tasks = task_sets(run)
    if run.method in ("random", "majority"):
        return _predict_counting(run, config, tasks.evaluate, hooks)
    torch.backends.cudnn.benchmark = False  # the same kernels every time: reproducible
    trainer = TRAINERS[run.method](run, config, tasks, hooks)
    outcome = trainer.train()
    if not outcome.stopped:
        _save({"model": trainer.model.state_dict()}, trainer.directory / "final.pt")
    return outcome
