"""Validation through the real pages: four annotators score two real DynToM stages.

The scoring round runs once for the module (tests/module_rows.py); each test reads it
in its own savepoint, so a rule change or an override made by one is gone for the next.

Scores (all 5, yes/no all "yes", except):
- trial149 profiles+relationship: annotator 2 says the relationship is not realistic;
- trial149 trajectory rationality 4, 4, 3, 4 (mean 3.75);
- trial149 scenario 3 consistency 3, 4, 4, 4 (mean 3.75);
- storyline: trial149 scenario 1 4, 4, 5, 5 and trial210 scenario 2 4, 4, 4, 4.

Hand-computed (Krippendorff 2011, coincidence matrices, ordinal metric
d(c,k) = (sum of n_g for g from c to k - (n_c + n_k) / 2) ** 2):
- rationality: units (4,4,3,4), (5,5,5,5): n3=1 n4=3 n5=4, n=8; o34=o43=1;
  d34=4, d35=30.25, d45=12.25; alpha = 1 - 7 * 8 / (2 * (3*4 + 4*30.25 + 12*12.25))
  = 1 - 56/560 = 0.9;
- storyline: ten units, (4,4,5,5), (4,4,4,4), eight (5,5,5,5): n4=6 n5=34, n=40;
  o45 = 4/3; alpha = 1 - 39 * (4/3) / (6 * 34) = 1 - 52/204 = 0.745098;
- consistency: (3,4,4,4) and nine (5,5,5,5): n3=1 n4=3 n5=36; o34=1; d34=4,
  d35=462.25, d45=380.25; alpha = 1 - 39 * 8 / (2 * (12 + 36*462.25 + 108*380.25))
  = 1 - 312/115440 = 0.997297.
Retention: profiles 1/2 = 50%, trajectories 1/2 = 50%, scenarios 9/10 = 90%.
"""

from __future__ import annotations

import json
import tempfile
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from accounts.services import user_create_with_role
from annotation.dyntom.validation.rubrics import paper_rule
from annotation.dyntom.validation.services import decision_rule_revise
from annotation.models import (
    AcceptedSet,
    ValidationAssignment,
    ValidationBatch,
    ValidationDecision,
    ValidationObject,
    ValidationScore,
    ValidationStage,
)
from reports.tables.validation import build_validation_report
from tests.factories import UserFactory
from tests.module_rows import register_builder

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("validation_scored")]

TRIALS = ("trial149", "trial210")


def _login(client, user):
    client.force_login(user)
    return client


def _value(stage: str, obj: ValidationObject, i: int, criterion: str, scale: str) -> int:
    """The score annotator ``i`` gives (see the module docstring)."""
    if scale == "yes_no":
        return (
            0
            if (stage, obj.kind, criterion, i)
            == ("trial149", "context", "relationship_realistic", 2)
            else 1
        )
    table = {
        ("trial149", "trajectory", "", "rationality"): (4, 4, 3, 4),
        ("trial149", "scenario", "3", "consistency"): (3, 4, 4, 4),
        ("trial149", "scenario", "1", "storyline"): (4, 4, 5, 5),
        ("trial210", "scenario", "2", "storyline"): (4, 4, 4, 4),
    }
    return table.get((stage, obj.kind, obj.ref, criterion), (5, 5, 5, 5))[i]


@register_builder("validation_scored")
def build_scored(shared_data: Path) -> tuple[int, list[int], int]:
    """A batch made on the page, four annotators scoring through the pages: ids of the
    batch, the annotators and the researcher."""
    with tempfile.TemporaryDirectory() as folder:
        for trial in TRIALS:
            (Path(folder) / trial).symlink_to(shared_data / "dyntom" / trial)
        call_command("import_benchmark", "dyntom", folder, stdout=StringIO())
    researcher = user_create_with_role(username="res", password="pw-res-123!", role="researcher")
    client = Client()
    _login(client, researcher)
    response = client.post(
        reverse("annotation:validation"),
        {
            "name": "two real stages",
            "k": 4,
            "kinds": ["context", "trajectory", "scenario"],
            "work_keys": "trial149, trial210",
        },
    )
    batch = ValidationBatch.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse(
        "annotation:validation-batch", args=[batch.pk]
    )
    annotators = [UserFactory(username=f"ann{i}", role="annotator") for i in range(4)]
    for i, ann in enumerate(annotators):
        client.logout()
        _login(client, ann)
        for _ in TRIALS:
            response = client.post(reverse("annotation:validation-take", args=[batch.pk]))
            assert response.status_code == 302
            vstage_url = response["Location"]
            page = client.get(vstage_url)
            assert page.status_code == 200
            vstage = page.context["vstage"]
            while True:
                page = client.get(vstage_url)
                slot = page.context["current"]
                if slot.submitted_at is not None:
                    break  # resumed on the last object: the stage is done
                obj = slot.object
                values = {
                    c["key"]: _value(vstage.label, obj, i, c["key"], c["scale"])
                    for c in slot.rubric.criteria
                }
                first, *rest = values
                # The first criterion is autosaved as htmx would; the rest go with submit.
                saved = client.post(
                    reverse("annotation:validation-save", args=[slot.pk]),
                    {f"score-{first}": values[first]},
                    headers={"HX-Request": "true"},
                )
                assert saved.status_code == 200 and b"Saved" in saved.content
                response = client.post(
                    reverse("annotation:validation-submit", args=[slot.pk]),
                    {f"score-{k}": values[k] for k in rest} | {"comment": f"by {i}"},
                )
                assert response.status_code == 302, response.content[:500]
    return batch.pk, [a.pk for a in annotators], researcher.pk


@pytest.fixture
def scored(client, module_rows):
    """The module's scored batch and its annotators, ``client`` signed in as its researcher."""
    batch_id, annotator_ids, researcher_id = module_rows.get("validation_scored")
    _login(client, get_user_model().objects.get(pk=researcher_id))
    annotators = list(get_user_model().objects.filter(pk__in=annotator_ids).order_by("pk"))
    return ValidationBatch.objects.get(pk=batch_id), annotators


def _decision(batch, stage: str, kind: str, ref: str = "") -> ValidationDecision:
    return ValidationDecision.objects.get(
        object__batch=batch, object__vstage__label=stage, object__kind=kind, object__ref=ref
    )


def test_four_annotators_decisions_retention_alpha_rule_change_and_override(client, scored):
    batch, _ = scored
    assert ValidationAssignment.objects.filter(object__batch=batch).count() == 14 * 4
    assert not ValidationAssignment.objects.filter(submitted_at__isnull=True).exists()
    assert ValidationScore.objects.filter(assignment__object__batch=batch).count() == 4 * 2 * (
        2 + 3 + 5 * 3
    )

    ctx = _decision(batch, "trial149", "context")
    assert (ctx.outcome, ctx.reason) == (
        "discard",
        "profiles and relationship: 1 score(s) <= 0 on relationship_realistic >= 1",
    )
    traj = _decision(batch, "trial149", "trajectory")
    assert (traj.outcome, traj.reason) == (
        "discard",
        "mental-state trajectory: mean rationality 3.75 < 4.0",
    )
    sc3 = _decision(batch, "trial149", "scenario", "3")
    assert (sc3.outcome, sc3.reason) == ("discard", "scenario 3: mean consistency 3.75 < 4.0")
    assert _decision(batch, "trial210", "scenario", "2").outcome == "keep"  # mean 4.0
    kept = ValidationDecision.objects.filter(object__batch=batch, outcome="keep").count()
    assert kept == 14 - 3
    stages = {s.label: s.outcome for s in ValidationStage.objects.filter(batch=batch)}
    assert stages == {"trial149": "discard", "trial210": "keep"}

    report = build_validation_report(batch_ids=[batch.pk], n_resamples=200)
    retention = {r[0]: r[1:] for r in report.table("retention").rows}
    assert retention["profiles and relationship"] == [2, 2, 1, 50.0, 92.0]
    assert retention["mental-state trajectory"] == [2, 2, 1, 50.0, 85.4]
    assert retention["scenario"] == [10, 10, 9, 90.0, 88.7]
    alpha = {(r[0], r[1]): r for r in report.table("agreement").rows}
    assert alpha[("mental-state trajectory", "rationality")][4] == pytest.approx(0.9, abs=1e-4)
    assert alpha[("scenario", "storyline")][4] == pytest.approx(0.745098, abs=1e-4)
    assert alpha[("scenario", "consistency")][4] == pytest.approx(0.997297, abs=1e-4)
    assert alpha[("mental-state trajectory", "coherence")][4] is None  # all 5: undefined
    low, high = alpha[("scenario", "storyline")][5:7]
    assert low <= 0.745098 <= high
    dist = {(r[0], r[1], r[2]): r[3] for r in report.table("distribution").rows}
    assert (
        dist[("mental-state trajectory", "rationality", 3)],
        dist[("mental-state trajectory", "rationality", 4)],
        dist[("mental-state trajectory", "rationality", 5)],
    ) == (1, 3, 4)
    assert dist[("profiles and relationship", "relationship_realistic", 0)] == 1

    # The researcher's page shows scores, decisions with reasons and accepted sets.
    page = client.get(reverse("annotation:validation-batch", args=[batch.pk]))
    assert page.status_code == 200
    assert b"mean rationality 3.75 &lt; 4.0" in page.content
    # A new version each time what the batch accepts changed while scores came in.
    scored_set = AcceptedSet.objects.filter(batch=batch).order_by("-version").first()
    assert len(scored_set.object_ids) == 11 and len(scored_set.stage_ids) == 1
    assert scored_set.rule_versions == {
        "context": 1,
        "question": 1,
        "scenario": 1,
        "trajectory": 1,
    }

    # A new rule version recomputes: threshold 3.5 keeps the trajectory and scenario 3.
    spec = paper_rule("trajectory")
    spec["rules"][0]["when"]["value"] = 3.5
    decision_rule_revise(kind="trajectory", spec=spec)
    traj.refresh_from_db()
    assert traj.outcome == "keep" and traj.rule.version == 2
    report = build_validation_report(batch_ids=[batch.pk], n_resamples=50)
    retention = {r[0]: r[1:] for r in report.table("retention").rows}
    assert retention["mental-state trajectory"][3] == 100.0

    # An override, stored with its reason; the stage and accepted set follow it.
    response = client.post(
        reverse("annotation:validation-override", args=[sc3.object_id]),
        {"outcome": "keep", "reason": "consistent once scenario 2 is read"},
    )
    assert response.status_code == 302
    sc3.refresh_from_db()
    assert (sc3.outcome, sc3.override_outcome, sc3.override_reason) == (
        "discard",
        "keep",
        "consistent once scenario 2 is read",
    )
    latest = AcceptedSet.objects.filter(batch=batch).order_by("-version").first()
    assert latest.version == scored_set.version + 2 and sc3.object_id in latest.object_ids
    assert latest.rule_versions["trajectory"] == 2
    report = build_validation_report(batch_ids=[batch.pk], n_resamples=50)
    assert report.table("retention").rows[2][3:5] == [10, 100.0]
    assert report.table("accepted-sets").rows[0][1] == latest.version


def test_report_page_and_exports(client, scored):
    batch, _ = scored
    page = client.get(reverse("reports:validation") + f"?batch={batch.pk}")
    assert page.status_code == 200
    assert b"Retention per step" in page.content and b"85.4" in page.content
    data = json.loads(client.get(reverse("reports:validation-export", args=["json"])).content)
    assert [t["key"] for t in data["tables"]] == [
        "retention",
        "agreement",
        "distribution",
        "review",
        "agreement-review",
        "accepted-sets",
    ]
    for fmt, kind in (("csv", "application/zip"), ("xlsx", "spreadsheet")):
        response = client.get(reverse("reports:validation-export", args=[fmt]))
        assert response.status_code == 200 and kind in response["Content-Type"]
    csv = client.get(reverse("reports:validation-table-csv", args=["retention"]))
    assert b"scenario,10,10,9,90.0,88.7" in csv.content.replace(b"\r", b"")
    svg = client.get(reverse("reports:validation-chart", args=["retention", "svg"]))
    assert svg.status_code == 200 and svg.content.lstrip().startswith(b"<")
    assert b"reports/validation/" in client.get(reverse("reports:index")).content


def test_the_cached_report_follows_rule_changes_and_overrides(client, scored):
    """The page's report is cached while nothing it reads changed (issue 31); a rule
    version that recomputes decisions, and an override, must show at once."""
    batch, _ = scored

    def retention() -> dict[str, float]:
        url = reverse("reports:validation-export", args=["json"]) + f"?batch={batch.pk}"
        table = json.loads(client.get(url).content)["tables"][0]
        return {row["Step"]: row["Retention %"] for row in table["rows"]}

    assert retention()["mental-state trajectory"] == 50.0
    assert retention()["mental-state trajectory"] == 50.0  # served from the cache
    spec = paper_rule("trajectory")
    spec["rules"][0]["when"]["value"] = 3.5
    decision_rule_revise(kind="trajectory", spec=spec)
    assert retention()["mental-state trajectory"] == 100.0
    sc3 = _decision(batch, "trial149", "scenario", "3")
    assert retention()["scenario"] == 90.0
    client.post(
        reverse("annotation:validation-override", args=[sc3.object_id]),
        {"outcome": "keep", "reason": "consistent once scenario 2 is read"},
    )
    assert retention()["scenario"] == 100.0
