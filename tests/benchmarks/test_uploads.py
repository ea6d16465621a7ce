"""Imports from uploaded files: the dry run, Confirm, layouts, refusals and the pages.

Every format goes through ``benchmarks.services.import_upload_start`` (what the
``/data/`` pages and the API call) with the real files from ``../shared/data`` or the
demo fixtures; broken copies are made in the test. The dry run must leave the database
as it was and count exactly what Confirm then creates.
"""

from __future__ import annotations

import io
import json
import shutil
import time
import zipfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from benchmarks import services, uploads
from benchmarks.models import (
    Character,
    DynToMQuestion,
    DynToMScenario,
    DynToMStage,
    ImportJob,
    QAItem,
    Scene,
    SpeakerAnnotation,
    SpeakerInstance,
    Work,
)
from benchmarks.uploads import UploadRefused
from modeling.models import Prediction, Run

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "demo"
MODELS = (
    Work,
    Character,
    Scene,
    SpeakerInstance,
    SpeakerAnnotation,
    QAItem,
    DynToMStage,
    DynToMScenario,
    DynToMQuestion,
    Run,
    Prediction,
)
CUE, SPEECH = " " * 20, " " * 10
NAMES = ["MARA", "JONAH", "IRIS", "HOPE", "WREN", "ABEL"]


def screenplay_text(*, broken_cue: bool = True) -> str:
    """Ten scenes; in the eighth, a cue with nothing under it (the parser cannot read it)."""
    parts = []
    for n in range(10):
        a, b = NAMES[n % 6], NAMES[(n + 1) % 6]
        parts.append(f"INT. LIGHTHOUSE ROOM {n + 1} - NIGHT\n\n")
        parts.append(f"{a.title()} watches the lamp. {b.title()} climbs the stairs.\n\n")
        if broken_cue and n == 7:
            parts.append(f"{CUE}WREN\n\n")
        parts.append(
            f"{CUE}{a}\n{SPEECH}Is the lamp lit, {b.title()}?\n\n"
            f"{CUE}{b}\n{SPEECH}It is lit. The ships will see it.\n\n"
        )
    return "".join(parts)


def upload(name: str, data: bytes | str) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data.encode() if isinstance(data, str) else data)


def from_path(path: Path, name: str | None = None) -> SimpleUploadedFile:
    return upload(name or path.name, path.read_bytes())


def zip_of(members: dict[str, bytes], *, links: tuple[str, ...] = ()) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for name in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o120777 << 16
            zf.writestr(info, "../../etc/passwd")
    return buffer.getvalue()


def trials_zip(root: Path, names: list[str], *, prefix: str = "") -> bytes:
    return zip_of(
        {
            f"{prefix}{name}/{file.name}": file.read_bytes()
            for name in names
            for file in sorted((root / name).iterdir())
        }
    )


@pytest.fixture(autouse=True)
def _no_uploads_from_other_tests():
    """Uploads left by another test (a dry run never confirmed) would count as ours."""
    shutil.rmtree(uploads.uploads_root(), ignore_errors=True)


def snapshot() -> dict[str, int]:
    return {m.__name__: m.objects.count() for m in MODELS}


def created(report: dict) -> dict[str, int]:
    return {row["kind"]: row["created"] for row in report["counts"] if row["created"]}


def leftover_uploads() -> list[str]:
    root = uploads.uploads_root()
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def dry_run_then_confirm(user, format_name: str, files, **kwargs) -> ImportJob:
    """The whole flow, checking the invariants every format must keep."""
    before = snapshot()
    job = services.import_upload_start(user=user, format_name=format_name, files=files, **kwargs)
    assert job.status == ImportJob.Status.READY
    assert snapshot() == before, "the dry run wrote to the database"
    assert uploads.upload_folder(job.upload).is_dir()
    job = services.import_upload_confirm(job=job)
    assert job.status == ImportJob.Status.SUCCEEDED, job.error
    after = snapshot()
    made = {name: after[name] - before[name] for name in after if after[name] != before[name]}
    assert made == created(job.report)
    assert job.report["counts"] == job.dry_run["counts"]
    assert job.progress_done == job.progress_total
    assert not uploads.upload_folder(job.upload).exists(), "upload kept after the import"
    return job


# -- each format -----------------------------------------------------------------------


def test_screenplay_from_shared_data_dry_run_confirm_and_again(researcher, shared_data):
    script = shared_data / "screenplays" / "dead_poets_society.txt"
    job = dry_run_then_confirm(researcher, "screenplay", [from_path(script)])

    assert created(job.report)["Work"] == 1
    work = Work.objects.get(benchmark="tom-in-amc")
    assert work.title == "Dead Poets Society" and work.source == script.name
    assert any("could not be parsed" in w for w in job.report["warnings"])
    assert all(str(uploads.uploads_root()) not in w for w in job.report["warnings"])
    scene = job.preview[0]
    assert scene["kind"] == "scene" and scene["masked"][0]["code"] == "P0"
    assert scene["masked"][0]["candidates"] == ["neil", "keating", "charlie", "knox", "todd"]

    # The same file again: the dry run and the import create nothing.
    again = dry_run_then_confirm(researcher, "screenplay", [from_path(script)])
    assert created(again.report) == {}
    assert {row["kind"]: row["unchanged"] for row in again.report["counts"]}["Scene"] == 105


def test_written_screenplay_warns_with_the_line_number_and_takes_a_title(researcher):
    job = services.import_upload_start(
        user=researcher,
        format_name="screenplay",
        files=[upload("lighthouse.txt", screenplay_text())],
        options={"title": "The Lamp", "split": "dev"},
    )
    (warning,) = [w for w in job.dry_run["warnings"] if "could not be parsed" in w]
    assert warning.startswith("lighthouse.txt: 1 line(s)")
    assert "line 75: 'WREN'" in warning
    assert job.preview[0]["title"].startswith("The Lamp · testing-")
    services.import_upload_confirm(job=job)
    assert Work.objects.get().split == "dev"


def test_tvshowguess_raw_and_tsv_are_laid_out_side_by_side(researcher, shared_data):
    # The sheet may be called anything: it is read as <show>.tsv beside <show>.raw.
    job = dry_run_then_confirm(
        researcher,
        "tvshowguess",
        [
            from_path(shared_data / "tvshowguess" / "friends.raw"),
            from_path(shared_data / "tvshowguess" / "friends.tsv", "annotations.tsv"),
        ],
    )
    made = created(job.report)
    assert made["Work"] == 1 and made["SpeakerAnnotation"] > 0
    assert Work.objects.get().key == "friends"
    assert job.preview[0]["kind"] == "scene" and job.preview[0]["masked"]


def test_dyntom_zip_of_shared_trials_in_a_wrapping_folder(researcher, shared_data):
    names = ["trial50", "trial69", "trial149"]
    data = trials_zip(shared_data / "dyntom", names, prefix="dyntom/")
    job = dry_run_then_confirm(researcher, "dyntom", [upload("stages.zip", data)], options={})

    assert created(job.report)["DynToMStage"] == 3
    assert job.progress_total == 3
    # Where a stage came from is stored relative to the upload, not its temporary folder.
    sources = sorted(Work.objects.values_list("source", flat=True))
    assert sources == sorted(f"dyntom/{name}" for name in names)
    stage = job.preview[0]
    assert stage["kind"] == "stage" and stage["questions"] and stage["scenario"]["dialogue"]

    again = dry_run_then_confirm(researcher, "dyntom", [upload("stages.zip", data)])
    assert created(again.report) == {}


def test_dyntom_story_and_questions_pair_takes_its_stage_name(researcher, shared_data):
    trial = shared_data / "dyntom" / "trial50"
    files = [from_path(trial / "story.json"), from_path(trial / "question_new.json")]
    with pytest.raises(UploadRefused) as refused:
        services.import_upload_start(user=researcher, format_name="dyntom", files=files)
    assert refused.value.field == "stage"

    files = [from_path(trial / "story.json"), from_path(trial / "question_new.json")]
    job = dry_run_then_confirm(researcher, "dyntom", files, options={"stage": "trial50"})
    assert Work.objects.get().key == "trial50"
    assert job.preview[0]["question_count"] == DynToMQuestion.objects.count()


def test_chartom_qa_with_books_cuts_the_windows(researcher, shared_data):
    books = [from_path(shared_data / "novels" / "father_goriot_pg1237.txt")]
    job = dry_run_then_confirm(
        researcher,
        "chartom-qa",
        [from_path(shared_data / "chartom-qa" / "paper_examples.jsonl")],
        books=books,
    )
    assert job.options["books"] is True
    goriot = QAItem.objects.get(work__key__startswith="Father Goriot")
    assert goriot.context_1000 and goriot.context_2000
    item = job.preview[0]
    assert item["kind"] == "qa-item" and item["question"] and item["choices"]


def test_tom_in_amc_json(researcher):
    job = dry_run_then_confirm(researcher, "tom-in-amc", [from_path(FIXTURES / "tom_in_amc.json")])
    assert created(job.report)["Work"] >= 1
    assert job.preview[0]["kind"] == "scene"


def test_predictions_jsonl_need_a_run_name_and_become_a_run(researcher):
    services.benchmark_import(format_name="dyntom", path=FIXTURES / "dyntom")
    predictions = FIXTURES / "predictions" / "dyntom.jsonl"
    with pytest.raises(UploadRefused) as refused:
        services.import_upload_start(
            user=researcher, format_name="predictions", files=[from_path(predictions)]
        )
    assert refused.value.field == "name"

    job = dry_run_then_confirm(
        researcher, "predictions", [from_path(predictions)], options={"name": "uploaded run"}
    )
    run = Run.objects.get()
    assert run.name == "uploaded run" and run.imported
    assert created(job.report) == {"Run": 1, "Prediction": run.predictions.count()}
    assert job.preview[0]["kind"] == "prediction" and job.preview[0]["parse_status"]
    assert any("uploaded run" in note for note in job.report["notes"])


# -- refusals: located, nothing written, nothing kept ----------------------------------


def test_a_broken_file_is_refused_with_its_location_and_nothing_is_kept(researcher, shared_data):
    lines = (shared_data / "chartom-qa" / "paper_examples.jsonl").read_text().splitlines()
    record = json.loads(lines[1])
    record["tom_dimension"] = "telepathy"
    broken = "\n".join([lines[0], json.dumps(record)]) + "\n"

    with pytest.raises(UploadRefused) as refused:
        services.import_upload_start(
            user=researcher, format_name="chartom-qa", files=[upload("qa.jsonl", broken)]
        )

    error = refused.value.as_dict()
    assert error["file"] == "qa.jsonl"
    assert error["record"] == "line 2"
    assert error["field"] == "tom_dimension"
    assert snapshot() == dict.fromkeys(snapshot(), 0)
    assert not ImportJob.objects.exists()
    assert leftover_uploads() == []


@pytest.mark.parametrize(
    ("members", "links", "message"),
    [
        ({"../evil/story.json": b"{}"}, (), "'..'"),
        ({"/abs/story.json": b"{}"}, (), "absolute"),
        ({}, ("trial1/story.json",), "symbolic link"),
    ],
)
def test_unsafe_zip_members_are_refused(researcher, members, links, message):
    data = zip_of(members, links=links)
    with pytest.raises(UploadRefused) as refused:
        services.import_upload_start(
            user=researcher, format_name="dyntom", files=[upload("bad.zip", data)]
        )
    assert message in refused.value.message
    assert refused.value.file.startswith("bad.zip: ")
    assert leftover_uploads() == []
    assert not (uploads.uploads_root().parent / "evil").exists()


def test_a_zip_without_trials_names_what_it_lacks(researcher):
    data = zip_of({"README.md": b"hello", "notes/plan.txt": b"x"})
    with pytest.raises(UploadRefused) as refused:
        services.import_upload_start(
            user=researcher, format_name="dyntom", files=[upload("empty.zip", data)]
        )
    assert refused.value.file == "empty.zip"
    assert "no story.json or question_new.json" in refused.value.message


def test_zip_bombs_are_refused_by_size_and_count(researcher, settings):
    bomb = zip_of({"trial1/story.json": b"0" * (3 * 1024 * 1024)})  # ~3 KB packed
    with pytest.raises(UploadRefused) as refused:
        services.import_upload_start(
            user=researcher, format_name="dyntom", files=[upload("bomb.zip", bomb)]
        )
    assert "over the 2,097,152-byte limit" in refused.value.message

    settings.TOMLAB_UPLOAD_MAX_BYTES = 50_000
    many = zip_of({f"trial{n}/question_new.json": b" " * 20_000 for n in range(5)})
    with pytest.raises(UploadRefused) as refused:
        services.import_upload_start(
            user=researcher, format_name="dyntom", files=[upload("many.zip", many)]
        )
    assert "TOMLAB_UPLOAD_MAX_BYTES" in refused.value.message
    assert leftover_uploads() == []


def test_a_zip_whose_header_understates_a_member_is_refused(researcher):
    data = bytearray(zip_of({"trial1/story.json": b"0" * (3 * 1024 * 1024)}))
    # The central directory's uncompressed size (offset 24 of its entry) says 1,000.
    entry = data.rindex(b"PK\x01\x02")
    data[entry + 24 : entry + 28] = (1000).to_bytes(4, "little")
    with pytest.raises(UploadRefused) as refused:
        services.import_upload_start(
            user=researcher, format_name="dyntom", files=[upload("liar.zip", bytes(data))]
        )
    assert refused.value.file == "liar.zip: trial1/story.json"
    assert leftover_uploads() == []


def test_wrong_files_and_options_name_the_form_field(researcher):
    cases = [
        ("screenplay", [upload("notes.pdf", b"%PDF")], {}, "files"),
        ("screenplay", [], {}, "files"),
        ("nope", [upload("a.txt", "x")], {}, "format"),
        ("tom-in-amc", [upload("a.json", "{}")], {"title": "x"}, "title"),
        ("tvshowguess", [upload("a.tsv", "x")], {}, "files"),
        ("screenplay", [upload("a.txt", "x"), upload("b.txt", "y")], {"title": "x"}, "title"),
        ("screenplay", [upload("a.txt", "x"), upload("a.txt", "y")], {}, "files"),
        ("predictions", [upload("p.jsonl", "{}")], {"name": "x" * 201}, "name"),
        ("screenplay", [upload("a.txt", "x")], {"title": "a\x00b"}, "title"),
    ]
    for format_name, files, options, field in cases:
        with pytest.raises(UploadRefused) as refused:
            services.import_upload_start(
                user=researcher, format_name=format_name, files=files, options=options
            )
        assert refused.value.field == field, (format_name, options, refused.value)
    assert leftover_uploads() == []
    assert not ImportJob.objects.exists()


def test_an_upload_over_the_limit_is_refused_while_it_is_written(researcher, settings):
    settings.TOMLAB_UPLOAD_MAX_BYTES = 1000
    with pytest.raises(UploadRefused) as refused:
        services.import_upload_start(
            user=researcher, format_name="screenplay", files=[upload("big.txt", "x" * 5000)]
        )
    assert "TOMLAB_UPLOAD_MAX_BYTES" in refused.value.message
    assert leftover_uploads() == []


def test_file_names_are_made_safe():
    assert uploads.safe_name("../../etc/passwd") == "passwd"
    assert uploads.safe_name("C:\\Users\\me\\big fish.fountain") == "big fish.fountain"
    assert uploads.safe_name("x\x00y<script>.txt") == "x_y_script_.txt"
    assert uploads.safe_name("..") == "file"
    assert len(uploads.safe_name("a" * 500 + ".jsonl")) == uploads.NAME_MAX


# -- lifecycle: confirm once, cancel, expiry, progress --------------------------------


def test_confirm_twice_and_cancel_after_the_import_are_refused(researcher):
    job = services.import_upload_start(
        user=researcher, format_name="screenplay", files=[upload("a.txt", screenplay_text())]
    )
    services.import_upload_confirm(job=job)
    with pytest.raises(UploadRefused, match="only a dry run waiting"):
        services.import_upload_confirm(job=job)
    with pytest.raises(UploadRefused, match="cannot be cancelled"):
        services.import_upload_cancel(job=job)
    assert Work.objects.count() == 1


def test_cancel_deletes_the_upload_and_writes_nothing(researcher):
    job = services.import_upload_start(
        user=researcher, format_name="screenplay", files=[upload("a.txt", screenplay_text())]
    )
    services.import_upload_cancel(job=job)
    job.refresh_from_db()
    assert job.status == ImportJob.Status.CANCELLED
    assert leftover_uploads() == []
    assert Work.objects.count() == 0


def test_abandoned_uploads_are_purged_on_the_next_upload(researcher, settings):
    old = services.import_upload_start(
        user=researcher, format_name="screenplay", files=[upload("a.txt", screenplay_text())]
    )
    settings.TOMLAB_UPLOAD_TTL_S = 0
    time.sleep(0.05)
    new = services.import_upload_start(
        user=researcher, format_name="screenplay", files=[upload("b.txt", screenplay_text())]
    )
    old.refresh_from_db()
    assert old.status == ImportJob.Status.CANCELLED and "expired" in old.error
    assert leftover_uploads() == [new.upload]


def test_a_confirmed_upload_above_the_threshold_is_queued(researcher, settings, client):
    settings.TOMLAB_IMPORT_BACKGROUND_BYTES = 100
    job = services.import_upload_start(
        user=researcher, format_name="screenplay", files=[upload("a.txt", screenplay_text())]
    )
    job = services.import_upload_confirm(job=job)
    assert job.status == ImportJob.Status.QUEUED
    assert Work.objects.count() == 0
    assert uploads.upload_folder(job.upload).is_dir()

    # A queued import can still be cancelled; the worker then skips it.
    services.import_upload_cancel(job=job)
    assert services.import_job_run(job_id=job.pk) == "skipped"
    assert leftover_uploads() == []


def test_progress_written_by_another_process_shows_on_the_job_page(researcher, client):
    job = services.import_upload_start(
        user=researcher, format_name="screenplay", files=[upload("a.txt", screenplay_text())]
    )
    ImportJob.objects.filter(pk=job.pk).update(status=ImportJob.Status.RUNNING)
    progress = uploads.ProgressFile(uploads.upload_folder(job.upload), total=10)
    progress(5)  # the first call writes at once, as a worker's would
    client.force_login(researcher)
    url = reverse("benchmarks:import-job", args=[job.pk])

    polled = client.get(url, HTTP_HX_REQUEST="true")

    assert polled.status_code == 200  # still running: keep polling
    body = polled.content.decode()
    assert 'data-testid="progress-done">5<' in body
    assert f"pct-{round(100 * 5 / job.progress_total)}" in body
    assert 'hx-trigger="every 2s"' in body

    ImportJob.objects.filter(pk=job.pk).update(status=ImportJob.Status.SUCCEEDED)
    assert client.get(url, HTTP_HX_REQUEST="true").status_code == 286


# -- pages -----------------------------------------------------------------------------


def test_pages_upload_dry_run_confirm_and_list(client, researcher):
    client.force_login(researcher)
    form = client.get(reverse("benchmarks:import"))
    assert form.status_code == 200
    fields = client.get(
        reverse("benchmarks:import"), {"format": "predictions"}, HTTP_HX_REQUEST="true"
    )
    assert 'name="name"' in fields.content.decode()
    assert 'name="title"' not in fields.content.decode()

    response = client.post(
        reverse("benchmarks:import"),
        {"format": "screenplay", "files": [upload("lamp.txt", screenplay_text())]},
    )
    job = ImportJob.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("benchmarks:import-job", args=[job.pk])
    page = client.get(response["Location"]).content.decode()
    assert "Dry run" in page and "line 75: &#x27;WREN&#x27;" in page
    assert 'data-testid="preview-scene"' in page and ">P0<" in page
    # One name for them on every page (issue 49: "42 testing" vs "41 test scenes").
    assert "test scene · " in page and "testing scene" not in page
    told = client.get(
        reverse("benchmarks:import"), {"format": "screenplay"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "in the test scenes." in told and "testing scene" not in told
    assert Work.objects.count() == 0

    done = client.post(reverse("benchmarks:import-confirm", args=[job.pk]), follow=True)
    assert "What was imported" in done.content.decode()
    assert Work.objects.get().source == "lamp.txt"
    listing = client.get(reverse("benchmarks:import-list")).content.decode()
    assert f"Import {job.pk}" in listing and "lamp.txt" in listing


def test_a_refused_upload_shows_the_located_error(client, researcher, shared_data):
    client.force_login(researcher)
    trial = shared_data / "dyntom" / "trial50"
    story = json.loads((trial / "story.json").read_text())
    story["scenario numbers"] = -1
    response = client.post(
        reverse("benchmarks:import"),
        {
            "format": "dyntom",
            "stage": "trial50",
            "files": [
                upload("story.json", json.dumps(story)),
                from_path(trial / "question_new.json"),
            ],
        },
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert 'data-testid="refused-file">trial50/story.json<' in body
    assert 'data-testid="refused-field">scenario numbers<' in body
    assert not ImportJob.objects.exists() and not Work.objects.exists()
    assert str(uploads.uploads_root()) not in body


def test_an_upload_is_seen_by_its_owner_only(client, researcher):
    from accounts.services import user_create_with_role

    job = services.import_upload_start(
        user=researcher, format_name="screenplay", files=[upload("a.txt", screenplay_text())]
    )
    other = user_create_with_role(username="res2", password="pw-res2-123!", role="researcher")
    client.force_login(other)
    assert client.get(reverse("benchmarks:import-job", args=[job.pk])).status_code == 404
    assert client.post(reverse("benchmarks:import-confirm", args=[job.pk])).status_code == 404
    assert f"Import {job.pk}" not in client.get(reverse("benchmarks:import-list")).content.decode()


@pytest.mark.parametrize("role", ["rater", "annotator", "anonymous"])
def test_non_researchers_are_refused_every_page(client, request, researcher, role):
    job = services.import_upload_start(
        user=researcher, format_name="screenplay", files=[upload("a.txt", screenplay_text())]
    )
    if role != "anonymous":
        client.force_login(request.getfixturevalue(role))
    pages = [
        ("get", reverse("benchmarks:import")),
        ("get", reverse("benchmarks:import-list")),
        ("get", reverse("benchmarks:import-job", args=[job.pk])),
        ("post", reverse("benchmarks:import-confirm", args=[job.pk])),
        ("post", reverse("benchmarks:import-cancel", args=[job.pk])),
        ("post", reverse("benchmarks:import")),
    ]
    for method, url in pages:
        response = getattr(client, method)(url)
        if role == "anonymous":
            assert response.status_code == 302 and "/accounts/login/" in response["Location"]
        else:
            assert response.status_code == 403, url
    job.refresh_from_db()
    assert job.status == ImportJob.Status.READY and Work.objects.count() == 0


def test_home_and_new_study_link_to_the_import_page(client, researcher):
    client.force_login(researcher)
    target = f'href="{reverse("benchmarks:import")}"'
    assert target in client.get(reverse("home")).content.decode()
    assert target in client.get(reverse("studies:new")).content.decode()


# -- the background path, on a real Celery worker --------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_large_upload_imports_on_a_worker_with_progress(
    researcher, shared_data, settings, client, tmp_path
):
    from tests.celery_worker import purge_queues, start_worker, stop_worker, wait_for

    names = sorted(p.name for p in (shared_data / "dyntom").iterdir())
    data = trials_zip(shared_data / "dyntom", names)
    settings.TOMLAB_IMPORT_BACKGROUND_BYTES = len(data) - 1
    client.force_login(researcher)
    client.post(
        reverse("benchmarks:import"), {"format": "dyntom", "files": [upload("all.zip", data)]}
    )
    job = ImportJob.objects.get()
    assert job.progress_total == len(names) == 24
    page = reverse("benchmarks:import-job", args=[job.pk])
    assert "on a background worker" in client.get(page).content.decode()

    purge_queues()  # messages of earlier sessions, whose rows are gone
    client.post(reverse("benchmarks:import-confirm", args=[job.pk]))
    job.refresh_from_db()
    assert job.status == ImportJob.Status.QUEUED and not Work.objects.exists()
    queued = client.get(page, HTTP_HX_REQUEST="true")
    assert queued.status_code == 200 and 'hx-trigger="every 2s"' in queued.content.decode()

    log = tmp_path / "worker.log"
    worker = start_worker(log)
    seen: list[int] = []
    try:

        def finished() -> bool:
            polled = client.get(page, HTTP_HX_REQUEST="true")
            current = ImportJob.objects.get(pk=job.pk)
            seen.append(services.import_job_progress(current)[0])
            return polled.status_code == 286

        wait_for(finished, timeout=120, what="the worker to finish the import", log=log)
    finally:
        stop_worker(worker)
    job.refresh_from_db()
    assert job.status == ImportJob.Status.SUCCEEDED, job.error
    assert job.progress_done == 24 and seen[-1] == 24
    assert seen == sorted(seen)  # progress only goes up
    assert job.report["counts"] == job.dry_run["counts"]
    assert DynToMStage.objects.count() == 24
    assert leftover_uploads() == []
    body = client.get(page).content.decode()
    assert "What was imported" in body and "pct-100" in body


def test_after_a_chartom_qa_import_the_next_step_is_a_multiple_choice_study(
    client, researcher, shared_data
):
    """Issue 49's walk: a CharToM-QA import ends on a link to the study its items need
    (multiple choice) and a run over them, not the scene study of a screenplay."""
    client.force_login(researcher)
    response = client.post(
        reverse("benchmarks:import"),
        {
            "format": "chartom-qa",
            "files": [from_path(shared_data / "chartom-qa" / "paper_examples.jsonl")],
        },
    )
    assert response.status_code == 302, response.content[:500]
    job = ImportJob.objects.get()
    done = client.post(reverse("benchmarks:import-confirm", args=[job.pk]), follow=True)
    page = done.content.decode()

    assert "What was imported" in page
    note = page[page.index('data-testid="imported-note"') :]
    note = note[: note.index("</p>")]
    assert f'href="{reverse("studies:choice-new")}"' in note and "New multiple-choice study" in note
    assert f'href="{reverse("modeling:run-new")}?benchmark=chartom-qa"' in note
    assert "New scene study" not in note
