"""A benchmark imported through a field mapping from the browser's /data/ pages and the API.

The upload page takes the benchmark's name and version, a preset and the mapping written
in the form; the dry run shows the source fields found, the items as they will be
stored, the counts by category and, when records fail, every one of them; Confirm
imports. Mistakes are 400s naming the field, never 500s.
"""

from __future__ import annotations

import json
import shutil

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from benchmarks import uploads
from benchmarks.models import ImportJob, MappingPreset, MCItem, Work

from .test_generic_import import PLAIN, plain_records

pytestmark = pytest.mark.django_db

API = "/api/imports/"
PAGE = reverse("benchmarks:import")


def items_file(records=None, name: str = "mini.jsonl") -> SimpleUploadedFile:
    body = "".join(json.dumps(r) + "\n" for r in (records or plain_records()))
    return SimpleUploadedFile(name, body.encode())


@pytest.fixture(autouse=True)
def _no_uploads_from_other_tests():
    shutil.rmtree(uploads.uploads_root(), ignore_errors=True)


@pytest.fixture
def signed_in(client, researcher):
    client.force_login(researcher)
    return client


def test_the_form_offers_the_mapped_format_with_labelled_fields(signed_in):
    page = signed_in.get(PAGE, {"format": "generic"}).content.decode()
    fields = signed_in.get(PAGE, {"format": "generic"}, HTTP_HX_REQUEST="true")

    assert '<option value="generic" selected>Other benchmark (field mapping)</option>' in page
    body = fields.content.decode()
    for label, name in (
        ("Benchmark name", "name"),
        ("Version", "version"),
        ("Mapping preset", "preset"),
        ("Field mapping (JSON)", "mapping"),
        ("Save this mapping as", "save_as"),
    ):
        assert f'<label for="id_{name}">{label}</label>' in body
    assert '<option value="ToMBench">ToMBench (built in)</option>' in body
    assert "<textarea" in body and "Run name" not in body


def test_choosing_a_preset_fills_the_mapping_to_edit(signed_in):
    swapped = signed_in.get(
        PAGE, {"format": "generic", "part": "mapping", "preset": "ToMBench"}, HTTP_HX_REQUEST="true"
    )
    # Without scripts, the form's "fill" button sends the whole form by GET.
    full = signed_in.get(
        PAGE, {"format": "generic", "preset": "ToMBench", "name": "ToMBench", "version": "1.0"}
    )

    body = swapped.content.decode()
    assert body.lstrip().startswith('<div class="field wide" id="mapping-field"')
    assert "&quot;故事&quot;" in body and "&quot;OPTION-A&quot;" in body
    assert 'value="ToMBench"' in full.content.decode()
    assert "&quot;{task|slug}-{$n}&quot;" in full.content.decode()


def test_a_mapping_written_in_the_form_dry_runs_then_confirm_imports(signed_in, researcher):
    response = signed_in.post(
        PAGE,
        {
            "format": "generic",
            "files": [items_file()],
            "name": "Mini ToM",
            "version": "1.0",
            "mapping": json.dumps(PLAIN, indent=2),
            "save_as": "Mini mapping",
        },
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    job = ImportJob.objects.get()
    assert not Work.objects.exists()
    page = signed_in.get(response["Location"]).content.decode()
    assert "Source fields found" in page and "<strong><code>story</code></strong>" in page
    assert "Items by category" in page and "<td>Hidden emotion</td>" in page
    assert "Mia puts her marble in the basket" in page and "(correct)" in page
    assert "The mapping was saved as the preset &#x27;Mini mapping&#x27;." in page
    assert job.dry_run["categories"] == {
        "ability": [["False belief", 1], ["Hidden emotion", 1], ["Irony", 1]]
    }
    preset = MappingPreset.objects.get()
    assert preset.name == "Mini mapping" and preset.mapping == PLAIN
    assert preset.created_by == researcher

    signed_in.post(reverse("benchmarks:import-confirm", args=[job.pk]))

    work = Work.objects.get()
    assert (work.key, work.title, work.extra["version"]) == ("mini-tom@1.0", "Mini ToM", "1.0")
    assert work.extra["mapping"] == PLAIN
    assert MCItem.objects.filter(work=work).count() == 3
    # The saved preset is offered the next time.
    form = signed_in.get(PAGE, {"format": "generic"}, HTTP_HX_REQUEST="true")
    assert '<option value="Mini mapping">Mini mapping</option>' in form.content.decode()


def test_a_bad_mapping_is_a_400_on_the_mapping_field(signed_in):
    bad = dict(PLAIN, answer={"field": "answer", "as": "digit"})
    response = signed_in.post(
        PAGE,
        {"format": "generic", "files": [items_file()], "name": "Mini", "mapping": json.dumps(bad)},
    )
    broken = signed_in.post(
        PAGE,
        {"format": "generic", "files": [items_file()], "name": "Mini", "mapping": "{oops"},
    )

    assert response.status_code == 400 and broken.status_code == 400
    assert response.context["form"].errors["mapping"] == [
        "mapping key 'answer.as': 'digit' is not one of auto, letter, index0, index1, text"
    ]
    assert "the mapping is not JSON" in broken.context["form"].errors["mapping"][0]
    assert not ImportJob.objects.exists() and not Work.objects.exists()


def test_every_failing_record_is_shown_with_the_records_that_parsed(signed_in):
    records = plain_records()
    records[0]["answer"] = "Z"
    records[2].pop("question")

    response = signed_in.post(
        PAGE,
        {
            "format": "generic",
            "files": [items_file(records)],
            "name": "Mini",
            "preset": "",
            "mapping": json.dumps(PLAIN),
        },
    )

    assert response.status_code == 400
    page = response.content.decode()
    assert "2 records failed" in page
    refused = response.context["refused"]
    assert [(e.file, e.record, e.field) for e in refused.errors] == [
        ("mini.jsonl", "line 1", "answer"),
        ("mini.jsonl", "line 3", "question"),
    ]
    assert "Records that parsed" in page and "Leo gets a jumper" in page
    assert "Items by category" in page
    assert not Work.objects.exists() and not ImportJob.objects.exists()
    root = uploads.uploads_root()
    assert not root.exists() or not any(root.iterdir())  # the refused upload is deleted


def test_the_api_imports_with_a_preset_or_a_mapping_and_refuses_with_400s(
    client, researcher, shared_data
):
    client.force_login(researcher)
    folder = shared_data / "tombench"
    with (folder / "Discrepant Emotions.jsonl").open("rb") as fh:
        data = fh.read()

    dry = client.post(
        API,
        {
            "format": "generic",
            "files": [SimpleUploadedFile("Discrepant Emotions.jsonl", data)],
            "preset": "ToMBench",
            "name": "ToMBench",
            "version": "1.0",
        },
    )

    assert dry.status_code == 200, dry.content
    body = dry.json()
    assert body["dry_run"]["counts"] == [
        {"kind": "MCItem", "created": 40, "updated": 0, "unchanged": 0},
        {"kind": "Work", "created": 1, "updated": 0, "unchanged": 0},
    ]
    assert body["dry_run"]["categories"]["task"] == [["Discrepant Emotions", 40]]
    assert body["preview"][0]["kind"] == "mc-item"
    assert [t["language"] for t in body["preview"][0]["texts"]] == ["zh", "en"]
    assert body["options"]["mapping"]["answer"]["field"] == "答案\nANSWER"
    confirmed = client.post(body["confirm_url"])
    assert confirmed.status_code == 201
    assert MCItem.objects.filter(work__key="tombench@1.0").count() == 40

    with_mapping = client.post(
        f"{API}?confirm=1",
        {
            "format": "generic",
            "files": [items_file()],
            "mapping": json.dumps(PLAIN),
            "name": "Mini",
        },
    )
    assert with_mapping.status_code == 201, with_mapping.content
    assert Work.objects.get(key="mini@1").extra["mapping"] == PLAIN

    bad_mapping = client.post(
        API,
        {"format": "generic", "files": [items_file()], "mapping": '{"answer": 1}', "name": "x"},
    )
    no_name = client.post(API, {"format": "generic", "files": [items_file()], "preset": "ToMBench"})
    no_mapping = client.post(API, {"format": "generic", "files": [items_file()], "name": "x"})
    records = plain_records()
    records[1]["choices"] = ["only one"]
    failing = client.post(
        API,
        {
            "format": "generic",
            "files": [items_file(records)],
            "mapping": json.dumps(PLAIN),
            "name": "x",
        },
    )

    assert bad_mapping.status_code == 400
    assert bad_mapping.json()["errors"] == [
        {
            "file": None,
            "record": None,
            "field": "mapping",
            "message": "mapping key 'answer': expected a JSON object, got a number",
        }
    ]
    assert no_name.status_code == 400 and no_name.json()["errors"][0]["field"] == "name"
    assert no_mapping.status_code == 400 and no_mapping.json()["errors"][0]["field"] == "mapping"
    assert failing.status_code == 400
    refused = failing.json()
    assert refused["errors"] == [
        {
            "file": "mini.jsonl",
            "record": "line 2",
            "field": "choices",
            "message": "1 option: an item needs at least 2",
        }
    ]
    assert refused["error_count"] == 1
    assert [p["title"] for p in refused["details"]["preview"]] == ["q1", "q3"]
    assert Work.objects.count() == 2  # the two confirmed imports only


def test_a_saved_preset_is_edited_in_the_admin_and_checked(signed_in):
    preset = MappingPreset.objects.create(name="Mine", mapping=PLAIN)
    url = reverse("admin:benchmarks_mappingpreset_change", args=[preset.pk])

    refused = signed_in.post(
        url, {"name": "Mine", "description": "", "mapping": json.dumps({**PLAIN, "answer": 3})}
    )
    builtin = signed_in.post(
        url, {"name": "tombench", "description": "", "mapping": json.dumps(PLAIN)}
    )
    saved = signed_in.post(
        url, {"name": "Mine", "description": "ours", "mapping": json.dumps({**PLAIN, "id": "id"})}
    )

    assert refused.status_code == 200
    assert "mapping key &#x27;answer&#x27;: expected a JSON object" in refused.content.decode()
    assert "built-in preset" in builtin.content.decode()
    assert saved.status_code == 302
    preset.refresh_from_db()
    assert preset.description == "ours"
