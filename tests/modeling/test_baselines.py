"""The trained baselines of ToM-in-AMC (modeling/baselines) on a tiny Longformer.

The encoder is a randomly initialised Longformer and a BPE tokenizer trained here on
the screenplays' own text, saved to a directory and loaded through the same code as a
real model. The movies are real: Big Fish (train split) and Dead Poets Society (dev),
imported with ``import_benchmark screenplay``.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks.models import Scene, SpeakerInstance
from modeling.baselines.config import BaselineConfig
from modeling.baselines.data import tasks_load
from modeling.baselines.learners import (
    ABSENT,
    LeopardHead,
    cosine_logits,
    prototypes,
)
from modeling.baselines.longformer_p import (
    SceneTokenizer,
    attentive_pool,
    collate,
    load_encoder,
)
from modeling.baselines.services import baseline_run_create
from modeling.baselines.training import TRAINERS, Hooks, task_sets
from modeling.models import Prediction, Run
from modeling.runs.services import run_queue
from tests.celery_worker import drain_queue, purge_queues

pytestmark = pytest.mark.django_db

# Small enough for a few seconds on 2 CPU cores, long enough to hold several utterances.
TINY = {"max_length": 256, "attention_window": 16, "batch_size": 4}


def _dev_instances(movies) -> set[int]:
    return set(
        SpeakerInstance.objects.filter(scene__work=movies["dev"]).values_list("pk", flat=True)
    )


# --- Longformer-P pieces ------------------------------------------------------------------


def test_attentive_pooling_uses_only_the_characters_own_tokens():
    torch.manual_seed(0)
    hidden = torch.randn(2, 10, 6)
    scores = torch.randn(2, 10)
    owner = torch.tensor([0, 0, 1])
    masks = torch.zeros(3, 10, dtype=torch.bool)
    masks[0, [1, 2, 3]] = True  # P0 of scene 0
    masks[1, [5, 6]] = True  # P1 of scene 0
    masks[2, [0, 9]] = True  # P0 of scene 1
    pooled = attentive_pool(hidden, scores, owner, masks)

    # By hand: a softmax over the character's own positions weighs their hidden states.
    for n, (scene, positions) in enumerate([(0, [1, 2, 3]), (0, [5, 6]), (1, [0, 9])]):
        alpha = torch.softmax(scores[scene, positions], dim=0)
        expected = (alpha.unsqueeze(1) * hidden[scene, positions]).sum(0)
        assert torch.allclose(pooled[n], expected, atol=1e-6)

    # Changing every token that is not P0's (scene 0) leaves P0's embedding as it was
    # and changes P1's.
    other = ~masks[0]
    hidden2, scores2 = hidden.clone(), scores.clone()
    hidden2[0, other] += 5.0
    scores2[0, other] -= 3.0
    pooled2 = attentive_pool(hidden2, scores2, owner, masks)
    assert torch.equal(pooled2[0], pooled[0])
    assert not torch.allclose(pooled2[1], pooled[1])
    assert torch.equal(pooled2[2], pooled[2])  # another scene


def test_scene_tokens_carry_speaker_ids_split_tokens_and_masks(tiny_encoder):
    from modeling.baselines.data import Line

    tokenizer, _ = load_encoder(
        tiny_encoder, attention_window=16, max_length=64, gradient_checkpointing=False
    )
    lines = [
        Line("scene", "", "P1 walks in."),
        Line("dialog", "P0", "Hello there."),
        Line("dialog", "will", "Dad."),
        Line("dialog", "P0", "Son."),
    ]
    encoded = tokenizer.encode(lines)
    tokens = tokenizer.tokenizer.convert_ids_to_tokens(encoded.ids)
    assert tokens[0] == "<s>" and tokens[-1] == "</s>"
    assert tokens.count("[SPLIT]") == 4
    p0 = [tokens[i] for i in encoded.positions["P0"]]
    assert p0.count("[P_0]") == 2 and p0.count("[SPLIT]") == 2
    assert "Dad" not in p0 and "will" not in p0  # another speaker's line is not P0's
    assert [tokens[i] for i in encoded.positions["P1"]] == ["[P_1]"]  # named in narration

    short = SceneTokenizer(tokenizer.tokenizer, max_length=8).encode(lines * 10)
    assert len(short.ids) == 8
    assert all(p < 7 for positions in short.positions.values() for p in positions)
    # A code cut off by the maximum length is pooled over [CLS] rather than nothing.
    batch = collate([short], [(0, "P0"), (0, "P7")], pad_id=tokenizer.pad_id)
    assert batch.masks[1].nonzero().flatten().tolist() == [0]


def test_gradient_checkpointing_path_gives_the_same_embeddings_and_gradients(tiny_encoder):
    """What --device cuda turns on, checked on CPU: recomputing activations in the
    backward pass changes nothing but memory."""
    from modeling.baselines.data import Line

    lines = [Line("dialog", "P0", "Hello there, son."), Line("dialog", "P1", "Dad.")]
    results = []
    for checkpointing in (False, True):
        torch.manual_seed(0)
        tokenizer, model = load_encoder(
            tiny_encoder, attention_window=16, max_length=64, gradient_checkpointing=checkpointing
        )
        model.train()  # checkpointing only acts in training; the same seed, the same dropout
        batch = collate([tokenizer.encode(lines)], [(0, "P0"), (0, "P1")], pad_id=tokenizer.pad_id)
        torch.manual_seed(1)
        embeddings = model(batch)
        embeddings.sum().backward()
        results.append((embeddings.detach(), model.attention.weight.grad.clone()))
        assert model.encoder.is_activation_checkpointing == checkpointing
    assert embeddings.shape == (2, 32)
    assert torch.allclose(results[0][0], results[1][0], atol=1e-5)
    assert torch.allclose(results[0][1], results[1][1], atol=1e-5)


# --- ProtoNet and LEOPARD math --------------------------------------------------------------


def test_prototypes_are_class_means_and_missing_classes_cannot_win():
    embeddings = torch.tensor([[1.0, 0.0], [3.0, 0.0], [0.0, 2.0], [5.0, 5.0]])
    labels = torch.tensor([0, 0, 2, 3])
    protos, present = prototypes(embeddings, labels, 5)
    assert torch.equal(protos[0], torch.tensor([2.0, 0.0]))
    assert torch.equal(protos[2], torch.tensor([0.0, 2.0]))
    assert present.tolist() == [True, False, True, True, False]
    logits = cosine_logits(torch.tensor([[0.0, 1.0], [1.0, 1.0]]), protos, present, scale=10.0)
    assert logits.shape == (2, 5)
    assert logits[:, [1, 4]].eq(ABSENT).all()
    assert logits[0].argmax() == 2 and logits[1].argmax() == 3
    assert logits[0, 2] == pytest.approx(10.0)


@pytest.mark.parametrize("n_classes", [1, 2, 3, 4, 5])
def test_leopard_generates_one_linear_row_per_class(n_classes):
    torch.manual_seed(n_classes)
    head = LeopardHead(12, hidden=16, out_dim=8)
    support = torch.randn(2 * n_classes + 1, 12, requires_grad=True)
    labels = torch.tensor([i % n_classes for i in range(2 * n_classes + 1)])
    weight, bias, present = head.generate(support, labels, n_classes)
    assert weight.shape == (n_classes, 8) and bias.shape == (n_classes,)
    assert present.all()
    # Each row is the mean of the generator's output over that class's support examples.
    rows = head.generator(support[labels == 0])
    assert torch.allclose(weight[0], rows[:, :-1].mean(0), atol=1e-6)
    assert torch.allclose(bias[0], rows[:, -1].mean(), atol=1e-6)

    def support_loss(w, b):
        logits = head.logits(head.mapper(support), w, b, present)
        return torch.nn.functional.cross_entropy(logits, labels)

    adapted_w, adapted_b, _ = head.adapt(
        support, labels, n_classes, steps=3, lr=0.5, first_order=False
    )
    assert adapted_w.shape == (n_classes, 8) and adapted_b.shape == (n_classes,)
    if n_classes > 1:  # one class: the loss is 0 already
        assert support_loss(adapted_w, adapted_b) < support_loss(weight, bias)
    queries = head.logits(head.mapper(torch.randn(3, 12)), adapted_w, adapted_b, present)
    assert queries.shape == (3, n_classes)
    queries.sum().backward()  # the outer update reaches the generator and the encoder side
    assert head.generator[0].weight.grad is not None and support.grad is not None


# --- tasks from the item bank ----------------------------------------------------------------


def test_tasks_mask_screenplay_history_and_test_on_instances(movies):
    (big_fish,) = tasks_load(benchmark="tom-in-amc", splits=["train"])
    assert big_fish.classes == ["edward", "will", "sandra", "jenny", "josephine"]
    assert big_fish.test_examples and big_fish.history_examples
    assert {e.instance_id for e in big_fish.test_examples} == set(
        SpeakerInstance.objects.filter(scene__work=movies["train"]).values_list("pk", flat=True)
    )
    assert not set(big_fish.history) & set(big_fish.tests)
    # History scenes had names in clear: their speakers are masked like test scenes.
    for scene_id, examples in big_fish.history.items():
        speakers = {line.speaker for line in big_fish.scenes[scene_id] if line.kind == "dialog"}
        assert {e.code for e in examples} <= speakers
        assert not speakers & set(big_fish.classes)
    narration = " ".join(
        line.text
        for sid in big_fish.history
        for line in big_fish.scenes[sid]
        if line.kind == "scene"
    )
    assert "P0" in narration


def test_a_work_without_history_scenes_learns_from_its_first_three_fifths(db, shared_data):
    call_command(
        "import_benchmark", "tvshowguess", str(shared_data / "tvshowguess" / "friends.raw"),
        verbosity=0,
    )  # fmt: skip
    (friends,) = tasks_load(benchmark="tvshowguess", splits=[""])  # imported without a split
    scenes = list(Scene.objects.filter(work__key="friends").order_by("position"))
    assert len(friends.history) == len(scenes) * 3 // 5
    assert list(friends.history) == [s.pk for s in scenes[: len(friends.history)]]
    assert len(friends.history) + len(friends.tests) == len(scenes)
    assert all(e.instance_id for e in friends.test_examples)

    call_command("train_baseline", "majority", "--benchmark", "tvshowguess", "--eval-split", "")
    run = Run.objects.get(benchmark="tvshowguess")
    assert sorted(run.predictions.values_list("speaker_instance_id", flat=True)) == sorted(
        e.instance_id for e in friends.test_examples
    )


# --- training ---------------------------------------------------------------------------------


def _run(method: str, encoder: Path, **params) -> Run:
    return baseline_run_create(
        method=method, encoder=str(encoder), params={**TINY, **params}, enqueue=False
    )


@pytest.mark.parametrize("method", ["mtl", "protonet", "leopard"])
def test_a_few_training_steps_reduce_the_training_loss(method, movies, tiny_encoder):
    run = _run(method, tiny_encoder, lr=3e-3, support_batches=2)
    config = BaselineConfig.for_method(method, run.params["config"])
    trainer = TRAINERS[method](run, config, task_sets(run), Hooks())
    spec = trainer.epoch_specs(0)[0]

    def loss() -> torch.Tensor:
        torch.manual_seed(0)
        return trainer.loss(spec, random.Random(0))  # the same support sample each time

    trainer.model.eval()  # no dropout: the same batch gives the same loss
    with torch.no_grad():
        before = float(loss())
    for _ in range(6):
        trainer.model.train()
        trainer.optimizer.zero_grad()
        loss().backward()
        trainer.optimizer.step()
    trainer.model.eval()
    with torch.no_grad():
        after = float(loss())
    assert after < before * 0.9, (before, after)


@pytest.mark.parametrize("method", ["random", "majority"])
def test_counting_baselines_answer_every_dev_instance_at_once(method, movies, capsys):
    call_command("train_baseline", method, "--eval-split", "dev", "--seed", "3")
    run = Run.objects.get(method=method)
    assert run.kind == Run.Kind.TRAINED and run.status == Run.Status.SUCCEEDED
    predictions = list(Prediction.objects.filter(run=run))
    assert {p.speaker_instance_id for p in predictions} == _dev_instances(movies)
    assert len(predictions) == len(_dev_instances(movies))
    assert all(p.parse_status == "ok" and p.correct is not None for p in predictions)
    if method == "majority":
        (dead_poets,) = tasks_load(benchmark="tom-in-amc", splits=["dev"])
        counts = [0] * len(dead_poets.classes)
        for e in dead_poets.history_examples:
            counts[e.label] += 1
        top = dead_poets.classes[counts.index(max(counts))]
        assert {p.parsed_answer for p in predictions} == {top}
    else:
        assert len({p.parsed_answer for p in predictions}) > 1
        again = baseline_run_create(method="random", params={"seed": 3}, enqueue=False)
        call_command("train_baseline", "--resume", str(again.pk))
        assert sorted(again.predictions.values_list("speaker_instance_id", "parsed_answer")) == (
            sorted((p.speaker_instance_id, p.parsed_answer) for p in predictions)
        )
    assert "accuracy" in capsys.readouterr().out


def test_random_guesses_do_not_depend_on_row_ids(movies, shared_data):
    def guesses() -> dict[tuple[str, str, str], str]:
        call_command("train_baseline", "random", "--eval-split", "dev", "--seed", "3")
        run = Run.objects.filter(method="random").latest("pk")
        return {
            (p.speaker_instance.scene.work.key, p.speaker_instance.scene.source_id,
             p.speaker_instance.code): p.parsed_answer
            for p in run.predictions.select_related("speaker_instance__scene__work")
        }  # fmt: skip

    first = guesses()
    dev = SpeakerInstance.objects.filter(scene__work__split="dev")
    ids = set(dev.values_list("pk", flat=True))
    # A fresh import of the same script: new row ids, the same instances.
    dead_poets = movies["dev"]
    Run.objects.all().delete()
    SpeakerInstance.objects.filter(scene__work=dead_poets).delete()  # protects the characters
    dead_poets.delete()
    # Another movie first takes the freed ids (SQLite hands them out again).
    for name, split in (("star_wars_a_new_hope.txt", "test"), ("dead_poets_society.txt", "dev")):
        script = shared_data / "screenplays" / name
        call_command("import_benchmark", "screenplay", str(script), "--split", split, verbosity=0)
    assert not ids & set(dev.values_list("pk", flat=True))

    assert guesses() == first
    assert len(set(first.values())) > 1


def test_train_baseline_protonet_then_leopard_and_mtl_end_to_end(movies, tiny_encoder, capsys):
    common = [
        "--train-split", "train", "--eval-split", "dev", "--encoder", str(tiny_encoder),
        "--epochs", "2", "--max-length", "256", "--batch-size", "4",
        "--param", "attention_window=16", "--param", "max_steps=4", "--param", "update_every=2",
    ]  # fmt: skip
    call_command("train_baseline", "protonet", *common)
    protonet = Run.objects.get(method="protonet")
    call_command("train_baseline", "leopard", *common, "--init-from", str(protonet.pk))
    call_command("train_baseline", "mtl", *common)
    out = capsys.readouterr().out
    dev = _dev_instances(movies)
    for run in Run.objects.filter(method__in=["protonet", "leopard", "mtl"]):
        assert run.status == Run.Status.SUCCEEDED, run.error
        assert run.kind == Run.Kind.TRAINED and run.model == tiny_encoder.name
        assert [m["epoch"] for m in run.metrics] == [1, 2]
        assert all(m["train_loss"] > 0 and 0 <= m["dev_accuracy"] <= 1 for m in run.metrics)
        best = max(m["dev_accuracy"] for m in run.metrics)
        kept = [m for m in run.metrics if m["kept"]]  # the first epoch with the best dev score
        assert len(kept) == 1 and kept[0]["dev_accuracy"] == best
        assert kept[0] == next(m for m in run.metrics if m["dev_accuracy"] == best)
        ids = list(run.predictions.values_list("speaker_instance_id", flat=True))
        assert sorted(ids) == sorted(dev)  # one prediction per instance, no more
        assert run.done_calls == run.total_calls > len(dev)
    leopard = Run.objects.get(method="leopard")
    assert leopard.params["init_from"] == protonet.pk
    assert leopard.params["config"]["lr"] == 1e-5  # the paper's LEOPARD rate by default
    assert "epoch 2: train loss" in out and "dev accuracy" in out

    # Beside the LLM runs: the run page with its curve, the API, the report.
    from accounts.services import user_create_with_role

    user = user_create_with_role(username="r", password="pw-r-1234!", role="researcher")
    client = APIClient()
    client.force_login(user)
    page = client.get(reverse("modeling:run-detail", args=[protonet.pk])).content.decode()
    assert "Training curve" in page and 'data-testid="epochs"' in page
    chart_url = reverse("reports:run-training-chart", args=[protonet.pk, "loss", "svg"])
    assert chart_url in page
    chart = client.get(chart_url)
    assert chart.status_code == 200 and chart["Content-Type"] == "image/svg+xml"
    assert b"Training loss by epoch" in chart.content
    png = client.get(reverse("reports:run-training-chart", args=[protonet.pk, "accuracy", "png"]))
    assert png.content.startswith(b"\x89PNG")
    body = client.get(reverse("modeling-run-detail", args=[protonet.pk])).json()
    assert body["kind"] == "trained" and len(body["metrics"]) == 2
    report = client.get(reverse("reports:report", args=["tom-in-amc"])).content.decode()
    for run in Run.objects.all():
        assert f"#{run.pk} {run.name}" in report


def test_queued_baselines_go_to_the_gpu_queue_and_its_task_runs_them(
    movies, tiny_encoder, researcher, rater, client, django_capture_on_commit_callbacks
):
    from modeling.runs.tasks import train_baseline_task

    purge_queues()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("train_baseline", "majority", "--background")
    client.force_login(researcher)
    form = {
        "method": "protonet", "benchmark": "tom-in-amc", "train_split": "train",
        "select_split": "dev", "eval_split": "dev", "encoder": str(tiny_encoder),
        "epochs": "1", "seed": "2", "device": "cpu",
    }  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("modeling:baseline-run-new"), form)
    majority, protonet = Run.objects.order_by("pk")
    assert response.status_code == 302 and response["Location"].endswith(f"/runs/{protonet.pk}/")
    assert protonet.created_by == researcher and protonet.params["config"]["epochs"] == 1
    assert run_queue(protonet) == "gpu"
    assert drain_queue("gpu") == [
        ("modeling.tasks.train_baseline", [majority.pk]),
        ("modeling.tasks.train_baseline", [protonet.pk]),
    ]
    assert drain_queue("default") == []

    assert train_baseline_task(majority.pk) == Run.Status.SUCCEEDED  # what the worker runs
    assert majority.predictions.count() == len(_dev_instances(movies))

    refused = client.post(reverse("modeling:baseline-run-new"), {**form, "encoder": "/nowhere"})
    assert refused.status_code == 200 and b"does not exist" in refused.content
    assert Run.objects.count() == 2
    client.force_login(rater)
    assert client.get(reverse("modeling:baseline-run-new")).status_code == 403


def test_bad_settings_are_refused_with_what_is_wrong(movies, tiny_encoder, tmp_path):
    with pytest.raises(CommandError, match="no encoder"):
        call_command("train_baseline", "protonet")
    with pytest.raises(CommandError, match="does not exist"):
        call_command("train_baseline", "mtl", "--encoder", str(tmp_path / "nowhere"))
    with pytest.raises(CommandError, match="unknown baseline parameter 'windw'"):
        call_command("train_baseline", "mtl", "--encoder", str(tiny_encoder), "--param", "windw=3")
    with pytest.raises(CommandError, match="no tom-in-amc work in split 'test'"):
        call_command("train_baseline", "majority", "--eval-split", "test")
    with pytest.raises(CommandError, match="not a ProtoNet run"):
        call_command(
            "train_baseline", "leopard", "--encoder", str(tiny_encoder), "--init-from", "999"
        )
    with pytest.raises(CommandError, match="cuda"):
        call_command("train_baseline", "mtl", "--encoder", str(tiny_encoder), "--device", "tpu")
    assert not Run.objects.exists()
    leopard = BaselineConfig.for_method("leopard")
    assert (leopard.lr, leopard.update_every, leopard.epochs) == (1e-5, 1, 10)
    paper = BaselineConfig.for_method("protonet")
    assert (paper.max_length, paper.attention_window, paper.batch_size, paper.lr) == (
        2000, 256, 8, 2e-5,
    )  # fmt: skip
