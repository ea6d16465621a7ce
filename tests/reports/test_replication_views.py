"""The replication package pages and API: researchers download a study's package, upload
one, and see what was imported; everyone else is refused."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import include, path, reverse

from benchmarks.models import ImportJob
from benchmarks.services import import_job_run
from demo.studies import DYNTOM_STUDY
from modeling.models import Run
from reports.models import ReplicationImport
from studies.models import Study
from tests.module_rows import build_demo

pytestmark = [pytest.mark.django_db, pytest.mark.urls(__name__), pytest.mark.module_rows("demo")]

# config/api_router.py is to mount the package API before the studies API; until it
# does, this module's URLconf mounts it the same way for these tests.
urlpatterns = [
    path("api/studies/", include("reports.api.package_urls")),
    path("", include("config.urls")),
]


@pytest.fixture
def study(db, module_rows, shared_data) -> Study:
    if not module_rows.shares("demo"):
        build_demo(shared_data)
    return Study.objects.get(name=DYNTOM_STUDY)


def dyntom_run() -> Run:
    return Run.objects.filter(benchmark="dyntom").order_by("pk").first()


def test_the_packages_page_lists_studies_and_offers_the_upload(client, researcher, study):
    client.force_login(researcher)
    response = client.get("/reports/packages/")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'enctype="multipart/form-data"' in page and "Import package" in page
    assert f"/reports/packages/study/{study.pk}/" in page
    assert "No package imported yet" in page


def test_the_export_page_downloads_a_package(client, researcher, study):
    client.force_login(researcher)
    page = client.get(f"/reports/packages/study/{study.pk}/")
    assert page.status_code == 200
    assert "Download replication package" in page.content.decode()
    run = dyntom_run()

    response = client.get(
        f"/reports/packages/study/{study.pk}/download/?runs={run.pk}&with_items=1"
    )

    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert f'filename="study-{study.pk}-' in response["Content-Disposition"]
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    manifest = json.loads(archive.read("manifest.json"))
    assert manifest["options"] == {"with_items": True, "runs": ["R1"], "with_platform_ids": False}
    assert any(name.startswith("items/dyntom/") for name in archive.namelist())


def test_a_bad_download_option_is_a_400_naming_it(client, researcher, study):
    client.force_login(researcher)
    other = Run.objects.exclude(benchmark="dyntom").first()
    for query, expected in (
        (f"runs={other.pk}", f"no dyntom run with id {other.pk}"),
        ("runs=3;drop", "neither &#x27;all&#x27; nor ids"),
        ("with_items=maybe", "with_items: give 1 or 0"),
    ):
        response = client.get(f"/reports/packages/study/{study.pk}/download/?{query}")
        assert response.status_code == 400, query
        assert expected in response.content.decode(), query


def test_uploading_a_package_imports_it_once(client, researcher, study, tmp_path):
    """The upload is queued for a worker (here: the service the task calls); its import
    page follows the job to the study it became."""
    client.force_login(researcher)
    response = client.get(f"/reports/packages/study/{study.pk}/download/?runs={dyntom_run().pk}")
    data = b"".join(response.streaming_content)

    def upload_and_run() -> str:
        queued = client.post(
            "/reports/packages/import/",
            {"package": SimpleUploadedFile("dyntom.zip", data, "application/zip")},
            follow=True,
        )
        assert queued.status_code == 200
        job = ImportJob.objects.order_by("-pk").first()
        assert job.status == ImportJob.Status.QUEUED
        assert "Package queued for import" in queued.content.decode()
        import_job_run(job_id=job.pk)
        return client.get(reverse("benchmarks:import-job", args=[job.pk])).content.decode()

    page = upload_and_run()
    record = ReplicationImport.objects.get()
    assert f"created study #{record.study_id}" in page
    assert "report.json: rebuilt here, equal to the packaged one" in page
    assert f'href="/studies/{record.study_id}/"' in page
    assert record.imported_by == researcher and record.source_name == "dyntom.zip"
    assert record.study.status == Study.Status.CLOSED

    assert "nothing created" in upload_and_run()
    assert ReplicationImport.objects.count() == 1


def test_a_broken_upload_is_refused_on_the_page(client, researcher, study):
    client.force_login(researcher)
    response = client.post(
        "/reports/packages/import/",
        {"package": SimpleUploadedFile("notes.zip", b"not a zip at all", "application/zip")},
    )
    assert response.status_code == 400
    assert "notes.zip: not a zip file" in response.content.decode()
    missing = client.post("/reports/packages/import/", {})
    assert missing.status_code == 400 and "This field is required" in missing.content.decode()
    assert not ReplicationImport.objects.exists() and not ImportJob.objects.exists()


def test_only_researchers_reach_the_pages_and_the_api(client, rater, study):
    anonymous = client.get("/reports/packages/")
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    client.force_login(rater)
    for url in (
        "/reports/packages/",
        f"/reports/packages/study/{study.pk}/",
        f"/reports/packages/study/{study.pk}/download/",
    ):
        assert client.get(url).status_code == 403, url
    assert client.post("/reports/packages/import/").status_code == 403
    assert client.get(f"/api/studies/{study.pk}/package/").status_code == 403


def test_the_api_serves_the_package(client, researcher, study):
    client.force_login(researcher)
    run = dyntom_run()
    response = client.get(f"/api/studies/{study.pk}/package/?runs={run.pk}")
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    assert "datapackage.json" in archive.namelist()

    bad = client.get(f"/api/studies/{study.pk}/package/?runs=abc")
    assert bad.status_code == 400 and "runs" in bad.json()
    assert client.get("/api/studies/999999/package/").status_code == 404
