"""CharToM-QA construction tables: note checks, qualification, and Table 7 (Appendix E).

Added to the CharToM-QA report by ``reports/tables/chartom_qa.py``:

- ``note-checks``: the shares of the annotators' judgements of filtered notes (section
  4.1: accurate 80%, subjective but consistent 13%, inappropriate 7%, so 93% "treated
  as accurate") with 95% CIs, beside the paper's figures as a reference row. A share
  counts judgements (two per note in the paper's design); the interval resamples
  notes, because the two judgements of one note are not independent;
- ``note-check-agreement``: the two annotators' agreement on the notes both judged
  (percent agreement and Cohen's kappa, with bootstrap CIs over notes), on the three
  labels and on "treated as accurate" or not;
- ``check-review``: the reviewer queue's outcome: per check (note checks, expert
  judgement) the items with two or more answers, disputed, settled by a reviewer, the
  decisions changed, and agreement (percent and Krippendorff's alpha) before and after
  adjudication; after, a settled item's answers all count as the settled label or score,
  as they do in the shares above and in Table 7;
- ``checks-by-annotator``: each annotator's note checks (label shares) and expert
  scores (mean), with the median time per task: progress, and a lenient or harsh
  annotator at a glance;
- ``qualification``: each annotator's labeling trials (attempts, mean span F1 against
  the gold, passed);
- ``table-7``: per generative run BPC, RougeL and BERTScore (fractions), then the
  "Human Correlation" row (the paper's name): Pearson's r of the experts' mean score
  per judged answer with that answer's BPC (included / total bonus points), RougeL
  and BERTScore, and the paper's 0.92 / 0.72 / 0.81 as a reference row.

Pearson, kappa, agreement and the intervals all come from ``metrics``.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.db.models import Avg, Count, Max, Q

from annotation.chartom import check_decisions, check_review, judgement, note_checks
from annotation.models import (
    Adjudication,
    JudgementSample,
    NoteCheckLabel,
    QualificationAnswer,
    QualificationAttempt,
    TaskAssignment,
    TaskKind,
)
from metrics import (
    accuracy_ci,
    agreement_ci,
    bonus_point_coverage,
    cohen_kappa,
    krippendorff_alpha,
    pearson,
    percent_agreement,
)
from modeling.models import Prediction
from modeling.pipelines.chartom_qa import STRICT
from reports.chartom_answers import RunAnswers
from reports.report_types import Cell, Report, Table
from reports.tables import N_RESAMPLES, pct, run_label

# Section 4.1: 100 notes of four books, two annotators each.
PAPER_NOTES = 100
PAPER_SHARES = {"accurate": 80.0, "subjective": 13.0, "inappropriate": 7.0}
PAPER_TREATED_AS_ACCURATE = 93.0
# Appendix E, Table 7: Pearson's r of the experts' scores with each metric.
PAPER_CORRELATION = {"BPC": 0.92, "RougeL": 0.72, "BERTScore": 0.81}
TREATED = "treated as accurate"
LABELS = [(value, label) for value, label in NoteCheckLabel.choices]
TEXT_METRICS = {"RougeL": "rouge_l", "BERTScore": "bertscore_f1"}


def build(
    report: Report,
    generative: Sequence[dict[str, Any]],
    answers: dict[int, RunAnswers],
    *,
    seed: int,
) -> None:
    """Append the construction tables; ``answers`` holds each run's packed answers."""
    judgements = note_checks.note_check_judgements()
    # The annotators' own labels: their agreement is about them, not the reviewer's.
    own = note_checks.note_check_judgements(settled=False)
    report.tables.append(note_check_table(judgements, seed=seed))
    report.tables.append(note_agreement_table(own, seed=seed))
    report.tables.append(check_review_table(own, judgements))
    report.tables.append(checks_by_annotator_table())
    report.tables.append(qualification_table())
    run_ids = [r["id"] for r in generative]
    scores = judgement.judgement_scores(run_ids=run_ids) if run_ids else {}
    report.tables.append(table_7(generative, answers, scores))


def data_fingerprint(run_ids: Sequence[int]) -> dict[str, Any]:
    """What the construction tables read, for the report cache's key.

    Human checks and text-similarity scores change these tables without adding a
    prediction, so the cached report must not outlive them. ``run_ids`` are the
    CharToM-QA runs: their ids, not a join on the run's benchmark, let PostgreSQL read
    only their predictions (30 ms, not 240, beside a million DynToM predictions).
    """
    size: dict[str, Any] = {}
    submitted = TaskAssignment.objects.filter(
        task__kind__in=[TaskKind.NOTE_CHECK, TaskKind.JUDGEMENT], submitted_at__isnull=False
    )
    for kind, n, last in (
        submitted.order_by()
        .values_list("task__kind")
        .annotate(n=Count("pk"), last=Max("submitted_at"))
    ):
        size[f"{kind}_n"], size[f"{kind}_last"] = n, str(last)
    settled = Adjudication.objects.filter(task__isnull=False).aggregate(
        n=Count("pk"), last=Max("pk")
    )
    size.update({f"check_adjudications_{k}": v for k, v in settled.items()})
    size["review_spreads"] = sorted(
        JudgementSample.objects.values_list("pk", "review_spread").order_by()
    )
    size.update(
        {
            f"qualification_{k}": str(v)
            for k, v in QualificationAttempt.objects.aggregate(
                n=Count("pk"), last=Max("finished_at")
            ).items()
        }
    )
    size.update(
        {
            f"qualification_answers_{k}": str(v)
            for k, v in QualificationAnswer.objects.aggregate(
                n=Count("pk"), last=Max("answered_at")
            ).items()
        }
    )
    size.update(
        Prediction.objects.filter(run_id__in=list(run_ids)).aggregate(
            rouge_l=Count("pk", filter=Q(details__has_key="rouge_l")),
            bertscore=Count("pk", filter=Q(details__has_key="bertscore_f1")),
        )
    )
    return size


# --- note checks -----------------------------------------------------------------------


def _share_cells(judgements: list[note_checks.NoteJudgement], labels: set[str], seed: int):
    estimate = accuracy_ci(
        [j.label in labels for j in judgements],
        clusters=[j.note_id for j in judgements],
        n_resamples=N_RESAMPLES,
        seed=seed,
    )
    return [pct(estimate.accuracy), pct(estimate.ci_low), pct(estimate.ci_high)]


def note_check_table(judgements: list[note_checks.NoteJudgement], *, seed: int) -> Table:
    columns = ["Source", "Notes", "Judgements"]
    for _, label in [*LABELS, ("", TREATED)]:
        name = label[0].upper() + label[1:]
        columns += [f"{name} %", f"{name} CI low %", f"{name} CI high %"]
    ours: list[Cell] = ["This study", len({j.note_id for j in judgements}), len(judgements)]
    for value, _ in LABELS:
        ours += _share_cells(judgements, {value}, seed)
    ours += _share_cells(judgements, {NoteCheckLabel.ACCURATE, NoteCheckLabel.SUBJECTIVE}, seed)
    paper: list[Cell] = ["Paper, section 4.1 (reference)", PAPER_NOTES, None]
    for value, _ in LABELS:
        paper += [PAPER_SHARES[value], None, None]
    paper += [PAPER_TREATED_AS_ACCURATE, None, None]
    return Table(
        key="note-checks",
        title="Note checks: how annotators judged the filtered notes",
        columns=columns,
        rows=[ours, paper],
        note=(
            "Share of all submitted judgements per label (a note judged by two annotators "
            "counts twice); treated as accurate = accurate + subjective but consistent. "
            "95% CI: percentile bootstrap resampling notes. "
            + ("No note checked yet." if not judgements else "")
        ).strip(),
    )


def _pairs(judgements: list[note_checks.NoteJudgement]) -> list[tuple[str, str]]:
    """The first two judgements of every note judged at least twice, in submission order."""
    by_note: dict[int, list[str]] = defaultdict(list)
    for j in judgements:
        by_note[j.note_id].append(j.label)
    return [(labels[0], labels[1]) for labels in by_note.values() if len(labels) >= 2]


def _kappa(units: Sequence[Sequence[Any]]) -> float | None:
    return cohen_kappa([u[0] for u in units], [u[1] for u in units])


def note_agreement_table(judgements: list[note_checks.NoteJudgement], *, seed: int) -> Table:
    pairs = _pairs(judgements)
    treated = {NoteCheckLabel.ACCURATE.value, NoteCheckLabel.SUBJECTIVE.value}
    schemes = [
        ("Three labels", pairs),
        (
            "Treated as accurate or not",
            [(a in treated, b in treated) for a, b in pairs],
        ),
    ]
    rows: list[list[Cell]] = []
    for name, units in schemes:
        units = [list(u) for u in units]
        low, high = agreement_ci(units, percent_agreement, n_resamples=N_RESAMPLES, seed=seed)
        k_low, k_high = agreement_ci(units, _kappa, n_resamples=N_RESAMPLES, seed=seed)
        kappa = _kappa(units) if units else None
        rows.append(
            [
                name,
                len(units),
                pct(percent_agreement(units)),
                pct(low),
                pct(high),
                None if kappa is None else round(kappa, 4),
                None if k_low is None else round(k_low, 4),
                None if k_high is None else round(k_high, 4),
            ]
        )
    return Table(
        key="note-check-agreement",
        title="Note checks: agreement of the two annotators",
        columns=[
            "Labels",
            "Notes judged twice",
            "Agreement %",
            "Agreement CI low %",
            "Agreement CI high %",
            "Cohen's kappa",
            "Kappa CI low",
            "Kappa CI high",
        ],
        rows=rows,
        note=(
            "Over the notes with at least two judgements: the first and second judgement "
            "of each note (whoever gave them) are the two raters. Kappa is empty when it is "
            "0/0 (both gave one label throughout). 95% CI: bootstrap over notes."
        ),
    )


def _units(pairs: list[tuple[int, Any]]) -> list[list[Any]]:
    """(unit, value) pairs -> the values of each unit, units in first-seen order."""
    by_unit: dict[int, list[Any]] = defaultdict(list)
    for unit, value in pairs:
        by_unit[unit].append(value)
    return list(by_unit.values())


def _agreement_cells(units: list[list[Any]], level: str) -> list[Cell]:
    alpha = krippendorff_alpha(units, level)
    return [pct(percent_agreement(units)), None if alpha is None else round(alpha, 4)]


def check_review_table(
    own: list[note_checks.NoteJudgement], settled: list[note_checks.NoteJudgement]
) -> Table:
    """Agreement before and after adjudication, and the decisions changed, per check.

    ``own`` and ``settled`` are the note checks without and with the reviewers'
    decisions; expert scores are read here the same two ways. Disputed, settled and
    changed come from the reviewer queue's own functions, so the page and this table
    count alike.
    """
    disputes = check_review.check_disputes()
    in_force = check_decisions.settled_in_force()
    changed = check_review.check_decisions_changed()
    scores = {after: judgement.judgement_scores(settled=after) for after in (False, True)}
    units = {
        TaskKind.NOTE_CHECK: (
            _units([(j.note_id, j.label) for j in own]),
            _units([(j.note_id, j.label) for j in settled]),
            "nominal",
        ),
        TaskKind.JUDGEMENT: (list(scores[False].values()), list(scores[True].values()), "interval"),
    }
    rows: list[list[Cell]] = []
    for kind, name in (
        (TaskKind.NOTE_CHECK, "Note checks"),
        (TaskKind.JUDGEMENT, "Expert judgement"),
    ):
        before, after, level = units[kind]
        rows.append(
            [
                name,
                sum(1 for u in before if len(u) >= 2),
                sum(1 for d in disputes if d.kind == kind and d.disputed),
                sum(1 for s in in_force.values() if s.kind == kind),
                changed.get(kind, 0),
                *_agreement_cells(before, level),
                *_agreement_cells(after, level),
            ]
        )
    return Table(
        key="check-review",
        title="Checks: agreement before and after adjudication",
        columns=[
            "Check",
            "Items with 2+ answers",
            "Disputed",
            "Settled by a reviewer",
            "Decisions changed",
            "Agreement before %",
            "Alpha before",
            "Agreement after %",
            "Alpha after",
        ],
        rows=rows,
        note=(
            "Items: notes checked, model answers scored (all samples pooled). Disputed: "
            "closed tasks whose labels differ, or whose scores differ by the sample's "
            "threshold or more. Decisions changed: settled items whose decision differs "
            "from the most frequent label (a tie always changes) or from the experts' mean "
            "score. Agreement: the mean share of agreeing pairs of answers per item; "
            "Krippendorff's alpha nominal on labels, interval on scores (empty when "
            "undefined). After adjudication every answer of a settled item counts as the "
            "settled label or score."
        ),
    )


def checks_by_annotator_table() -> Table:
    rows = (
        TaskAssignment.objects.filter(
            task__kind__in=[TaskKind.NOTE_CHECK, TaskKind.JUDGEMENT], submitted_at__isnull=False
        )
        .order_by("annotator__username", "pk")
        .values_list("annotator__username", "task__kind", "answer", "seconds")
    )
    people: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for username, kind, answer, seconds in rows:
        answer = answer if isinstance(answer, dict) else {}
        value = answer.get("label") if kind == TaskKind.NOTE_CHECK else answer.get("score")
        if value is None:
            continue
        people[username][kind].append(value)
        people[username][f"{kind}_seconds"].append(seconds)
    table_rows: list[list[Cell]] = []
    for username, work in people.items():
        labels = work[TaskKind.NOTE_CHECK]
        scores = work[TaskKind.JUDGEMENT]
        shares = [
            pct(sum(label == value for label in labels) / len(labels)) if labels else None
            for value, _ in LABELS
        ]
        table_rows.append(
            [
                username,
                len(labels),
                *shares,
                _median(work[f"{TaskKind.NOTE_CHECK}_seconds"]),
                len(scores),
                _r(_mean(scores)),
                _median(work[f"{TaskKind.JUDGEMENT}_seconds"]),
            ]
        )
    return Table(
        key="checks-by-annotator",
        title="Note checks and expert scores by annotator",
        columns=[
            "Annotator",
            "Note checks",
            *(f"{label[0].upper() + label[1:]} %" for _, label in LABELS),
            "Median seconds per note",
            "Answers scored",
            "Mean score",
            "Median seconds per answer",
        ],
        rows=table_rows,
        note="Submitted work only; seconds from taking a task to submitting it (server clock).",
    )


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 1) if present else None


# --- qualification ---------------------------------------------------------------------


def qualification_table() -> Table:
    attempts = (
        QualificationAttempt.objects.order_by()
        .values("annotator__username", "qset__name", "qset__threshold")
        .annotate(
            attempts=Count("pk", distinct=True),
            finished=Count("pk", filter=Q(finished_at__isnull=False), distinct=True),
            passed=Count("pk", filter=Q(passed=True), distinct=True),
            answered=Count("answers"),
            mean_f1=Avg("answers__f1"),
            best=Max("score"),
        )
        .order_by("qset__name", "annotator__username")
    )
    rows: list[list[Cell]] = [
        [
            a["annotator__username"],
            a["qset__name"],
            a["qset__threshold"],
            a["attempts"],
            a["finished"],
            a["answered"],
            None if a["mean_f1"] is None else round(a["mean_f1"], 4),
            a["best"],
            a["passed"] > 0,
        ]
        for a in attempts
    ]
    return Table(
        key="qualification",
        title="Qualification trials: agreement with the gold key notes",
        columns=[
            "Annotator",
            "Gold set",
            "Threshold",
            "Attempts",
            "Finished",
            "Items answered",
            "Mean span F1",
            "Best score",
            "Passed",
        ],
        rows=rows,
        note=(
            "Mean span F1: the annotator's selected spans against the gold spans, over every "
            "item they answered in any attempt; best score and passed as each attempt "
            "recorded them (passed: at least one attempt reached the set's threshold). "
            + ("" if rows else "No qualification attempt yet.")
        ).strip(),
    )


# --- Table 7 ---------------------------------------------------------------------------


def _answer_bpc(covered: int | None, total: int) -> float | None:
    if covered is None or not total:
        return None
    return covered / total


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


# Two points always give r = ±1: a correlation is only reported from three answers.
MIN_CORRELATION_PAIRS = 3


def _missing_reason(metric: str, judged: list[float], values: list[Any]) -> str:
    """Why a metric's correlation is empty (``pearson`` gave None); ``judged`` holds the
    expert scores of the judged answers."""
    n = sum(v is not None for v in values)
    if not judged:
        return f"{metric}: no expert score yet"
    if metric == "BERTScore" and n == 0 and not getattr(settings, "TOMLAB_BERTSCORE_MODEL", ""):
        return "BERTScore not computed: no model configured (TOMLAB_BERTSCORE_MODEL)"
    if metric in TEXT_METRICS and n == 0:
        return (
            f"{metric} not computed yet: 'Score RougeL / BERTScore' on this page, or "
            "manage.py score_text_similarity --run ID"
        )
    if metric == "BPC" and n == 0:
        return "BPC not computed: the judged answers have no LLM-judge bonus points"
    if n < MIN_CORRELATION_PAIRS:
        return (
            f"{metric}: needs {MIN_CORRELATION_PAIRS} judged answers with a value, has {n} "
            "(r of two points is always ±1)"
        )
    return f"{metric}: constant over the judged answers, r undefined"


def table_7(
    generative: Sequence[dict[str, Any]],
    answers: dict[int, RunAnswers],
    scores: dict[int, list[float]],
) -> Table:
    rows: list[list[Cell]] = []
    human: list[float] = []
    metric_values: dict[str, list[Any]] = {"BPC": [], **{name: [] for name in TEXT_METRICS}}
    for run in generative:
        run_answers = answers.get(run["id"], RunAnswers())
        strict = run_answers.strict or {"covered": [], "total": []}
        judgements = list(zip(strict["covered"], strict["total"], strict=True))
        pairs = [(covered, total) for covered, total in judgements if covered is not None]
        judged = [i for i, pk in enumerate(run_answers.ids) if scores.get(pk)]
        text = {
            name: [v for v in getattr(run_answers, key) if v is not None]
            for name, key in TEXT_METRICS.items()
        }
        n = len(run_answers.ids)
        notes = [
            f"{name} on {len(values)} of {n} answers"
            for name, values in text.items()
            if len(values) != n
        ]
        run_human = [statistics.fmean(scores[run_answers.ids[i]]) for i in judged]
        rows.append(
            [
                run_label(run),
                n,
                _r(bonus_point_coverage(pairs)),
                _r(_mean(text["RougeL"])),
                _r(_mean(text["BERTScore"])),
                len(judged),
                _r(_mean(run_human)),
                "; ".join(notes),
            ]
        )
        human += run_human
        metric_values["BPC"] += [_answer_bpc(*judgements[i]) for i in judged]
        for name, key in TEXT_METRICS.items():
            metric_values[name] += [getattr(run_answers, key)[i] for i in judged]
    correlations = {
        name: pearson(human, values)
        if sum(v is not None for v in values) >= MIN_CORRELATION_PAIRS
        else None
        for name, values in metric_values.items()
    }
    reasons = [
        _missing_reason(name, human, metric_values[name])
        for name, r in correlations.items()
        if r is None
    ]
    counts = ", ".join(
        f"{name} {sum(v is not None for v in values)}" for name, values in metric_values.items()
    )
    rows.append(
        [
            "Human Correlation (Pearson r)",
            len(human),
            *(_r(correlations[name]) for name in ("BPC", "RougeL", "BERTScore")),
            None,
            _r(_mean(human)),
            "; ".join([f"answers with a value: {counts}", *reasons]),
        ]
    )
    rows.append(
        [
            "Paper, Table 7 Human Correlation (reference)",
            None,
            PAPER_CORRELATION["BPC"],
            PAPER_CORRELATION["RougeL"],
            PAPER_CORRELATION["BERTScore"],
            None,
            None,
            "CharToM-QA Appendix E, on the paper's human-study subset",
        ]
    )
    return Table(
        key="table-7",
        title=(
            "Table 7: BPC, RougeL and BERTScore, and their correlation with expert scores "
            f"(BPC scoring: {STRICT})"
        ),
        columns=[
            "System",
            "Answers",
            "BPC",
            "RougeL",
            "BERTScore",
            "Judged answers",
            "Mean human score",
            "Notes",
        ],
        rows=rows,
        note=" ".join(
            [
                "Run rows: first-sample generative answers of the run; BPC pooled over the "
                "answers the LLM judge scored, RougeL and BERTScore F1 averaged (fractions; "
                "the paper prints percent). Human correlation: Pearson's r over the judged "
                "answers of the selected runs between the experts' mean score (0-1) and the "
                "answer's BPC (included / total bonus points), RougeL and BERTScore.",
                *(f"{reason}." for reason in reasons),
            ]
        ),
    )
