"""Writes of DynToM validation: batches, assignment, scores, decisions, overrides, versions.

The flow (paper section 3.1, Appendix A): a researcher puts stages (imported item-bank
stages or generated ones) into a :class:`ValidationBatch`; each stage becomes up to four
kinds of objects (profiles+relationship, trajectory, each scenario, each question). An
annotator takes the next stage with room (:func:`validation_stage_take`) and gets a
slot on every object of it that still has fewer than ``k`` annotators. Every score is
saved the moment it is given (:func:`validation_score_record`, idempotent); submitting
an object freezes it and recomputes its decision from the submitted scores and the
active rule of its kind (:func:`validation_decisions_recompute`). The stage follows its
objects: a generated stage all kept is published with ``generated_stage_keep``, one
discarded goes to ``generated_stage_discard``. Every change in what a batch accepts is
recorded as a new :class:`AcceptedSet` version.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from benchmarks.models import DynToMStage
from studies.assignment import items_assign_with_room

from ...models import (
    AcceptedSet,
    Adjudication,
    DecisionRule,
    GeneratedStage,
    GenerationJob,
    Rubric,
    ValidationAssignment,
    ValidationBatch,
    ValidationDecision,
    ValidationObject,
    ValidationScore,
    ValidationStage,
)
from ..generation.services import generated_stage_discard, generated_stage_keep
from . import rules as rules_lang
from .rubrics import (
    CONTEXT,
    KIND_LABELS,
    KINDS,
    QUESTION,
    SCALE_VALUES,
    SCENARIO,
    TRAJECTORY,
    criteria_validate,
    criterion_keys,
    validation_defaults_ensure,
)
from .selectors import waiting_generated_stages


class ValidationError(ValueError):
    """A request the validation flow refuses; the message is shown to the person."""


# --- rubrics and rules (versioned) ----------------------------------------------------


def _newest(model: type[Rubric] | type[DecisionRule]) -> dict[str, Any]:
    # One query in the common case: the defaults are only written when a kind is missing.
    for _ in range(2):
        newest: dict[str, Any] = {}
        for row in model.objects.order_by("kind", "-version"):
            newest.setdefault(row.kind, row)
        if set(KINDS) <= set(newest):
            return newest
        validation_defaults_ensure()
    return newest


def active_rubrics() -> dict[str, Rubric]:
    """Kind -> newest rubric version (defaults created if missing)."""
    return _newest(Rubric)


def active_rules() -> dict[str, DecisionRule]:
    """Kind -> newest decision rule version (defaults created if missing)."""
    return _newest(DecisionRule)


@transaction.atomic
def rubric_revise(
    *, kind: str, criteria: list[dict[str, Any]], notes: str = "", created_by=None
) -> Rubric:
    """Save edited criteria as the kind's next rubric version; earlier scores keep theirs.

    Raises :class:`~annotation.dyntom.validation.rubrics.RubricError` for unsound
    criteria, and :class:`~annotation.dyntom.validation.rules.RuleError` when the kind's
    active rule names a criterion the new version drops (revise the rule first).
    """
    if kind not in KINDS:
        raise ValidationError(f"unknown kind {kind!r}")
    criteria_validate(criteria)
    rules_lang.rule_spec_validate(active_rules()[kind].spec, criterion_keys(criteria))
    current = Rubric.objects.select_for_update().filter(kind=kind).order_by("-version").first()
    return Rubric.objects.create(
        kind=kind,
        version=(current.version + 1) if current else 1,
        criteria=criteria,
        notes=notes,
        created_by=created_by,
    )


@transaction.atomic
def decision_rule_revise(
    *, kind: str, spec: dict[str, Any], notes: str = "", created_by=None
) -> DecisionRule:
    """Save a rule set as the kind's next version and recompute every decision of that
    kind with it. Raises :class:`~annotation.dyntom.validation.rules.RuleError` naming
    what is wrong."""
    if kind not in KINDS:
        raise ValidationError(f"unknown kind {kind!r}")
    rules_lang.rule_spec_validate(spec, criterion_keys(active_rubrics()[kind].criteria))
    current = (
        DecisionRule.objects.select_for_update().filter(kind=kind).order_by("-version").first()
    )
    rule = DecisionRule.objects.create(
        kind=kind,
        version=(current.version + 1) if current else 1,
        spec=spec,
        notes=notes,
        created_by=created_by,
    )
    validation_decisions_recompute(objects=ValidationObject.objects.filter(kind=kind))
    # The accepted sets now rest on the new rule version, changed outcomes or not.
    versions = {k: r.version for k, r in active_rules().items()}
    for batch_id in (
        ValidationObject.objects.filter(kind=kind)
        .order_by()
        .values_list("batch_id", flat=True)
        .distinct()
    ):
        if AcceptedSet.objects.filter(batch_id=batch_id).exists():
            accepted_set_snapshot(batch_id=batch_id, rule_versions=versions)
    return rule


# --- batches --------------------------------------------------------------------------


def _objects_of(
    *, kinds: Sequence[str], scenarios: Sequence[int], questions: Sequence[str]
) -> list[tuple[str, str, str]]:
    """(kind, ref, label) of a stage's objects in screen order."""
    out: list[tuple[str, str, str]] = []
    if CONTEXT in kinds:
        out.append((CONTEXT, "", "profiles and relationship"))
    if TRAJECTORY in kinds:
        out.append((TRAJECTORY, "", "mental-state trajectory"))
    if SCENARIO in kinds:
        out.extend((SCENARIO, str(n), f"scenario {n}") for n in scenarios)
    if QUESTION in kinds:
        out.extend((QUESTION, key, f"question {key}") for key in questions)
    return out


@transaction.atomic
def validation_batch_create(
    *,
    name: str,
    stages: Iterable[DynToMStage] = (),
    generated: Iterable[GeneratedStage] = (),
    k: int = 4,
    kinds: Sequence[str] = KINDS,
    created_by=None,
) -> ValidationBatch:
    """A batch over imported stages and generated stages awaiting validation.

    Each stage gets one object per kind in ``kinds`` (one per scenario and question).
    ``k`` annotators score every object. Generated stages must await validation.
    """
    if not 1 <= k <= 20:
        raise ValidationError("k must be from 1 to 20")
    kinds = [kind for kind in KINDS if kind in set(kinds)]
    if not kinds:
        raise ValidationError("choose at least one kind of object to score")
    validation_defaults_ensure()
    batch = ValidationBatch.objects.create(name=name, k=k, kinds=kinds, created_by=created_by)
    position = 0
    objects: list[ValidationObject] = []

    def add(vstage: ValidationStage, scenarios: Sequence[int], questions: Sequence[str]) -> None:
        for i, (kind, ref, label) in enumerate(
            _objects_of(kinds=kinds, scenarios=scenarios, questions=questions)
        ):
            objects.append(
                ValidationObject(
                    batch=batch, vstage=vstage, kind=kind, ref=ref, position=i, label=label, k=k
                )
            )

    for stage in (
        DynToMStage.objects.filter(pk__in=[s.pk for s in stages])
        .select_related("work")
        .order_by("work__key")
    ):
        position += 1
        vstage = ValidationStage.objects.create(
            batch=batch, position=position, stage=stage, label=stage.work.key
        )
        add(
            vstage,
            list(stage.scenarios.order_by("number").values_list("number", flat=True)),
            list(stage.questions.order_by("position").values_list("key", flat=True)),
        )
    for gen in generated:
        if gen.status != GeneratedStage.Status.AWAITING_VALIDATION:
            raise ValidationError(f"generated stage {gen.pk} is {gen.get_status_display()}")
        position += 1
        vstage = ValidationStage.objects.create(
            batch=batch,
            position=position,
            generated=gen,
            label=f"generated job {gen.job_id} stage {gen.index}",
        )
        add(vstage, list(range(1, gen.scenario_count + 1)), list(gen.questions))
    if not position:
        raise ValidationError("no stage to validate: name imported stages or generated ones")
    ValidationObject.objects.bulk_create(objects)
    return batch


def validation_batch_for_job(*, job_id: int) -> ValidationBatch | None:
    """Put a generation job's finished stages into validation: one batch per job.

    Called when a job's task ends, so generated stages reach annotators by themselves
    (paper section 3.1: every generated stage is validated before it is kept). Stages a
    batch already holds are left where they are; ``None`` when nothing is waiting.
    """
    waiting = list(waiting_generated_stages().filter(job_id=job_id).order_by("index"))
    if not waiting:
        return None
    return validation_batch_create(
        name=f"Generation job {job_id}",
        generated=waiting,
        k=settings.TOMLAB_VALIDATION_K,
        created_by=GenerationJob.objects.get(pk=job_id).created_by,
    )


# --- assignment -----------------------------------------------------------------------


def validation_stage_take(
    *, batch: ValidationBatch, annotator: AbstractBaseUser
) -> ValidationStage | None:
    """Give ``annotator`` every object of the next stage that has room for them.

    The next stage is the first, by position, with an object that has fewer than its
    ``k`` annotators and none of them this one. The objects are then locked and counted
    by :func:`studies.assignment.items_assign_with_room` (the scene study's routine), so
    concurrent annotators never overfill an object and nobody gets one twice. ``None``
    when nothing in the batch has room for them.
    """
    # Not one atomic block: each try takes its own locks and commits, so a try that
    # found its stage filled retries on the next with fresh counts.
    rubrics = active_rubrics()
    # Others (or this annotator's other tab) may fill the chosen stage first; then the
    # next query no longer finds it, so one try per stage is enough.
    for _ in range(batch.stages.count()):
        open_object = (
            ValidationObject.objects.filter(batch=batch)
            .exclude(assignments__annotator=annotator)
            .annotate(n=Count("assignments"))
            .filter(n__lt=F("k"))
            .order_by("vstage__position", "position")
            .values_list("vstage_id", flat=True)
            .first()
        )
        if open_object is None:
            return None
        with transaction.atomic():
            given = items_assign_with_room(
                items=ValidationObject.objects.filter(vstage_id=open_object),
                assignments=ValidationAssignment.objects.all(),
                item_field="object",
                group_field="annotator",
                has_room=lambda obj, counts: (
                    sum(counts.values()) < obj.k and counts[annotator.pk] == 0
                ),
                build=lambda objs: (
                    ValidationAssignment(
                        object=obj,
                        vstage_id=obj.vstage_id,
                        annotator=annotator,
                        rubric=rubrics[obj.kind],
                    )
                    for obj in objs
                ),
            )
        if given:
            return ValidationStage.objects.get(pk=open_object)
    return None


# --- scores ---------------------------------------------------------------------------


def _locked_assignment(assignment_id: int, annotator: AbstractBaseUser) -> ValidationAssignment:
    """The annotator's own slot, locked; another annotator's id is simply not found."""
    try:
        return (
            ValidationAssignment.objects.select_for_update(of=("self",))
            .select_related("rubric", "object")
            .get(pk=assignment_id, annotator=annotator)
        )
    except ValidationAssignment.DoesNotExist:
        raise ValidationError("no such object in your assignments") from None


def _checked_value(assignment: ValidationAssignment, criterion: str, value: int) -> None:
    for c in assignment.rubric.criteria:
        if c["key"] == criterion:
            if value not in SCALE_VALUES[c["scale"]]:
                raise ValidationError(f"{c['label']}: {value} is not on its scale")
            return
    raise ValidationError(f"{criterion!r} is not a criterion of this rubric")


@transaction.atomic
def validation_score_record(
    *, assignment_id: int, annotator: AbstractBaseUser, criterion: str, value: int
) -> ValidationAssignment:
    """Save one score the moment it is given; saving the same value again changes nothing.

    Refused once the object is submitted: submitted scores are what decisions read.
    """
    assignment = _locked_assignment(assignment_id, annotator)
    if assignment.submitted_at is not None:
        raise ValidationError("this object is already submitted")
    _checked_value(assignment, criterion, value)
    ValidationScore.objects.update_or_create(
        assignment=assignment, criterion=criterion, defaults={"value": value}
    )
    return assignment


@transaction.atomic
def validation_comment_record(
    *, assignment_id: int, annotator: AbstractBaseUser, comment: str
) -> ValidationAssignment:
    """Save the comment box (autosaved like the scores)."""
    assignment = _locked_assignment(assignment_id, annotator)
    if assignment.submitted_at is not None:
        raise ValidationError("this object is already submitted")
    if assignment.comment != comment:
        assignment.comment = comment
        assignment.save(update_fields=["comment"])
    return assignment


@transaction.atomic
def validation_submit(
    *,
    assignment_id: int,
    annotator: AbstractBaseUser,
    values: Mapping[str, int] | None = None,
    comment: str | None = None,
) -> ValidationAssignment:
    """Submit an object: save any ``values`` and ``comment`` sent with it, check every
    criterion is scored, freeze it and recompute the object's decision.

    Idempotent: a second submission (a replay, a second tab) returns the first.
    """
    assignment = _locked_assignment(assignment_id, annotator)
    if assignment.submitted_at is not None:
        return assignment
    for criterion, value in (values or {}).items():
        _checked_value(assignment, criterion, value)
        ValidationScore.objects.update_or_create(
            assignment=assignment, criterion=criterion, defaults={"value": value}
        )
    scored = set(assignment.scores.values_list("criterion", flat=True))
    missing = [c["label"] for c in assignment.rubric.criteria if c["key"] not in scored]
    if missing:
        raise ValidationError(f"score every criterion first: {', '.join(missing)}")
    assignment.submitted_at = timezone.now()
    fields = ["submitted_at"]
    if comment is not None and comment != assignment.comment:
        assignment.comment = comment
        fields.append("comment")
    assignment.save(update_fields=fields)
    validation_decisions_recompute(objects=[assignment.object])
    return assignment


# --- decisions ------------------------------------------------------------------------


def submitted_scores(object_ids: Iterable[int]) -> dict[int, dict[str, list[int]]]:
    """object id -> criterion -> submitted values, in assignment order."""
    out: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for object_id, criterion, value in (
        ValidationScore.objects.filter(
            assignment__object_id__in=list(object_ids), assignment__submitted_at__isnull=False
        )
        .order_by("assignment_id", "criterion")
        .values_list("assignment__object_id", "criterion", "value")
    ):
        out[object_id][criterion].append(value)
    return out


@transaction.atomic
def validation_decisions_recompute(*, objects: Iterable[ValidationObject] | None = None) -> int:
    """Recompute the decisions of ``objects`` (default: all) from their submitted scores
    and the active rule of their kind; then their stages and their batches' accepted
    sets. Overrides are left as they are. Returns the number of objects decided.
    """
    rules = active_rules()
    rubrics = active_rubrics()
    objs = list(
        ValidationObject.objects.all() if objects is None else objects  # type: ignore[arg-type]
    )
    if not objs:
        return 0
    submitted = dict(
        ValidationAssignment.objects.filter(object__in=objs, submitted_at__isnull=False)
        .order_by()
        .values("object")
        .annotate(n=Count("pk"))
        .values_list("object", "n")
    )
    scores = submitted_scores(o.pk for o in objs)
    existing = {d.object_id: d for d in ValidationDecision.objects.filter(object__in=objs)}
    moved: set[int] = set()  # stages with an object whose outcome changed
    for obj in objs:
        rule = rules[obj.kind]
        n = submitted.get(obj.pk, 0)
        decision = rules_lang.decide(
            rule.spec,
            scores.get(obj.pk, {}),
            criterion_keys=criterion_keys(rubrics[obj.kind].criteria),
            submitted=n,
            k=obj.k,
            subject=obj.label if obj.kind in (SCENARIO, QUESTION) else KIND_LABELS[obj.kind],
        )
        if decision.add_annotators and n + decision.add_annotators > obj.k:
            # "undecided -> add an annotator": the object's k grows, so the next
            # annotator who takes the stage gets a slot on it.
            obj.k = n + decision.add_annotators
            ValidationObject.objects.filter(pk=obj.pk).update(k=obj.k)
        row = existing.get(obj.pk)
        if (row.outcome if row else rules_lang.PENDING) != decision.outcome:
            moved.add(obj.vstage_id)
        if row is None:
            ValidationDecision.objects.create(
                object=obj, outcome=decision.outcome, reason=decision.reason, rule=rule, submitted=n
            )
        elif (row.outcome, row.reason, row.rule_id, row.submitted) != (
            decision.outcome,
            decision.reason,
            rule.pk,
            n,
        ):
            row.outcome, row.reason, row.rule, row.submitted = (
                decision.outcome,
                decision.reason,
                rule,
                n,
            )
            row.save(update_fields=["outcome", "reason", "rule", "submitted", "computed_at"])
    # A stage's outcome depends only on its objects' outcomes: while they stay as they
    # were (most submissions before the k-th), the stage and accepted set stay too.
    if moved:
        _stages_settle(moved, rules=rules)
    return len(objs)


def _stages_settle(vstage_ids: set[int], *, rules: dict[str, DecisionRule] | None = None) -> None:
    """Each stage's outcome from its objects; generated stages handed on; new snapshots."""
    outcomes: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for vstage_id, kind, outcome, override in ValidationObject.objects.filter(
        vstage_id__in=vstage_ids
    ).values_list("vstage_id", "kind", "decision__outcome", "decision__override_outcome"):
        outcomes[vstage_id].append((kind, override or outcome or rules_lang.PENDING))
    batches: set[int] = set()
    for vstage in ValidationStage.objects.filter(pk__in=vstage_ids).select_related("generated"):
        outcome, reason = rules_lang.stage_outcome(outcomes[vstage.pk])
        if (vstage.outcome, vstage.outcome_reason) != (outcome, reason):
            vstage.outcome, vstage.outcome_reason = outcome, reason
            vstage.save(update_fields=["outcome", "outcome_reason"])
        batches.add(vstage.batch_id)
        gen = vstage.generated
        if gen is None or gen.status != GeneratedStage.Status.AWAITING_VALIDATION:
            continue
        why = f"validation batch {vstage.batch_id}: {reason}"
        if outcome == rules_lang.KEEP:
            generated_stage_keep(stage=gen, reason=why)
        elif outcome == rules_lang.DISCARD:
            generated_stage_discard(stage=gen, reason=why)
    rule_versions = {kind: rule.version for kind, rule in (rules or active_rules()).items()}
    for batch_id in sorted(batches):
        accepted_set_snapshot(batch_id=batch_id, rule_versions=rule_versions)


@transaction.atomic
def accepted_set_snapshot(
    *, batch_id: int, rule_versions: dict[str, int] | None = None
) -> AcceptedSet | None:
    """Record the batch's accepted objects and stages as a new version when they (or
    the rule versions) changed since the last one. The batch row is locked, so two
    submissions at once cannot both take the next number."""
    ValidationBatch.objects.select_for_update().get(pk=batch_id)
    object_ids = sorted(
        ValidationDecision.objects.filter(object__batch_id=batch_id)
        .filter(
            Q(override_outcome=rules_lang.KEEP) | Q(override_outcome="", outcome=rules_lang.KEEP)
        )
        .values_list("object_id", flat=True)
    )
    stage_ids = sorted(
        ValidationStage.objects.filter(batch_id=batch_id, outcome=rules_lang.KEEP).values_list(
            "pk", flat=True
        )
    )
    if rule_versions is None:
        rule_versions = {kind: rule.version for kind, rule in active_rules().items()}
    rule_versions = dict(sorted(rule_versions.items()))
    last = AcceptedSet.objects.filter(batch_id=batch_id).order_by("-version").first()
    if last is None and not object_ids:
        return None
    if last is not None and (last.object_ids, last.stage_ids, last.rule_versions) == (
        object_ids,
        stage_ids,
        rule_versions,
    ):
        return last
    return AcceptedSet.objects.create(
        batch_id=batch_id,
        version=(last.version + 1) if last else 1,
        object_ids=object_ids,
        stage_ids=stage_ids,
        rule_versions=rule_versions,
    )


def validation_decision_override(
    *, obj: ValidationObject, outcome: str, reason: str, overridden_by
) -> ValidationDecision:
    """A researcher's override of the rules' outcome from the batch page, with a reason
    (required). ``outcome`` "" removes the override. Recorded like a reviewer's decision
    (:func:`validation_adjudicate`), so its history stays too."""
    return validation_adjudicate(obj=obj, outcome=outcome, reason=reason, reviewer=overridden_by)


@transaction.atomic
def validation_adjudicate(
    *,
    obj: ValidationObject,
    reviewer,
    reason: str,
    outcome: str = "",
    settled: Mapping[str, int] | None = None,
    withdraw: bool = False,
) -> ValidationDecision:
    """Settle a disagreement on ``obj``: the outcome in force from now on, and/or the
    settled score of each criterion, with the reviewer's reason (required).

    With settled scores and no ``outcome``, the outcome is the rules' applied to the
    settled scores as one annotator's. An :class:`~annotation.models.Adjudication` row
    records it with the annotators' submitted answers it settled and the rules' outcome
    before; the decision's ``override_*`` fields mirror it, so the stage, the generated
    stage and the accepted set follow. ``withdraw`` (or no outcome and no settled
    scores) undoes the decision in force: a new row, the history kept, the rules decide
    again. The rules' own outcome is never touched.
    """
    decision, _ = ValidationDecision.objects.select_for_update().get_or_create(
        object=obj,
        defaults={"outcome": rules_lang.PENDING, "reason": "not yet computed"},
    )
    settled = dict(settled or {})
    if settled:
        criteria = active_rubrics()[obj.kind].criteria
        labels = {c["key"]: c for c in criteria}
        for key, value in settled.items():
            if key not in labels:
                raise ValidationError(f"{key!r} is not a criterion of this rubric")
            if value not in SCALE_VALUES[labels[key]["scale"]]:
                raise ValidationError(f"{labels[key]['label']}: {value} is not on its scale")
        if not outcome:
            if set(settled) != set(labels):
                missing = ", ".join(c["label"] for c in criteria if c["key"] not in settled)
                raise ValidationError(
                    f"choose an outcome, or settle every criterion so the rules decide "
                    f"(missing: {missing})"
                )
            outcome = rules_lang.decide(
                active_rules()[obj.kind].spec,
                {key: [value] for key, value in settled.items()},
                criterion_keys=criterion_keys(criteria),
                submitted=1,
                k=1,
            ).outcome
            if outcome not in (rules_lang.KEEP, rules_lang.DISCARD, rules_lang.REGENERATE):
                raise ValidationError(
                    f"the rules leave these settled scores {outcome}: choose an outcome"
                )
    withdraw = withdraw or not outcome
    if not withdraw and outcome not in rules_lang.OUTCOMES:
        raise ValidationError(f"outcome must be one of {', '.join(rules_lang.OUTCOMES)}")
    reason = reason.strip()
    if not withdraw and not reason:
        raise ValidationError("reason: say why you decide so")
    answers = [
        {
            "annotator": a.annotator.get_username(),
            "scores": {s.criterion: s.value for s in a.scores.all()},
            "comment": a.comment,
            "submitted_at": a.submitted_at.isoformat(),
        }
        for a in ValidationAssignment.objects.filter(object=obj, submitted_at__isnull=False)
        .select_related("annotator")
        .prefetch_related("scores")
        .order_by("pk")
    ]
    Adjudication.objects.create(
        object=obj,
        reviewer=reviewer,
        outcome="" if withdraw else outcome,
        settled_scores={} if withdraw else settled,
        reason=reason,
        answers=answers,
        rule_outcome=decision.outcome,
        rule_reason=decision.reason,
    )
    decision.override_outcome = "" if withdraw else outcome
    decision.override_reason = "" if withdraw else reason
    decision.overridden_by = None if withdraw else reviewer
    decision.overridden_at = None if withdraw else timezone.now()
    decision.save(
        update_fields=["override_outcome", "override_reason", "overridden_by", "overridden_at"]
    )
    _stages_settle({obj.vstage_id})
    return decision


@transaction.atomic
def validation_review_threshold_set(
    *, batch: ValidationBatch, spread: int, split: bool
) -> ValidationBatch:
    """Set the batch's reviewer-queue threshold: a score spread from 1 to 4, and
    whether a split keep/discard among the annotators counts as a disagreement."""
    if not 1 <= spread <= 4:
        raise ValidationError("spread: a whole number from 1 to 4")
    batch.review_spread, batch.review_split = spread, split
    batch.save(update_fields=["review_spread", "review_split"])
    return batch
