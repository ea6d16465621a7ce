"""How close a generative CharToM-QA answer is to the reference answer: RougeL and BERTScore.

CharToM-QA Appendix E (Table 7) sets two conventional metrics beside the LLM judge's
bonus point coverage: RougeL (token overlap, ``metrics.text_overlap``) and
BERTScore (Zhang et al. 2020, "BERTScore: Evaluating Text Generation with BERT").

BERTScore is written here rather than taken from the ``bert-score`` package: its last
release (0.3.13, 2023) calls tokenizer methods transformers 5 removed
(``build_inputs_with_special_tokens`` on an empty sentence fails). The method is the
paper's, without idf weighting or baseline rescaling: every token of both texts is
embedded by the model's layer ``num_layers`` (0 = the last); each candidate token is
matched greedily to its most similar reference token by cosine similarity and the
similarities averaged (precision), each reference token likewise to the candidate
(recall); F1 is their harmonic mean. Special tokens ([CLS], [SEP]) may be matched but
are not averaged over, as in the authors' implementation; on a tiny test model our
numbers equal ``bert_score.BERTScorer``'s (checked by hand, 0.3.13). A text with no
token scores 0. The model is a local directory (``settings.TOMLAB_BERTSCORE_MODEL``);
nothing is downloaded (``HF_HUB_OFFLINE`` is set in settings and every load passes
``local_files_only``).

:func:`predictions_text_similarity` stores ``rouge_l`` and ``bertscore_f1`` into each
generative prediction's ``details``; the Celery task ``modeling.score_text_similarity``
(sent to the ``gpu`` queue) and the ``score_text_similarity`` command call it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings

from benchmarks.models import Benchmark
from common.tasks import task_send_on_commit

from ...models import Prediction, Run

# The benchmark's one reading of a response: the judge's truncation, its predictions.
from .predictions import generative_predictions, prediction_details_merge
from .reading import truncate_response

logger = logging.getLogger(__name__)

BATCH_SIZE = 32
CHUNK = 256


@dataclass(frozen=True)
class _Encoder:
    model: Any
    tokenizer: Any
    device: Any
    max_length: int


@lru_cache(maxsize=2)
def _encoder(model_path: str) -> _Encoder:
    # Imported here: torch and transformers take seconds to import, and only a worker
    # that scores needs them.
    import torch
    from transformers import AutoModel, AutoTokenizer

    if not Path(model_path).is_dir():
        raise ValueError(f"BERTScore model directory {model_path!r} does not exist")
    tokenizer = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
    model = AutoModel.from_pretrained(model_path, local_files_only=True)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(device).eval()
    limits = [
        n
        for n in (
            getattr(tokenizer, "model_max_length", None),
            getattr(model.config, "max_position_embeddings", None),
        )
        if isinstance(n, int) and 0 < n < 1_000_000
    ]
    return _Encoder(model, tokenizer, device, min(limits) if limits else 512)


def _embed(encoder: _Encoder, texts: Sequence[str], layer: int) -> list[tuple[Any, Any]]:
    """Per text, its tokens' L2-normalised embeddings (n x d) and which are not special."""
    import torch

    batch = encoder.tokenizer(
        list(texts),
        padding=True,
        truncation=True,
        max_length=encoder.max_length,
        return_special_tokens_mask=True,
        return_tensors="pt",
    )
    ordinary = batch.pop("special_tokens_mask") == 0
    present = batch["attention_mask"] == 1
    batch = {name: value.to(encoder.device) for name, value in batch.items()}
    with torch.inference_mode():
        output = encoder.model(**batch, output_hidden_states=True)
    hidden = output.hidden_states[layer] if layer else output.last_hidden_state
    hidden = torch.nn.functional.normalize(hidden.float(), dim=-1).cpu()
    return [(hidden[i][present[i]], ordinary[i][present[i]]) for i in range(len(texts))]


def _prf(reference: tuple[Any, Any], candidate: tuple[Any, Any]) -> tuple[float, float, float]:
    # As in the authors' implementation (bert_score.utils.greedy_cos_idf), special
    # tokens may be a token's best match but are not averaged over themselves.
    ref, ref_ordinary = reference
    cand, cand_ordinary = candidate
    if not bool(ref_ordinary.any()) or not bool(cand_ordinary.any()):
        return 0.0, 0.0, 0.0
    similarity = cand @ ref.T  # cosine: both sides are unit vectors
    precision = float(similarity.max(dim=1).values[cand_ordinary].mean())
    recall = float(similarity.max(dim=0).values[ref_ordinary].mean())
    if precision + recall <= 0:
        return precision, recall, 0.0
    return precision, recall, 2 * precision * recall / (precision + recall)


def bertscore(
    pairs: Sequence[tuple[str, str]], *, model_path: str, num_layers: int = 0
) -> list[tuple[float, float, float]]:
    """``(precision, recall, F1)`` per ``(reference, candidate)`` pair.

    ``num_layers``: the layer whose output embeds the tokens (1 = the first
    transformer layer); 0 takes the last. Raises ``ValueError`` for a missing model
    directory or a layer the model does not have.
    """
    encoder = _encoder(str(model_path))
    layers = int(getattr(encoder.model.config, "num_hidden_layers", 0) or 0)
    if num_layers < 0 or (layers and num_layers > layers):
        raise ValueError(f"num_layers must lie in 0..{layers}, got {num_layers}")
    scores: list[tuple[float, float, float]] = []
    for start in range(0, len(pairs), BATCH_SIZE):
        chunk = pairs[start : start + BATCH_SIZE]
        references = _embed(encoder, [r for r, _ in chunk], num_layers)
        candidates = _embed(encoder, [c for _, c in chunk], num_layers)
        scores += [_prf(r, c) for r, c in zip(references, candidates, strict=True)]
    return scores


def bertscore_f1(
    pairs: list[tuple[str, str]], *, model_path: str, num_layers: int = 0
) -> list[float]:
    """BERTScore F1 per ``(reference, candidate)`` pair (see :func:`bertscore`)."""
    return [f1 for _, _, f1 in bertscore(pairs, model_path=model_path, num_layers=num_layers)]


# --- scoring stored predictions ------------------------------------------------------------


def _chunks(run_ids: Sequence[int]) -> Iterator[list[int]]:
    ids = list(generative_predictions(run_ids).order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(ids), CHUNK):
        yield ids[start : start + CHUNK]


def bertscore_model() -> str:
    """The configured BERTScore model directory; "" when BERTScore is not computed."""
    return str(getattr(settings, "TOMLAB_BERTSCORE_MODEL", "") or "")


def predictions_text_similarity(*, run_ids: list[int], bertscore: bool = True) -> int:
    """Score every generative prediction of ``run_ids`` against its item's reference answer.

    The response is scored as the judge sees it: cut to the evaluator's length
    (:func:`~modeling.pipelines.chartom_qa.truncate_response`). Stores
    ``details["rouge_l"]`` and, when ``bertscore`` and ``settings.TOMLAB_BERTSCORE_MODEL`` are set,
    ``details["bertscore_f1"]`` with ``details["bertscore_model"]`` (the model
    directory's name) and ``details["bertscore_layers"]``. Running it again rewrites
    the same numbers. Returns how many predictions were scored. Raises ``ValueError``
    for an id that is not a CharToM-QA run (nothing is written then).
    """
    # Imported here: the metric module imports rouge-score (and nltk) on first use.
    from metrics.text_overlap import rouge_l

    wanted = sorted(set(run_ids))
    found = set(
        Run.objects.filter(pk__in=wanted, benchmark=Benchmark.CHARTOM_QA).values_list(
            "pk", flat=True
        )
    )
    missing = [i for i in wanted if i not in found]
    if missing:
        raise ValueError(f"no CharToM-QA run with id {', '.join(map(str, missing))}")
    model_path = bertscore_model() if bertscore else ""
    layers = int(getattr(settings, "TOMLAB_BERTSCORE_LAYERS", 0) or 0)
    scored = 0
    for ids in _chunks(wanted):
        rows = list(
            Prediction.objects.filter(pk__in=ids)
            .select_related("call", "qa_item")
            .only("pk", "raw_output", "call__raw_output", "qa_item__answer")
            .order_by("pk")
        )
        pairs = [
            (p.qa_item.answer, truncate_response(p.reply.strip(), p.qa_item.answer)) for p in rows
        ]
        values: dict[int, dict[str, Any]] = {
            p.pk: {"rouge_l": rouge_l(reference, candidate)}
            for p, (reference, candidate) in zip(rows, pairs, strict=True)
        }
        if model_path:
            f1s = bertscore_f1(pairs, model_path=model_path, num_layers=layers)
            for p, f1 in zip(rows, f1s, strict=True):
                values[p.pk].update(
                    bertscore_f1=f1,
                    bertscore_model=Path(model_path).name,
                    bertscore_layers=layers,
                )
        scored += prediction_details_merge(values)
    logger.info("text similarity: %s prediction(s) of run(s) %s scored", scored, wanted)
    return scored


TEXT_SIMILARITY_QUEUE = "gpu"
TEXT_SIMILARITY_TASK_NAME = "modeling.score_text_similarity"


def text_similarity_enqueue(*, run_ids: list[int]) -> None:
    """Score ``run_ids`` on a GPU worker once the current transaction commits."""
    task_send_on_commit(
        TEXT_SIMILARITY_TASK_NAME, (sorted(set(run_ids)),), queue=TEXT_SIMILARITY_QUEUE
    )
