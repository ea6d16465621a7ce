"""Longformer-P, the base learner of ToM-in-AMC (Appendix B.1, after Sang et al. 2022b).

A scene becomes one token sequence: every line is ``[P_x] utterance [SPLIT]`` for a
masked speaker, ``name: utterance [SPLIT]`` for another speaker and ``narration
[SPLIT]`` for a heading or an action line; a code named inside any text (``P0 drives``)
becomes its ``[P_x]`` token too. The Longformer encodes the sequence into ``H``; each
masked character ``P_x`` gets a mask ``M_x`` over the tokens of its own utterances and
mentions, and its embedding is ``H^T softmax(A restricted to M_x)``, with ``A`` a learned
attention score per token (:func:`attentive_pool`).

The encoder is loaded from a local directory only (``local_files_only``; settings set
``HF_HUB_OFFLINE``): nothing is downloaded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from .data import Line, code_number

MAX_CODES = 20  # [P_0] … [P_19]; TVShowGuess scenes mask up to 6 speakers
SPLIT_TOKEN = "[SPLIT]"
SPEAKER_TOKENS = [f"[P_{i}]" for i in range(MAX_CODES)]
_CODE_IN_TEXT = re.compile(r"\bP(\d+)\b")


@dataclass(frozen=True)
class EncodedScene:
    ids: list[int]  # with the leading [CLS] and trailing [SEP]
    positions: dict[str, list[int]]  # code -> token positions of M_x


class SceneTokenizer:
    """Turns scenes into :class:`EncodedScene`s with a transformers tokenizer."""

    def __init__(self, tokenizer, *, max_length: int) -> None:
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.split_id = tokenizer.convert_tokens_to_ids(SPLIT_TOKEN)
        self.speaker_ids = tokenizer.convert_tokens_to_ids(SPEAKER_TOKENS)
        self.cls_id = _first_id(tokenizer, "cls_token_id", "bos_token_id")
        self.sep_id = _first_id(tokenizer, "sep_token_id", "eos_token_id")
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def encode(self, lines: list[Line]) -> EncodedScene:
        # One batched tokenizer call per scene: every text fragment at once.
        pieces: list[tuple[str, str | None]] = []  # (kind, payload): "text"/"code"/"split"
        owners: list[str | None] = []  # the code whose utterance each piece belongs to
        for line in lines:
            owner = None
            if line.kind == "dialog":
                if _is_code(line.speaker):
                    owner = line.speaker
                    pieces.append(("code", line.speaker))
                    owners.append(owner)
                elif line.speaker:
                    pieces.append(("text", f"{line.speaker}:"))
                    owners.append(None)
            start = 0
            for match in _CODE_IN_TEXT.finditer(line.text):
                pieces.append(("text", line.text[start : match.start()]))
                owners.append(owner)
                pieces.append(("code", f"P{match.group(1)}"))
                owners.append(owner)
                start = match.end()
            pieces.append(("text", line.text[start:]))
            owners.append(owner)
            pieces.append(("split", None))
            owners.append(owner)
        texts = [p for kind, p in pieces if kind == "text"]
        encoded = iter(
            self.tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
        )
        ids = [self.cls_id]
        positions: dict[str, list[int]] = {}
        limit = self.max_length - 1  # room for [SEP]
        for (kind, payload), owner in zip(pieces, owners, strict=True):
            if kind == "text":
                chunk = next(encoded)
            elif kind == "split":
                chunk = [self.split_id]
            else:
                chunk = [self.speaker_ids[min(code_number(payload), MAX_CODES - 1)]]
            chunk = chunk[: max(0, limit - len(ids))]
            mentioned = payload if kind == "code" else None
            for code in {owner, mentioned} - {None}:
                positions.setdefault(code, []).extend(range(len(ids), len(ids) + len(chunk)))
            ids.extend(chunk)
        ids.append(self.sep_id)
        return EncodedScene(ids=ids, positions=positions)


def _is_code(text: str) -> bool:
    try:
        code_number(text)
    except ValueError:
        return False
    return True


def _first_id(tokenizer, *names: str) -> int:
    for name in names:
        value = getattr(tokenizer, name, None)
        if value is not None:
            return value
    raise ValueError(f"the tokenizer has none of {', '.join(names)}")


@dataclass
class Batch:
    """Scenes padded into tensors, and one row per masked character to embed."""

    input_ids: torch.Tensor  # (B, L)
    attention_mask: torch.Tensor  # (B, L)
    owner: torch.Tensor  # (N,) the scene of each character row
    masks: torch.Tensor  # (N, L) bool, M_x

    def to(self, device: torch.device) -> Batch:
        return Batch(
            *(t.to(device) for t in (self.input_ids, self.attention_mask, self.owner, self.masks))
        )


def collate(scenes: list[EncodedScene], rows: list[tuple[int, str]], *, pad_id: int) -> Batch:
    """``rows`` are (scene index, code). A code with no token left (cut by the maximum
    length) is pooled over the [CLS] token, so it still gets an embedding."""
    length = max(len(s.ids) for s in scenes)
    input_ids = torch.full((len(scenes), length), pad_id, dtype=torch.long)
    attention = torch.zeros((len(scenes), length), dtype=torch.long)
    for i, scene in enumerate(scenes):
        input_ids[i, : len(scene.ids)] = torch.tensor(scene.ids)
        attention[i, : len(scene.ids)] = 1
    masks = torch.zeros((len(rows), length), dtype=torch.bool)
    for n, (i, code) in enumerate(rows):
        positions = scenes[i].positions.get(code) or [0]
        masks[n, positions] = True
    owner = torch.tensor([i for i, _ in rows], dtype=torch.long)
    return Batch(input_ids, attention, owner, masks)


def attentive_pool(
    hidden: torch.Tensor, scores: torch.Tensor, owner: torch.Tensor, masks: torch.Tensor
) -> torch.Tensor:
    """Character embeddings ``e_x = H^T softmax(A | M_x)`` (Appendix B.1).

    ``hidden`` (B, L, D), ``scores`` (B, L), ``owner`` (N,), ``masks`` (N, L) bool. The
    softmax runs over the masked positions only (the others get -inf, not 0 as a literal
    ``A * M_x`` would), so a character's embedding depends on its own tokens alone.
    """
    rows = torch.arange(owner.shape[0], device=owner.device)
    logits = scores[owner].float().masked_fill(~masks, float("-inf"))
    alpha = torch.softmax(logits, dim=-1).to(hidden.dtype)
    # Scatter the weights into one (B, N, L) tensor so one batched matmul pools every
    # row, instead of copying H once per character (N x L x D).
    weights = hidden.new_zeros(hidden.shape[0], owner.shape[0], hidden.shape[1])
    weights[owner, rows] = alpha
    return torch.bmm(weights, hidden)[owner, rows]


class LongformerP(nn.Module):
    """The encoder plus the attention scorer ``A``; ``forward`` gives (N, D) embeddings."""

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder
        self.attention = nn.Linear(encoder.config.hidden_size, 1)

    @property
    def dim(self) -> int:
        return self.encoder.config.hidden_size

    def forward(self, batch: Batch) -> torch.Tensor:
        global_attention = torch.zeros_like(batch.attention_mask)
        global_attention[:, 0] = 1  # [CLS] sees the whole scene, as in Longformer's tasks
        kwargs = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask}
        if getattr(self.encoder.config, "model_type", "") == "longformer":
            kwargs["global_attention_mask"] = global_attention
        hidden = self.encoder(**kwargs).last_hidden_state
        scores = self.attention(hidden).squeeze(-1)
        return attentive_pool(hidden, scores, batch.owner, batch.masks)


def load_encoder(
    path: str | Path, *, attention_window: int, max_length: int, gradient_checkpointing: bool
) -> tuple[SceneTokenizer, LongformerP]:
    """Tokenizer (with [P_x] and [SPLIT] added) and Longformer-P from a local directory."""
    from transformers import AutoModel, AutoTokenizer

    path = Path(path)
    if not path.is_dir():
        raise ValueError(
            f"encoder directory {str(path)!r} does not exist; set TOMLAB_BASELINE_ENCODER or "
            "--encoder to a local copy of e.g. allenai/longformer-base-4096"
        )
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    tokenizer.add_special_tokens(
        {"additional_special_tokens": [*SPEAKER_TOKENS, SPLIT_TOKEN]},
        replace_extra_special_tokens=False,
    )
    extra = {}
    config_type = _model_type(path)
    if config_type == "longformer":
        extra["attention_window"] = attention_window
    encoder = AutoModel.from_pretrained(path, local_files_only=True, **extra)
    encoder.resize_token_embeddings(len(tokenizer))
    positions = getattr(encoder.config, "max_position_embeddings", None)
    if positions:
        # RoBERTa-style position ids start after the padding index (2 slots).
        max_length = min(max_length, positions - 2)
    if gradient_checkpointing:
        # transformers 5 names it activation checkpointing (gradient_checkpointing_enable is
        # deprecated); non-reentrant, as torch recommends.
        encoder.activation_checkpointing_enable(
            activation_checkpointing_kwargs={"use_reentrant": False}
        )
    return SceneTokenizer(tokenizer, max_length=max_length), LongformerP(encoder)


def _model_type(path: Path) -> str:
    import json

    try:
        return json.loads((path / "config.json").read_text()).get("model_type", "")
    except (OSError, ValueError):
        return ""
