"""DynToM validation services on real stages: defaults, assignment, scores, decisions,
rule versions, overrides, accepted-set versions and the hand-off of generated stages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command

from annotation.dyntom.validation.rubrics import (
    DEFAULT_RUBRICS,
    RubricError,
    paper_rule,
    validation_defaults_ensure,
)
from annotation.dyntom.validation.rules import RuleError
from annotation.dyntom.validation.services import (
    ValidationError,
    decision_rule_revise,
    rubric_revise,
    validation_batch_create,
    validation_decision_override,
    validation_score_record,
    validation_stage_take,
    validation_submit,
)
from annotation.models import (
    AcceptedSet,
    DecisionRule,
    GeneratedStage,
    GenerationJob,
    Rubric,
    ValidationAssignment,
    ValidationBatch,
    ValidationDecision,
    ValidationScore,
)
from benchmarks.models import DynToMStage, Work
from modeling.models import Backend
from tests.factories import UserFactory, generation_job

pytestmark = pytest.mark.django_db

TRIALS = ("trial149", "trial210")


@pytest.fixture
def real_stages(shared_data: Path, tmp_path: Path) -> list[DynToMStage]:
    # Link two real trials into a temp dir (nothing is copied into the repo).
    for trial in TRIALS:
        (tmp_path / trial).symlink_to(shared_data / "dyntom" / trial)
    call_command("import_benchmark", "dyntom", str(tmp_path))
    return list(DynToMStage.objects.filter(work__key__in=TRIALS).order_by("work__key"))


def _annotators(n: int) -> list:
    return [UserFactory(username=f"ann{i}", role="annotator") for i in range(n)]


def _score_all(assignment: ValidationAssignment, value_of: dict[str, int]) -> None:
    validation_submit(
        assignment_id=assignment.pk,
        annotator=assignment.annotator,
        # Unnamed criteria get the top of their scale: 5, or 1 (yes) for yes/no.
        values={
            c["key"]: value_of.get(c["key"], 1 if c["scale"] == "yes_no" else 5)
            for c in assignment.rubric.criteria
        },
    )


def test_defaults_are_created_once_and_an_edit_is_a_new_version():
    assert validation_defaults_ensure() == 8
    assert validation_defaults_ensure() == 0
    criteria = [*DEFAULT_RUBRICS["question"], DEFAULT_RUBRICS["trajectory"][2]]
    v2 = rubric_revise(kind="question", criteria=criteria, notes="add authenticity")
    assert v2.version == 2 and Rubric.objects.filter(kind="question").count() == 2
    assert validation_defaults_ensure() == 0  # an edited kind is never reset
    with pytest.raises(RubricError, match=r"criteria\[0\].scale"):
        rubric_revise(kind="question", criteria=[{"key": "a", "label": "A", "scale": "1-7"}])
    # The active rule reads "*", so dropping a criterion is fine; one naming it is not.
    decision_rule_revise(
        kind="question",
        spec={
            "rules": [
                {
                    "when": {"stat": "mean", "criterion": "clarity", "op": "<", "value": 4},
                    "then": "regenerate",
                }
            ]
        },
    )
    with pytest.raises(RuleError, match="'clarity' is not a criterion"):
        rubric_revise(kind="question", criteria=DEFAULT_RUBRICS["question"][1:])


def test_assignment_k_annotators_never_twice_and_rubric_version_kept(real_stages):
    batch = validation_batch_create(
        name="b", stages=real_stages[:1], kinds=["context", "trajectory", "scenario"], k=4
    )
    assert batch.validation_objects.count() == 1 + 1 + 5
    anns = _annotators(5)
    for ann in anns[:4]:
        vstage = validation_stage_take(batch=batch, annotator=ann)
        assert vstage is not None and vstage.label == "trial149"
        assert ValidationAssignment.objects.filter(annotator=ann).count() == 7
        # Asking again gives nothing new: no object twice.
        assert validation_stage_take(batch=batch, annotator=ann) is None
        assert ValidationAssignment.objects.filter(annotator=ann).count() == 7
    assert validation_stage_take(batch=batch, annotator=anns[4]) is None  # all full at k=4
    first = ValidationAssignment.objects.filter(annotator=anns[0], object__kind="trajectory").get()
    rubric_revise(kind="trajectory", criteria=DEFAULT_RUBRICS["trajectory"][:2])
    first.refresh_from_db()
    assert first.rubric.version == 1  # old slots keep the rubric they were given


def test_scores_idempotent_hidden_checks_and_decisions(real_stages):
    batch = validation_batch_create(name="b", stages=real_stages[:1], kinds=["trajectory"], k=4)
    anns = _annotators(4)
    for ann in anns:
        validation_stage_take(batch=batch, annotator=ann)
    slots = list(ValidationAssignment.objects.order_by("annotator__username"))
    a0 = slots[0]
    validation_score_record(assignment_id=a0.pk, annotator=anns[0], criterion="coherence", value=3)
    validation_score_record(assignment_id=a0.pk, annotator=anns[0], criterion="coherence", value=3)
    assert ValidationScore.objects.filter(assignment=a0).count() == 1
    with pytest.raises(ValidationError, match="not on its scale"):
        validation_score_record(
            assignment_id=a0.pk, annotator=anns[0], criterion="coherence", value=6
        )
    with pytest.raises(ValidationError, match="no such object"):
        validation_score_record(
            assignment_id=a0.pk, annotator=anns[1], criterion="coherence", value=4
        )
    with pytest.raises(ValidationError, match="score every criterion first"):
        validation_submit(assignment_id=a0.pk, annotator=anns[0])
    # rationality 4, 4, 3, 4 -> mean 3.75 < 4.0
    for slot, rationality in zip(slots, (4, 4, 3, 4), strict=True):
        _score_all(slot, {"coherence": 5, "rationality": rationality, "authenticity": 4})
    decision = ValidationDecision.objects.get(object__batch=batch)
    assert decision.outcome == "discard"
    assert decision.reason == "mental-state trajectory: mean rationality 3.75 < 4.0"
    assert decision.rule.version == 1
    # A submitted object is frozen; a replayed submission changes nothing.
    with pytest.raises(ValidationError, match="already submitted"):
        validation_score_record(
            assignment_id=a0.pk, annotator=anns[0], criterion="coherence", value=5
        )
    validation_submit(assignment_id=a0.pk, annotator=anns[0])

    # A new rule version (threshold 3.5) recomputes the decision.
    spec = paper_rule("trajectory")
    spec["rules"][0]["when"]["value"] = 3.5
    rule = decision_rule_revise(kind="trajectory", spec=spec, notes="softer")
    decision.refresh_from_db()
    assert (decision.outcome, decision.rule_id, rule.version) == ("keep", rule.pk, 2)
    assert decision.reason == "mental-state trajectory: no rule applies (4 annotators): keep"
    sets = list(AcceptedSet.objects.filter(batch=batch).order_by("version"))
    assert [s.version for s in sets] == [1]
    assert sets[0].object_ids == [decision.object_id]
    assert sets[0].rule_versions["trajectory"] == 2
    assert sets[0].stage_ids == [decision.object.vstage_id]

    # An override is stored with its reason; recomputation leaves it alone.
    with pytest.raises(ValidationError, match="say why"):
        validation_decision_override(
            obj=decision.object, outcome="discard", reason=" ", overridden_by=None
        )
    researcher = UserFactory(username="boss", role="researcher")
    validation_decision_override(
        obj=decision.object,
        outcome="discard",
        reason="copies another stage",
        overridden_by=researcher,
    )
    decision_rule_revise(kind="trajectory", spec=spec, notes="same again")
    decision.refresh_from_db()
    assert (decision.outcome, decision.override_outcome) == ("keep", "discard")
    assert (
        decision.override_reason == "copies another stage" and decision.overridden_by == researcher
    )
    latest = AcceptedSet.objects.filter(batch=batch).order_by("-version").first()
    assert (
        latest.version == 3 and latest.object_ids == [] and latest.rule_versions["trajectory"] == 3
    )


def test_undecided_adds_a_fifth_annotator(real_stages):
    decision_rule_revise(
        kind="trajectory",
        spec={
            "rules": [
                {
                    "when": {
                        "all": [
                            {"stat": "mean", "criterion": "*", "op": ">=", "value": 3.5},
                            {"stat": "mean", "criterion": "*", "op": "<", "value": 4.0},
                        ]
                    },
                    "then": "undecided",
                    "add_annotators": 1,
                    "max_annotators": 5,
                },
                {
                    "when": {"stat": "mean", "criterion": "*", "op": "<", "value": 4.0},
                    "then": "discard",
                },
            ],
            "otherwise": "keep",
        },
    )
    batch = validation_batch_create(name="b", stages=real_stages[:1], kinds=["trajectory"], k=4)
    anns = _annotators(6)
    for ann, rationality in zip(anns[:4], (4, 4, 3, 4), strict=True):
        validation_stage_take(batch=batch, annotator=ann)
        _score_all(ValidationAssignment.objects.get(annotator=ann), {"rationality": rationality})
    obj = batch.validation_objects.get()
    obj.refresh_from_db()
    assert obj.k == 5 and obj.decision.outcome == "undecided"
    assert validation_stage_take(batch=batch, annotator=anns[4]) is not None
    assert validation_stage_take(batch=batch, annotator=anns[5]) is None  # k = 5 reached
    _score_all(ValidationAssignment.objects.get(annotator=anns[4]), {"rationality": 5})
    obj.decision.refresh_from_db()
    assert obj.decision.outcome == "keep"  # rationality mean 20/5 = 4.0


def _generated_from(shared_data: Path, trial: str) -> GeneratedStage:
    """A generated stage awaiting validation whose texts are those of a real trial."""
    story = json.loads((shared_data / "dyntom" / trial / "story.json").read_text())
    questions = json.loads((shared_data / "dyntom" / trial / "question_new.json").read_text())
    backend = Backend.objects.create(name="loop", kind="openai", base_url="http://127.0.0.1:9/v1")
    job = generation_job(
        backend,
        scenario_count=story["scenario numbers"],
        status=GenerationJob.Status.SUCCEEDED,
    )
    sketch = dict(story["sketch"])
    relationship = next(iter(sketch.pop("relationships among characters").values()))
    return GeneratedStage.objects.create(
        job=job,
        index=1,
        status=GeneratedStage.Status.AWAITING_VALIDATION,
        scenario_count=story["scenario numbers"],
        location=story.get("social setting", ""),
        location_category=story.get("social setting type", ""),
        characters=[{"full_name": story["main character"]}],
        characters_information=story["characters information"],
        relationship=relationship,
        trajectory=sketch,
        scenarios=story["story"],
        questions=questions,
        model="m",
    )


def test_generated_stage_kept_by_the_rules_enters_the_item_bank(shared_data):
    kept = _generated_from(shared_data, "trial263")
    batch = validation_batch_create(
        name="gen", generated=[kept], kinds=["context", "trajectory", "scenario"], k=2
    )
    anns = _annotators(2)
    for ann in anns:
        validation_stage_take(batch=batch, annotator=ann)
        for slot in ValidationAssignment.objects.filter(annotator=ann):
            _score_all(slot, {})
    kept.refresh_from_db()
    assert kept.status == GeneratedStage.Status.KEPT
    work = Work.objects.get(key=kept.work_key)
    assert work.stage.scenarios.count() == 5 and work.stage.questions.count() == 71
    assert work.extra["generation"]["decision"]["reason"].endswith("every object kept")


def test_generated_stage_with_a_no_is_discarded(shared_data):
    gen = _generated_from(shared_data, "trial263")
    batch = validation_batch_create(name="gen", generated=[gen], kinds=["context"], k=2)
    anns = _annotators(2)
    for ann, realistic in zip(anns, (1, 0), strict=True):
        validation_stage_take(batch=batch, annotator=ann)
        _score_all(
            ValidationAssignment.objects.get(annotator=ann), {"relationship_realistic": realistic}
        )
    gen.refresh_from_db()
    assert gen.status == GeneratedStage.Status.DISCARDED
    assert gen.decision_reason == f"validation batch {batch.pk}: discarded: context"
    assert not Work.objects.filter(key__startswith="generated-").exists()


def test_admin_edit_saves_a_new_rule_version_and_refuses_a_bad_one(client):
    researcher = UserFactory(username="boss", role="researcher")
    client.force_login(researcher)
    validation_defaults_ensure()
    v1 = DecisionRule.objects.get(kind="scenario", version=1)
    url = f"/admin/annotation/decisionrule/{v1.pk}/change/"
    spec = paper_rule("scenario")
    spec["rules"][0]["when"]["stat"] = "median"
    response = client.post(url, {"kind": "scenario", "spec": json.dumps(spec), "notes": "median"})
    assert response.status_code == 302
    v1.refresh_from_db()
    assert v1.spec == paper_rule("scenario")  # the old version is untouched
    v2 = DecisionRule.objects.get(kind="scenario", version=2)
    assert v2.spec == spec and v2.created_by == researcher
    spec["rules"][0]["when"]["criterion"] = "nonsense"
    bad = client.post(url, {"kind": "scenario", "spec": json.dumps(spec), "notes": ""})
    assert bad.status_code == 200 and b"&#x27;nonsense&#x27; is not a criterion" in bad.content
    assert DecisionRule.objects.filter(kind="scenario").count() == 2
    # A rubric edit through the admin is a new version as well.
    r1 = Rubric.objects.get(kind="question", version=1)
    criteria = DEFAULT_RUBRICS["question"]
    response = client.post(
        f"/admin/annotation/rubric/{r1.pk}/change/",
        {"kind": "question", "criteria": json.dumps(criteria), "notes": "same, again"},
    )
    assert response.status_code == 302
    assert list(Rubric.objects.filter(kind="question").values_list("version", flat=True)) == [2, 1]


def test_questions_below_threshold_are_regenerated_not_the_stage(real_stages):
    from reports.tables.validation import build_validation_report

    batch = validation_batch_create(name="q", stages=real_stages[:1], kinds=["question"], k=1)
    assert batch.validation_objects.count() == 71  # the stage's real question count
    (ann,) = _annotators(1)
    validation_stage_take(batch=batch, annotator=ann)
    for slot in ValidationAssignment.objects.filter(annotator=ann).select_related("object"):
        low = slot.object.ref == "type_d_why_3"
        _score_all(slot, {"answerability": 3} if low else {})
    decision = ValidationDecision.objects.get(object__ref="type_d_why_3")
    assert (decision.outcome, decision.reason) == (
        "regenerate",
        "question type_d_why_3: mean answerability 3.0 < 4.0",
    )
    vstage = batch.stages.get()
    assert (vstage.outcome, vstage.outcome_reason) == ("regenerate", "1 question(s) to regenerate")
    rows = {r[0]: r[1:] for r in build_validation_report(n_resamples=10).table("retention").rows}
    assert rows["question"] == [71, 71, 70, 98.59, None]


def test_generated_stages_awaiting_are_offered_once_on_the_page(client, shared_data):
    from django.urls import reverse

    gen = _generated_from(shared_data, "trial263")
    client.force_login(UserFactory(username="boss", role="researcher"))
    page = client.get(reverse("annotation:validation"))
    assert b"1 generated stage awaits validation in no batch yet" in page.content
    form = {"name": "gen", "k": 4, "kinds": ["context"], "include_generated": "on"}
    assert client.post(reverse("annotation:validation"), form).status_code == 302
    batch = ValidationBatch.objects.get()
    assert list(batch.stages.values_list("generated_id", flat=True)) == [gen.pk]
    assert b"waiting-generated" not in client.get(reverse("annotation:validation")).content
    # A second batch does not take the same stage again: nothing is left to validate.
    empty = client.post(reverse("annotation:validation"), {**form, "name": "again"})
    assert empty.status_code == 400 and b"no stage to validate" in empty.content
    assert not ValidationBatch.objects.filter(name="again").exists()
