"""Prompt-token estimates for the run preview, with the backend's own tokenizer when known.

A character heuristic (``ChatRequest.estimated_prompt_tokens``, ~4 characters a token)
was 57% over what a run really used on a DynToM preview (35,627 vs 22,627 tokens).
Counting with the model's tokenizer is exact up to the server's chat formatting:

- transformers backend: the tokenizer in ``Backend.model_path``, through its chat
  template when it has one (the text the backend itself would feed the model);
- OpenAI-compatible backend: ``Backend.options["tokenizer"]``, a local directory a
  transformers tokenizer loads from or a ``tokenizer.json`` file, when set. The server
  wraps each message in its own chat markup, so a few tokens per message are added
  (the same 4 the heuristic adds);
- otherwise, or when that tokenizer cannot be loaded, the heuristic.

Only local files are read (``local_files_only``): nothing is downloaded here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from .base import BackendConfig, ChatRequest

logger = logging.getLogger(__name__)

HEURISTIC = "about 4 characters a token"
# Chat markup a server puts around each message (role, separators), not in the text.
TOKENS_PER_MESSAGE = 4


@dataclass(frozen=True)
class PromptTokenCounter:
    """Counts the prompt tokens of requests; ``method`` says how, for the page."""

    method: str
    count_many: Callable[[Sequence[ChatRequest]], list[int]]
    exact: bool = False  # False: the character heuristic

    def count(self, requests: Sequence[ChatRequest]) -> int:
        return sum(self.count_many(requests))


def _heuristic(note: str = "") -> PromptTokenCounter:
    method = f"{HEURISTIC}{f'; {note}' if note else ''}"
    return PromptTokenCounter(
        method=method, count_many=lambda rs: [r.estimated_prompt_tokens() for r in rs]
    )


@lru_cache(maxsize=4)
def _load(path: str) -> Any:
    """A tokenizer from a local directory (transformers) or a ``tokenizer.json`` file.

    Cached: a preview loads it once per process, not once per click.
    """
    source = Path(path).expanduser()
    if source.is_file():
        from tokenizers import Tokenizer

        return Tokenizer.from_file(str(source))
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(source), local_files_only=True)


def _count_transformers(tokenizer: Any, requests: Sequence[ChatRequest]) -> list[int]:
    from .transformers_backend import TransformersChatBackend

    # The same text and special-token choice the backend uses to generate; one batch
    # call (the choice depends only on the tokenizer having a chat template).
    rendered = [TransformersChatBackend.chat_text(tokenizer, r) for r in requests]
    if not rendered:
        return []
    texts = [text for text, _ in rendered]
    ids = tokenizer(texts, add_special_tokens=rendered[0][1])["input_ids"]
    return [len(i) for i in ids]


def _count_messages(tokenizer: Any, requests: Sequence[ChatRequest]) -> list[int]:
    def tokens(text: str) -> int:
        if hasattr(tokenizer, "encode_batch"):  # a bare ``tokenizers.Tokenizer``
            return len(tokenizer.encode(text, add_special_tokens=False).ids)
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    return [
        sum(tokens(content) + TOKENS_PER_MESSAGE for _, content in r.messages) for r in requests
    ]


def prompt_token_counter(*, backend: BackendConfig) -> PromptTokenCounter:
    """The best prompt-token counter this backend row allows (see the module docstring)."""
    kind = backend.kind
    if kind == "transformers":
        path, where = backend.model_path, "the model's tokenizer"
    else:
        path, where = str((backend.options or {}).get("tokenizer") or ""), "tokenizer"
    if not path:
        return _heuristic()
    try:
        tokenizer = _load(path)
    except Exception as exc:  # missing files, unknown format: the preview still works
        logger.warning("%s: cannot load tokenizer %s: %s", backend.name, path, exc)
        return _heuristic(f"the tokenizer at {path} could not be loaded")
    name = Path(path).name or path
    if kind == "transformers":
        return PromptTokenCounter(
            method=f"{where} ({name})",
            count_many=lambda rs: _count_transformers(tokenizer, rs),
            exact=True,
        )
    return PromptTokenCounter(
        method=f"{where} {name}, +{TOKENS_PER_MESSAGE} per message for chat markup",
        count_many=lambda rs: _count_messages(tokenizer, rs),
        exact=True,
    )
