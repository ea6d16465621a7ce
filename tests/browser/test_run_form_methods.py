"""The run form offers only the chosen benchmark's methods (issue 29, part 4)."""

from __future__ import annotations

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from modeling.pipelines import get_pipeline

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_method_list_follows_the_benchmark(
    live_server, page, log_in_as, researcher, screenshot
):
    log_in_as(page)
    page.goto(live_server.url + reverse("modeling:run-new"))
    method = page.locator("#id_method")

    for benchmark in ("dyntom", "chartom-qa", "tom-in-amc"):
        page.select_option("#id_benchmark", benchmark)
        offered = method.locator("option:not([disabled])").evaluate_all(
            "options => options.map(o => o.value)"
        )
        assert offered == list(get_pipeline(benchmark).methods)
        expect(method).to_have_value(get_pipeline(benchmark).methods[0])
    screenshot("run-form-methods")
