"""Adaptive allocation on the researcher's pages and the API (issue 50): the form's
choices and its errors naming the field, the study page's per-stratum table, its CSV
and the API's copy of it (one function fills all three)."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from studies.choice import allocation
from studies.models import Study
from tests.studies.test_allocation import SPLIT, make_adaptive, run_to_the_end

pytestmark = pytest.mark.django_db


def _form(mini, **extra) -> dict:
    return {
        "name": "Balanced on the page",
        "benchmark": "generic",
        "works": [mini.pk],
        "category_field": "ability",
        "items_per_participant": "3",
        "option_order": "shuffled",
        "overlap": "3",
        "reveal": "at_end",
        "seed": "3",
        "allocation": "balanced",
        "min_per_item": "2",
        "target_points": "5",
    } | extra


def test_the_form_offers_the_designs_and_names_the_field_it_refuses(client, researcher, mini):
    client.force_login(researcher)
    url = reverse("studies:choice-new")
    page = client.get(url).content.decode()
    for design in ("uniform", "balanced", "widest"):
        assert f'value="{design}"' in page
    assert "Allocation of answers" in page and "the same budget" in page
    refusals = [
        ({"allocation": "widest"}, "id_runs", "name the runs to compare with"),
        ({"items_per_participant": ""}, "id_items_per_participant", "batches smaller than"),
        ({"min_per_item": "4"}, "id_min_per_item", "phase one can ask at most 3"),
        ({"target_points": "0"}, "id_target_points", "greater than or equal to 1"),
    ]
    for extra, field_id, words in refusals:
        response = client.post(url, _form(mini, name="Refused", **extra))
        assert response.status_code == 422
        body = response.content.decode()
        if field_id == "id_runs":  # check boxes: the error sits under the group
            assert 'id="runs-label"' in body and words in body
        else:
            assert f'id="{field_id}_error"' in body and words in body
    assert not Study.objects.filter(name="Refused").exists()

    response = client.post(url, _form(mini))
    assert response.status_code == 302, response.content.decode()[:2000]
    study = Study.objects.get(name="Balanced on the page")
    assert allocation.study_allocation(study).design == "balanced"
    # The draft's edit form shows the design; a change of design alone keeps the items.
    edit = reverse("studies:edit", args=[study.pk])
    assert 'value="balanced" selected' in client.get(edit).content.decode()
    before = list(study.study_items.order_by("pk").values_list("mc_item", flat=True))
    assert client.post(edit, _form(mini, allocation="uniform")).status_code == 302
    study.refresh_from_db()
    assert allocation.study_allocation(study).design == "uniform"
    assert list(study.study_items.order_by("pk").values_list("mc_item", flat=True)) == before


def test_the_study_page_csv_and_api_show_the_same_strata(client, researcher, mini):
    study = make_adaptive(mini, min_per_item=2)
    run_to_the_end(study)
    client.force_login(researcher)
    page = client.get(reverse("studies:detail", args=[study.pk])).content.decode()
    assert "Design: balanced by ability, phase one 2 answers per item, 36 answers." in page
    assert 'data-testid="strata-table"' in page

    rows = allocation.stratum_rows(study)
    split = next(r for r in rows if r["stratum"] == SPLIT)
    # Phase one's 6 and half the other 12 (tests/studies/test_allocation.py says why).
    assert split["answers"] == 12 and split["items"] == 3
    agreed = next(r for r in rows if r["stratum"] == "False belief")
    # All right, but an interval of 8 answers is not ±0 (the report's score interval).
    assert agreed["half_width_points"] > 5 and agreed["answers_to_target"] > 0

    response = client.get(reverse("studies:strata-csv", args=[study.pk]))
    table = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["stratum"] for r in table] == [r["stratum"] for r in rows]
    assert table[[r["stratum"] for r in rows].index(SPLIT)]["answers"] == "12"

    api = APIClient()
    api.force_login(researcher)
    data = api.get(reverse("studies-detail", args=[study.pk])).json()["allocation"]
    assert data["design"] == "balanced" and data["budget"] == 36
    assert data["description"] == "balanced by ability, phase one 2 answers per item, 36 answers"
    assert data["strata"] == rows
