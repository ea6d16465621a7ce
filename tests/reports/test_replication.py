"""Replication packages (issue 30): export a study with its runs and report, validate the
package with Frictionless, import it (here and into another database in a subprocess)
and get report JSON equal to the packaged one."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from benchmarks.models import QAItem
from common.csv_safe import read_with_field_limit
from demo.studies import CHARTOM_STUDY, DYNTOM_STUDY, SCENE_STUDY
from modeling.models import Backend, Prediction, PromptTemplate, Run
from reports.models import ReplicationImport
from reports.replication.exporting import package_export
from reports.replication.importing import PackageError, package_import, package_validate
from reports.replication.tables import CELL_LIMIT, table_read
from studies.models import ChoiceAnswer, Guess, Participant, Study, StudyTextVersion
from tests.factories import UserFactory
from tests.module_rows import build_demo
from tests.package_edits import package_rewrite

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("demo")]

STUDIES = {"tom-in-amc": SCENE_STUDY, "chartom-qa": CHARTOM_STUDY, "dyntom": DYNTOM_STUDY}
KEY_ENV = "H6_REPLICATION_TEST_KEY"
KEY_VALUE = "sk-h6-environment-value-0123456789abcdef"
STORED_KEY = "sk-h6-stored-key-value-abcdef0123456789"


@pytest.fixture
def demo(module_rows, shared_data) -> dict[str, Study]:
    if not module_rows.shares("demo"):
        build_demo(shared_data)
    return {benchmark: Study.objects.get(name=name) for benchmark, name in STUDIES.items()}


def one_run(study: Study) -> list[int]:
    """The study's benchmark's first run: "each with one model run"."""
    return [Run.objects.filter(benchmark=study.benchmark).order_by("pk").first().pk]


def packaged_reports(path: Path) -> dict[str, dict]:
    with zipfile.ZipFile(path) as archive:
        return {
            name.removeprefix("reports/"): json.loads(archive.read(name))
            for name in archive.namelist()
            if name.startswith("reports/")
        }


def validate(path: Path, tmp_path: Path) -> None:
    folder = tmp_path / f"unpacked-{path.stem}"
    with zipfile.ZipFile(path) as archive:
        archive.extractall(folder)

    def frictionless_validate():
        # Frictionless raises the csv module's process-wide cell limit when imported.
        from frictionless import validate as frictionless_validate

        return frictionless_validate(str(folder / "datapackage.json"))

    report = read_with_field_limit(CELL_LIMIT, frictionless_validate)
    assert report.valid, report.flatten(["rowNumber", "fieldName", "type", "note"])


@pytest.mark.parametrize("benchmark", list(STUDIES))
def test_round_trip_gives_the_packaged_report(demo, benchmark, tmp_path):
    study = demo[benchmark]
    if benchmark == "tom-in-amc":  # a scene study's checks may carry an instruction
        study.attention_instruction = "Select '{name}' for this speaker."
        study.save(update_fields=["attention_instruction"])
    path = tmp_path / f"{benchmark}.zip"
    result = package_export(study, path, with_items=True, runs=one_run(study))

    validate(path, tmp_path)
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        descriptor = json.loads(archive.read("datapackage.json"))
        manifest = json.loads(archive.read("manifest.json"))
    assert {"README.md", "study.json", "data/responses.csv", "reports/report.json"} <= names
    assert any(n.startswith(f"items/{benchmark}/") for n in names)
    csvs = [r for r in descriptor["resources"] if r["path"].endswith(".csv")]
    assert csvs and all(r["schema"]["fields"] for r in csvs)
    assert manifest["package_id"] == result.package_id and manifest["warnings"] == []
    packaged = packaged_reports(path)
    assert packaged["report.json"]["tables"][0]["rows"][0]["Run"] == "R1"

    before = Study.objects.count()
    imported = package_import(path)
    assert imported.created and Study.objects.count() == before + 1
    copy = imported.study
    assert copy.status == Study.Status.CLOSED and copy.name == study.name
    assert copy.instructions == study.instructions and copy.consent == study.consent
    texts = StudyTextVersion.objects.filter(study=copy)
    assert texts.get(kind="instructions", version=study.instructions_version).content == (
        study.instructions
    )
    assert copy.attention_instruction == study.attention_instruction
    if study.attention_instruction:
        shown = texts.get(kind="attention_instruction", version=study.instructions_version)
        assert shown.content == study.attention_instruction
    assert ReplicationImport.objects.get(study=copy).package_id == result.package_id
    assert imported.differences == {"report.json": [], "report-include-excluded.json": []}
    assert imported.reports == packaged
    # Every counted answer came back, and the picks' order with them.
    if benchmark == "tom-in-amc":
        assert Guess.objects.filter(assignment__participant__study=copy).count() == 24
    else:
        original = ChoiceAnswer.objects.filter(assignment__participant__study=study)
        again = ChoiceAnswer.objects.filter(assignment__participant__study=copy)
        assert list(again.order_by("pk").values_list("option", "round")) == list(
            original.order_by("pk").values_list("option", "round")
        )

    second = package_import(path)
    assert not second.created and second.study == copy
    assert "nothing created" in second.messages[0]
    assert Study.objects.count() == before + 1


def test_an_item_changed_by_one_character_is_refused_naming_it(demo, tmp_path):
    study = demo["chartom-qa"]
    path = tmp_path / "chartom.zip"
    package_export(study, path, runs=one_run(study))
    item = QAItem.objects.filter(work__benchmark="chartom-qa").order_by("pk").first()
    QAItem.objects.filter(pk=item.pk).update(answer=item.answer[:-1] + "#")
    counts = (Study.objects.count(), Run.objects.count(), Prediction.objects.count())

    with pytest.raises(PackageError) as refused:
        package_import(path)

    message = str(refused.value)
    assert item.natural_key in message and "'answer'" in message
    assert (Study.objects.count(), Run.objects.count(), Prediction.objects.count()) == counts
    assert not ReplicationImport.objects.exists()
    with pytest.raises(CommandError, match=item.natural_key):
        call_command("import_study", str(path), stdout=StringIO())


def test_no_credential_or_user_name_anywhere_in_the_package(demo, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY_VALUE)
    study = demo["dyntom"]
    backend = Backend.objects.create(
        name="h6-backend",
        kind=Backend.Kind.OPENAI,
        base_url="http://127.0.0.1:9/v1",
        api_key_env=KEY_ENV,
        default_model="gpt-h6",
    )
    backend.set_api_key(STORED_KEY)
    backend.save()
    template = PromptTemplate.objects.create(
        name="h6-template", version=3, benchmark="dyntom", method="vanilla", user="Q: {questions}"
    )
    run = Run.objects.get(pk=one_run(study)[0])
    Run.objects.filter(pk=run.pk).update(backend=backend, template=template)
    participants = list(Participant.objects.filter(study=study))
    # A participant who joined with an account and no label (shown by user name in the
    # study's own exports), and a creator with a user name to look for.
    joined = UserFactory(username="h6-joined-rater-name", role="rater")
    Participant.objects.filter(pk=participants[0].pk).update(user=joined, label="")
    creator = UserFactory(username="h6-creating-researcher", role="researcher")
    Study.objects.filter(pk=study.pk).update(created_by=creator)
    Run.objects.filter(pk=run.pk).update(created_by=creator)
    Participant.objects.filter(pk=participants[1].pk).update(
        platform_ids={"participant": "PROLIFIC-h6-secret-pid"}
    )
    path = tmp_path / "dyntom.zip"

    package_export(study, path, runs=[run.pk])

    with zipfile.ZipFile(path) as archive:
        blob = b"\n".join(archive.read(n) for n in archive.namelist())
        runs_csv = archive.read("data/runs.csv").decode()
        templates_csv = archive.read("data/templates.csv").decode()
    assert "openai" in runs_csv and "gpt-h6" not in runs_csv  # kind yes, the run's model
    assert "h6-template" in templates_csv and "Q: {questions}" in templates_csv
    users = get_user_model().objects.all()
    forbidden = {
        KEY_VALUE: "the key's environment value",
        STORED_KEY: "the API key",
        backend.api_key: "the stored key's ciphertext",
        "127.0.0.1:9": "the backend's base URL",
        "PROLIFIC-h6-secret-pid": "a platform id",
        **{p.token: "an invite token" for p in participants},
        **{u.password: "a password hash" for u in users},
        **{u.username: "a user name" for u in users if u.username.startswith("h6-")},
        **{p.label: "a participant label" for p in participants if p.label},
    }
    for needle, what in forbidden.items():
        assert needle.encode() not in blob, what


def test_platform_ids_only_on_request_and_then_with_a_warning(demo, tmp_path):
    study = demo["tom-in-amc"]
    participant = Participant.objects.filter(study=study).order_by("pk").first()
    Participant.objects.filter(pk=participant.pk).update(platform_ids={"participant": "PID-h6-1"})
    path = tmp_path / "with-ids.zip"
    out = StringIO()
    call_command(
        "export_study",
        study.pk,
        str(path),
        "--runs",
        str(one_run(study)[0]),
        "--with-platform-ids",
        stdout=out,
        stderr=out,
    )
    with zipfile.ZipFile(path) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        assert b"PID-h6-1" in archive.read("data/participants.csv")
        assert b"platform ids" in archive.read("README.md") or b"platform" in archive.read(
            "README.md"
        )
    assert manifest["warnings"] and "platform" in manifest["warnings"][0]
    assert "warning" in out.getvalue()


def test_export_refuses_a_run_of_another_benchmark(demo, tmp_path):
    other = Run.objects.exclude(benchmark="tom-in-amc").first()
    with pytest.raises(CommandError, match=f"no tom-in-amc run with id {other.pk}"):
        call_command(
            "export_study",
            demo["tom-in-amc"].pk,
            str(tmp_path / "x.zip"),
            "--runs",
            str(other.pk),
            stdout=StringIO(),
        )
    assert not (tmp_path / "x.zip").exists()


def test_a_broken_package_is_refused_naming_the_file(demo, tmp_path):
    study = demo["dyntom"]
    path = tmp_path / "good.zip"
    package_export(study, path, runs=one_run(study))

    def bad_option(name: str, data: bytes) -> bytes:
        if name != "data/choices.csv":
            return data
        lines = data.decode().splitlines()
        cells = lines[1].split(",")
        cells[3] = "not-a-number"  # the option column
        return "\n".join([lines[0], ",".join(cells), *lines[2:]]).encode()

    # Sealed again (its hash made to match), so the schema check is what refuses it.
    broken = package_rewrite(path, tmp_path / "broken.zip", bad_option)
    edited = package_rewrite(path, tmp_path / "edited.zip", bad_option, reseal=False)
    (tmp_path / "not-a-zip.zip").write_text("hello")
    # A descriptor pointing outside the package (Frictionless would read it).
    escaping = tmp_path / "escaping.zip"
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(escaping, "w") as target:
        for name in source.namelist():
            data = source.read(name)
            if name == "datapackage.json":
                descriptor = json.loads(data)
                descriptor["resources"][0]["path"] = "../../../etc/hostname"
                data = json.dumps(descriptor).encode()
            target.writestr(name, data)

    with pytest.raises(PackageError, match=r"choices.*option"):
        package_import(broken)
    with pytest.raises(
        PackageError,
        match=r"data/choices.csv: its contents do not match its hash in datapackage.json",
    ):
        package_import(edited)
    with pytest.raises(PackageError, match="not a zip"):
        package_import(tmp_path / "not-a-zip.zip")
    with pytest.raises(
        PackageError, match=r"resource 1: path '../../../etc/hostname' is not a file"
    ):
        package_import(escaping)
    assert not ReplicationImport.objects.exists()


def test_an_answer_marked_right_against_the_gold_is_refused(demo, tmp_path):
    """Issue 45: the import scores each answer again against this bank's gold instead
    of trusting the package's ``correct`` column (here sealed again after the edit)."""
    study = demo["dyntom"]
    path = tmp_path / "good.zip"
    package_export(study, path, runs=one_run(study))
    flipped = []

    def flip_first_score(name: str, data: bytes) -> bytes:
        if name != "data/choices.csv":
            return data
        lines = data.decode().splitlines()
        for n, line in enumerate(lines[1:], start=1):
            cells = line.split(",")
            if cells[9] in ("True", "False"):  # the correct column
                cells[9] = "False" if cells[9] == "True" else "True"
                lines[n] = ",".join(cells)
                flipped.append((n + 1, cells[9].lower()))  # row numbers count the header
                break
        return "\n".join(lines).encode() + b"\n"

    edited = package_rewrite(path, tmp_path / "flipped.zip", flip_first_score)
    ((row, value),) = flipped
    with pytest.raises(PackageError, match=rf"choices.csv row {row}: correct is {value}, but"):
        package_import(edited)
    assert not ReplicationImport.objects.exists()
    # The package as exported imports: its scores are the bank's.
    assert package_import(path).created


@pytest.fixture
def other_database(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(DATABASE_URL, label) of an empty database of the other engine. The PostgreSQL
    one is named after this process, so two suites on one server never share it."""
    engine = settings.DATABASES["default"]["ENGINE"]
    if not engine.endswith("sqlite3"):
        yield f"sqlite:///{tmp_path / 'other.sqlite3'}", "SQLite"
        return
    import psycopg

    name = f"tomlab_other_{os.getpid()}"
    server = "postgresql://postgres@127.0.0.1:5432/postgres"
    with psycopg.connect(server, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {name}")
    yield f"postgres://postgres@127.0.0.1:5432/{name}", "PostgreSQL"
    with psycopg.connect(server, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _manage(commands: list[list[str]], *, database_url: str) -> list[SimpleNamespace]:
    """Run ``manage.py`` commands against ``database_url``, in order, in one process
    (tests/manage_many.py): each result has the command line's returncode, stdout, stderr."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
    }
    done = subprocess.run(
        [sys.executable, "tests/manage_many.py", json.dumps(commands)],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [SimpleNamespace(**result) for result in json.loads(done.stdout)]


def test_round_trip_into_the_other_database_engine(demo, tmp_path, other_database):
    packages = {}
    for benchmark, study in demo.items():
        packages[benchmark] = tmp_path / f"{benchmark}.zip"
        package_export(study, packages[benchmark], with_items=True, runs=one_run(study))
    # A copy whose bundled CharToM-QA items differ from the package's hashes by one
    # character in one answer: the empty database has no bank to compare with, so the
    # bundle is imported and then found to differ.
    changed = []

    def one_answer(name: str, data: bytes) -> bytes:
        if not name.startswith("items/chartom-qa/"):
            return data
        first, rest = data.decode().split("\n", 1)
        record = json.loads(first)
        record["answer"] = record["answer"][:-1] + "#"
        changed.append(record["question"])
        return (json.dumps(record, ensure_ascii=False) + "\n" + rest).encode()

    tampered = package_rewrite(packages["chartom-qa"], tmp_path / "tampered.zip", one_answer)
    (changed,) = changed
    database_url, engine = other_database

    commands = [["migrate", "--no-input"], ["import_study", str(tampered)]]
    for benchmark, path in packages.items():
        out = tmp_path / f"{benchmark}-rebuilt.json"
        commands += [["import_study", str(path), "--report-out", str(out)]]
        commands += [["import_study", str(path)]]
    migrated, refused, *imports = _manage(commands, database_url=database_url)
    assert migrated.returncode == 0, migrated.stderr[-2000:]
    assert refused.returncode != 0
    assert "'answer'" in refused.stderr and "CharToM-QA item" in refused.stderr
    item = QAItem.objects.get(question=changed)
    assert item.natural_key in refused.stderr
    for (benchmark, path), done, again in zip(
        packages.items(), imports[::2], imports[1::2], strict=True
    ):
        out = tmp_path / f"{benchmark}-rebuilt.json"
        assert done.returncode == 0, (engine, done.stderr[-3000:])
        assert "report.json: equal to the package's" in done.stdout, done.stdout
        assert json.loads(out.read_text()) == packaged_reports(path), (engine, benchmark)
        assert again.returncode == 0 and "nothing created" in again.stdout


def test_excluded_answers_travel_and_withdrawn_ones_stay(demo, tmp_path):
    from django.utils import timezone

    study = demo["dyntom"]
    answered = list(
        Participant.objects.filter(study=study, assignments__isnull=False).distinct().order_by("pk")
    )
    invited = Participant.objects.filter(study=study, assignments__isnull=True).first()
    Participant.objects.filter(pk=answered[0].pk).update(
        excluded_at=timezone.now(), exclusion_source="researcher", exclusion_reason="too fast"
    )
    Participant.objects.filter(pk=answered[1].pk).update(withdrawn_at=timezone.now())
    Participant.objects.filter(pk=invited.pk).update(withdrawn_at=timezone.now())
    path = tmp_path / "dyntom.zip"

    package_export(study, path, runs=one_run(study))

    with zipfile.ZipFile(path) as archive:
        participants = archive.read("data/participants.csv").decode()
        choices = archive.read("data/choices.csv").decode().strip().splitlines()
    assert participants.count(",withdrawn,") == 2 and "too fast" in participants
    # The excluded participant's 20 picks travel; the withdrawn one's do not.
    assert len(choices) - 1 == 20
    packaged = packaged_reports(path)
    assert packaged["report.json"]["facts"]["excluded_participants_left_out"] == 1
    assert packaged["report-include-excluded.json"]["facts"]["excluded_participants_included"] == 1
    assert not any(t["key"] == "human-participants" for t in packaged["report.json"]["tables"])

    imported = package_import(path)

    assert imported.differences == {"report.json": [], "report-include-excluded.json": []}
    copy = Participant.objects.filter(study=imported.study)
    assert copy.filter(withdrawn_at__isnull=False).count() == 2
    assert copy.get(excluded_at__isnull=False).exclusion_reason == "too fast"


def test_a_credential_in_any_file_refuses_the_export(demo, tmp_path):
    study = demo["dyntom"]
    first, second = Participant.objects.filter(study=study).order_by("pk")[:2]
    # A researcher pasted another participant's invite token into an exclusion reason.
    Participant.objects.filter(pk=first.pk).update(
        excluded_at=first.created_at, exclusion_reason=f"same person as {second.token}"
    )
    path = tmp_path / "leak.zip"

    with pytest.raises(CommandError, match=r"data/participants.csv holds an invite token"):
        call_command("export_study", study.pk, str(path), stdout=StringIO())

    assert not path.exists()
    assert second.token not in str(list(tmp_path.iterdir()))


def test_a_cell_over_the_csv_default_reads_and_leaves_the_default_in_place(tmp_path):
    """A package's long raw reply validates and reads, and the csv module's process-wide
    cell limit is back at its default afterwards (Frictionless raises it when imported),
    so an invite CSV in the same process still refuses a 140 kB cell."""
    default = csv.field_size_limit()
    long_text = "R" * 200_000
    columns = "item,kind,benchmark,work,key,code,field,sha256"
    data = f"{columns}\ni1,scene,b,w,k,c,{long_text},x\n"
    (tmp_path / "items.csv").write_text(data)
    schema = {"fields": [{"name": c, "type": "string"} for c in columns.split(",")]}
    resource = {"name": "items", "path": "items.csv", "format": "csv", "schema": schema}
    resource["hash"] = f"sha256:{hashlib.sha256(data.encode()).hexdigest()}"
    descriptor = {"name": "p", "resources": [resource]}
    (tmp_path / "datapackage.json").write_text(json.dumps(descriptor))
    package_validate(tmp_path)
    assert table_read("items", data.encode())[0]["field"] == long_text
    assert csv.field_size_limit() == default == 131_072
    with pytest.raises(csv.Error, match="field larger than field limit"):
        list(csv.reader(io.StringIO(long_text)))
