"""An annotator scores a real DynToM stage's objects with the keyboard only.

The stage (trial149) is imported from the shared data; the batch scores profiles and
relationship (yes/no) and the trajectory (1-5). Keys: y/y for the two yes/no criteria,
Enter; then 4, 3, 5 for coherence, rationality, authenticity, Enter. Every score is
autosaved as it is given (checked in the database before submitting), no page breaks
the Content-Security-Policy, and the stage stays visible beside the rubric.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from annotation.dyntom.validation.services import validation_batch_create
from annotation.models import ValidationAssignment, ValidationDecision, ValidationScore
from benchmarks.models import DynToMStage
from tests.browser.conftest import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def batch(shared_data: Path, tmp_path: Path):
    (tmp_path / "trial149").symlink_to(shared_data / "dyntom" / "trial149")
    call_command("import_benchmark", "dyntom", str(tmp_path))
    return validation_batch_create(
        name="keyboard",
        stages=DynToMStage.objects.filter(work__key="trial149"),
        kinds=["context", "trajectory"],
        k=1,
    )


def _log_in(page, base: str) -> None:
    sign_in(page, base, "ann", "pw-ann-123!")


def _scores(slot: ValidationAssignment) -> dict[str, int]:
    return dict(ValidationScore.objects.filter(assignment=slot).values_list("criterion", "value"))


def test_annotator_scores_a_stage_with_the_keyboard(
    live_server, page, screenshot, annotator, batch
):
    violations: list[str] = []
    page.on(
        "console",
        lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None,
    )
    base = live_server.url
    _log_in(page, base)
    page.goto(f"{base}/annotation/validation/")
    page.get_by_role("button", name="Take the next stage").click()
    page.wait_for_url("**/annotation/validation/stages/*/")

    # The whole stage is on the page: profiles, relationship, trajectory, dialogues.
    expect(page.get_by_role("heading", name="Characters and relationship")).to_be_visible()
    expect(page.get_by_role("heading", name="Mental-state trajectory")).to_be_visible()
    expect(page.get_by_role("heading", name="Scenario 5")).to_be_visible()
    expect(page.locator(".dialogue dt").first).to_be_visible()
    expect(page.get_by_text("Scott Brennan").first).to_be_visible()

    context_slot = ValidationAssignment.objects.get(annotator=annotator, object__kind="context")
    trajectory_slot = ValidationAssignment.objects.get(
        annotator=annotator, object__kind="trajectory"
    )
    # Focus starts on the first criterion; y answers it and moves on.
    expect(page.get_by_role("heading", name="Score: profiles and relationship")).to_be_visible()
    page.keyboard.press("y")
    page.keyboard.press("y")
    expect(page.locator("#save-status")).to_have_text("✓ Saved")
    page.wait_for_function(
        "document.querySelectorAll('#score-form input[type=radio]:checked').length === 2"
    )
    # Saved at once, before any submit.
    for _ in range(50):
        if len(_scores(context_slot)) == 2:
            break
        page.wait_for_timeout(100)
    assert _scores(context_slot) == {"profiles_realistic": 1, "relationship_realistic": 1}
    page.keyboard.press("Enter")

    expect(page.get_by_role("heading", name="Score: mental-state trajectory")).to_be_visible()
    expect(page.get_by_test_id("progress")).to_have_text("1 / 2 scored")
    page.keyboard.press("4")
    page.keyboard.press("3")
    # Tab moves between criteria too: back to rationality and change it.
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("5")
    page.keyboard.press("5")
    expect(page.locator("fieldset[data-criterion=rationality] input:checked")).to_have_value("5")
    page.locator("#comment").fill("reads well")
    page.locator("#comment").press("Tab")  # leave the box; Enter in it would not submit
    page.wait_for_timeout(300)
    screenshot("validation-scoring-keyboard")
    page.get_by_role("button", name="Submit and next").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("progress")).to_have_text("2 / 2 scored")
    expect(page.get_by_text("Submitted. Your scores are final.")).to_be_visible()

    trajectory_slot.refresh_from_db()
    assert trajectory_slot.submitted_at is not None and trajectory_slot.comment == "reads well"
    assert _scores(trajectory_slot) == {"coherence": 4, "rationality": 5, "authenticity": 5}
    decision = ValidationDecision.objects.get(object=trajectory_slot.object)
    assert decision.outcome == "keep"  # k = 1, every mean >= 4.0
    assert not violations, violations


def test_researcher_sees_decisions_overrides_and_the_report(
    live_server, page, screenshot, researcher, annotator, batch
):
    from annotation.dyntom.validation.services import validation_stage_take, validation_submit

    validation_stage_take(batch=batch, annotator=annotator)
    for slot in ValidationAssignment.objects.filter(annotator=annotator).select_related("rubric"):
        values = {c["key"]: (1 if c["scale"] == "yes_no" else 3) for c in slot.rubric.criteria}
        validation_submit(assignment_id=slot.pk, annotator=annotator, values=values)
    base = live_server.url
    sign_in(page, base, "res", "pw-res-123!")
    page.goto(f"{base}/annotation/validation/{batch.pk}/")
    row = page.locator("tr", has_text="mental-state trajectory").last
    expect(row).to_contain_text("mean coherence 3.0 < 4.0")
    row.get_by_label("Outcome").select_option("keep")
    row.get_by_label("Reason").fill("a single annotator was too strict")
    row.get_by_role("button", name="Save").click()
    expect(page.get_by_text("overridden from discard by res: a single annotator")).to_be_visible()
    screenshot("validation-batch-researcher")
    page.goto(f"{base}/reports/validation/")
    expect(page.get_by_role("heading", name="Retention per step")).to_be_visible()
    expect(page.locator("#table-retention")).to_contain_text("85.4")
    expect(page.locator("#table-retention img")).to_be_visible()
    screenshot("validation-report")
