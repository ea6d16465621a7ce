"""What a benchmark pipeline provides to the run engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from modeling.models import PromptTemplate


@dataclass
class CallUnit:
    """One prompt covering one or more items (a DynToM stage covers all its questions)."""

    key: str  # stable across runs, e.g. "dyntom:trial50"
    messages: list[dict[str, str]]
    item_ids: list[int]
    # What parse() needs about the items (keys, option counts, gold), read once with the
    # units so scoring a reply costs no query.
    items: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ParsedItem:
    item_id: int
    parsed_answer: str
    parse_status: str  # Prediction.ParseStatus value
    correct: bool | None
    details: dict[str, Any] | None = None


class Pipeline:
    """Subclasses set the class attributes and implement the three methods."""

    benchmark: str = ""
    methods: tuple[str, ...] = ()
    # Prediction field that points at the item (e.g. "dyntom_question").
    item_field: str = ""
    default_params: dict[str, Any] = {}

    def default_template_name(self, method: str) -> str:
        return f"{self.benchmark}-{method}"

    def build_units(
        self, *, selection: dict[str, Any], template: PromptTemplate
    ) -> list[CallUnit]:  # pragma: no cover - interface
        """The calls a run over ``selection`` makes, in a stable order."""
        raise NotImplementedError

    def parse(self, *, unit: CallUnit, text: str) -> list[ParsedItem]:  # pragma: no cover
        """One ParsedItem per ``unit.item_ids`` entry, whatever the output looks like."""
        raise NotImplementedError

    def finish(self, *, run: Any) -> None:
        """Called when an execution of ``run`` ends (any status): work on what it recorded.

        E.g. CharToM-QA's judge merges its verdicts into the responses it judged. It
        must be safe to call again, as a resumed run ends again.
        """
