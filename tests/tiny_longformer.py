"""A tiny randomly initialised Longformer and a tokenizer trained on the given texts.

Saved with ``save_pretrained`` to a directory, so tests and the benchmark script load it
through the same code path as a real model (``modeling.baselines.longformer_p
.load_encoder``); nothing is downloaded.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # Longformer's ids 0, 1, 2, 3, 4


def build_tiny_longformer(
    directory: Path,
    texts: Iterable[str],
    *,
    hidden: int = 32,
    layers: int = 2,
    heads: int = 2,
    window: int = 16,
    max_positions: int = 514,
    vocab_size: int = 600,
    seed: int = 0,
) -> Path:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LongformerConfig, LongformerModel, PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS)
    tokenizer.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        cls_token="<s>",
        sep_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        mask_token="<mask>",
    )
    directory.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(directory)
    torch.manual_seed(seed)
    config = LongformerConfig(
        vocab_size=len(fast),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=hidden * 2,
        attention_window=window,
        max_position_embeddings=max_positions,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        sep_token_id=2,
    )
    LongformerModel(config).save_pretrained(directory)
    return directory


def scene_texts(scenes) -> list[str]:
    """Every line's speaker and text of ``scenes`` (Scene rows' ``lines``)."""
    return [
        f"{line.get('title', '')} {line.get('text', '')}"
        for scene in scenes
        for line in scene.lines
    ]
