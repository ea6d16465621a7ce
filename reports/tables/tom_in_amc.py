"""ToM-in-AMC tables (also the scene tables of TVShowGuess, which shares its format).

A *system* is a model run or a human study ("Humans: <study name>"). Each system is
scored on everything it answered (its own set); only ``accuracy-common`` restricts every
system to the masked speakers all of them answered (the common set, counted in its note
and in ``facts["compared_instances"]``). Studies and runs on different scenes thus still
show their own accuracy when they share no speaker.

- ``accuracy`` (Table 4): instance and scene accuracy with 95% CIs per system on its own
  answers, under the Random (chance) and Majority baselines of the speakers any system
  answered;
- ``accuracy-common`` (with two systems or more): the same on the common set, with its
  baselines; empty, and saying so, when the systems share no speaker;
- ``by-speakers`` (Tables 5 and 11): accuracy by the number of masked speakers in the
  scene, 1, 2, 3…, then Easy (< 3) and Hard (≥ 3), each system on its own answers;
- ``by-genre`` (Table 12) and, with two systems or more over two genres or more,
  ``genre-correlation`` (Figure 5): Spearman's rho between systems over their per-genre
  accuracies (own answers).

With human studies (section 7.2, Table 3, Appendix E), over each study's own answers:
``human-studies`` (who took part), ``human-familiarity`` (seen vs unseen work),
``human-history`` (the "needed earlier scenes" flag), ``human-tags`` (ToM dimensions),
``human-agreement`` (percent agreement, Fleiss' kappa, Krippendorff's alpha) and
``human-time`` (seconds per scene).

A run is scored on its first sample (the papers' systems answer once). A human study
pools its raters' answers: an instance accuracy over (rater, speaker) answers and a
scene accuracy over (rater, scene) responses, bootstrapped by scene so a scene's
raters stay together. Withdrawn raters are left out (by the selector), excluded ones
unless the report includes them; imported annotation studies, which carry no
correctness, count in the flag, tag and agreement tables only.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import compress
from typing import Any

from metrics import (
    EASY,
    HARD,
    AccuracyEstimate,
    accuracy_ci,
    agreement_ci,
    agreement_cis,
    chance_baseline,
    cluster_accuracy_ci,
    cluster_accuracy_cis,
    correlation_matrix,
    fleiss_kappa,
    krippendorff_alpha,
    majority_baseline,
    percent_agreement,
    scene_accuracy_ci,
    speaker_difficulty,
)
from reports import selectors
from reports.report_types import Cell, Chart, Report, Table
from reports.tables import (
    N_RESAMPLES,
    excluded_note,
    pct,
    run_label,
    runs_table,
    single_unit_note,
    single_unit_rows,
    unparsed_note,
)
from reports.tables.speaker_outcomes import HumanAnswers, Outcomes, human_answers, run_outcomes
from studies.models import Study
from studies.scene.services import IDLE_CUTOFF

NO_GENRE = "(no genre)"
NO_TAG = "(no tag)"
RANDOM = "Random"
MAJORITY = "Majority"
DIFFICULTY_LABELS = {EASY: "Easy (<3)", HARD: "Hard (≥3)"}


@dataclass
class System:
    """A column (or row) of the comparison: a run or a human study.

    ``outcomes`` are its scored answers (all of them, not only the common set): a run's
    first-sample predictions, a study's judged answers (several per speaker, one per
    rater).
    """

    label: str
    model: str
    method: str
    outcomes: Outcomes
    human: bool = False


@dataclass
class HumanStudy:
    """A study and every counted answer of it (all its items, not only the compared)."""

    study: dict[str, Any]
    label: str
    answers: HumanAnswers

    @property
    def scored(self) -> bool:
        """Whether answers were scored here; imported annotations have no correctness."""
        return not self.study["imported"]


@dataclass
class SpeakerData:
    """What the speaker tables are computed from; TVShowGuess reuses it."""

    items: list[dict[str, Any]]
    runs: list[dict[str, Any]]
    # run id -> its first-sample outcomes, and its predictions and unparseable ones
    outcomes: dict[int, Outcomes] = field(default_factory=dict)
    stats: dict[int, dict[str, int]] = field(default_factory=dict)
    frequency: dict[tuple[int, str], int] = field(default_factory=dict)
    frequency_fallback: set[int] = field(default_factory=set)
    studies: list[HumanStudy] = field(default_factory=list)
    systems: list[System] = field(default_factory=list)
    # Instance ids every system with an answer answered (the common set), and those any
    # system answered; both None when no system answered anything.
    compared: set[int] | None = None
    answered: set[int] | None = None
    include_excluded: bool = False

    def labels(self) -> list[str]:
        return [s.label for s in self.systems]

    @cached_property
    def item_of(self) -> dict[int, dict[str, Any]]:
        """Masked speaker id -> its item row (scene, genres, scene size, candidates)."""
        return {i["id"]: i for i in self.items}

    @cached_property
    def scene_of(self) -> dict[int, int]:
        return {i["id"]: i["scene_id"] for i in self.items}

    @property
    def compared_items(self) -> list[dict[str, Any]]:
        """The common set's items (none when no system answered)."""
        return [i for i in self.items if i["id"] in (self.compared or ())]

    @property
    def answered_items(self) -> list[dict[str, Any]]:
        """The items any system answered; every item when none did (baselines then)."""
        if self.answered is None:
            return self.items
        return [i for i in self.items if i["id"] in self.answered]


def build(
    report: Report,
    runs: list[dict[str, Any]],
    *,
    studies: list[dict[str, Any]] | None = None,
    seed: int,
    include_excluded: bool = False,
) -> None:
    build_speaker_tables(
        report, runs, studies=studies or [], seed=seed, include_excluded=include_excluded
    )


def build_speaker_tables(
    report: Report,
    runs: list[dict[str, Any]],
    *,
    studies: list[dict[str, Any]] | None = None,
    seed: int,
    include_excluded: bool = False,
) -> SpeakerData:
    """Add the runs, accuracy (own and common set), by-speakers, by-genre and human
    tables; return the data."""
    benchmark = report.benchmark
    frequency, fallback = selectors.character_frequencies(benchmark)
    data = SpeakerData(
        items=selectors.speaker_item_rows(benchmark),
        runs=runs,
        frequency=frequency,
        frequency_fallback=fallback,
        include_excluded=include_excluded,
    )
    data.outcomes, data.stats = run_outcomes([r["id"] for r in runs])
    if studies:
        data.studies = _human_studies(studies, data.scene_of, include_excluded=include_excluded)
    _compare(data)
    report.tables.append(runs_table(runs, data.stats))
    if data.studies:
        report.tables.append(_studies_table(data))
        report.facts.update(
            studies=len(data.studies),
            human_participants=sum(
                len({r.participant_id for r in h.answers.by_response.values()})
                for h in data.studies
            ),
            human_answers=sum(len(h.answers) for h in data.studies),
        )
    common = len(data.systems) >= 2
    if common or data.studies:
        report.facts["compared_instances"] = len(data.compared_items)
    report.tables.append(_accuracy_table(data, seed=seed))
    report.charts.append(
        Chart(
            key="accuracy",
            title="Instance and scene accuracy (95% CI)",
            kind="bar",
            table="accuracy",
            x="System",
            series=["Accuracy %", "Scene accuracy %"],
            error_low=["CI low %", "Scene CI low %"],
            error_high=["CI high %", "Scene CI high %"],
            y_label="accuracy (%)",
        )
    )
    if common:
        report.tables.append(_accuracy_table(data, seed=seed, common=True))
    by_speakers = _group_table(
        data,
        key="by-speakers",
        title="Accuracy by number of masked speakers in the scene",
        group_column="Speakers",
        groups_of=_speaker_groups,
        order=_speaker_order,
    )
    report.tables.append(by_speakers)
    report.charts.append(_systems_chart(by_speakers, data, x="Speakers"))
    by_genre = _group_table(
        data,
        key="by-genre",
        title="Accuracy by genre",
        group_column="Genre",
        groups_of=lambda row: row["genres"] or [NO_GENRE],
        order=lambda g: (g == NO_GENRE, str(g)),
    )
    works: dict[str, set[int]] = defaultdict(set)
    for item in data.answered_items:
        for genre in item["genres"] or [NO_GENRE]:
            works[genre].add(item["work_id"])
    by_genre.columns.insert(1, "Works")
    for row in by_genre.rows:
        row.insert(1, len(works[row[0]]))
    report.tables.append(by_genre)
    report.charts.append(_systems_chart(by_genre, data, x="Genre"))
    # A correlation across genres needs two systems and two genres to rank.
    genres = {g for item in data.answered_items for g in item["genres"] or []}
    if len(data.systems) >= 2 and len(genres) >= 2:
        _add_genre_correlation(report, data)
    if data.studies:
        _add_human_tables(report, data, seed=seed)
    return data


def _human_studies(
    studies: list[dict[str, Any]], scene_of: dict[int, int], *, include_excluded: bool
) -> list[HumanStudy]:
    """Each study with its answers, labelled "Humans: <name>" (with the id if names repeat)."""
    by_study = human_answers(
        [s["id"] for s in studies],
        scene_of,
        include_excluded=include_excluded,
        closed=[s["id"] for s in studies if s["status"] == Study.Status.CLOSED],
    )
    names = Counter(s["name"] for s in studies)
    return [
        HumanStudy(
            study=s,
            label=f"Humans: {s['name']}" + (f" (#{s['id']})" if names[s["name"]] > 1 else ""),
            answers=by_study[s["id"]],
        )
        for s in studies
    ]


def _compare(data: SpeakerData) -> None:
    """The systems with all their answers, the common set and what any system answered.

    A system that answered nothing (a queued run, a study nobody took yet) is shown
    with no answers rather than emptying the common set for everyone.
    """
    data.systems = [
        System(run_label(run), run["model"], run["method"], data.outcomes[run["id"]])
        for run in data.runs
    ]
    for human in data.studies:
        if human.scored:
            scored = human.answers.scored()
            data.systems.append(System(human.label, "humans", "study", scored, human=True))
    answered = [set(s.outcomes.per_instance) for s in data.systems if s.outcomes]
    data.compared = set.intersection(*answered) if answered else None
    data.answered = set.union(*answered) if answered else None


def _item_chance(items: Sequence[dict[str, Any]]) -> float | None:
    return chance_baseline([len(i["candidates"]) for i in items])


def _item_majority(data: SpeakerData, items: Sequence[dict[str, Any]]) -> float | None:
    return majority_baseline(
        [(i["work_id"], i["gold"]) for i in items],
        [[(i["work_id"], c) for c in i["candidates"]] for i in items],
        data.frequency,
    )


def _scene_chance(items: Sequence[dict[str, Any]]) -> float | None:
    """Expected scene accuracy of independent uniform guesses: mean over scenes of Π 1/k."""
    per_scene: dict[Hashable, float] = defaultdict(lambda: 1.0)
    for i in items:
        per_scene[i["scene_id"]] *= 1 / len(i["candidates"])
    return math.fsum(per_scene.values()) / len(per_scene) if per_scene else None


def _instance_estimate(
    outcomes: Outcomes, scene_of: dict[int, int], *, seed: int
) -> AccuracyEstimate:
    """Accuracy of the answers, bootstrapped by scene (``accuracy_ci`` by scene)."""
    sizes, hits = outcomes.per_scene(scene_of)
    return cluster_accuracy_ci(sizes, hits, n_resamples=N_RESAMPLES, seed=seed)


def _human_estimates(
    outcomes: Outcomes, scene_of: dict[int, int], *, seed: int
) -> tuple[AccuracyEstimate, AccuracyEstimate, int]:
    """Instance and scene accuracy of pooled rater answers, both bootstrapped by scene.

    A scene response (one rater, one scene) is correct when all its answers are; the
    third value counts the distinct scenes.
    """
    # Both by scene, over the same scenes: one pass over the bootstrap's draws for both.
    sizes, hits = outcomes.scene_responses(scene_of)
    instance, scene = cluster_accuracy_cis(
        [outcomes.per_scene(scene_of), (sizes, hits)], n_resamples=N_RESAMPLES, seed=seed
    )
    return instance, scene, len(sizes)


def _accuracy_table(data: SpeakerData, *, seed: int, common: bool = False) -> Table:
    """Each system's accuracy on its own answers, or (``common``) on the common set."""
    items = data.compared_items if common else data.answered_items
    scenes = {i["scene_id"] for i in items}
    n = len(items)
    # Baselines are expected values, not samples: they have no interval.
    rows: list[list[Cell]] = [
        [
            *(RANDOM, "", "chance", n, None, pct(_item_chance(items)), None, None),
            *(len(scenes), None, pct(_scene_chance(items)), None, None),
        ],
        [
            *(MAJORITY, "", "baseline", n, None, pct(_item_majority(data, items)), None, None),
            *(len(scenes), None, None, None, None),
        ],
    ]
    single: list[str] = []
    for system in data.systems:
        outcomes = system.outcomes.within(data.compared) if common else system.outcomes
        if system.human:
            instance, scene, scene_count = _human_estimates(outcomes, data.scene_of, seed=seed)
        else:
            clusters = [data.scene_of[i] for i in outcomes.instances]
            correct = outcomes.correct
            instance = accuracy_ci(correct, clusters=clusters, n_resamples=N_RESAMPLES, seed=seed)
            scene = scene_accuracy_ci(correct, clusters, n_resamples=N_RESAMPLES, seed=seed)
            scene_count = scene.n
        if instance.units == 1:  # instances resample by scene: one scene, no interval
            single.append(system.label)
        rows.append(
            [
                system.label,
                system.model,
                system.method,
                len(outcomes.per_instance),
                instance.n,
                pct(instance.accuracy),
                pct(instance.ci_low),
                pct(instance.ci_high),
                scene_count,
                scene.n,
                pct(scene.accuracy),
                pct(scene.ci_low),
                pct(scene.ci_high),
            ]
        )
    note = (
        "Instances are masked speakers; a scene is correct when all its speakers are. "
        "95% CIs: percentile bootstrap over scenes. Random: expected accuracy of a uniform "
        "guess among the candidates. Majority: the candidate most often a masked speaker "
        "in the work's history (training) scenes, a tie going to the candidate listed "
        "first; the guess train_baseline majority writes."
    )
    if data.frequency_fallback:
        note += (
            f" {len(data.frequency_fallback)} work(s) have no training scenes; there "
            "Majority counts the evaluated scenes' answers (an optimistic baseline)."
        )
    note += " Runs: first sample." + (_common_scope(data) if common else _scope(data))
    if any(s.human for s in data.systems):
        note += (
            " Humans: Answers pools every rater's answers and Scene answers every "
            "(rater, scene) response; a scene's raters are resampled together."
        )
    note += single_unit_note(single, "scene")
    unscored = [h.label for h in data.studies if not h.scored]
    if unscored:
        note += f" Imported annotations without correctness ({', '.join(unscored)}) are not scored."
    if common and not n:
        # An empty common set must not read as "no data": the systems' own numbers exist.
        rows = []
        # Short enough for the page to show it in full (longer notes fold away).
        note = (
            "Common set: empty. No masked speaker was answered by every system; each "
            "system's own accuracy is in the table above."
            + _silent(data)
            + unparsed_note(data.runs, data.stats)
        )
    return Table(
        key="accuracy-common" if common else "accuracy",
        title=(
            f"Common set: accuracy on the {n} masked speakers ({_scenes(len(scenes))}) "
            "every system answered"
            if common
            else "Instance and scene accuracy (each system on what it answered)"
        ),
        columns=[
            "System",
            "Model",
            "Method",
            "Instances",
            "Answers",
            "Accuracy %",
            "CI low %",
            "CI high %",
            "Scenes",
            "Scene answers",
            "Scene accuracy %",
            "Scene CI low %",
            "Scene CI high %",
        ],
        rows=rows,
        note=note,
        no_interval=single_unit_rows(single, "scene") if rows else {},
        alert=unparsed_note(data.runs, data.stats).strip() if common and rows else "",
    )


def _scenes(n: int) -> str:
    return f"{n} scene" if n == 1 else f"{n} scenes"


def _silent(data: SpeakerData) -> str:
    """The systems that answered nothing (left out of the common set), for the notes."""
    silent = [s.label for s in data.systems if not s.outcomes]
    return f" Without any answer, left out of it: {', '.join(silent)}." if silent else ""


def _scope(data: SpeakerData) -> str:
    """What each system is scored on, for the notes of the own-set tables."""
    if data.answered is None:
        return f" No system answered yet; baselines over all {len(data.items)} masked speakers."
    items = data.answered_items
    scenes = len({i["scene_id"] for i in items})
    return (
        " Each system is scored on every masked speaker it answered (Instances), not "
        "only the common set; Random and Majority over the "
        f"{len(items)} of {len(data.items)} masked speakers ({_scenes(scenes)}) any system "
        "answered."
    )


def _common_scope(data: SpeakerData) -> str:
    """What the common set is, for its table's note."""
    items = data.compared_items
    scenes = len({i["scene_id"] for i in items})
    return (
        f" Every system is scored on the same {len(items)} of {len(data.items)} masked "
        f"speakers ({_scenes(scenes)}): those every system with an answer answered."
        + _silent(data)
        + unparsed_note(data.runs, data.stats)
    )


def _speaker_groups(row: dict[str, Any]) -> list[Hashable]:
    return [row["speakers"], DIFFICULTY_LABELS[speaker_difficulty(row["speakers"])]]


def _speaker_order(group: Hashable) -> tuple[int, Any]:
    if isinstance(group, int):
        return (0, group)
    return (1, list(DIFFICULTY_LABELS.values()).index(group))


def _group_table(
    data: SpeakerData,
    *,
    key: str,
    title: str,
    group_column: str,
    groups_of: Callable[[dict[str, Any]], list[Hashable]],
    order: Callable[[Hashable], Any],
) -> Table:
    """Random, Majority and each system's accuracy per group (an item may be in several),
    the systems on their own answers, the baselines over the items any system answered."""
    items_by: dict[Hashable, list[dict[str, Any]]] = defaultdict(list)
    for item in data.answered_items:
        for group in groups_of(item):
            items_by[group].append(item)
    system_by = [_by_group(data, system, groups_of) for system in data.systems]
    groups = sorted(set(items_by) | {g for by in system_by for g in by}, key=order)
    rows: list[list[Cell]] = []
    for group in groups:
        items = items_by.get(group, [])
        rows.append(
            [
                group if isinstance(group, str) else str(group),
                len(items),
                pct(_item_chance(items)) if items else None,
                pct(_item_majority(data, items)) if items else None,
                *(pct(_share(by.get(group))) for by in system_by),
            ]
        )
    return Table(
        key=key,
        title=title,
        columns=[
            group_column,
            "Instances",
            f"{RANDOM} %",
            f"{MAJORITY} %",
            *(f"{label} %" for label in data.labels()),
        ],
        rows=rows,
        note="Instances: masked speakers in the group that any system answered." + _scope(data),
    )


def _by_group(
    data: SpeakerData,
    system: System,
    groups_of: Callable[[dict[str, Any]], list[Hashable]],
) -> dict[Hashable, tuple[int, int]]:
    """(answers, correct answers) of the system per group, groups in first-answer order."""
    by: dict[Hashable, tuple[int, int]] = {}
    for instance, (n, right) in system.outcomes.per_instance.items():
        for group in groups_of(data.item_of[instance]):
            had_n, had_right = by.get(group, (0, 0))
            by[group] = (had_n + n, had_right + right)
    return by


def _share(counts: tuple[int, int] | None) -> float | None:
    """Accuracy from (answers, correct answers): what ``accuracy`` gives for the answers."""
    return counts[1] / counts[0] if counts and counts[0] else None


def _systems_chart(table: Table, data: SpeakerData, *, x: str) -> Chart:
    return Chart(
        key=table.key,
        title=table.title,
        kind="bar",
        table=table.key,
        x=x,
        series=[f"{RANDOM} %", f"{MAJORITY} %", *(f"{label} %" for label in data.labels())],
        y_label="accuracy (%)",
    )


def _add_genre_correlation(report: Report, data: SpeakerData) -> None:
    # From unrounded accuracies: rounding to 2 decimals could create ties.
    series: dict[str, dict[Hashable, float | None]] = {}
    for system in data.systems:
        by_genre = _by_group(data, system, lambda item: item["genres"] or [])
        series[system.label] = {genre: _share(counts) for genre, counts in by_genre.items()}
    names, matrix = correlation_matrix(series, method="spearman")
    genres = len({g for values in series.values() for g in values})
    report.tables.append(
        Table(
            key="genre-correlation",
            title="Spearman correlation between systems across genres",
            columns=["System", *names],
            rows=[
                [name, *(None if v is None else round(v, 3) for v in values)]
                for name, values in zip(names, matrix, strict=True)
            ],
            note=(
                f"Spearman's rho of per-genre accuracies ({genres} genre(s) in all), each "
                "system on its own answers, over the genres both systems answered; empty "
                "where fewer than two or no variation."
            ),
        )
    )
    report.charts.append(
        Chart(
            key="genre-correlation",
            title="Correlation between systems across genres",
            kind="heatmap",
            table="genre-correlation",
            y_label="Spearman's rho",
        )
    )


# -- human studies ---------------------------------------------------------------------


def _studies_table(data: SpeakerData) -> Table:
    rows: list[list[Cell]] = []
    for human in data.studies:
        s = human.study
        answers = human.answers
        responses = answers.by_response.values()
        versions = sorted(
            {r.instructions_version for r in responses if r.instructions_version is not None}
        )
        instances = set(answers.instances)
        rows.append(
            [
                human.label,
                s["id"],
                s["status"],
                s["imported"],
                s["participant_count"] - s["withdrawn_count"],
                s["withdrawn_count"],
                s["excluded_count"],
                len({r.participant_id for r in responses}),
                len(responses),
                len(answers),
                len({data.scene_of[i] for i in instances}),
                len(instances),
                ", ".join(map(str, versions)),
                "perturbed" if s["perturb_names"] else "original",
            ]
        )
    return Table(
        key="human-studies",
        title="Human studies",
        columns=[
            "Study",
            "ID",
            "Status",
            "Imported",
            "Participants",
            "Withdrawn",
            "Excluded",
            "Raters",
            "Scene answers",
            "Answers",
            "Scenes",
            "Instances",
            "Instructions versions",
            "Names",
        ],
        rows=rows,
        note=(
            "Participants: invited or joined, not withdrawn. Withdrawn participants keep "
            "their responses but are left out of every table. Excluded: not withdrawn, "
            "excluded by the study's rule or a researcher (counted in Participants)."
            + excluded_note([h.study for h in data.studies], include_excluded=data.include_excluded)
            + " Raters: participants with a counted scene; Scene answers: counted (rater, "
            "scene) responses; Answers: their masked-speaker answers. Practice scenes and "
            "attention checks never count. Instructions versions: as stamped on the answers."
        ),
    )


def _add_human_tables(report: Report, data: SpeakerData, *, seed: int) -> None:
    familiarity = _familiarity_table(data, seed=seed)
    report.tables.append(familiarity)
    report.charts.append(
        Chart(
            key=familiarity.key,
            title="Human accuracy on seen and unseen works (95% CI)",
            kind="bar",
            table=familiarity.key,
            x="Study",
            series=["Seen %", "Unseen %"],
            error_low=["Seen CI low %", "Unseen CI low %"],
            error_high=["Seen CI high %", "Unseen CI high %"],
            y_label="accuracy (%)",
        )
    )
    history = _history_table(data, seed=seed)
    report.tables.append(history)
    report.charts.append(
        Chart(
            key=history.key,
            title="Human accuracy by the history-needed flag (95% CI)",
            kind="bar",
            table=history.key,
            x="Study",
            series=["Needed %", "Not needed %"],
            error_low=["Needed CI low %", "Not needed CI low %"],
            error_high=["Needed CI high %", "Not needed CI high %"],
            y_label="accuracy (%)",
        )
    )
    tags = _tags_table(data)
    report.tables.append(tags)
    report.charts.append(
        Chart(
            key=tags.key,
            title=tags.title,
            kind="bar",
            table=tags.key,
            x="Tag",
            series=[f"{h.label} share %" for h in data.studies],
            y_label="share of answers (%)",
        )
    )
    report.tables.append(_agreement_table(data, seed=seed))
    time = _time_table(data)
    report.tables.append(time)
    report.charts.append(
        Chart(
            key=time.key,
            title="Seconds per scene (median)",
            kind="bar",
            table=time.key,
            x="Study",
            series=["Median total s", "Median active s"],
            y_label="seconds per scene",
        )
    )


def _accuracy_cells(
    data: SpeakerData, human: HumanStudy, keep: list[bool], *, seed: int
) -> list[Cell]:
    """Answers (those ``keep`` picks), accuracy and its CI (imported studies: counts only)."""
    if not human.scored:
        return [sum(keep), None, None, None]
    outcomes = human.answers.outcomes(keep)
    estimate = _instance_estimate(outcomes, data.scene_of, seed=seed)
    return [len(outcomes), pct(estimate.accuracy), pct(estimate.ci_low), pct(estimate.ci_high)]


def _familiarity_table(data: SpeakerData, *, seed: int) -> Table:
    rows: list[list[Cell]] = []
    for human in data.studies:
        row: list[Cell] = [human.label]
        answers = human.answers
        for seen in (True, False):
            keep = answers.where("seen", seen)
            raters = len(
                {
                    answers.by_response[r].participant_id
                    for r in set(compress(answers.responses, keep))
                }
            )
            count = sum(keep)
            if not human.scored:
                row += [raters, count, None, None, None, None]
                continue
            instance, scene, _ = _human_estimates(answers.outcomes(keep), data.scene_of, seed=seed)
            row += [
                raters,
                count,
                pct(instance.accuracy),
                pct(instance.ci_low),
                pct(instance.ci_high),
                pct(scene.accuracy),
            ]
        rows.append(row)
    columns = ["Study"]
    for group in ("Seen", "Unseen"):
        columns += [
            f"{group} raters",
            f"{group} answers",
            f"{group} %",
            f"{group} CI low %",
            f"{group} CI high %",
            f"{group} scene %",
        ]
    return Table(
        key="human-familiarity",
        title="Human accuracy by familiarity with the work",
        columns=columns,
        rows=rows,
        note=(
            "Seen: the rater said they had seen (or read) the work before answering its "
            "scenes. Over each study's own answers (not only the compared speakers); "
            "95% CIs: percentile bootstrap over scenes."
        ),
    )


def _history_table(data: SpeakerData, *, seed: int) -> Table:
    rows: list[list[Cell]] = []
    for human in data.studies:
        responses = human.answers.by_response
        flags = [r.history_needed for r in responses.values()]
        flagged = [f for f in flags if f is not None]
        needed = sum(flagged)
        row: list[Cell] = [
            human.label,
            len(responses),
            len(flagged),
            needed,
            pct(needed / len(flagged)) if flagged else None,
        ]
        for flag in (True, False):
            row += _accuracy_cells(
                data, human, human.answers.where("history_needed", flag), seed=seed
            )
        rows.append(row)
    return Table(
        key="human-history",
        title="Scenes that needed earlier scenes (raters' flag) and accuracy by it",
        columns=[
            "Study",
            "Scene answers",
            "Flagged",
            "History needed",
            "History needed share %",
            "Needed answers",
            "Needed %",
            "Needed CI low %",
            "Needed CI high %",
            "Not needed answers",
            "Not needed %",
            "Not needed CI low %",
            "Not needed CI high %",
        ],
        rows=rows,
        note=(
            "Each rater says per scene whether earlier scenes were needed. Share = scene "
            "answers flagged 'needed' / scene answers with a flag; accuracy over the "
            "masked-speaker answers of those scenes, 95% CI by scene bootstrap."
        ),
    )


def _tags_table(data: SpeakerData) -> Table:
    tags: list[str] = []
    counts: list[Counter[str]] = []
    for human in data.studies:
        # Answers carry a handful of distinct tag lists: count those, then their tags.
        # (Distinct lists in first-answer order meet the tags in first-answer order.)
        tag_lists = Counter(human.answers.tags)
        for tag in [*(human.study["tags"] or []), *(t for ts in tag_lists for t in ts)]:
            if tag not in tags:
                tags.append(tag)
        count: Counter[str] = Counter()
        for tag_list, n in tag_lists.items():
            for tag in set(tag_list):
                count[tag] += n
        count[NO_TAG] = tag_lists.get((), 0)
        counts.append(count)
    rows: list[list[Cell]] = []
    for tag in [*tags, NO_TAG]:
        row: list[Cell] = [tag]
        for human, count in zip(data.studies, counts, strict=True):
            n = len(human.answers)
            row += [count[tag], pct(count[tag] / n) if n else None]
        rows.append(row)
    totals = ", ".join(f"{h.label}: {len(h.answers)}" for h in data.studies)
    return Table(
        key="human-tags",
        title="ToM dimensions raters used (share of answers)",
        columns=[
            "Tag",
            *(c for h in data.studies for c in (f"{h.label} answers", f"{h.label} share %")),
        ],
        rows=rows,
        note=(
            f"Share = answers carrying the tag / all answers of the study ({totals}). An "
            "answer (one rater, one masked speaker) may carry several tags, so shares "
            "need not sum to 100."
        ),
    )


def _fleiss_subset(units: list[list[Hashable]]) -> tuple[list[list[Hashable]], int | None]:
    """Units with the most common rater count (Fleiss' kappa needs equal counts).

    Ties go to the larger count (more raters per unit). Returns the units and m.
    """
    sizes = Counter(len(u) for u in units)
    if not sizes:
        return [], None
    m = max(sizes, key=lambda k: (sizes[k], k))
    return [u for u in units if len(u) == m], m


def _agreement_row(
    label: str, rating: str, units: list[list[Hashable]], *, seed: int
) -> list[Cell]:
    def r3(value: float | None) -> float | None:
        return None if value is None else round(value, 3)

    sizes = sorted({len(u) for u in units})
    per_unit = "" if not sizes else str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
    fleiss_units, m = _fleiss_subset(units)
    (agree_low, agree_high), (alpha_low, alpha_high) = agreement_cis(
        units, [percent_agreement, krippendorff_alpha], n_resamples=N_RESAMPLES, seed=seed
    )
    kappa_low, kappa_high = agreement_ci(
        fleiss_units, fleiss_kappa, n_resamples=N_RESAMPLES, seed=seed
    )
    return [
        label,
        rating,
        len(units),
        per_unit,
        pct(percent_agreement(units)),
        pct(agree_low),
        pct(agree_high),
        len(fleiss_units),
        m,
        r3(fleiss_kappa(fleiss_units)),
        r3(kappa_low),
        r3(kappa_high),
        r3(krippendorff_alpha(units)),
        r3(alpha_low),
        r3(alpha_high),
    ]


def _agreement_table(data: SpeakerData, *, seed: int) -> Table:
    rows: list[list[Cell]] = []
    for human in data.studies:
        answers: dict[int, list[Hashable]] = defaultdict(list)
        for instance, answer in zip(human.answers.instances, human.answers.answers, strict=True):
            if answer:  # "can't tell" names no one
                answers[instance].append(answer)
        flags: dict[int, list[Hashable]] = defaultdict(list)
        for response in human.answers.by_response.values():
            if response.history_needed is not None:
                flags[response.scene_id].append(response.history_needed)
        for rating, by_unit in (("speaker", answers), ("history needed", flags)):
            units = [values for values in by_unit.values() if len(values) >= 2]
            rows.append(_agreement_row(human.label, rating, units, seed=seed))
    return Table(
        key="human-agreement",
        title="Agreement between raters",
        columns=[
            "Study",
            "Rating",
            "Units",
            "Raters per unit",
            "Agreement %",
            "Agreement CI low %",
            "Agreement CI high %",
            "Fleiss units",
            "Fleiss raters",
            "Fleiss' kappa",
            "Kappa CI low",
            "Kappa CI high",
            "Krippendorff's alpha",
            "Alpha CI low",
            "Alpha CI high",
        ],
        rows=rows,
        note=(
            "Units rated by two raters or more, within one study: masked speakers "
            "(the character named) and scenes (the history-needed flag). Agreement: "
            "mean share of agreeing rater pairs per unit. Fleiss' kappa needs the same "
            "number of raters per unit: it uses only the Fleiss units, those with the "
            "most common count (Fleiss raters). Krippendorff's alpha (nominal) uses "
            "every unit. 95% CIs: percentile bootstrap over units; empty where undefined "
            "(e.g. every rating the same)."
        ),
    )


def _time_table(data: SpeakerData) -> Table:
    def seconds(value: float | None) -> float | None:
        return None if value is None else round(value / 1000, 2)

    rows: list[list[Cell]] = []
    for human in data.studies:
        timed = [r for r in human.answers.by_response.values() if r.total_ms is not None]
        total = [r.total_ms for r in timed]
        active = [r.active_ms for r in timed]
        rows.append(
            [
                human.label,
                len(timed),
                seconds(statistics.median(total)) if total else None,
                seconds(statistics.fmean(total)) if total else None,
                seconds(statistics.median(active)) if active else None,
                seconds(statistics.fmean(active)) if active else None,
            ]
        )
    return Table(
        key="human-time",
        title="Time per scene",
        columns=[
            "Study",
            "Timed scenes",
            "Median total s",
            "Mean total s",
            "Median active s",
            "Mean active s",
        ],
        rows=rows,
        note=(
            "Per submitted (rater, scene) response, measured on the server: total from the "
            "scene's first display to its submission; active leaves out gaps of more than "
            f"{IDLE_CUTOFF.total_seconds() / 60:g} minutes between the rater's actions."
        ),
    )
