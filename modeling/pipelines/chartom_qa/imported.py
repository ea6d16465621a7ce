"""Scoring CharToM-QA predictions made elsewhere (``import_predictions``).

The file reader (``modeling.runs.prediction_import``) checks each line's fields; here an
imported answer is found in the item bank and scored exactly as the engine scores a
reply: the same pick reading, the same details, and a judge's verdict in the shape
the judge merge stores (so the reports read both alike). Errors are
:class:`~.reading.AnswerError` naming the input field.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from benchmarks.importers.chartom_qa import natural_key
from benchmarks.models import Benchmark, QAItem

from .reading import (
    GENERATIVE,
    AnswerError,
    Pick,
    bonus_judgement,
    defects_judgement,
    read_response,
    score_pick,
)

ITEM_FIELDS = (
    "id",
    "natural_key",
    "work__key",
    "character__name",
    "question",
    "answer",
    "bonus_points",
    "misleading_choices",
)


@dataclass
class ItemIndex:
    """The items an import names, looked up in one query."""

    by_key: dict[str, dict[str, Any]]
    by_text: dict[tuple[str, str], list[dict[str, Any]]]
    books: set[str]

    @classmethod
    def load(cls, *, keys: Iterable[str], books: Iterable[str]) -> ItemIndex:
        rows = list(
            QAItem.objects.filter(
                Q(natural_key__in=set(keys))
                | Q(work__benchmark=Benchmark.CHARTOM_QA, work__key__in=set(books))
            ).values(*ITEM_FIELDS)
        )
        by_text: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            by_text[(row["work__key"], row["question"].strip())].append(row)
        return cls({r["natural_key"]: r for r in rows}, by_text, {r["work__key"] for r in rows})

    def find(self, ref: tuple) -> dict[str, Any]:
        """The item ``ref`` names: ``("key", natural_key)`` or ``("text", book,
        character or None, question)``."""
        if ref[0] == "key":
            item = self.by_key.get(ref[1])
            if item is None:
                raise AnswerError(f"no CharToM-QA item with key {ref[1]!r}", field="item")
            return item
        _, book, character, question = ref
        item = self.by_key.get(natural_key(book, character, question))
        if item is not None:
            return item
        if book not in self.books:
            raise AnswerError(f"no CharToM-QA book {book!r} in the item bank", field="book")
        matches = self.by_text.get((book, question), [])
        if character is not None:
            # The item may have been imported without its character (the HuggingFace
            # release names none); the question text then decides alone.
            matches = [m for m in matches if m["character__name"] in (character, None)]
        if not matches:
            raise AnswerError(f"{book!r} has no such question", field="question")
        if len(matches) > 1:
            raise AnswerError(
                "the question is asked about several characters; name one", field="character"
            )
        return matches[0]


def generative_details(
    item: dict[str, Any],
    *,
    response: str,
    included: Sequence[int] | None = None,
    defects: list[str] | None = None,
    bonus_reply: str | None = None,
    defects_reply: str | None = None,
    context: int | None = None,
) -> dict[str, Any]:
    """A generative answer's details: lengths plus the judge's verdict.

    The verdict is either already read (0-based ``included`` and ``defects``, as the
    paper's examples give it) or the judge's raw replies (``bonus_reply`` /
    ``defects_reply``), read here in both scoring modes like the engine's judge runs.
    """
    total = len(item["bonus_points"])
    details: dict[str, Any] = {"task": GENERATIVE}
    if context is not None:
        details["context"] = context
    details |= read_response(response, answer=item["answer"]).details
    details.pop("reason", None)
    if bonus_reply is not None:
        details |= bonus_judgement(bonus_reply, total=total)
    else:
        indices = sorted(included or [])
        if indices and indices[-1] >= total:
            raise AnswerError(
                f"the item has {total} bonus point(s); indices run from 0 to {total - 1}",
                field="bonus_points_included",
            )
        details |= {"bonus_points_total": total, "bonus_points_included": indices}
    if defects_reply is not None:
        details |= defects_judgement(defects_reply)
    else:
        details["defects"] = list(defects or [])
    return details


def multichoice_score(
    item: dict[str, Any], *, choices: Sequence[str], answer: str | None, context: int | None
) -> Pick:
    """An imported pick (a letter or a 1-based number; None for no answer) scored."""
    expected = sorted(c.strip() for c in [item["answer"], *item["misleading_choices"]])
    if sorted(c.strip() for c in choices) != expected:
        raise AnswerError("not the item's answer and its three misleading choices", field="choices")
    pick = score_pick(answer, choices=choices, reference_answer=item["answer"], text_is_reply=False)
    if context is not None:
        pick.details["context"] = context
    return pick
