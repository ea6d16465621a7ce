"""The run form's Works box takes a work key with spaces in it (issue 29's loop).

An imported screenplay's work key is its title ("Big Fish"), and the box split every
key at its spaces, so no run could be limited to such a movie: "unknown tom-in-amc
work key(s): Big, Fish". A piece between commas or line breaks that is a key as it
stands is now read whole; other pieces are still split at their spaces.
"""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from modeling.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def movies(shared_data: Path) -> None:
    for name in ("big_fish.fountain", "dead_poets_society.txt"):
        call_command(
            "import_benchmark",
            "screenplay",
            str(shared_data / "screenplays" / name),
            "--no-progress",
            stdout=StringIO(),
            stderr=StringIO(),
        )


def preview(client, backend, works: str):
    return client.post(
        reverse("modeling:run-new"),
        {
            "benchmark": "tom-in-amc",
            "method": "zero-shot",
            "backend": str(backend.pk),
            "works": works,
            "scene_limit": "2",
            "samples": "1",
            "action": "preview",
        },
    )


def test_a_key_with_spaces_is_one_work(client, researcher, openai_backend, movies):
    client.force_login(researcher)
    response = preview(client, openai_backend, "Big Fish")
    page = response.content.decode()
    assert response.status_code == 200
    assert "unknown tom-in-amc work key" not in page
    assert 'data-testid="plan-calls">2<' in page  # two scenes of the one movie
    assert "Big Fish" in page

    # Two such keys, one a line: both movies. Nothing was saved by either preview.
    page = preview(client, openai_backend, "Big Fish\nDead Poets Society").content.decode()
    assert 'data-testid="plan-calls">4<' in page
    assert Run.objects.count() == 0


def test_only_the_unknown_piece_is_named(client, researcher, openai_backend, movies):
    client.force_login(researcher)
    page = preview(client, openai_backend, "Big Fish, nosuchwork").content.decode()
    assert "unknown tom-in-amc work key(s): nosuchwork" in page
    assert "Big," not in page


def test_a_started_run_selects_the_movie_by_its_key(client, researcher, openai_backend, movies):
    client.force_login(researcher)
    data = {
        "benchmark": "tom-in-amc",
        "method": "zero-shot",
        "backend": str(openai_backend.pk),
        "works": "Dead Poets Society",
        "samples": "1",
        "action": "start",
    }
    response = client.post(reverse("modeling:run-new"), data)
    run = Run.objects.get()
    assert response.status_code == 302
    assert run.selection["works"] == ["Dead Poets Society"]
    detail = client.get(reverse("modeling:run-detail", args=[run.pk])).content.decode()
    assert "<td>Dead Poets Society</td>" in detail  # the run's Items table
