"""What the speaker tables are computed from, held as compact columns.

A TVShowGuess study at scale has 100,000 human answers (issue 17). Holding each as a
dict of twenty joined fields cost seconds to read and as much again to walk per table,
so answers are kept as parallel lists of the few values the math needs (instance,
scene response, answer, correctness, tags); item attributes (scene, genres, scene
size) are looked up per masked speaker from ``speaker_item_rows`` and scene-response
attributes per response. Counting goes through ``Counter`` and ``itertools`` (loops in
C), once per instance or per response rather than per answer where the tables allow.

Orders matter: a bootstrap draws clusters by position, so every per-scene or per-unit
count here comes in the order its first answer appears, exactly as the per-answer
loops these replace built them (``tests/reports/test_speaker_report_golden.py``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import compress, filterfalse, groupby, islice, repeat
from operator import attrgetter, is_, is_not, itemgetter, not_
from typing import Any, NamedTuple

from reports import selectors
from reports.study_packs import packed_study_answers

# Rows converted to columns at a time while reading (bounds the rows held at once).
READ_CHUNK = 10_000


@dataclass
class Outcomes:
    """A system's scored answers: one entry per answer, in read order.

    ``correct`` holds plain booleans (a missing judgement already counts as wrong);
    ``responses`` the scene response (assignment id) of each human answer, ``None``
    for a model run.
    """

    instances: list[int] = field(default_factory=list)
    correct: list[bool] = field(default_factory=list)
    responses: list[int] | None = None

    def __len__(self) -> int:
        return len(self.instances)

    def select(self, keep: Sequence[bool]) -> Outcomes:
        """The answers where ``keep`` is true, in the same order."""
        return Outcomes(
            list(compress(self.instances, keep)),
            list(compress(self.correct, keep)),
            None if self.responses is None else list(compress(self.responses, keep)),
        )

    def within(self, instances: set[int] | None) -> Outcomes:
        """The answers on ``instances`` (all of them for ``None``)."""
        if instances is None:
            return self
        keep = [i in instances for i in self.instances]
        return self if all(keep) else self.select(keep)

    @cached_property
    def per_instance(self) -> dict[int, tuple[int, int]]:
        """instance -> (answers, correct answers), instances in first-answer order."""
        hits = Counter(compress(self.instances, self.correct))
        return {i: (n, hits[i]) for i, n in Counter(self.instances).items()}

    def per_scene(self, scene_of: Mapping[int, int]) -> tuple[list[int], list[int]]:
        """(answers, correct answers) per scene, scenes in first-answer order.

        A scene's first answer is the first answer of one of its instances, so walking
        instances in first-answer order meets the scenes in first-answer order too.
        """
        sizes: dict[int, int] = {}
        hits: dict[int, int] = {}
        for instance, (n, right) in self.per_instance.items():
            scene = scene_of[instance]
            sizes[scene] = sizes.get(scene, 0) + n
            hits[scene] = hits.get(scene, 0) + right
        return list(sizes.values()), [hits[s] for s in sizes]

    def scene_responses(self, scene_of: Mapping[int, int]) -> tuple[list[int], list[int]]:
        """(scene responses, all-correct responses) per scene, in first-answer order.

        A scene response (one rater, one scene) is correct when all its answers are.
        """
        if self.responses is None:
            raise ValueError("only human answers have scene responses")
        scenes = list(map(scene_of.__getitem__, self.instances))
        # Reversed, so each response keeps the scene of its first answer.
        scene_of_response = dict(zip(reversed(self.responses), reversed(scenes), strict=True))
        wrong = set(compress(self.responses, map(not_, self.correct)))
        responses = dict.fromkeys(self.responses)  # first-answer order
        sizes = Counter(map(scene_of_response.__getitem__, responses))
        hits = Counter(
            map(scene_of_response.__getitem__, filterfalse(wrong.__contains__, responses))
        )
        return list(sizes.values()), [hits[s] for s in sizes]


class Response(NamedTuple):
    """A scene response (one rater, one scene) that has counted answers."""

    participant_id: int
    seen: bool
    history_needed: bool | None
    total_ms: int | None
    active_ms: int
    instructions_version: Any  # as stamped on the response (None: not stamped)
    scene_id: int  # the scene of its first answer


@dataclass
class HumanAnswers:
    """Every counted answer of one study as columns, and its scene responses."""

    instances: list[int] = field(default_factory=list)
    responses: list[int] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    correct: list[bool | None] = field(default_factory=list)
    tags: list[tuple[str, ...]] = field(default_factory=list)
    # assignment id -> its response, in first-answer order
    by_response: dict[int, Response] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.instances)

    def keep(self, keep: Sequence[bool]) -> None:
        """Drop the answers where ``keep`` is false (before ``by_response`` is built)."""
        for name in ("instances", "responses", "answers", "correct", "tags"):
            setattr(self, name, list(compress(getattr(self, name), keep)))

    def outcomes(self, keep: Sequence[bool] | None = None) -> Outcomes:
        """The answers (where ``keep``) as outcomes; unjudged ones count as wrong."""
        instances, responses, correct = self.instances, self.responses, self.correct
        if keep is not None:
            instances = list(compress(instances, keep))
            responses = list(compress(responses, keep))
            correct = list(compress(correct, keep))
        return Outcomes(instances, _is(correct, True), responses)

    def scored(self) -> Outcomes:
        """The judged answers (``correct`` not ``None``) as outcomes."""
        return self.outcomes(list(map(is_not, self.correct, repeat(None))))

    def where(self, attribute: str, value: Any) -> list[bool]:
        """Per answer: whether its scene response's ``attribute`` is ``value``."""
        values = map(attrgetter(attribute), self.by_response.values())
        of = dict(zip(self.by_response, values, strict=True))
        return _is(map(of.__getitem__, self.responses), value)


def _is(values: Iterable[Any], value: Any) -> list[bool]:
    """``[v is value for v in values]``, looped in C (100,000 answers a call)."""
    return list(map(is_, values, repeat(value)))


def run_outcomes(
    run_ids: Sequence[int],
) -> tuple[dict[int, Outcomes], dict[int, dict[str, int]]]:
    """First-sample outcomes per run, and predictions, unparseable answers and samples
    per run (``runs_table``'s stats), from one read of the runs' predictions."""
    outcomes = {run_id: Outcomes() for run_id in run_ids}
    counts: dict[int, list[int]] = {}
    samples: dict[int, set[int]] = {}
    for run_id, sample, status, instance, correct in selectors.speaker_prediction_outcomes(run_ids):
        count = counts.setdefault(run_id, [0, 0])
        count[0] += 1
        count[1] += status != "ok"
        samples.setdefault(run_id, set()).add(sample)
        if sample == 0:
            # A run is scored on its first sample (the papers' systems answer once).
            outcomes[run_id].instances.append(instance)
            outcomes[run_id].correct.append(correct is True)
    stats = {
        run_id: {"predictions": n, "unparseable": bad, "samples": len(samples[run_id])}
        for run_id, (n, bad) in counts.items()
    }
    return outcomes, stats


def human_answers(
    study_ids: Iterable[int],
    scene_of: Mapping[int, int],
    *,
    include_excluded: bool = False,
    closed: Iterable[int] = (),
) -> dict[int, HumanAnswers]:
    """Each study's counted answers (``selectors.human_answer_columns``) as columns.

    ``scene_of`` maps every masked speaker of the benchmark to its scene; excluded
    participants' answers are read only with ``include_excluded``. The ``closed``
    studies' come from their packs (``reports.study_packs``), the same rows read once.
    """
    ids = list(study_ids)
    studies = {study_id: HumanAnswers() for study_id in ids}
    if not ids:
        return studies
    packed = packed_study_answers(
        [study_id for study_id in closed if study_id in studies],
        include_excluded=include_excluded,
    )
    live = [study_id for study_id in ids if study_id not in packed]
    decoded: dict[str | None, tuple[str, ...]] = {}

    def add_tags(target: HumanAnswers, tags: Iterable[str | None]) -> None:
        tags = list(tags)
        for text in set(tags) - decoded.keys():
            decoded[text] = tuple(json.loads(text) or ()) if text else ()
        target.tags.extend(map(decoded.__getitem__, tags))

    responses: dict[int, tuple[Any, ...]] = {}
    for study_id, pack in packed.items():
        target = studies[study_id]
        target.responses.extend(pack.responses)
        target.instances.extend(pack.instances)
        target.answers.extend(pack.answers)
        target.correct.extend(pack.correct)
        add_tags(target, pack.tags)
        responses.update((row[0], row[1:]) for row in pack.response_rows)
    rows = selectors.human_answer_columns(live, include_excluded=include_excluded) if live else ()
    rows = iter(rows)
    while chunk := list(islice(rows, READ_CHUNK)):
        # Answers come ordered by study: each study's run of rows becomes its columns.
        for study_id, block in groupby(chunk, key=itemgetter(0)):
            _, answer_responses, instances, answers, correct, tags = zip(*block, strict=True)
            target = studies[study_id]
            target.responses.extend(answer_responses)
            target.instances.extend(instances)
            target.answers.extend(answers)
            target.correct.extend(correct)
            add_tags(target, tags)
    if live:
        responses.update(
            (row[0], row[1:])
            for row in selectors.human_response_rows(live, include_excluded=include_excluded)
        )
    new = tuple.__new__  # a NamedTuple built from a tuple in C, as Django's named rows are
    for target in studies.values():
        if not responses.keys() >= set(target.responses):
            # A response missing from the second read (its rater withdrew or was
            # excluded in between):
            # its answers go too, as they would have in one read.
            target.keep([r in responses for r in target.responses])
        # Reversed, so each response keeps the scene of its first answer.
        first_instance = dict(
            zip(reversed(target.responses), reversed(target.instances), strict=True)
        )
        target.by_response = {
            assignment: new(
                Response, (*responses[assignment], scene_of[first_instance[assignment]])
            )
            for assignment in dict.fromkeys(target.responses)
        }
    return studies
