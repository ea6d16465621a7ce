"""The reviewer queue of DynToM validation: threshold, permission, decisions with their
provenance and history, and the validation report's counts before and after.

Data: ``tests.validation_disputes`` (four annotators, two real stages). Hand-computed
ordinal alpha of trajectory rationality (Krippendorff 2011; d(c,k) = (sum of n_g from
c to k - (n_c + n_k) / 2) ** 2):
- before: units (5,5,2,5), (4,4,4,4): n2=1 n4=4 n5=3, n=8; o25=o52=1; d24=6.25,
  d25=36, d45=12.25; alpha = 1 - 7 * 2 * 36 / (2 * (4*6.25 + 3*36 + 12*12.25))
  = 1 - 504/560 = 0.1;
- after the reviewer settles trial149's rationality on 3: units (3,3,3,3), (4,4,4,4):
  no disagreement left, alpha = 1.0.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from accounts.services import reviewer_set
from annotation.dyntom.validation import review
from annotation.dyntom.validation.services import ValidationError, validation_adjudicate
from annotation.models import Adjudication, ValidationDecision, ValidationObject
from reports.tables.validation import build_validation_report
from tests.factories import UserFactory
from tests.validation_disputes import disputed_batch

pytestmark = pytest.mark.django_db


@pytest.fixture
def disputed(shared_data: Path, tmp_path: Path):
    return disputed_batch(shared_data, tmp_path)


def _object(batch, stage: str, kind: str) -> ValidationObject:
    return ValidationObject.objects.get(batch=batch, vstage__label=stage, kind=kind)


def _disputed(batch) -> list[tuple[str, str]]:
    batch.refresh_from_db()
    return [(d.obj.vstage.label, d.obj.kind) for d in review.batch_disputes(batch) if d.disputed]


def test_the_threshold_picks_the_disputed_objects(disputed):
    batch, _ = disputed
    # Default: spread >= 2 or a split keep/discard.
    assert _disputed(batch) == [("trial149", "context"), ("trial149", "trajectory")]
    traj = next(
        d for d in review.batch_disputes(batch) if d.obj.kind == "trajectory" and d.disputed
    )
    assert (traj.spread, traj.split, traj.rule_outcome) == (3, True, "keep")
    assert [a["alone"] for a in traj.answers] == ["keep", "keep", "discard", "keep"]
    rationality = next(c for c in traj.criteria if c["key"] == "rationality")
    assert (rationality["cells"], rationality["wide"]) == ([5, 5, 2, 5], True)
    # Spread 3, splits ignored: the yes/no split (spread 1) is no longer disputed.
    batch.review_spread, batch.review_split = 3, False
    batch.save()
    assert _disputed(batch) == [("trial149", "trajectory")]
    batch.review_spread = 4
    batch.save()
    assert _disputed(batch) == []
    batch.review_spread = 1
    batch.save()
    assert _disputed(batch) == [("trial149", "context"), ("trial149", "trajectory")]


def test_threshold_form_is_the_researchers(client, disputed, researcher):
    batch, annotators = disputed
    url = reverse("annotation:review-threshold", args=[batch.pk])
    client.force_login(researcher)
    assert client.post(url, {"spread": "9"}).status_code == 302
    batch.refresh_from_db()
    assert batch.review_spread == 2  # refused, with a message naming the field
    page = client.get(reverse("annotation:review-queue", args=[batch.pk]))
    assert "spread" in page.content.decode() and page.context["open"] == 2
    client.post(url, {"spread": "3"})
    batch.refresh_from_db()
    assert (batch.review_spread, batch.review_split) == (3, False)
    # A reviewer who is an annotator may review, not set the threshold.
    reviewer_set(user=annotators[0], allowed=True)
    client.force_login(annotators[0])
    assert client.post(url, {"spread": "1"}).status_code == 403


def test_permission_annotators_need_it_and_never_see_their_own(client, disputed, researcher):
    batch, annotators = disputed
    outsider = UserFactory(username="ann-new", role="annotator")
    traj = _object(batch, "trial149", "trajectory")
    urls = [
        reverse("annotation:review"),
        reverse("annotation:review-queue", args=[batch.pk]),
        reverse("annotation:review-object", args=[traj.pk]),
    ]
    client.force_login(outsider)
    for url in urls:
        response = client.get(url)
        assert response.status_code == 403 and "reviewer permission" in response.content.decode()
    assert (
        "Review disagreements" not in client.get(reverse("annotation:validation")).content.decode()
    )
    # A manager gives the permission on the members page.
    client.force_login(researcher)
    client.post(reverse("workspace-members"), {"username": "ann-new", "reviewer": "on"})
    outsider = type(outsider).objects.get(pk=outsider.pk)  # fresh permission cache
    assert outsider.has_perm("annotation.adjudicate") and researcher.has_perm(
        "annotation.adjudicate"
    )
    client.force_login(outsider)
    assert "Review disagreements" in client.get(reverse("annotation:validation")).content.decode()
    queue = client.get(urls[1])
    assert queue.status_code == 200 and len(queue.context["disputes"]) == 2
    page = client.get(urls[2])
    assert page.status_code == 200
    # Side by side: the four annotators' rationality.
    assert [c["cells"] for c in page.context["criteria"] if c["key"] == "rationality"] == [
        [5, 5, 2, 5]
    ]
    # An annotator-reviewer is not shown the objects they scored (nor others' answers).
    reviewer_set(user=annotators[1], allowed=True)
    client.force_login(annotators[1])
    assert client.get(urls[1]).context["disputes"] == []
    assert client.get(urls[2]).status_code == 404
    # Taking it away closes the queue again.
    reviewer_set(user=annotators[1], allowed=False)
    assert client.get(urls[0]).status_code == 403


def test_a_decision_is_stored_with_provenance_overrides_and_keeps_history(
    client, disputed, researcher
):
    batch, _ = disputed
    traj = _object(batch, "trial149", "trajectory")
    context = _object(batch, "trial149", "context")
    client.force_login(researcher)
    url = reverse("annotation:review-object", args=[traj.pk])
    # The reason is required; an incomplete settled set needs an outcome.
    response = client.post(url, {"outcome": "discard", "reason": ""})
    assert response.status_code == 400 and "reason" in response.content.decode()
    response = client.post(
        url, {"outcome": "from-settled", "settle-rationality": "3", "reason": "x"}
    )
    assert response.status_code == 400 and "missing: Coherence" in response.content.decode()
    response = client.post(url, {"outcome": "keep", "settle-rationality": "7", "reason": "x"})
    assert response.status_code == 400 and "not on its scale" in response.content.decode()
    assert not Adjudication.objects.exists()
    # Settled scores decide through the rules: mean rationality 3 < 4 discards.
    response = client.post(
        url,
        {
            "outcome": "from-settled",
            "settle-coherence": "5",
            "settle-rationality": "3",
            "settle-authenticity": "5",
            "reason": "the shift in scenario 3 has no cause",
        },
    )
    # On to the next object still to settle.
    assert response.status_code == 302
    assert response["Location"] == reverse("annotation:review-object", args=[context.pk])
    row = Adjudication.objects.get()
    assert (row.outcome, row.rule_outcome, row.reviewer, row.reason) == (
        "discard",
        "keep",
        researcher,
        "the shift in scenario 3 has no cause",
    )
    assert row.rule_reason.startswith("mental-state trajectory: no rule applies")
    assert row.settled_scores == {"coherence": 5, "rationality": 3, "authenticity": 5}
    assert [a["scores"]["rationality"] for a in row.answers] == [5, 5, 2, 5]
    assert [a["annotator"] for a in row.answers] == ["ann0", "ann1", "ann2", "ann3"]
    decision = ValidationDecision.objects.get(object=traj)
    # The rules' outcome stays; the decision in force overrides it, and the stage follows.
    assert (decision.outcome, decision.effective_outcome) == ("keep", "discard")
    traj.vstage.refresh_from_db()
    assert traj.vstage.outcome == "discard"
    assert review.decisions_changed(batch_ids=[batch.pk]) == {"trajectory": 1}
    # Keep the split context (the rules discard it), then undo it: history kept.
    validation_adjudicate(obj=context, reviewer=researcher, outcome="keep", reason="one slip")
    assert sum(review.decisions_changed().values()) == 2
    response = client.post(
        reverse("annotation:review-object", args=[context.pk]),
        {"undo": "1", "undo_reason": "asked the team"},
    )
    assert response.status_code == 302
    assert ValidationDecision.objects.get(object=context).effective_outcome == "discard"
    assert list(
        Adjudication.objects.filter(object=context).order_by("pk").values_list("outcome", "reason")
    ) == [("keep", "one slip"), ("", "asked the team")]
    assert review.decisions_changed() == {"trajectory": 1}
    page = client.get(reverse("annotation:review-object", args=[context.pk]))
    assert "undone" in page.content.decode() and "one slip" in page.content.decode()
    with pytest.raises(ValidationError, match="say why"):
        validation_adjudicate(obj=context, reviewer=researcher, outcome="keep", reason=" ")


def test_the_report_shows_agreement_before_and_after_and_the_decisions_changed(
    client, disputed, researcher
):
    batch, _ = disputed
    traj = _object(batch, "trial149", "trajectory")

    def rationality(report) -> list:
        table = next(t for t in report.tables if t.key == "agreement-review")
        return next(r for r in table.rows if r[1] == "rationality")

    before = build_validation_report(n_resamples=10)
    assert rationality(before) == ["mental-state trajectory", "rationality", 2, 0, 0.1, 0.1]
    assert before.facts["decisions_changed"] == 0
    validation_adjudicate(
        obj=traj,
        reviewer=researcher,
        reason="settled",
        settled={"coherence": 5, "rationality": 3, "authenticity": 5},
    )
    after = build_validation_report(n_resamples=10)
    assert rationality(after) == ["mental-state trajectory", "rationality", 2, 1, 0.1, 1.0]
    assert (after.facts["adjudicated"], after.facts["decisions_changed"]) == (1, 1)
    table = next(t for t in after.tables if t.key == "review")
    # Step, decided, adjudicated, changed, kept by the rules, kept after review.
    assert table.rows[1] == ["mental-state trajectory", 2, 1, 1, 2, 1]
    # The page and its CSV show the same counts (the report is cached: it must follow).
    client.force_login(researcher)
    page = client.get(reverse("reports:validation")).content.decode()
    assert "Agreement before and after adjudication" in page and "Decisions changed" in page
    csv = client.get(reverse("reports:validation-table-csv", args=["review"])).content.decode()
    assert "mental-state trajectory,2,1,1,2,1" in csv.replace("\r", "")
    queue = client.get(reverse("annotation:review-queue", args=[batch.pk]))
    assert queue.context["changed"] == 1 and queue.context["open"] == 1
