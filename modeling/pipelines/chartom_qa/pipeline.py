"""CharToM-QA on the run engine: generative QA, multiple choice and the LLM judge.

Four methods, each a run with its own template (``chartom-qa-<method>``):

* ``generative``: one prompt per item with the plot window of the run's context
  (``selection["context"]``: 0, 1000 or 2000 tokens, default 0) and the paper's length
  instruction. The reply is stored whole on the call; the prediction keeps the
  truncated text the judge will see, and the lengths the reports' ratios need. When
  the run ends, RougeL against the reference answer is stored on each prediction
  (and BERTScore is queued when ``TOMLAB_BERTSCORE_MODEL`` is set).
* ``multichoice``: the four choices in a per-item shuffled order, answered with an
  index; correct when it is the reference answer's.
* ``judge-bonus`` and ``judge-defects``: the judge, run by another backend over the
  responses of a generative run (``selection["run"]``). Each makes one call per
  response and writes no prediction of its own; when the judge run ends, its replies
  are read in both scoring modes (``reading``) and merged into the generative
  predictions' ``details``, where the reports read them. Running a judge again (or
  resuming it) merges again; nothing is added twice.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from benchmarks.models import Benchmark, QAItem
from modeling.models import Prediction, Run, RunCall

from ..base import CallUnit, ParsedItem, Pipeline
from .predictions import generative_predictions, prediction_details_merge
from .prompts import template_name
from .reading import (
    CONTEXTS,
    GENERATIVE,
    JUDGE_BONUS,
    JUDGE_DEFECTS,
    MULTICHOICE,
    bonus_judgement,
    choices_order,
    defects_judgement,
    read_context,
    read_response,
    score_pick,
    truncate_response,
)

logger = logging.getLogger(__name__)

JUDGE_METHODS = (JUDGE_BONUS, JUDGE_DEFECTS)


def context_of(selection: dict[str, Any]) -> int:
    """The run's plot window in tokens (``selection["context"]``, default 0)."""
    try:
        return read_context(selection.get("context", 0))
    except ValueError as exc:
        raise ValueError(f"selection context: {exc}") from None


def plot_window(item: QAItem, context: int) -> str | None:
    """The item's story plot for ``context`` tokens (None when the item has none)."""
    return getattr(item, f"context_{context}")


def render_choices(choices: Sequence[str]) -> str:
    return "\n".join(f"({i}). {choice}" for i, choice in enumerate(choices, start=1))


def render_bonus_points(points: Sequence[str]) -> str:
    return "\n".join(f"({i}) {point}" for i, point in enumerate(points, start=1))


def _messages(template, fields: dict[str, Any]) -> list[dict[str, str]]:
    messages = []
    if template.system:
        messages.append({"role": "system", "content": template.system.format(**fields)})
    messages.append({"role": "user", "content": template.user.format(**fields)})
    return messages


class CharToMQAPipeline(Pipeline):
    benchmark = Benchmark.CHARTOM_QA
    methods = (GENERATIVE, MULTICHOICE, JUDGE_BONUS, JUDGE_DEFECTS)
    item_field = "qa_item"
    default_params: dict[str, Any] = {}

    def default_template_name(self, method: str) -> str:
        return template_name(method)

    # -- units ---------------------------------------------------------------------

    def build_units(self, *, selection, template) -> list[CallUnit]:
        # The template says what the run does: each method has its own template, and a
        # revised version keeps its method.
        method = template.method
        if method in (GENERATIVE, MULTICHOICE):
            return self._answer_units(method, selection, template)
        if method in JUDGE_METHODS:
            return self._judge_units(method, selection, template)
        raise ValueError(
            f"template {template} is for method {method!r}; CharToM-QA runs need one of "
            f"{', '.join(self.methods)}"
        )

    def items(self, selection: dict[str, Any]):
        items = QAItem.objects.filter(work__benchmark=Benchmark.CHARTOM_QA)
        if keys := selection.get("works"):
            items = items.filter(work__key__in=keys)
        if split := selection.get("split"):
            items = items.filter(work__split=split)
        items = items.select_related("work").order_by("work__key", "position", "pk")
        if limit := selection.get("limit"):
            items = items[: int(limit)]
        return items

    def _answer_units(self, method: str, selection, template) -> list[CallUnit]:
        context = context_of(selection)
        units, without_window = [], 0
        for item in self.items(selection):
            plot = plot_window(item, context)
            if plot is None:
                without_window += 1
                continue
            fields = {"book_name": item.work.title, "story_plot": plot, "question": item.question}
            info: dict[str, Any] = {"id": item.pk, "answer": item.answer, "context": context}
            if method == GENERATIVE:
                fields["length_of_answer"] = len(item.answer.split())
            else:
                choices = choices_order(item.natural_key, item.answer, item.misleading_choices)
                fields["choices"] = render_choices(choices)
                fields["indices"] = ", ".join(f"({i})" for i in range(1, len(choices) + 1))
                info["choices"] = choices
            units.append(
                CallUnit(
                    key=f"chartom-qa:{method}:c{context}:{item.natural_key}",
                    messages=_messages(template, fields),
                    item_ids=[item.pk],
                    items=[info],
                )
            )
        if without_window:
            logger.warning(
                "%s item(s) have no %s-token plot window and were left out", without_window, context
            )
            if not units:
                raise ValueError(
                    f"none of the {without_window} selected item(s) has a {context}-token plot "
                    f"window (context_{context}); choose another context ({CONTEXTS})"
                )
        return units

    def _judge_units(self, method: str, selection, template) -> list[CallUnit]:
        run_id = selection.get("run")
        responses = Run.objects.filter(pk=run_id, benchmark=Benchmark.CHARTOM_QA).first()
        if responses is None:
            raise ValueError(
                f"a judge run needs selection['run']: the id of a CharToM-QA generative run "
                f"(got {run_id!r})"
            )
        predictions = (
            generative_predictions([responses.pk])
            .select_related("qa_item__work", "call")
            .order_by("pk")
        )
        if limit := selection.get("limit"):
            predictions = predictions[: int(limit)]
        default_context = context_of(responses.selection or {})
        units = []
        for prediction in predictions:
            item, reply = prediction.qa_item, prediction.reply.strip()
            if not reply:
                continue  # nothing to judge: the prediction is unparseable already
            fields = {
                "book_name": item.work.title,
                "question": item.question,
                "reference_answer": item.answer,
                "response": truncate_response(reply, item.answer),
            }
            if method == JUDGE_BONUS:
                fields["bonus_points"] = render_bonus_points(item.bonus_points)
            else:
                context = (prediction.details or {}).get("context", default_context)
                fields["story_plot"] = plot_window(item, context) or ""
            units.append(
                CallUnit(
                    key=f"chartom-qa:{method}:{prediction.pk}",
                    messages=_messages(template, fields),
                    item_ids=[],
                    items=[{"prediction": prediction.pk, "total": len(item.bonus_points)}],
                )
            )
        return units

    # -- replies -------------------------------------------------------------------

    def parse(self, *, unit: CallUnit, text: str) -> list[ParsedItem]:
        if not unit.item_ids:
            return []  # a judge reply: merged into the response's details at the end
        info = unit.items[0]
        if "choices" in info:
            pick = score_pick(
                text, choices=info["choices"], reference_answer=info["answer"], text_is_reply=True
            )
            details = {**pick.details, "context": info["context"]}
            return [ParsedItem(info["id"], pick.parsed_answer, pick.status, pick.correct, details)]
        response = read_response(text, answer=info["answer"])
        details = {"task": GENERATIVE, "context": info["context"], **response.details}
        return [ParsedItem(info["id"], response.judged_text[:500], response.status, None, details)]

    def finish(self, *, run: Run) -> None:
        if run.method == GENERATIVE:
            self._score_text_similarity(run)
        elif run.method in JUDGE_METHODS:
            judgements_apply(run=run)

    def _score_text_similarity(self, run: Run) -> None:
        # Imported here: text_similarity imports this package's reading functions.
        from modeling.pipelines.chartom_qa.text_similarity import (
            bertscore_model,
            predictions_text_similarity,
            text_similarity_enqueue,
        )

        predictions_text_similarity(run_ids=[run.pk], bertscore=False)
        if bertscore_model():
            # BERTScore loads a transformer: a GPU worker does it (see text_similarity).
            text_similarity_enqueue(run_ids=[run.pk])


def judgements_apply(*, run: Run) -> int:
    """Read a judge run's replies and merge the verdicts into the responses' details.

    Only first-sample calls that are done count. Returns how many responses got a
    verdict. Safe to call again: each verdict replaces the one before.
    """
    if run.method not in JUDGE_METHODS:
        raise ValueError(f"run {run.pk} is not a judge run ({', '.join(JUDGE_METHODS)})")
    prefix = f"chartom-qa:{run.method}:"
    calls = {
        int(call.unit_key.removeprefix(prefix)): call
        for call in RunCall.objects.filter(
            run=run, status=RunCall.Status.DONE, sample_index=0, unit_key__startswith=prefix
        ).only("pk", "unit_key", "raw_output")
    }
    totals = dict(
        Prediction.objects.filter(pk__in=list(calls)).values_list("pk", "qa_item__bonus_points")
    )
    values: dict[int, dict[str, Any]] = {}
    for pk, call in calls.items():
        if pk not in totals:
            continue  # the response was deleted since
        if run.method == JUDGE_BONUS:
            verdict = bonus_judgement(call.raw_output, total=len(totals[pk]))
            verdict["judge_bonus"] |= {"run": run.pk, "call": call.pk}
        else:
            verdict = defects_judgement(call.raw_output)
            verdict["judge_defects"] |= {"run": run.pk, "call": call.pk}
        values[pk] = verdict
    drop = ("bonus_points_included",) if run.method == JUDGE_BONUS else ("defects",)
    return prediction_details_merge(values, drop=drop)
