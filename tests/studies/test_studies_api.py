"""The studies API (issue 29, part 5): create both kinds of study through going live,
pause, resume and close; refused transitions; invite links; the pseudonymised
participant ledger; responses equal to responses.csv row for row; the schema.

Everything goes through HTTP as a researcher (DRF's APIClient), beside the pages the
API must agree with: the same forms judge the input, the same CSVs hold the rows.
"""

from __future__ import annotations

import csv
import io

import pytest
from django.forms import BooleanField
from django.http import QueryDict
from django.urls import reverse
from rest_framework.test import APIClient

from studies.api import serializers as api_serializers
from studies.choice import services as cs
from studies.choice.forms import ChoiceStudyForm
from studies.forms import StudyCreateForm
from studies.models import Assignment, Participant, Study
from studies.participation.ledger import STATUSES
from studies.participation.services import (
    participant_consent,
    participant_for_user,
    participant_withdraw,
    participants_invite,
)
from studies.views import invite_url
from tests.factories import DynToMQuestionFactory, DynToMStageFactory

from .test_choice_services import _books, _join, chartom_study
from .test_exports import _answer_scene, answered  # noqa: F401 - fixture used below
from .test_rater_views import keep_scenes, to_scenes

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("friends")]

TAGS = ["beliefs", "intentions"]


@pytest.fixture
def api(researcher) -> APIClient:
    client = APIClient()
    client.force_login(researcher)
    return client


def _post(api: APIClient, name: str, study_id: int | None = None, data=None):
    args = [study_id] if study_id is not None else []
    return api.post(reverse(f"studies-{name}", args=args), data, format="json")


def _get(api: APIClient, name: str, study_id: int | None = None, query: str = ""):
    args = [study_id] if study_id is not None else []
    return api.get(reverse(f"studies-{name}", args=args) + query)


def _all_pages(api: APIClient, url: str) -> list[dict]:
    """Every row of a paginated list, page by page (``next`` links followed)."""
    rows: list[dict] = []
    while url:
        response = api.get(url)
        assert response.status_code == 200, response.content
        body = response.json()
        rows += body["results"]
        url = body["next"]
    return rows


def _scene_payload(friends, **extra) -> dict:
    return {
        "name": "Friends over the API",
        "works": [friends.pk],
        "overlap": 2,
        "min_unseen": 1,
        "tags": TAGS,
        "instructions": "Guess who speaks.",
        "seed": 3,
        "scenes": "all",
        **extra,
    }


# -- create, go live, pause, resume, close ------------------------------------------------


def test_a_scene_study_from_creation_through_go_live_pause_resume_and_close(api, friends):
    response = _post(api, "list", data=_scene_payload(friends))
    assert response.status_code == 201, response.content
    body = response.json()
    study = Study.objects.get(pk=body["id"])
    assert (body["name"], body["benchmark"], body["kind"], body["status"]) == (
        "Friends over the API",
        "tvshowguess",
        "scene",
        "draft",
    )
    assert study.created_by.username == "res"
    assert body["works"] == [{"id": friends.pk, "key": friends.key, "title": friends.title}]
    assert body["settings"]["overlap"] == 2 and body["settings"]["min_unseen"] == 1
    assert body["settings"]["tags"] == TAGS and body["settings"]["seed"] == 3
    assert body["items"]["total"] == study.study_items.count() > 0
    created = body["created"]
    assert created["leaks"]["scenes"] == study.study_items.count()
    assert created["leaks"]["held_back"] == study.study_items.filter(held_back=True).count()
    assert created["summary"].startswith(f"Study created with {created['leaks']['scenes']} scenes")
    assert body["participants"] == dict.fromkeys(STATUSES, 0)
    assert body["links"]["go_live"] == f"http://testserver/api/studies/{study.pk}/go-live/"
    assert "public_token" not in body["settings"]

    # The page, given the same settings, draws the same draft.
    page = api.post(
        reverse("studies:new"),
        {
            **_scene_payload(friends, name="Friends on the page"),
            "tags": "\n".join(TAGS),
            # What the page's fields show: the API takes them when left out.
            "min_seen": "0",
            "reveal": "at_end",
        },
    )
    assert page.status_code == 302
    twin = Study.objects.get(name="Friends on the page")
    fields = ("benchmark", "overlap", "min_seen", "min_unseen", "tags", "seed", "sampling")
    assert [getattr(twin, f) for f in fields] == [getattr(study, f) for f in fields]
    assert list(twin.study_items.values_list("scene", "held_back")) == list(
        study.study_items.values_list("scene", "held_back")
    )

    # A draft cannot be paused: a 409 with the service's message, nothing changed.
    refused = _post(api, "pause", study.pk)
    assert refused.status_code == 409
    assert refused.json() == {"detail": "a draft study cannot become paused"}
    study.refresh_from_db()
    assert study.status == "draft"

    live = _post(api, "go-live", study.pk)
    assert live.status_code == 200, live.content
    summary = live.json()
    held = list(
        study.study_items.filter(held_back=True)
        .order_by("study_work__position", "position")
        .values_list("scene__source_id", flat=True)
    )
    assert summary["status"] == "live" and summary["id"] == study.pk
    assert summary["held_back"] == held
    assert set(summary["leaks"]) == {"scenes", "flagged", "mentions", "held_back", "shown"}
    assert summary["leaks"]["held_back"] == len(held)
    assert summary["summary"].startswith("Leak check: ")
    study.refresh_from_db()
    assert study.status == "live" and study.item_set_hash

    paused = _post(api, "pause", study.pk)
    assert paused.status_code == 200 and paused.json()["status"] == "paused"
    resumed = _post(api, "resume", study.pk)
    assert resumed.status_code == 200
    assert resumed.json()["status"] == "live" and resumed.json()["leaks"] is None
    closed = _post(api, "close", study.pk)
    assert closed.status_code == 200 and closed.json()["status"] == "closed"
    for name, to in (("go-live", "live"), ("resume", "live"), ("pause", "paused")):
        refused = _post(api, name, study.pk)
        assert refused.status_code == 409, name
        assert refused.json() == {"detail": f"a closed study cannot become {to}"}
    study.refresh_from_db()
    assert study.status == "closed"

    detail = _get(api, "detail", study.pk).json()
    assert detail["status"] == "closed" and detail["settings"]["item_set_hash"]
    listed = _get(api, "list", query="?status=closed").json()["results"]
    assert [s["id"] for s in listed] == [study.pk]
    assert _get(api, "list", query="?status=draft").json()["results"][0]["id"] == twin.pk
    assert _get(api, "list", query="?status=open").status_code == 400


def test_every_scene_held_back_refuses_going_live(api, friends):
    study = Study.objects.get(pk=_post(api, "list", data=_scene_payload(friends)).json()["id"])
    study.study_items.update(held_back=True)
    # study_launch re-runs the leak check, which keeps holds: release none of them.
    refused = _post(api, "go-live", study.pk)
    assert refused.status_code == 409
    assert refused.json() == {"detail": "every scene is held back: nothing to assign"}
    study.refresh_from_db()
    assert study.status == "draft" and not study.item_set_hash


def test_multiple_choice_studies_are_chosen_by_their_works_benchmark(api):
    books = _books(2, 3)
    response = _post(
        api, "list", data={"name": "Books", "works": [w.pk for w in books], "questions": 4}
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["benchmark"], body["kind"], body["status"]) == ("chartom-qa", "choice", "draft")
    assert body["created"]["items"] == 4 == body["items"]["total"]
    assert body["created"]["leaks"] is None
    assert body["created"]["summary"] == "Study created with 4 items."
    assert body["settings"]["sampling"]["questions"] == 4
    live = _post(api, "go-live", body["id"])
    assert live.status_code == 200
    assert live.json()["summary"].startswith("Multiple-choice items need no leak check")
    assert live.json()["leaks"] is None and live.json()["held_back"] == []

    stage = DynToMStageFactory()
    for _ in range(2):
        DynToMQuestionFactory(stage=stage, gold_letter="a")
    response = _post(
        api,
        "list",
        data={"name": "Stages", "works": [stage.work.pk], "stage_percent": 100, "overlap": 3},
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["benchmark"], body["kind"]) == ("dyntom", "choice")
    assert body["settings"]["overlap"] == 3 and body["items"]["total"] == 1

    # Mixed benchmarks: the first work decides the form, which names the others.
    mixed = _post(api, "list", data={"name": "Mixed", "works": [books[0].pk, stage.work.pk]})
    assert mixed.status_code == 400
    assert mixed.json() == {"works": [f"Not chartom-qa works: {stage.work.title}."]}
    assert not Study.objects.filter(name="Mixed").exists()


# -- the same validation as the pages ------------------------------------------------------


def _page_errors(form_class, data: dict) -> dict[str, list[str]]:
    """What the page's form says of the same values, posted as a browser posts them."""
    query = QueryDict(mutable=True)
    for key, value in data.items():
        if isinstance(value, list) and key != "tags":
            query.setlist(key, [str(v) for v in value])
        elif key == "tags":
            query[key] = "\n".join(value)
        elif isinstance(value, bool):
            if value:
                query[key] = "on"
        else:
            query[key] = str(value)
    for name, field in form_class.base_fields.items():
        # The values the page shows, which a browser posts when they are left alone.
        if name not in data and field.initial is not None and not isinstance(field, BooleanField):
            query[name] = str(field.initial)
    if form_class is ChoiceStudyForm:
        query.setdefault("benchmark", "chartom-qa")
    form = form_class(query)
    assert not form.is_valid()
    return {("non_field_errors" if k == "__all__" else k): list(v) for k, v in form.errors.items()}


def test_create_answers_the_page_forms_errors_field_by_field(api, friends):
    Study.objects.create(name="Taken", benchmark="tvshowguess")
    books = _books(1, 2)
    before = Study.objects.count()
    cases = [
        (StudyCreateForm, {"name": "", "works": []}),
        (StudyCreateForm, _scene_payload(friends, name="Taken")),
        (StudyCreateForm, _scene_payload(friends, min_seen=2, min_unseen=1)),
        (StudyCreateForm, _scene_payload(friends, scenes="genre")),
        (StudyCreateForm, _scene_payload(friends, overlap="٣", seed=-1)),
        (StudyCreateForm, _scene_payload(friends, overlap=10**30, tags=[])),
        (StudyCreateForm, _scene_payload(friends, works=[friends.pk, 10**6], reveal="never")),
        (StudyCreateForm, _scene_payload(friends, tags=["x" * 61], name="a\x00b")),
        (ChoiceStudyForm, {"name": "Q", "works": [books[0].pk], "questions": 0}),
        (ChoiceStudyForm, {"name": "Q", "works": [books[0].pk], "question_types": ["nope"]}),
    ]
    for form_class, data in cases:
        response = _post(api, "list", data=data)
        assert response.status_code == 400, (data, response.content)
        assert response.json() == _page_errors(form_class, data), data
    assert Study.objects.count() == before


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ([1, 2], "non_field_errors", "expected a JSON object"),
        ("name", "non_field_errors", "expected a JSON object"),
        ({"name": ["a"], "works": []}, "name", "expected a single value, not a list"),
        ({"name": {"a": 1}}, "name", "expected a single value, not a list"),
        ({"name": True}, "name", "expected text or a number, not true or false"),
        ({"name": "S", "works": "1"}, "works", "expected a list of values"),
        ({"name": "S", "works": [True]}, "works", "expected a list of values"),
        ({"name": "S", "works": [[1]]}, "works", "expected a list of values"),
        ({"name": "S", "one_to_one": "yes"}, "one_to_one", "expected true or false"),
        ({"name": "S", "tags": "a\nb"}, "tags", "expected a list of values"),
        ({"name": "S", "tags": ["a\nb"]}, "tags", "one line each"),
        ({"name": "S", "colour": "red"}, "colour", "unknown field; this form takes: name, "),
        ({"name": "S", "benchmark": "imdb"}, "benchmark", "one of tom-in-amc, tvshowguess"),
        ({"name": "S", "benchmark": ["dyntom"]}, "benchmark", "one of tom-in-amc"),
    ],
)
def test_create_refuses_json_the_form_cannot_take(api, data, field, message):
    response = _post(api, "list", data=data)
    assert response.status_code == 400, response.content
    assert response.json()[field][0].startswith(message), response.json()
    assert not Study.objects.exists()


def test_a_benchmark_that_is_not_the_works_is_refused(api, friends):
    response = _post(api, "list", data=_scene_payload(friends, benchmark="tom-in-amc"))
    assert response.status_code == 400
    assert response.json() == {"benchmark": ["the works are tvshowguess"]}
    assert not Study.objects.exists()
    ok = _post(api, "list", data=_scene_payload(friends, benchmark="tvshowguess"))
    assert ok.status_code == 201


# -- invites -------------------------------------------------------------------------------


def test_invites_are_the_pages_links(api, live_study):
    response = _post(api, "invites", live_study.pk, {"labels": ["Ann", "Ben"]})
    assert response.status_code == 201, response.content
    body = response.json()
    made = list(Participant.objects.filter(study=live_study).order_by("pk"))
    assert body["count"] == 2
    assert body["invites"] == [
        {"participant_id": p.pk, "label": p.label, "url": f"http://testserver/s/{p.token}/"}
        for p in made
    ]
    # The same URLs as the study page lists.
    page = api.get(reverse("studies:detail", args=[live_study.pk]))
    assert [i["url"] for i in page.context["invites"]] == [i["url"] for i in body["invites"]]
    assert [invite_url(page.wsgi_request, p.token) for p in made] == [
        i["url"] for i in body["invites"]
    ]

    counted = _post(api, "invites", live_study.pk, {"count": 2})
    assert counted.status_code == 201
    assert [i["label"] for i in counted.json()["invites"]] == ["rater 3", "rater 4"]

    for data, field, message in [
        ({}, "non_field_errors", "give a number of links or their labels"),
        ({"count": 201}, "count", "Ensure this value is less than or equal to 200."),
        ({"count": 0}, "count", "Ensure this value is greater than or equal to 1."),
        ({"count": "1e3"}, "count", "Number of links: expected a whole number"),
        ({"labels": ["x"] * 201}, "non_field_errors", "at most 200 links at a time"),
        ({"labels": ["a\nb"]}, "labels", "one line each"),
        ({"labels": "Ann"}, "labels", "expected a list of values"),
        ({"token": "abc"}, "token", "unknown field"),
        ([], "non_field_errors", "expected a JSON object"),
    ]:
        refused = _post(api, "invites", live_study.pk, data)
        assert refused.status_code == 400, data
        assert refused.json()[field][0].startswith(message), (data, refused.json())
    assert Participant.objects.filter(study=live_study).count() == 4

    assert _post(api, "close", live_study.pk).status_code == 200
    closed = _post(api, "invites", live_study.pk, {"count": 1})
    assert closed.status_code == 409
    assert closed.json() == {"detail": "The study is closed: it takes no new invites."}
    assert Participant.objects.filter(study=live_study).count() == 4


# -- participants --------------------------------------------------------------------------


def _raters_csv(api, study) -> list[dict[str, str]]:
    response = api.get(reverse("studies:raters-csv", args=[study.pk]))
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_participants_are_pseudonymised_and_agree_with_raters_csv(api, client, live_study, rater):
    live_study.open_join = True
    live_study.save(update_fields=["open_join"])
    keep_scenes(live_study, 2)
    ann, ben, cid, _dan = participants_invite(
        study=live_study, labels=["Ann Lastname", "Ben Lastname", "Cid Lastname", "Dan Lastname"]
    )
    Participant.objects.filter(pk=ann.pk).update(
        platform_ids={"participant": "PROLIFIC-AAA", "study": "ST-1", "session": "SE-1"}
    )
    to_scenes(client, ann)
    _answer_scene(client, ann)
    participant_withdraw(participant=ben)
    participant_consent(participant=cid)
    mine = participant_for_user(study=live_study, user=rater)  # an account, by its username

    response = _get(api, "participants", live_study.pk)
    assert response.status_code == 200
    text = response.content.decode()
    for p in Participant.objects.filter(study=live_study):
        assert p.token not in text
        assert (p.label or "@@") not in text
    for secret in ("Lastname", "rat", "PROLIFIC-AAA", "ST-1", "SE-1", mine.token):
        assert secret not in text
    body = response.json()
    assert body["count"] == 5
    rows = body["results"]
    assert {r["status"] for r in rows} == {
        "in_progress",
        "withdrawn",
        "consented",
        "invited",
    }
    by_id = {r["participant_id"]: r for r in rows}
    assert by_id[ann.pk]["items_submitted"] == 1 and by_id[ann.pk]["items_given"] >= 1
    assert by_id[ben.pk]["status_label"] == "withdrawn"

    # Row for row, the same participants and statuses as raters.csv.
    table = _raters_csv(api, live_study)
    assert [int(r["participant_id"]) for r in table] == [r["participant_id"] for r in rows]
    for row, line in zip(rows, table, strict=True):
        for column in ("status", "status_at", "exclusion_reason"):
            assert str(row[column]) == line[column], column
        assert str(row["excluded"]) == line["excluded"]

    withdrawn = _get(api, "participants", live_study.pk, "?status=withdrawn").json()
    assert [r["participant_id"] for r in withdrawn["results"]] == [ben.pk]
    counts = _get(api, "detail", live_study.pk).json()["participants"]
    assert counts == dict.fromkeys(STATUSES, 0) | {
        "in_progress": 1,
        "withdrawn": 1,
        "consented": 1,
        "invited": 2,
    }
    for bad in ("?status=done", "?status=a%00b", "?status=" + "9" * 5000):
        refused = _get(api, "participants", live_study.pk, bad)
        assert refused.status_code == 400
        assert refused.json()["status"][0].startswith("status: unknown status")


def test_participants_page_through_the_ledger(api, live_study):
    made = participants_invite(study=live_study, labels=[f"p{i}" for i in range(5)])
    rows = _all_pages(api, reverse("studies-participants", args=[live_study.pk]) + "?page_size=2")
    assert [r["participant_id"] for r in rows] == [p.pk for p in made]


# -- responses equal responses.csv ---------------------------------------------------------


def _csv_rows(api, study, query: str = "") -> list[dict[str, str]]:
    response = api.get(reverse("studies:responses-csv", args=[study.pk]) + query)
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(response.getvalue().decode())))


def _as_csv(value) -> str:
    return "" if value is None else str(value)


def _same_rows(api, study, query: str = "") -> int:
    """The API's rows, paged 2 at a time, equal responses.csv's: same columns, same
    values (as the CSV writes them), same order. Returns how many."""
    table = _csv_rows(api, study, query)
    sep = "&" if query else "?"
    url = reverse("studies-responses", args=[study.pk]) + query + f"{sep}page_size=2"
    rows = _all_pages(api, url)
    assert len(rows) == len(table) > 2  # more than one page
    for row, line in zip(rows, table, strict=True):
        assert list(row) == list(line)
        assert {k: _as_csv(v) for k, v in row.items()} == line
    return len(rows)


def test_scene_responses_equal_the_csv_rows(api, answered):  # noqa: F811
    study = answered[0]
    n = _same_rows(api, study)
    assert n < _same_rows(api, study, "?include_excluded=1")


def test_choice_responses_equal_the_csv_rows(api):
    study, works = chartom_study(2, 2)
    ann = _join(study, {works[0].pk}, "Ann")
    ben = _join(study, {works[1].pk}, "Ben")
    cs.design_apply(study=study)
    for p in (ann, ben):
        for assignment in Assignment.objects.filter(participant=p):
            cs.choice_record(participant=p, assignment_id=assignment.pk, action="submit", shown=1)
            cs.choice_record(participant=p, assignment_id=assignment.pk, action="keep")
    assert _same_rows(api, study) >= 4
    # choices.csv, the import's own name for the file, is the same rows.
    old = api.get(reverse("studies:choice-export", args=[study.pk, "csv"]))
    assert list(csv.DictReader(io.StringIO(old.getvalue().decode()))) == _csv_rows(api, study)


# -- the list and the schema ---------------------------------------------------------------


def test_the_list_counts_participants_per_ledger_status(
    api, live_study, django_assert_max_num_queries
):
    (ann, _ben) = participants_invite(study=live_study, labels=["Ann", "Ben"])
    participant_withdraw(participant=ann)
    for i in range(3):
        Study.objects.create(name=f"Draft {i}", benchmark="tvshowguess")
    # Session, user, roles, count, page, works; then the ledger, one query a study.
    with django_assert_max_num_queries(6 + 4):
        response = _get(api, "list")
    body = response.json()
    assert body["count"] == 4
    assert [s["name"] for s in body["results"]] == [
        "Draft 2",
        "Draft 1",
        "Draft 0",
        live_study.name,
    ]
    row = body["results"][-1]
    assert row["participants"] == dict.fromkeys(STATUSES, 0) | {"withdrawn": 1, "invited": 1}
    assert row["works"][0]["key"] == live_study.study_works.get().work.key
    assert set(row["links"]) == {
        "detail",
        "participants",
        "responses",
        "exit_answers",
        "invites",
        "go_live",
        "pause",
        "resume",
        "close",
        "page",
    }
    for link in row["links"].values():
        assert api.get(link).status_code in (200, 405)  # 405: a POST-only action
    assert _get(api, "list", query="?benchmark=dyntom").json()["count"] == 0
    assert _get(api, "list", query="?benchmark=x").status_code == 400


SCHEMA_PATHS = {
    "/api/studies/": {"get", "post"},
    "/api/studies/{study_id}/": {"get"},
    "/api/studies/{study_id}/go-live/": {"post"},
    "/api/studies/{study_id}/pause/": {"post"},
    "/api/studies/{study_id}/resume/": {"post"},
    "/api/studies/{study_id}/close/": {"post"},
    "/api/studies/{study_id}/invites/": {"post"},
    "/api/studies/{study_id}/participants/": {"get"},
    "/api/studies/{study_id}/responses/": {"get"},
    "/api/studies/{study_id}/exit-answers/": {"get"},
    "/api/studies/{study_id}/exit-wide/": {"get"},
    "/api/studies/{study_id}/exit-codebook/": {"get"},
    "/api/studies/{study_id}/package/": {"get"},  # the replication package (reports)
}


def _ref(schema: dict, node: dict) -> dict:
    return schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]


def test_the_schema_lists_every_studies_path_with_its_methods(api):
    schema = api.get(reverse("api-schema"), {"format": "json"}).json()
    paths = {p: ops for p, ops in schema["paths"].items() if p.startswith("/api/studies/")}
    assert {p: set(ops) - {"parameters"} for p, ops in paths.items()} == SCHEMA_PATHS

    create = paths["/api/studies/"]["post"]
    body = create["requestBody"]["content"]["application/json"]["schema"]
    kinds = [_ref(schema, option) for option in _ref(schema, body)["oneOf"]]
    scene, choice = (set(k["properties"]) for k in kinds)
    assert scene == set(StudyCreateForm.base_fields) | {"benchmark"}
    assert choice == set(ChoiceStudyForm.base_fields)
    created = _ref(schema, create["responses"]["201"]["content"]["application/json"]["schema"])
    assert {"id", "status", "settings", "participants", "links", "created"} <= set(
        created["properties"]
    )
    assert "400" in create["responses"]
    for action in ("go-live", "pause", "resume", "close"):
        responses = paths[f"/api/studies/{{study_id}}/{action}/"]["post"]["responses"]
        assert {"200", "409"} <= set(responses), action
    invites = paths["/api/studies/{study_id}/invites/"]["post"]
    request = _ref(schema, invites["requestBody"]["content"]["application/json"]["schema"])
    assert set(request["properties"]) == {"labels", "count"}
    participants = paths["/api/studies/{study_id}/participants/"]["get"]
    status = next(p for p in participants["parameters"] if p["name"] == "status")
    assert sorted(status["schema"]["enum"]) == sorted(STATUSES)
    page = _ref(schema, participants["responses"]["200"]["content"]["application/json"]["schema"])
    assert {"count", "next", "previous", "results"} <= set(page["properties"])
    row = _ref(schema, page["properties"]["results"]["items"])
    assert set(row["properties"]) == set(api_serializers.ParticipantRowSerializer().fields)
    assert not {"participant", "label", "token", "platform_participant"} & set(row["properties"])


def test_the_schema_description_is_true(api):
    """ "Item bank, studies, model runs and reports": each has endpoints in the schema."""
    schema = api.get(reverse("api-schema"), {"format": "json"}).json()
    description = schema["info"]["description"]
    assert description.startswith("Item bank, studies, model runs and reports")
    paths = set(schema["paths"])
    for prefix in ("/api/benchmarks/", "/api/studies/", "/api/modeling/runs/", "/api/reports/"):
        assert any(p.startswith(prefix) for p in paths), prefix
    # Studies can be created and run, not only read.
    assert "post" in schema["paths"]["/api/studies/"]
