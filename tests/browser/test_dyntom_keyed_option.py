"""The annotator validating a DynToM question sees which option is keyed (issue 28,
part 7), beside the answerability criterion it is judged by. Real stage: trial149."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from annotation.dyntom.validation.services import validation_batch_create
from benchmarks.models import DynToMQuestion, DynToMStage
from studies.choice.services import dyntom_gold_index
from tests.browser.conftest import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_keyed_option_is_marked_beside_answerability(
    live_server, page, screenshot, annotator, shared_data: Path, tmp_path: Path
):
    (tmp_path / "trial149").symlink_to(shared_data / "dyntom" / "trial149")
    call_command("import_benchmark", "dyntom", str(tmp_path))
    validation_batch_create(
        name="questions", stages=DynToMStage.objects.all(), kinds=["question"], k=1
    )
    base = live_server.url
    sign_in(page, base, "ann", "pw-ann-123!")
    page.goto(f"{base}/annotation/validation/")
    page.get_by_role("button", name="Take the next stage").click()
    page.wait_for_url("**/annotation/validation/stages/*/")

    expect(page.get_by_role("group", name="Answerability")).to_be_visible()
    first = DynToMQuestion.objects.order_by("position").first()
    keyed = page.get_by_test_id("keyed-option")
    expect(keyed).to_have_count(1)
    expect(keyed).to_contain_text(first.options[dyntom_gold_index(first)])
    expect(keyed).to_contain_text("✓ keyed answer")
    screenshot("dyntom-validation-keyed-option")
