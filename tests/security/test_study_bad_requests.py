"""Requests to the study pages that answered 500 answer 4xx with a message (issue 26, item 7).

- a NUL byte in a platform id on the public link (before anyone logs in) and on an
  invite link: PostgreSQL cannot store a NUL in a JSON value or compare with one;
- the choices import: a CSV value over the CSV reader's 131,072-character limit; a
  file of any size read whole (200 MB took 1.37 GB and 40 s) now refused by its size
  before it is read (``TOMLAB_IMPORT_MAX_BYTES['study-choices']``), each value held to
  ``TOMLAB_IMPORT_MAX_FIELD_BYTES``, and an error quotes 200 characters of a value at
  most, where it repeated the whole value.

All over HTTP, through the real views (the test client); run on SQLite and PostgreSQL.
"""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from studies.choice import exchange
from studies.choice import services as cs
from studies.models import ChoiceAnswer, Participant
from studies.participation import recruitment
from studies.participation.services import participants_invite
from studies.services import study_launch
from tests.factories import DynToMQuestionFactory, DynToMStageFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def study():
    """A live DynToM study of one stage with two questions, and a public link."""
    stage = DynToMStageFactory()
    for _ in range(2):
        DynToMQuestionFactory(stage=stage, gold_letter="a")
    created = cs.choice_study_create(
        name="Stages", benchmark="dyntom", works=[stage.work], stage_fraction=1, overlap=3
    ).study
    study_launch(study=created)
    return recruitment.public_link_set(study=created, cap=5)


@pytest.mark.parametrize("param", ["PROLIFIC_PID", "STUDY_ID", "SESSION_ID"])
@pytest.mark.parametrize("method", ["get", "post"])
def test_a_nul_in_a_platform_id_on_the_public_link_is_a_400(client, study, param, method):
    public = reverse("rater:public", args=[study.public_token])
    response = getattr(client, method)(f"{public}?{param}=pp%00123")
    assert response.status_code == 400
    page = response.content.decode()
    assert "This link is not valid" in page and f"{param} parameter holds a control" in page
    assert not Participant.objects.exists()
    # The same link without the NUL works.
    assert client.post(f"{public}?{param}=pp123").status_code == 302


def test_a_nul_in_a_platform_id_on_an_invite_link_is_a_400(client, study):
    (p,) = participants_invite(study=study, labels=["Pat"])
    start = reverse("rater:start", args=[p.token])
    response = client.get(f"{start}?PROLIFIC_PID=a%00b&STUDY_ID=s")
    assert response.status_code == 400 and b"PROLIFIC_PID parameter" in response.content
    p.refresh_from_db()
    assert p.platform_ids == {}
    assert client.get(f"{start}?PROLIFIC_PID=ab").status_code == 200


# -- the choices import ---------------------------------------------------------------------


@pytest.fixture
def res_client(client, researcher):
    client.force_login(researcher)
    return client


def _csv(rows: list[dict]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=exchange.COLUMNS)
    writer.writeheader()
    for row in rows:
        writer.writerow({c: row.get(c, "") for c in exchange.COLUMNS})
    return out.getvalue().encode()


def _row(study, **over) -> dict:
    item = study.study_items.get()
    question = cs.dyntom_questions(item)[0]
    return {"participant": "ext-1", "item": exchange.item_key(item, question), "round": 1,
            "option": 0, **over}  # fmt: skip


def _import(client, study, name: str, data: bytes):
    url = reverse("studies:choice-import", args=[study.pk])
    return client.post(url, {"file": SimpleUploadedFile(name, data)})


def test_a_good_file_still_imports(res_client, study):
    response = _import(res_client, study, "picks.csv", _csv([_row(study)]))
    assert response.status_code == 302
    assert ChoiceAnswer.objects.count() == 1


def test_a_csv_value_over_128_kb_is_a_422_that_quotes_200_characters(res_client, study):
    huge = "A" * 140_000  # over the CSV reader's 131,072-character field limit
    response = _import(res_client, study, "big.csv", _csv([_row(study, question=huge)]))
    assert response.status_code == 422
    page = response.content.decode()
    assert "malformed CSV: field larger than field limit (131072)" in page
    assert "Nothing was imported" in page and "A" * 200 not in page
    assert not ChoiceAnswer.objects.exists() and not Participant.objects.exists()


def test_an_error_quotes_the_first_200_characters_of_a_value(res_client, study):
    long_key = "B" * 5000
    response = _import(res_client, study, "k.csv", _csv([_row(study, item=long_key)]))
    assert response.status_code == 422
    page = response.content.decode()
    assert "B" * 200 in page and "B" * 201 not in page
    assert "(5,000 characters) is not an item of this study" in page
    for field, value, message in [
        ("option", "9" * 5000, "is not a whole number"),
        ("ms", "9" * 18, "must be at most"),
        ("answered_at", "C" * 3000, "is not an ISO date and time"),
    ]:
        response = _import(res_client, study, "v.csv", _csv([_row(study, **{field: value})]))
        page = response.content.decode()
        assert response.status_code == 422 and message in page, field
        assert value[:201] not in page
    assert not ChoiceAnswer.objects.exists()


@pytest.mark.parametrize("label", ["x" * 201, "a\x00b"])
def test_a_label_that_cannot_be_stored_is_a_422(res_client, study, label):
    response = _import(
        res_client, study, "l.json", json.dumps([_row(study, participant=label)]).encode()
    )
    assert response.status_code == 422 and b"field &#x27;participant&#x27;" in response.content
    assert not Participant.objects.exists()


def test_a_file_over_the_size_limit_is_a_413_before_it_is_read(res_client, study, settings):
    settings.TOMLAB_IMPORT_MAX_BYTES = {**settings.TOMLAB_IMPORT_MAX_BYTES, "study-choices": 1000}
    data = _csv([_row(study, participant=f"p{n}") for n in range(100)])
    assert len(data) > 1000
    response = _import(res_client, study, "many.csv", data)
    assert response.status_code == 413
    page = response.content.decode()
    assert f"the file is {len(data):,} bytes, over the 1,000-byte limit" in page
    assert "TOMLAB_IMPORT_MAX_BYTES[&#x27;study-choices&#x27;]" in page
    assert not ChoiceAnswer.objects.exists()


def test_the_size_is_checked_before_any_byte_is_read(settings):
    class Upload:  # as Django's UploadedFile: the size is known from the request
        size = 200 * 1024 * 1024

        def read(self, *args):
            raise AssertionError("the upload was read")

    with pytest.raises(exchange.FileTooLarge, match="209,715,200 bytes, over the 52,428,800"):
        exchange.upload_read(Upload())

    class Unsized(io.BytesIO):
        size = None

    settings.TOMLAB_IMPORT_MAX_BYTES = {**settings.TOMLAB_IMPORT_MAX_BYTES, "study-choices": 10}
    stream = Unsized(b"x" * 1000)
    with pytest.raises(exchange.FileTooLarge):
        exchange.upload_read(stream)
    assert stream.tell() == 11  # at most one byte past the limit was read


def test_a_json_value_over_the_field_limit_is_a_422(res_client, study, settings):
    settings.TOMLAB_IMPORT_MAX_FIELD_BYTES = 1000
    rows = [_row(study, question="D" * 2000)]
    response = _import(res_client, study, "f.json", json.dumps(rows).encode())
    assert response.status_code == 422
    page = response.content.decode()
    assert "field &#x27;question&#x27;: the value is 2,000 bytes, over the 1,000-byte" in page
    assert "TOMLAB_IMPORT_MAX_FIELD_BYTES" in page and "D" * 201 not in page


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"label\n" + b"E" * 140_000 + b"\n", "malformed CSV (field larger than field limit"),
        (b"label\nAnn\nB\x00b\n", "row 3: the label holds a control character"),
        (b"label\n" + b"x\n" * 2_600_000, "the CSV file is over 5,000,000 bytes"),
    ],
)
def test_the_invite_csv_refuses_what_it_cannot_store(res_client, study, data, message):
    url = reverse("studies:invite-csv", args=[study.pk])
    response = res_client.post(url, {"file": SimpleUploadedFile("panel.csv", data)}, follow=True)
    assert response.status_code == 200 and message in response.content.decode()
    assert not Participant.objects.exists()
