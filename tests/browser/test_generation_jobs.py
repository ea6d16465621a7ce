"""A researcher reads how DynToM generation jobs ended (issue 25: a job whose only stage
needed attention was shown as "Succeeded, 4/4 steps done")."""

import re

import pytest
from playwright.sync_api import expect

from annotation.dyntom.generation.services import generation_job_create, generation_job_run
from tests.annotation import test_generation as generation_fixtures
from tests.annotation.test_generation import GenerationResponder

pytestmark = pytest.mark.django_db(transaction=True)

# The generation fixtures live in tests/annotation, which this folder does not see.
backend = generation_fixtures.backend
pools = generation_fixtures.pools


def test_job_statuses_say_how_many_stages_are_usable(
    live_server, page, screenshot, log_in_as, researcher, backend, pools, llm_server, settings
):
    settings.TOMLAB_GENERATION_MAX_ATTEMPTS = 2
    jobs = {}
    for name, bad in (
        ("nothing usable", {"relationship": ["", ""]}),
        ("partly usable", {"relationship": ["", ""]}),
    ):
        llm_server.responder = GenerationResponder(bad=bad)
        stages = 1 if name == "nothing usable" else 2
        # Another seed each: the second job must not meet the first's replies in the cache.
        job = generation_job_create(
            backend=backend, stage_count=stages, scenario_count=4, seed=len(jobs), enqueue=False
        )
        generation_job_run(job_id=job.pk)
        jobs[name] = job
    log_in_as(page)

    page.goto(f"{live_server.url}/annotation/generation/")
    badges = page.get_by_test_id("job-status")
    expect(badges).to_have_text(
        ["succeeded: 1 of 2 stages usable", "needs attention: 0 of 1 stage usable"]
    )
    for badge in (badges.nth(0), badges.nth(1)):
        # The warning colour for both: neither is a plain success.
        assert badge.evaluate("e => getComputedStyle(e).color") == "rgb(138, 90, 0)"
    screenshot("generation-jobs-usable-stages")

    page.goto(f"{live_server.url}/annotation/generation/{jobs['nothing usable'].pk}/")
    expect(page.get_by_test_id("job-status")).to_have_text("needs attention: 0 of 1 stage usable")
    expect(page.locator("#job-progress .error")).to_have_text(
        "no usable stage: 1 of 1 stage needs attention"
    )
    expect(page.get_by_test_id("stage-1")).to_contain_text(
        re.compile("relationship: 2 replies failed validation")
    )
    screenshot("generation-job-needs-attention")
