"""Token overlap of a model answer with the reference answer: ROUGE-L (Lin 2004).

CharToM-QA Appendix E / Table 7 reports RougeL beside BPC and BERTScore. ROUGE-L is
the F-measure of the longest common subsequence (LCS) of the two token sequences:
P = LCS / len(candidate), R = LCS / len(reference), F = 2PR / (P + R).

We use Google's ``rouge-score`` package (the reimplementation of ROUGE-1.5.5 most
papers cite) with its default tokenizer: lowercased, every run of characters other
than ``a-z0-9`` is a separator, no stemming. That tokenizer is ASCII-only, so text
in other scripts (CharToM-QA's Chinese release) scores 0; the English release is
what ToMLab holds.
"""

from __future__ import annotations

from functools import cache

from rouge_score.rouge_scorer import RougeScorer


@cache
def _scorer() -> RougeScorer:
    return RougeScorer(["rougeL"], use_stemmer=False)


def rouge_l(reference: str, candidate: str) -> float:
    """ROUGE-L F-measure of ``candidate`` against ``reference``, in 0..1.

    0.0 when either side has no token (an empty or refused answer).
    """
    return float(_scorer().score(reference, candidate)["rougeL"].fmeasure)
