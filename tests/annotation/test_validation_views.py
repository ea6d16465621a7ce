"""Validation through the real pages: who sees what, the batch index, query counts.

The four-annotator round with its hand-computed agreement is in test_validation_scored.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.models import (
    ValidationAssignment,
    ValidationBatch,
    ValidationScore,
)
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

TRIALS = ("trial149", "trial210")


@pytest.fixture
def imported(shared_data: Path, tmp_path: Path) -> None:
    for trial in TRIALS:
        (tmp_path / trial).symlink_to(shared_data / "dyntom" / trial)
    call_command("import_benchmark", "dyntom", str(tmp_path))


def _login(client, user):
    client.force_login(user)
    return client


def test_annotators_see_only_their_own_scores_and_slots(client, imported, researcher):
    _login(client, researcher)
    client.post(
        reverse("annotation:validation"),
        {"name": "b", "k": 2, "kinds": ["trajectory"], "work_keys": "trial149"},
    )
    batch = ValidationBatch.objects.get()
    a, b, rater = (
        UserFactory(username="a", role="annotator"),
        UserFactory(username="b", role="annotator"),
        UserFactory(username="r", role="rater"),
    )
    client.logout()
    _login(client, a)
    vstage_url = client.post(reverse("annotation:validation-take", args=[batch.pk]))["Location"]
    slot_a = ValidationAssignment.objects.get(annotator=a)
    save = reverse("annotation:validation-save", args=[slot_a.pk])
    assert (
        client.post(save, {"score-coherence": "2"}, headers={"HX-Request": "true"}).status_code
        == 200
    )
    # Idempotent autosave; a value off the scale is refused with its message (422).
    client.post(save, {"score-coherence": "2"}, headers={"HX-Request": "true"})
    assert ValidationScore.objects.get(assignment=slot_a).value == 2
    bad = client.post(save, {"score-coherence": "7"}, headers={"HX-Request": "true"})
    assert bad.status_code == 422 and b"not on its scale" in bad.content
    # Without htmx (no JavaScript) a malformed value is a plain 400 naming the field.
    plain = client.post(save, {"score-coherence": "x"})
    assert plain.status_code == 400 and b"score-coherence" in plain.content
    # Resumable: the page after a reload shows the saved score checked.
    page = client.get(vstage_url)
    assert page.context["criteria"][0]["value"] == 2
    assert b'value="2" checked' in page.content
    # Submitting with a criterion missing is refused and names it.
    missing = client.post(reverse("annotation:validation-submit", args=[slot_a.pk]), {})
    assert missing.status_code == 400 and b"Rationality" in missing.content

    client.logout()
    _login(client, b)
    client.post(reverse("annotation:validation-take", args=[batch.pk]))
    # b cannot save into a's slot nor open a's page with a's scores.
    # Another's slot is not found (as every other's work is), with a value or none.
    stolen = client.post(save, {"score-coherence": "5"}, headers={"HX-Request": "true"})
    assert stolen.status_code == 404
    assert client.post(save, {}).status_code == 404
    assert ValidationScore.objects.get(assignment=slot_a).value == 2
    page = client.get(vstage_url)
    assert page.context["current"].annotator == b
    assert all(c["value"] is None for c in page.context["criteria"])
    assert client.get(reverse("annotation:validation-batch", args=[batch.pk])).status_code == 403
    # Nothing left for a third annotator at k=2... and raters are kept out.
    client.logout()
    _login(client, rater)
    assert client.get(reverse("annotation:validation")).status_code == 403
    assert client.get(reverse("reports:validation")).status_code in (302, 403)


def test_index_lists_progress(client, imported, annotator, researcher):
    _login(client, researcher)
    client.post(
        reverse("annotation:validation"),
        {"name": "b", "k": 4, "kinds": ["context", "trajectory"], "work_keys": "trial149"},
    )
    client.logout()
    _login(client, annotator)
    batch = ValidationBatch.objects.get()
    client.post(reverse("annotation:validation-take", args=[batch.pk]))
    page = client.get(reverse("annotation:validation"))
    assert page.status_code == 200 and b"0 of 2 objects scored" in page.content
    bad = client.post(reverse("annotation:validation"), {"name": "x", "k": 4, "kinds": ["context"]})
    assert bad.status_code == 403  # annotators do not create batches


def test_query_counts_stay_flat(client, imported, researcher, django_assert_max_num_queries):
    """The per-score path is one short transaction; the pages do not grow with objects."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def count(url: str) -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        return len(queries)

    client.force_login(researcher)
    batches = []
    for keys in ("trial149", "trial149 trial210"):
        client.post(
            reverse("annotation:validation"),
            {"name": keys, "k": 4, "kinds": ["context", "scenario", "question"], "work_keys": keys},
        )
        batches.append(ValidationBatch.objects.order_by("-pk").first())
    ann = UserFactory(username="a", role="annotator")
    client.force_login(ann)
    for batch in batches:
        client.post(reverse("annotation:validation-take", args=[batch.pk]))
    slot = ValidationAssignment.objects.filter(annotator=ann, object__kind="context").first()
    # session, user, roles; then lock the slot, upsert the score (savepoints included)
    with django_assert_max_num_queries(12):
        client.post(
            reverse("annotation:validation-save", args=[slot.pk]),
            {"score-profiles_realistic": "1"},
            headers={"HX-Request": "true"},
        )
    small, big = (
        count(reverse("annotation:validation-stage", args=[b.stages.first().pk])) for b in batches
    )
    # 9, and one for the menu's "Review disagreements": may this annotator review?
    assert small == big <= 10
    client.force_login(researcher)
    small, big = (count(reverse("annotation:validation-batch", args=[b.pk])) for b in batches)
    assert small == big <= 10  # 77 vs 154 objects
