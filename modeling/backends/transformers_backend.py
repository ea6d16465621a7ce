"""Local causal LMs through Hugging Face transformers, generated in batches on one device.

The backend serves the one model stored in ``Backend.model_path`` (a local directory;
nothing is downloaded: ``HF_HUB_OFFLINE`` is set in settings and every load passes
``local_files_only``); ``ChatRequest.model`` is only a label. The weights load on first
use and stay until :meth:`close`.

``Backend.options`` keys, all optional:

- ``device``: ``"cuda"``, ``"cuda:1"``, ``"cpu"``…; default CUDA when available.
- ``dtype``: ``"bfloat16"``, ``"float16"``, ``"float32"`` or ``"auto"`` (the checkpoint's);
  default ``"auto"`` on CUDA and ``"float32"`` on CPU, where half precision is slow.
- ``batch_size``: prompts per ``generate`` call (default 8). A batch that runs out of
  memory is split in halves and retried.
- ``max_new_tokens``: used when a request has no ``max_tokens`` (default 256).
- ``max_input_tokens``: keep only the last N prompt tokens. Without it, a prompt that
  does not fit the model's context (``max_position_embeddings``) is an error for that
  request rather than a silently shortened prompt, since a shortened prompt changes the
  experiment. Truncation is from the left because DynToM puts the questions and the
  answer format at the end.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LogitsProcessor,
    LogitsProcessorList,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from .base import (
    BackendConfig,
    BackendConfigError,
    BackendError,
    ChatBackend,
    ChatRequest,
    ChatResult,
)

logger = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 8
DEFAULT_MAX_NEW_TOKENS = 256
_DTYPES = {"bfloat16", "float16", "float32", "auto"}

Outcome = tuple[ChatRequest, ChatResult | BackendError]


def request_seed(request: ChatRequest) -> int:
    """A 63-bit seed from the request's ``seed`` parameter and its sample index.

    Hashing (rather than adding) keeps ``seed=1, sample 0`` and ``seed=0, sample 1`` apart.
    """
    base = request.param_dict.get("seed", 0)
    digest = hashlib.sha256(f"{base}:{request.sample_index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & (2**63 - 1)


class _SeededSampler(LogitsProcessor):
    """Samples every row with its own generator and forces that token.

    ``generate(do_sample=True)`` draws the whole batch from the global RNG, so a request's
    tokens would depend on the requests that happened to share its batch. Here each row
    has a generator seeded from its request, and generate runs greedily over logits in
    which only the drawn token is finite. Temperature and top-p are applied the way
    transformers' own warpers apply them.
    """

    def __init__(self, seeds: list[int], temperature: float, top_p: float) -> None:
        self.seeds = seeds
        self.temperature = temperature
        self.top_p = top_p
        self._generators: list[torch.Generator] | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.Tensor:
        if self._generators is None:
            self._generators = [
                torch.Generator(device=scores.device).manual_seed(seed) for seed in self.seeds
            ]
        probs = torch.softmax(scores.float() / self.temperature, dim=-1)
        if self.top_p < 1.0:
            ordered, order = probs.sort(dim=-1, descending=True)
            # Drop a token once the more likely ones already cover top_p (the first stays).
            ordered = ordered.masked_fill(ordered.cumsum(dim=-1) - ordered >= self.top_p, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, order, ordered)
        chosen = torch.cat(
            [
                torch.multinomial(row, 1, generator=generator)
                for row, generator in zip(probs, self._generators, strict=True)
            ]
        )
        forced = torch.full_like(scores, float("-inf"))
        return forced.scatter(1, chosen.unsqueeze(1), 0.0)


@dataclass(frozen=True)
class _Sampling:
    """What must be equal for requests to share one ``generate`` call."""

    temperature: float
    top_p: float
    max_new_tokens: int
    stop: tuple[str, ...]


@dataclass
class _Prepared:
    request: ChatRequest
    input_ids: list[int]
    truncated: int


class TransformersChatBackend(ChatBackend):
    """One model per backend object, loaded lazily; calls are serialised by a lock.

    Concurrent ``generate`` calls on one device would only compete for its memory, so
    throughput comes from batching in :meth:`complete_many` instead of threads.
    """

    def __init__(self, config: BackendConfig) -> None:
        super().__init__(config)
        if not config.model_path:
            raise BackendConfigError(f"backend {self.name}: no model_path is set")
        self.model_path = Path(config.model_path).expanduser()
        if not self.model_path.is_dir():
            raise BackendConfigError(
                f"backend {self.name}: model path {self.model_path} is not a directory"
            )
        options = config.get_options()
        try:
            self.device = torch.device(
                options.get("device") or ("cuda" if torch.cuda.is_available() else "cpu")
            )
        except (RuntimeError, TypeError) as exc:
            raise BackendConfigError(f"backend {self.name}: bad device option: {exc}") from exc
        dtype = options.get("dtype") or ("auto" if self.device.type == "cuda" else "float32")
        if dtype not in _DTYPES:
            raise BackendConfigError(
                f"backend {self.name}: dtype {dtype!r} is not one of {', '.join(sorted(_DTYPES))}"
            )
        self.dtype: torch.dtype | str = dtype if dtype == "auto" else getattr(torch, dtype)
        self.batch_size = self._positive_int(options, "batch_size", DEFAULT_BATCH_SIZE)
        self.max_new_tokens = self._positive_int(options, "max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
        self.max_input_tokens = self._positive_int(options, "max_input_tokens", None)
        # Reentrant: render_prompt loads under the lock that generation also holds.
        self._lock = threading.RLock()
        self._model: PreTrainedModel | None = None
        self._tokenizer: PreTrainedTokenizerBase | None = None
        self._eos_ids: set[int] = set()
        self._context: int | None = None

    def _positive_int(self, options: dict[str, Any], key: str, default: int | None) -> int | None:
        value = options.get(key, default)
        if value is None:
            return None
        try:
            number = int(value)
        except (TypeError, ValueError):
            number = 0
        if number < 1:
            raise BackendConfigError(
                f"backend {self.name}: option {key} must be a positive integer, not {value!r}"
            )
        return number

    # Loading ------------------------------------------------------------------------

    def _loaded(self) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
        with self._lock:
            if self._model is None or self._tokenizer is None:
                self._load()
            return self._model, self._tokenizer

    def _load(self) -> None:
        started = time.monotonic()
        try:
            tokenizer = AutoTokenizer.from_pretrained(self.model_path, local_files_only=True)
            model = AutoModelForCausalLM.from_pretrained(
                self.model_path, local_files_only=True, dtype=self.dtype
            )
            model.to(self.device)
        except Exception as exc:
            # Loading fails in many ways (missing files, unknown architecture, corrupt
            # weights, no memory); for the run they all mean "this row cannot work".
            raise BackendConfigError(
                f"backend {self.name}: cannot load a model from {self.model_path}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        model.eval()
        if tokenizer.pad_token is None:
            # Padded positions are masked out, so any existing token will do; adding a
            # new one would mean resizing the embeddings.
            tokenizer.pad_token = (
                tokenizer.eos_token or tokenizer.unk_token or tokenizer.convert_ids_to_tokens(0)
            )
        eos = model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if tokenizer.eos_token_id is not None:
            eos_ids.add(tokenizer.eos_token_id)
        text_config = model.config.get_text_config()
        self._context = getattr(text_config, "max_position_embeddings", None) or getattr(
            text_config, "n_positions", None
        )
        self._eos_ids = eos_ids
        self._tokenizer = tokenizer
        self._model = model
        logger.info(
            "%s: loaded %s on %s in %.1fs",
            self.name,
            self.model_path,
            self.device,
            time.monotonic() - started,
        )

    def close(self) -> None:
        """Drop the weights; the next call loads them again."""
        with self._lock:
            self._model = None
            self._tokenizer = None
            gc.collect()
            if self.device.type == "cuda":
                torch.cuda.empty_cache()

    # Prompts ------------------------------------------------------------------------

    def render_prompt(self, request: ChatRequest) -> str:
        """The text the model is given: its chat template, else a plain transcript."""
        _, tokenizer = self._loaded()
        return self.chat_text(tokenizer, request)[0]

    @staticmethod
    def chat_text(tokenizer: PreTrainedTokenizerBase, request: ChatRequest) -> tuple[str, bool]:
        """(prompt, whether the tokenizer should add its special tokens)."""
        if tokenizer.chat_template:
            text = tokenizer.apply_chat_template(
                request.message_dicts, tokenize=False, add_generation_prompt=True
            )
            # Templates write their own BOS; adding another would double it.
            return text, False
        lines = [f"{role}: {content}" for role, content in request.messages]
        return "\n".join([*lines, "assistant:"]), True

    def _prepare(self, tokenizer: PreTrainedTokenizerBase, request: ChatRequest) -> _Prepared:
        text, add_special = self.chat_text(tokenizer, request)
        ids = tokenizer(text, add_special_tokens=add_special)["input_ids"]
        truncated = 0
        if self.max_input_tokens is not None and len(ids) > self.max_input_tokens:
            truncated = len(ids) - self.max_input_tokens
            ids = ids[truncated:]
        elif self._context is not None:
            wanted = len(ids) + self._sampling(request).max_new_tokens
            if wanted > self._context:
                raise BackendError(
                    f"{self.name}: prompt of {len(ids)} tokens plus "
                    f"{wanted - len(ids)} new ones exceeds the model's context of "
                    f"{self._context}; set options.max_input_tokens to truncate from the left"
                )
        return _Prepared(request=request, input_ids=ids, truncated=truncated)

    def _sampling(self, request: ChatRequest) -> _Sampling:
        params = request.param_dict
        stop = params.get("stop") or ()
        return _Sampling(
            temperature=float(params.get("temperature") or 0.0),
            top_p=float(params.get("top_p") or 1.0),
            max_new_tokens=int(params.get("max_tokens") or self.max_new_tokens),
            stop=(stop,) if isinstance(stop, str) else tuple(stop),
        )

    # Generation ---------------------------------------------------------------------

    def complete(self, request: ChatRequest) -> ChatResult:
        (_, outcome), *_ = self.complete_many([request])
        if isinstance(outcome, BackendError):
            raise outcome
        return outcome

    def complete_many(self, requests: Iterable[ChatRequest]) -> Iterator[Outcome]:
        """Yield (request, result or error) batch by batch.

        Requests are grouped by their sampling settings (one ``generate`` call takes one
        set) and sorted by length inside a group so batches carry little padding.
        Loading errors raise :class:`BackendConfigError`; anything that goes wrong with
        one prompt or one batch is yielded as a :class:`BackendError` for those requests.
        """
        model, tokenizer = self._loaded()
        groups: dict[_Sampling, list[_Prepared]] = {}
        for request in requests:
            try:
                prepared = self._prepare(tokenizer, request)
            except BackendError as exc:
                yield request, exc
                continue
            except Exception as exc:  # a chat template that rejects the messages, say
                yield request, BackendError(f"{self.name}: cannot build the prompt: {exc}")
                continue
            groups.setdefault(self._sampling(request), []).append(prepared)
        for sampling, prepared in groups.items():
            prepared.sort(key=lambda p: len(p.input_ids))
            for start in range(0, len(prepared), self.batch_size):
                batch = prepared[start : start + self.batch_size]
                with self._lock:
                    outcomes = self._run_batch(model, tokenizer, batch, sampling)
                # Yielded outside the lock: the caller writes to the database in between.
                yield from outcomes

    def _run_batch(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        batch: list[_Prepared],
        sampling: _Sampling,
    ) -> list[Outcome]:
        try:
            results = self._generate(model, tokenizer, batch, sampling)
            return [(p.request, r) for p, r in zip(batch, results, strict=True)]
        except torch.OutOfMemoryError:
            self._free_cache()
            if len(batch) > 1:
                half = len(batch) // 2
                logger.info("%s: out of memory for %d prompts; splitting", self.name, len(batch))
                return self._run_batch(model, tokenizer, batch[:half], sampling) + self._run_batch(
                    model, tokenizer, batch[half:], sampling
                )
            error = BackendError(
                f"{self.name}: out of memory for a {len(batch[0].input_ids)}-token prompt"
            )
        except Exception as exc:
            # One bad batch (NaN logits in half precision, a CUDA error…) must fail its
            # own requests, not the whole run.
            logger.exception("%s: generation failed", self.name)
            error = BackendError(f"{self.name}: generation failed: {type(exc).__name__}: {exc}")
        return [(p.request, error) for p in batch]

    def _free_cache(self) -> None:
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def _generate(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        batch: list[_Prepared],
        sampling: _Sampling,
    ) -> list[ChatResult]:
        pad_id = tokenizer.pad_token_id
        width = max(len(p.input_ids) for p in batch)
        # Left padding, so every row's next token comes right after its own prompt.
        input_ids = torch.tensor(
            [[pad_id] * (width - len(p.input_ids)) + p.input_ids for p in batch],
            device=self.device,
        )
        attention_mask = torch.tensor(
            [[0] * (width - len(p.input_ids)) + [1] * len(p.input_ids) for p in batch],
            device=self.device,
        )
        processors = LogitsProcessorList()
        seeds = [request_seed(p.request) for p in batch]
        if sampling.temperature > 0:
            processors.append(_SeededSampler(seeds, sampling.temperature, sampling.top_p))
        started = time.monotonic()
        with torch.inference_mode():
            output = model.generate(
                input_ids=input_ids,
                attention_mask=attention_mask,
                max_new_tokens=sampling.max_new_tokens,
                # Sampling happens in _SeededSampler; unset the checkpoint's own defaults.
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                logits_processor=processors,
                pad_token_id=pad_id,
                eos_token_id=sorted(self._eos_ids) or None,
                stop_strings=list(sampling.stop) or None,
                tokenizer=tokenizer if sampling.stop else None,
            )
        batch_ms = int((time.monotonic() - started) * 1000)
        generated = output[:, width:].tolist()
        results = []
        for prepared, tokens, seed in zip(batch, generated, seeds, strict=True):
            text, count, finish = self._decode(tokenizer, tokens, sampling, pad_id)
            extra: dict[str, Any] = {"batch_size": len(batch), "batch_latency_ms": batch_ms}
            if sampling.temperature > 0:
                extra["seed"] = seed
            if prepared.truncated:
                extra["truncated_prompt_tokens"] = prepared.truncated
            results.append(
                ChatResult(
                    text=text,
                    prompt_tokens=len(prepared.input_ids),
                    completion_tokens=count,
                    # Each request's share of the batch, so a run's latencies sum to
                    # the time it really took; the whole batch's time is in extra.
                    latency_ms=batch_ms // len(batch),
                    finish_reason=finish,
                    extra=extra,
                )
            )
        return results

    def _decode(
        self,
        tokenizer: PreTrainedTokenizerBase,
        tokens: list[int],
        sampling: _Sampling,
        pad_id: int,
    ) -> tuple[str, int, str]:
        """(text, generated tokens, finish reason) for one row of new tokens.

        A row that finished early is filled with ``pad_id`` (often the EOS token itself)
        until the longest row is done; those fillers are not generated tokens.
        """
        end = next(
            (i for i, t in enumerate(tokens) if t in self._eos_ids or t == pad_id), len(tokens)
        )
        text = tokenizer.decode(tokens[:end], skip_special_tokens=True)
        hits = [text.find(s) for s in sampling.stop if s and s in text]
        if hits:
            # Like OpenAI, the stop sequence itself is not part of the reply.
            return text[: min(hits)], end, "stop"
        if end < len(tokens):
            return text, end + (tokens[end] in self._eos_ids), "stop"
        return text, end, "length"
