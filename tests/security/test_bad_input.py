"""Odd input is a 4xx with a message, never a 500, and never half-applied (issue 10, item 5).

Each case below was a 500 on the old code: ``int()`` on Unicode digits ("²" passes
``isdigit()``), Python's 4,300-digit limit, a NUL byte that PostgreSQL refuses, and
the hold action that applied the hold before failing on its ``page``.
"""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.urls import reverse

from common.request_params import BadNumber, number_list, optional_number, parse_number
from studies import services
from studies.models import Guess, StudyItem
from tests.studies.conftest import friends, live_study  # noqa: F401 - fixtures
from tests.studies.test_rater_views import HTMX, current, instances, invite, to_scenes, url

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("friends")]

HUGE = "9" * 5000


def test_parse_number_takes_only_bounded_ascii_digits():
    assert parse_number("0", name="n") == 0 and parse_number("042", name="n") == 42
    assert parse_number("9" * 18, name="n") == 10**18 - 1
    for raw in ["²", "٣", " 1", "1 ", "+1", "-1", "1_000", "1.0", "", "a\x00", "9" * 19, HUGE]:
        with pytest.raises(BadNumber, match=r"^page: "):
            parse_number(raw, name="page")
    with pytest.raises(BadNumber, match="at most 10"):
        parse_number("11", name="n", maximum=10)
    assert optional_number("", name="n") is None and optional_number(None, name="n") is None
    assert number_list(" 3, 5,,", name="runs") == [3, 5]
    with pytest.raises(BadNumber, match="runs"):
        number_list("3,²", name="runs")


@pytest.fixture
def at_scene(client, live_study):  # noqa: F811
    participant = invite(live_study)
    to_scenes(client, participant)
    assignment = current(participant)
    return participant, assignment, instances(assignment)[0]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("choice-{id}", "²", b"choose one of the 6 candidates"),
        ("choice-{id}", HUGE, b"choose one of the 6 candidates"),
        ("choice-" + HUGE, "0", b"expected a whole number"),
        ("evidence-{id}", "a note\x00with a NUL", b"null characters are not allowed"),
        ("tags-{id}", "belief\x00", b"null characters are not allowed"),
    ],
)
def test_bad_answer_fields_are_refused_and_nothing_is_stored(
    client, at_scene, field, value, message
):
    participant, assignment, first = at_scene
    field = field.format(id=first.pk)
    # URL-encoded, as browsers and htmx send forms (a 5,000-digit multipart field name
    # is refused by Django's multipart parser before any view runs).
    data = urlencode({field: value})
    form = "application/x-www-form-urlencoded"
    save = url("scene-save", participant, assignment_id=assignment.pk)
    response = client.post(save, data, content_type=form, **HTMX)
    assert response.status_code == 422 and message in response.content
    response = client.post(save, data, content_type=form)
    assert response.status_code == 400 and message in response.content
    submit = url("scene-submit", participant, assignment_id=assignment.pk)
    response = client.post(submit, data, content_type=form)
    assert response.status_code == 400 and message in response.content
    assert not Guess.objects.exists()
    assignment.refresh_from_db()
    assert assignment.status == "assigned"


def test_history_with_a_malformed_assignment_is_a_400(client, at_scene):
    participant, assignment, _ = at_scene
    history = url("history", participant, session_id=assignment.session_id)
    response = client.get(history + "?assignment=²")
    assert (
        response.status_code == 400 and b"assignment: expected a whole number" in response.content
    )
    assert client.get(history + f"?assignment={assignment.pk}").status_code == 200


def test_a_nul_or_an_overlong_invite_token_is_a_plain_404(client, live_study):  # noqa: F811
    participant = invite(live_study)
    for token in [participant.token[:10] + "\x00" + participant.token[10:], "x" * 5000]:
        assert client.get(f"/s/{token}/").status_code == 404
        assert client.post(f"/s/{token}/consent/").status_code == 404
    assert client.get(url("start", participant)).status_code == 200


def test_hold_with_a_malformed_page_is_refused_before_the_hold(client, researcher, friends):  # noqa: F811
    study = services.study_create(name="d", benchmark="tvshowguess", works=[friends])
    scene = StudyItem.objects.filter(study=study).order_by("pk").first()
    client.force_login(researcher)
    hold = reverse("studies:scene-hold", args=[study.pk, scene.pk])
    response = client.post(hold, {"held_back": "1", "page": "²"})
    assert response.status_code == 400 and b"page: expected a whole number" in response.content
    scene.refresh_from_db()
    assert scene.held_back is False  # validated before acting: the hold was not applied
    response = client.post(hold, {"held_back": "1", "page": "2"})
    assert response.status_code == 302 and response.url.endswith(f"?page=2#scene-{scene.pk}")
    scene.refresh_from_db()
    assert scene.held_back is True
    for page in ("leaks", "responses"):
        response = client.get(reverse(f"studies:{page}", args=[study.pk]), {"page": HUGE})
        assert response.status_code == 400


def test_researcher_forms_refuse_nul(client, researcher, friends):  # noqa: F811
    study = services.study_create(name="d", benchmark="tvshowguess", works=[friends])
    client.force_login(researcher)
    client.post(
        reverse("studies:texts", args=[study.pk]), {"instructions": "a\x00b", "consent": ""}
    )
    study.refresh_from_db()
    assert study.instructions == "" and study.instructions_version == 1
    response = client.post(reverse("studies:invite", args=[study.pk]), {"labels": "x\x00"})
    assert response.status_code == 302 and not study.participants.exists()


def test_report_run_lists_are_parsed_strictly(client, researcher):
    client.force_login(researcher)
    for runs in ("²", HUGE, "1,\x00"):
        response = client.get(reverse("reports:tidy-csv", args=["dyntom"]), {"runs": runs})
        assert response.status_code == 400 and b"runs: expected a whole number" in response.content
    response = client.get("/api/reports/dyntom/", {"studies": "²"})
    assert response.status_code == 400


def test_study_form_numbers_take_only_ascii_digits():
    from studies.forms import InviteForm

    for count in ("٣", "²", HUGE, "-1"):
        form = InviteForm({"count": count})
        assert not form.is_valid() and "expected a whole number" in str(form.errors)
    assert InviteForm({"count": "3"}).is_valid()
