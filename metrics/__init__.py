"""The pure math behind ToMLab's reports: no Django, no database, plain values in and out.

Table builders (``reports/tables/``) query the database and hand lists of booleans,
labels and numbers to these functions, so every number can be checked by hand in a
unit test. Fractions are in 0..1; tables turn them into percent.
"""

from metrics.accuracy import (
    EASY,
    HARD,
    AccuracyEstimate,
    accuracy,
    accuracy_by_difficulty,
    accuracy_by_group,
    accuracy_ci,
    accuracy_vs_chance,
    chance_baseline,
    cluster_accuracy_ci,
    first_seen_codes,
    majority_baseline,
    majority_choice,
    scene_accuracy_ci,
    speaker_difficulty,
    wilson_interval,
)
from metrics.agreement import (
    agreement_ci,
    agreement_cis,
    cohen_kappa,
    fleiss_kappa,
    interval_alpha,
    krippendorff_alpha,
    ordinal_alpha,
    ordinal_alpha_ci,
    percent_agreement,
)
from metrics.bootstrap import bootstrap_ci, percentile_interval
from metrics.chartom import (
    bonus_point_coverage,
    bonus_point_coverage_ci,
    length_ratio,
    penalty_rate,
)
from metrics.correlation import average_ranks, correlation_matrix, mean_sd, pearson, spearman
from metrics.dyntom import (
    CompositionalAnalysis,
    CompositionalCounts,
    DynToMOutcome,
    OutcomeColumns,
    SpanAccuracy,
    compositional_analysis,
    time_span_accuracy,
)

__all__ = [
    "EASY",
    "HARD",
    "AccuracyEstimate",
    "CompositionalAnalysis",
    "CompositionalCounts",
    "DynToMOutcome",
    "OutcomeColumns",
    "SpanAccuracy",
    "accuracy",
    "accuracy_by_difficulty",
    "accuracy_by_group",
    "accuracy_ci",
    "accuracy_vs_chance",
    "agreement_ci",
    "agreement_cis",
    "average_ranks",
    "bonus_point_coverage",
    "bonus_point_coverage_ci",
    "bootstrap_ci",
    "chance_baseline",
    "cluster_accuracy_ci",
    "cohen_kappa",
    "compositional_analysis",
    "correlation_matrix",
    "first_seen_codes",
    "fleiss_kappa",
    "interval_alpha",
    "krippendorff_alpha",
    "length_ratio",
    "majority_baseline",
    "majority_choice",
    "mean_sd",
    "ordinal_alpha",
    "ordinal_alpha_ci",
    "pearson",
    "penalty_rate",
    "percent_agreement",
    "percentile_interval",
    "scene_accuracy_ci",
    "speaker_difficulty",
    "spearman",
    "time_span_accuracy",
    "wilson_interval",
]
