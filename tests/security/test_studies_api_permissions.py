"""The studies API refuses everyone but researchers, and answers junk with a 4xx.

- Every endpoint (list, create, detail, go-live, pause, resume, close, invites,
  participants, responses, exit answers), for an anonymous visitor, a rater and an
  annotator: 401 or 403, no study data in the answer, and nothing written.
- As a researcher: ids out of any range, NUL bytes, huge numbers and wrong JSON types in
  the path, the query and the body: a 4xx naming the field, never a 5xx, and nothing
  written. Run on SQLite and on PostgreSQL (``DATABASE_URL``), where a NUL or an
  out-of-range integer reaching the database is an error of its own.
"""

from __future__ import annotations

import base64
import json

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from studies.models import Participant, Study
from studies.participation.services import participants_invite
from studies.services import study_create
from tests.studies.conftest import friends, live_study  # noqa: F401 - fixtures used below

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("friends")]

HUGE = 10**30  # past any database integer
NUL = "a\x00b"


@pytest.fixture
def draft(friends, researcher):  # noqa: F811
    return study_create(
        name="Draft over the API", benchmark="tvshowguess", works=[friends], created_by=researcher
    )


def _endpoints(live: Study, draft: Study, work_id: int) -> list[tuple[str, str, dict | None]]:
    """(method, url, JSON body) for every studies API endpoint, each with a request that a
    researcher would see succeed."""
    create = {"name": "Sneaky", "works": [work_id]}

    def url(name: str, study: Study | None = None) -> str:
        return reverse(f"studies-{name}", args=[study.pk] if study else [])

    return [
        ("get", url("list"), None),
        ("post", url("list"), create),
        ("get", url("detail", live), None),
        ("post", url("go-live", draft), None),
        ("post", url("pause", live), None),
        ("post", url("resume", live), None),
        ("post", url("close", live), None),
        ("post", url("invites", live), {"count": 3}),
        ("get", url("participants", live), None),
        ("get", url("responses", live), None),
        ("get", url("exit-answers", live), None),
    ]


def _state() -> tuple:
    """What a refused request must leave as it was."""
    return (
        list(Study.objects.order_by("pk").values_list("pk", "name", "status", "item_set_hash")),
        list(Participant.objects.order_by("pk").values_list("pk", "label")),
    )


@pytest.mark.parametrize("who", ["anonymous", "rater", "annotator"])
def test_every_endpoint_refuses_anyone_but_researchers(who, live_study, draft, request):  # noqa: F811
    participants_invite(study=live_study, labels=["Secret label"])
    client = APIClient()
    if who != "anonymous":
        client.force_login(request.getfixturevalue(who))
    before = _state()
    endpoints = _endpoints(live_study, draft, live_study.study_works.get().work_id)
    assert len(endpoints) == 11
    for method, url, data in endpoints:
        response = getattr(client, method)(url, data, format="json")
        assert response.status_code in (401, 403), (who, method, url, response.status_code)
        body = response.content.decode()
        assert "Secret label" not in body and live_study.name not in body, url
        if who != "anonymous":
            assert response.json() == {"detail": "Only researchers may use the API."}
    assert _state() == before
    if who == "rater":
        # Basic auth with the rater's own password is refused the same way.
        basic = APIClient()
        token = base64.b64encode(b"rat:pw-rat-123!").decode()
        basic.credentials(HTTP_AUTHORIZATION=f"Basic {token}")
        for method, url, data in endpoints:
            response = getattr(basic, method)(url, data, format="json")
            assert response.status_code == 403, url
            assert response.json() == {"detail": "Only researchers may use the API."}
        assert _state() == before


def test_the_same_requests_succeed_for_a_researcher(live_study, draft, researcher):  # noqa: F811
    """The refusals above are the role's, not broken requests: a researcher gets 2xx."""
    client = APIClient()
    client.force_login(researcher)
    endpoints = _endpoints(live_study, draft, live_study.study_works.get().work_id)
    # Close last: a closed study takes no invites, and resume needs it paused first.
    order = [0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 6]
    codes = []
    for i in order:
        method, url, data = endpoints[i]
        codes.append(getattr(client, method)(url, data, format="json").status_code)
    assert codes == [200, 201, 200, 200, 200, 200, 201, 200, 200, 200, 200]
    assert Study.objects.get(name="Sneaky").status == "draft"
    assert Study.objects.get(pk=live_study.pk).status == "closed"


@pytest.fixture
def api(researcher) -> APIClient:
    client = APIClient(raise_request_exception=False)
    client.force_login(researcher)
    return client


BAD_IDS = ["0", str(2**63), str(2**64), str(HUGE), "9" * 400]
ID_ROUTES = [
    ("get", "studies-detail"),
    ("post", "studies-go-live"),
    ("post", "studies-pause"),
    ("post", "studies-resume"),
    ("post", "studies-close"),
    ("post", "studies-invites"),
    ("get", "studies-participants"),
    ("get", "studies-responses"),
    ("get", "studies-exit-answers"),
]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_ids_no_row_has_are_a_404(api, live_study, bad):  # noqa: F811
    before = _state()
    for method, name in ID_ROUTES:
        url = reverse(name, args=[1]).replace("/1/", f"/{bad}/", 1)
        response = getattr(api, method)(url, {"count": 1}, format="json")
        assert response.status_code == 404, (url[:80], response.status_code)
    assert _state() == before


@pytest.mark.parametrize(
    "query",
    [
        "?status=%00",
        "?status=live%00",
        "?benchmark=%00",
        "?page=%00",
        "?page=" + "9" * 5000,
        "?page=-1",
        "?page_size=%00",
        "?page_size=" + "9" * 5000,
        "?page=²",
        "?include_excluded=%00",
    ],
)
def test_junk_queries_are_a_4xx(api, live_study, query):  # noqa: F811
    participants_invite(study=live_study, labels=["p"])
    for name, args in (
        ("studies-list", []),
        ("studies-participants", [live_study.pk]),
        ("studies-responses", [live_study.pk]),
        ("studies-exit-answers", [live_study.pk]),
    ):
        response = api.get(reverse(name, args=args) + query)
        # A junk page_size falls back to the default size, as DRF reads it.
        assert response.status_code in (200, 400, 404), (name, query, response.status_code)
        if response.status_code == 400:
            assert set(response.json()) & {"status", "benchmark", "include_excluded"}


CREATE_JUNK = [
    # (body, the field the 400 names)
    ({"name": NUL, "works": [1]}, "name"),
    ({"name": "S", "works": [NUL]}, "works"),
    ({"name": "S", "works": [HUGE]}, "works"),
    ({"name": "S", "works": [-1, 0]}, "works"),
    ({"name": "S", "works": ["²"]}, "works"),
    ({"name": "S", "works": [1], "tags": [NUL]}, "tags"),
    ({"name": "S", "works": [1], "instructions": NUL}, "instructions"),
    ({"name": "S", "works": [1], "overlap": HUGE}, "overlap"),
    ({"name": "S", "works": [1], "overlap": 1.5}, "overlap"),
    ({"name": "S", "works": [1], "seed": 1e308}, "seed"),
    ({"name": "S", "works": [1], "seed": -(2**70)}, "seed"),
    ({"name": "S", "works": [1], "per_stratum": "9" * 4000, "scenes": "genre"}, "per_stratum"),
    ({"name": "S", "works": [1], "scenes": NUL}, "scenes"),
    ({"name": "S", "works": [1], "reveal": ["at_end"]}, "reveal"),
    ({"name": "S", "works": {"1": 1}}, "works"),
    ({"name": "S", "works": list(range(1, 40_000))}, "works"),  # past SQLite's 32,766
    ({"name": "Q", "benchmark": "dyntom", "question_types": ["x"] * 1001}, "question_types"),
    ({"name": "S" * 201, "works": [1]}, "name"),
    ({f"name{NUL}": "S"}, f"name{NUL}"),
    ({"name": "Q", "benchmark": "dyntom", "works": [1], "stage_percent": HUGE}, "stage_percent"),
    ({"name": "Q", "benchmark": "chartom-qa", "works": [1], "questions": NUL}, "questions"),
    ({"name": "Q", "benchmark": "dyntom", "question_types": [NUL]}, "question_types"),
    ({"name": "Q", "benchmark": NUL}, "benchmark"),
]


@pytest.mark.parametrize(("body", "field"), CREATE_JUNK)
def test_junk_create_bodies_are_a_400_naming_the_field(api, friends, body, field):  # noqa: F811
    body = {k: ([friends.pk] if v == [1] else v) for k, v in body.items()}
    before = _state()
    response = api.post(reverse("studies-list"), body, format="json")
    assert response.status_code == 400, response.content[:300]
    assert field in response.json(), response.json()
    assert _state() == before


@pytest.mark.parametrize(
    ("raw", "content_type"),
    [
        ("{", "application/json"),
        ('{"name": "S", "works": [' + "9" * 5000 + "]}", "application/json"),
        ('{"name": NaN}', "application/json"),
        ("null", "application/json"),
        ("[]", "application/json"),
        ('"S"', "application/json"),
        ("12", "application/json"),
        ("\x00", "application/json"),
        ("name=S&works=1", "application/x-www-form-urlencoded"),
        ("name=S", "text/plain"),
    ],
)
def test_bodies_that_are_not_a_json_object_are_a_4xx(api, live_study, raw, content_type):  # noqa: F811
    before = _state()
    for url in (reverse("studies-list"), reverse("studies-invites", args=[live_study.pk])):
        response = api.generic("POST", url, raw.encode(), content_type=content_type)
        assert 400 <= response.status_code < 500, (url, raw[:40], response.status_code)
    assert _state() == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"labels": [NUL]}, "labels"),
        ({"labels": ["x" * 100_000]}, None),  # the form keeps 200 characters, as the page
        ({"labels": [1, 2]}, None),  # numbers as labels, as the page's text would be
        ({"labels": [None]}, "labels"),
        ({"labels": [{"a": 1}]}, "labels"),
        ({"count": HUGE}, "count"),
        ({"count": -5}, "count"),
        ({"count": "²"}, "count"),
        ({"count": NUL}, "count"),
        ({"count": True}, "count"),
        ({"count": [1]}, "count"),
        ({"labels": [], "count": None}, "non_field_errors"),
    ],
)
def test_junk_invites_are_a_400_or_what_the_page_makes(api, live_study, body, field):  # noqa: F811
    before = Participant.objects.count()
    response = api.post(reverse("studies-invites", args=[live_study.pk]), body, format="json")
    if field is None:
        assert response.status_code == 201
        labels = [i["label"] for i in response.json()["invites"]]
        assert all(len(label) <= 200 for label in labels)
        return
    assert response.status_code == 400, response.content[:300]
    assert field in response.json(), response.json()
    assert Participant.objects.count() == before


def test_nothing_in_any_answer_is_a_500_for_every_endpoint_and_junk(api, live_study, draft):  # noqa: F811
    """Each endpoint with each junk body and query at once: only 2xx, 4xx."""
    endpoints = _endpoints(live_study, draft, live_study.study_works.get().work_id)
    junk = [None, [], NUL, HUGE, {"count": NUL, "labels": NUL, "name": NUL, "works": NUL}]
    for method, url, _data in endpoints:
        for body in junk:
            response = getattr(api, method)(
                url + "?status=%00&page=%00&benchmark=%00",
                json.dumps(body) if method == "post" else None,
                content_type="application/json",
            )
            assert response.status_code < 500, (method, url, body, response.status_code)
