"""Fixtures for model runs: the scripted OpenAI-compatible server, backends, DynToM stages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.llm_server import LLMTestServer
from tests.module_rows import build_dyntom_stages
from tests.tiny_longformer import build_tiny_longformer

SCREENPLAYS = ("big_fish.fountain", "dead_poets_society.txt")


@pytest.fixture
def openai_backend(db, llm_server: LLMTestServer):
    from modeling.models import Backend

    return Backend.objects.create(
        name="local-test",
        kind=Backend.Kind.OPENAI,
        base_url=llm_server.base_url,
        default_model="test-model",
        max_concurrency=4,
        max_retries=3,
        timeout_s=5.0,
    )


@pytest.fixture
def dyntom_stages(db, shared_data: Path, module_rows):
    """The 24 real DynToM stages from ../shared/data/dyntom, imported; the module's shared
    rows where it shares them (tests/module_rows.py)."""
    from benchmarks.models import DynToMStage

    if not module_rows.shares("dyntom_stages"):
        build_dyntom_stages(shared_data)

    return DynToMStage.objects.select_related("work").order_by("work__key")


def prompt_keys(request_json: dict) -> list[str]:
    """The question keys a DynToM prompt asks about, in order."""
    prompt = request_json["messages"][-1]["content"]
    return [line[1 : line.index("]")] for line in prompt.splitlines() if line.startswith("[type_")]


def answer_all(letter: str = "a"):
    """A responder that gives the same letter to every question of the prompt."""

    def responder(request_json: dict) -> str:
        return json.dumps(dict.fromkeys(prompt_keys(request_json), letter))

    return responder


def gold_responder(stages, *, wrong: set[str] = frozenset()):
    """A responder that answers with the gold letters (precomputed here, since the server
    thread cannot see a test's uncommitted rows), except for the question keys in ``wrong``.
    """
    golds = {
        stage.characters_information: {q.key: q.gold_letter for q in stage.questions.all()}
        for stage in stages
    }

    def responder(request_json: dict) -> str:
        prompt = request_json["messages"][-1]["content"]
        gold = next(g for info, g in golds.items() if info in prompt)
        return json.dumps(
            {k: ("z" if k in wrong else letter) for k, letter in gold.items()}, indent=1
        )

    return responder


TINY_BERT_SENTENCES = [
    "Vautrin wants Eugene on his side so that his scheme goes ahead.",
    "Goriot misses his daughters and longs to see them.",
    "She believes the letter has already been read.",
    "The boarding house smelled of soup and old wood.",
]


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    """BERTScore's model: a random-init 2-layer BERT and a WordPiece tokenizer trained on
    ``TINY_BERT_SENTENCES``."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    path = tmp_path_factory.mktemp("tiny-bert")
    wordpiece = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wordpiece.normalizer = normalizers.BertNormalizer(lowercase=True)
    wordpiece.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    wordpiece.train_from_iterator(
        TINY_BERT_SENTENCES, trainers.WordPieceTrainer(vocab_size=300, special_tokens=specials)
    )
    cls, sep = wordpiece.token_to_id("[CLS]"), wordpiece.token_to_id("[SEP]")
    wordpiece.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    PreTrainedTokenizerFast(
        tokenizer_object=wordpiece,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=64,
    ).save_pretrained(path)
    config = BertConfig(
        vocab_size=wordpiece.get_vocab_size(),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    BertModel(config).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_encoder(tmp_path_factory, shared_data: Path) -> Path:
    """A tiny Longformer whose tokenizer is trained on the two screenplays' text.

    Torch runs on one thread in the tests: on the shared 2-core machines, OpenMP threads
    spinning against other jobs made the tiny models' steps many times slower.
    """
    import torch

    torch.set_num_threads(1)
    texts = []
    for name in SCREENPLAYS:
        text = (shared_data / "screenplays" / name).read_text(encoding="utf-8", errors="replace")
        texts += [line.strip() for line in text.splitlines() if line.strip()]
    return build_tiny_longformer(tmp_path_factory.mktemp("tiny-longformer"), texts)


@pytest.fixture
def movies(db, shared_data: Path, tmp_path, settings):
    """Big Fish (train split) and Dead Poets Society (dev), imported from the screenplays;
    baseline checkpoints go to a temporary directory."""
    settings.TOMLAB_BASELINE_CHECKPOINT_DIR = tmp_path / "checkpoints"
    for name, split in zip(SCREENPLAYS, ("train", "dev"), strict=True):
        call_command(
            "import_benchmark",
            "screenplay",
            str(shared_data / "screenplays" / name),
            "--split",
            split,
            verbosity=0,
        )
    from benchmarks.models import Work

    return {w.split: w for w in Work.objects.filter(benchmark="tom-in-amc")}
