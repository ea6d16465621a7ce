"""``POST /api/imports/``: the dry run, ``?confirm=1``, job status, errors, permissions."""

from __future__ import annotations

import base64
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from benchmarks.models import ImportJob, Work
from modeling.models import Run

from .test_uploads import FIXTURES, screenplay_text

pytestmark = pytest.mark.django_db

URL = "/api/imports/"


def upload(name: str, data: bytes | str) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data.encode() if isinstance(data, str) else data)


@pytest.fixture
def api(client, researcher):
    client.force_login(researcher)
    return client


def test_dry_run_then_confirm(api):
    dry = api.post(URL, {"format": "screenplay", "files": [upload("lamp.txt", screenplay_text())]})

    assert dry.status_code == 200, dry.content
    body = dry.json()
    assert body["status"] == "ready" and body["files"] == ["lamp.txt"]
    counts = {row["kind"]: row["created"] for row in body["dry_run"]["counts"]}
    assert counts["Work"] == 1 and counts["Scene"] == 10
    assert any("line 75: 'WREN'" in w for w in body["dry_run"]["warnings"])
    assert body["preview"][0]["kind"] == "scene"
    assert body["report"] is None and not Work.objects.exists()

    confirmed = api.post(body["confirm_url"])
    assert confirmed.status_code == 201, confirmed.content
    assert confirmed.json()["report"]["counts"] == body["dry_run"]["counts"]
    assert Work.objects.get().title == "lamp"

    status = api.get(body["status_url"]).json()
    assert status["status"] == "succeeded"
    assert status["progress"] == {"done": 10, "total": 10}


def test_confirm_in_one_request_and_again_creates_nothing(api):
    files = {
        "format": "tom-in-amc",
        "files[]": [upload("t.json", (FIXTURES / "tom_in_amc.json").read_bytes())],
    }
    first = api.post(f"{URL}?confirm=1", files)
    assert first.status_code == 201, first.content
    assert {r["kind"]: r["created"] for r in first.json()["report"]["counts"]}["Work"] >= 1

    files["files[]"] = [upload("t.json", (FIXTURES / "tom_in_amc.json").read_bytes())]
    second = api.post(f"{URL}?confirm=1", files)
    assert second.status_code == 201
    assert all(row["created"] == 0 for row in second.json()["report"]["counts"])


def test_a_large_upload_is_queued_with_its_status_url(api, settings):
    settings.TOMLAB_IMPORT_BACKGROUND_BYTES = 10
    response = api.post(
        f"{URL}?confirm=1", {"format": "screenplay", "files": [upload("a.txt", screenplay_text())]}
    )

    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "queued" and body["background"] is True
    assert body["status_url"].endswith(reverse("import-job-api", args=[body["id"]]))
    assert api.get(body["status_url"]).json()["progress"] == {"done": 0, "total": 10}
    cancelled = api.post(reverse("import-job-cancel-api", args=[body["id"]]))
    assert cancelled.json()["status"] == "cancelled"
    assert not Work.objects.exists()


def test_predictions_with_options(api):
    from benchmarks.services import benchmark_import

    benchmark_import(format_name="dyntom", path=FIXTURES / "dyntom")
    data = (FIXTURES / "predictions" / "dyntom.jsonl").read_bytes()
    response = api.post(
        f"{URL}?confirm=1",
        {
            "format": "predictions",
            "name": "api run",
            "model": "demo-recorded",
            "files": [upload("p.jsonl", data)],
        },
    )
    assert response.status_code == 201, response.content
    assert Run.objects.get().name == "api run"


def test_located_errors_are_400_and_write_nothing(api, shared_data):
    lines = (shared_data / "chartom-qa" / "paper_examples.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    del record["question"]
    response = api.post(
        f"{URL}?confirm=1",
        {"format": "chartom-qa", "files": [upload("qa.jsonl", json.dumps(record) + "\n")]},
    )

    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error["file"] == "qa.jsonl" and error["record"] == "line 1"
    assert error["field"] == "question"
    assert not ImportJob.objects.exists() and not Work.objects.exists()


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({}, "format"),
        ({"format": "nope", "files": [upload("a.txt", "x")]}, "format"),
        ({"format": "screenplay"}, "files"),
        ({"format": "screenplay", "files": "not a file"}, "files"),
        (
            {"format": "screenplay", "files": [upload("a.txt", "x")], "title": "t" * 100_000},
            "title",
        ),
        ({"format": "screenplay", "files": [upload("a.txt", "x")], "title": "a\x00b"}, "title"),
        ({"format": "screenplay", "files": [upload("a.txt", "x")], "split": "nope"}, "split"),
        (
            {"format": "predictions", "files": [upload("p.jsonl", "{}")], "benchmark": "x"},
            "benchmark",
        ),
        ({"format": "dyntom", "files": [upload("a.zip", b"PK\x03\x04junk")]}, "files"),
        ({"format": "screenplay", "files": [upload("a.txt", b"\x00\xff" * 50)]}, None),
        ({"format": "tom-in-amc", "files": [upload("a.json", b"\x00{")]}, None),
    ],
)
def test_junk_is_a_400_naming_the_field(api, data, field):
    response = api.post(URL, data)

    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert errors and all(e["message"] for e in errors)
    if field:
        assert field in {e["field"] for e in errors}
    assert not ImportJob.objects.exists()


def test_bodies_that_are_not_multipart_are_refused_not_crashed(api):
    assert api.post(URL).status_code == 400
    assert (
        api.post(URL, data=b"\x00" * 100, content_type="application/octet-stream").status_code
        == 415
    )
    assert api.post(URL, data="{}", content_type="application/json").status_code == 415
    assert api.get(URL).status_code == 405
    assert api.get(reverse("import-job-api", args=[99999])).status_code == 404
    assert api.post(reverse("import-job-confirm-api", args=[99999])).status_code == 404


def test_confirming_twice_is_a_400(api):
    body = api.post(
        URL, {"format": "screenplay", "files": [upload("a.txt", screenplay_text())]}
    ).json()
    assert api.post(body["confirm_url"]).status_code == 201
    again = api.post(body["confirm_url"])
    assert again.status_code == 400
    assert "only a dry run waiting" in again.json()["errors"][0]["message"]


def test_basic_auth_researcher_can_import(client, researcher):
    token = base64.b64encode(b"res:pw-res-123!").decode()
    response = client.post(
        URL,
        {"format": "screenplay", "files": [upload("a.txt", screenplay_text())]},
        HTTP_AUTHORIZATION=f"Basic {token}",
    )
    assert response.status_code == 200


@pytest.mark.parametrize("role", ["rater", "annotator", "anonymous"])
def test_non_researchers_get_403_on_every_endpoint(client, request, researcher, role):
    client.force_login(researcher)
    job_id = client.post(
        URL, {"format": "screenplay", "files": [upload("a.txt", screenplay_text())]}
    ).json()["id"]
    client.logout()
    if role != "anonymous":
        client.force_login(request.getfixturevalue(role))

    calls = [
        client.post(URL, {"format": "screenplay", "files": [upload("a.txt", screenplay_text())]}),
        client.post(f"{URL}?confirm=1", {"format": "screenplay", "files": [upload("a.txt", "x")]}),
        client.get(reverse("import-job-api", args=[job_id])),
        client.post(reverse("import-job-confirm-api", args=[job_id])),
        client.post(reverse("import-job-cancel-api", args=[job_id])),
    ]

    assert [c.status_code for c in calls] == [403] * len(calls)
    assert ImportJob.objects.get().status == "ready" and ImportJob.objects.count() == 1


def test_another_researchers_job_is_404(client, researcher):
    from accounts.services import user_create_with_role

    client.force_login(researcher)
    body = client.post(
        URL, {"format": "screenplay", "files": [upload("a.txt", screenplay_text())]}
    ).json()
    other = user_create_with_role(username="res2", password="pw-res2-123!", role="researcher")
    client.force_login(other)
    assert client.get(body["status_url"]).status_code == 404
    assert client.post(body["confirm_url"]).status_code == 404


def test_schema_describes_the_multipart_request(api):
    schema = api.get(reverse("api-schema"), {"format": "json"}).json()
    post = schema["paths"][URL]["post"]
    assert set(post["responses"]) == {"200", "201", "202", "400"}
    assert {p["name"] for p in post["parameters"]} == {"confirm"}
    ref = post["requestBody"]["content"]["multipart/form-data"]["schema"]["$ref"]
    request_schema = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert request_schema["properties"]["files"]["items"]["format"] == "binary"
    assert set(request_schema["required"]) == {"format", "files"}
    assert f"{URL}jobs/{{job_id}}/" in schema["paths"]


def test_files_spooled_to_disk_import_too(api, settings, shared_data):
    # Above FILE_UPLOAD_MAX_MEMORY_SIZE Django keeps an upload in a temporary file.
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 10
    raw = shared_data / "tvshowguess" / "friends.raw"
    with raw.open("rb") as data:
        response = api.post(f"{URL}?confirm=1", {"format": "tvshowguess", "files": [data]})
    assert response.status_code == 201, response.content
    assert Work.objects.get().key == "friends"


@pytest.mark.parametrize(
    "name, body, field",
    [
        ("nul.jsonl", '{"book_name": "a\\u0000b", "question": "q"}\n', "book_name"),
        ("deep.jsonl", "[" * 50_000 + "]" * 50_000 + "\n", None),
        ("deep-object.jsonl", '{"a": ' * 100 + "1" + "}" * 100 + "\n", None),
    ],
)
def test_a_nul_or_deep_nesting_in_a_jsonl_record_is_a_400_naming_the_line(api, name, body, field):
    """Issue 45, finding 5: a \\u0000 in a JSONL field and a record nested 50,000 deep
    answered 500."""
    for fmt in ("chartom-qa", "predictions"):
        data = {"format": fmt, "files": [upload(name, body)]}
        if fmt == "predictions":
            data.update(benchmark="chartom-qa", name="probe")
        response = api.post(URL, data)

        assert response.status_code == 400, (fmt, response.content)
        errors = response.json()["errors"]
        assert any("line 1" in str(e.get("record")) for e in errors), (fmt, errors)
        if field:
            assert any(e.get("field") == field for e in errors), (fmt, errors)
    assert not ImportJob.objects.exists()
