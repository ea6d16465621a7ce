"""What a benchmark pipeline provides to the run engine."""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from benchmarks.models import Character, Work
    from modeling.models import PromptTemplate, Run


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


class PrepareSteps(Protocol):
    """What the engine lends a pipeline's :meth:`Pipeline.prepare` to make its calls.

    ``call`` sends one prompt under a stable key through the run's backend, cache,
    budget and counters, and returns the reply text; a call done before (a resumed
    run) is not sent again. ``call_many`` sends independent prompts concurrently. Both
    raise when the run must stop (budget, interrupt, lost lease) or the backend fails;
    the engine turns that into the run's status.
    """

    def call(
        self, *, key: str, messages: list[dict[str, str]], temperature: float | None = None
    ) -> str: ...  # pragma: no cover - interface

    def call_many(self, steps: list[Step]) -> list[str]:  # pragma: no cover - interface
        """``call`` for prompts that need none of each other's replies, sent together
        inside the run's window; the replies in the order of ``steps``."""
        ...


@dataclass(frozen=True)
class Step:
    """One prompt of :meth:`PrepareSteps.call_many`."""

    key: str
    messages: list[dict[str, str]]
    temperature: float | None = None


# A pipeline's chained prompts: yields the calls it needs next (which need none of
# each other's replies) and receives their replies, in order; ends when done.
Chain = Generator[list[Step], list[str], None]


def run_chains(steps: PrepareSteps, chains: list[Chain]) -> None:
    """Run ``chains`` side by side: each round sends the next calls of every chain still
    going in one :meth:`PrepareSteps.call_many`, so independent chains (ToMPro's works)
    share the run's window while each keeps its own order."""
    waiting: list[tuple[Chain, list[Step]]] = []
    for chain in chains:
        first = next(chain, None)
        if first is not None:
            waiting.append((chain, first))
    while waiting:
        replies = steps.call_many([step for _, calls in waiting for step in calls])
        going: list[tuple[Chain, list[Step]]] = []
        for chain, calls in waiting:
            mine, replies = replies[: len(calls)], replies[len(calls) :]
            with contextlib.suppress(StopIteration):
                going.append((chain, chain.send(mine)))
        waiting = going


class Pipeline:
    """Subclasses set the class attributes and implement build_units and parse.

    Pipelines whose prompts depend on a run's own earlier replies (ToMPro's stage 1
    writes the character descriptions its guessing prompts show) override
    :meth:`prepare` and :meth:`units_for_run`; those with run options (k shots, name
    perturbation, ablations) override :meth:`clean_options`.
    """

    benchmark: str = ""
    methods: tuple[str, ...] = ()
    # Prediction field that points at the item (e.g. "dyntom_question").
    item_field: str = ""
    default_params: dict[str, Any] = {}

    def default_template_name(self, method: str) -> str:
        return f"{self.benchmark}-{method}"

    def template_name(self, *, method: str, selection: dict[str, Any]) -> str:
        """The template a run uses when it names none; pipelines whose wording depends
        on the selection (the generic pipeline's language) override it."""
        return self.default_template_name(method)

    def clean_selection(self, *, selection: dict[str, Any]) -> dict[str, Any]:
        """The run's selection, checked and completed (``Run.selection``).

        Raises ``ValueError`` naming what is at fault. This base takes it as it is.
        """
        return selection

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

    def clean_options(self, *, method: str, options: dict[str, Any]) -> dict[str, Any]:
        """The run options, checked and completed with defaults (``Run.params["options"]``).

        Raises ``ValueError`` naming the option at fault. This base takes none.
        """
        if options:
            raise ValueError(
                f"{self.benchmark} runs take no options (got {', '.join(sorted(options))})"
            )
        return {}

    def prepare(self, *, run: Run, steps: PrepareSteps) -> None:
        """Calls to make, in order, before the run's units are built (none by default)."""

    def units_for_run(self, *, run: Run) -> list[CallUnit]:
        """The units of ``run`` (after :meth:`prepare`); by default from its selection."""
        return self.build_units(selection=run.selection, template=run.template)

    def iter_units_for_run(self, *, run: Run) -> Iterator[CallUnit]:
        """:meth:`units_for_run`'s units, in its order, as the engine takes them: a
        pipeline that can build them a few at a time yields them so, and the run's
        first calls go out before the rest are built."""
        return iter(self.units_for_run(run=run))

    def name_maps(self, *, run: Run) -> list[tuple[Work, dict[str, str], list[Character]]]:
        """(work, perturbation map, its characters) per work whose names ``run`` shows
        perturbed, for the run page; none by default."""
        return []
