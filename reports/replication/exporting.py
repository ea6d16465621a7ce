"""Write a study, its model runs and its report as a replication package (a zip).

``package_export`` is the one way to make a package: ``manage.py export_study``, the
study's download button and ``GET /api/studies/<id>/package/`` all call it. What the
zip holds is in ``readme.py`` (the README written into it) and docs/researcher.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import tempfile
import tomllib
import uuid
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from benchmarks.models import Benchmark
from benchmarks.services import benchmark_export
from common.secrets import CredentialUnreadable, decrypt_secret
from modeling.backends import BackendError
from modeling.backends.secrets import secret_parts
from modeling.credentials import option_secret_values
from modeling.models import Backend, Prediction, PromptTemplate, Run, RunCall
from reports.selectors import generic_study_designs, generic_work_runs
from studies.exports import response_export
from studies.models import (
    Assignment,
    ChoiceAnswer,
    Familiarity,
    Guess,
    Participant,
    Study,
    StudyItem,
    StudyTextVersion,
    StudyWork,
    WorkSession,
)
from studies.participation.ledger import study_ledger
from studies.services import study_current_texts

from . import readme
from .items import ItemRegistry
from .reports import package_view, report_normalise, reports_build, study_work_id
from .tables import TABLES, csv_bytes, schema, table_bytes

FORMAT = "tomlab-replication/1"
STUDY_REF = "S"
# Settings a package never carries: they would let someone claim the original study's
# payment (completion code and URLs), join it (public link) or forge its webhooks.
STUDY_SETTINGS = (
    "name",
    "benchmark",
    "status",
    "instructions",
    "consent",
    "instructions_version",
    "overlap",
    "min_seen",
    "min_unseen",
    "one_to_one",
    "perturb_names",
    "reveal",
    "tags",
    "sampling",
    "seed",
    "item_set_hash",
    "design_applied_at",
    "param_participant",
    "param_study",
    "param_session",
    "public_cap",
    "signup_ceiling",
    "minutes_estimate",
    "debrief",
    "exit_questions",
    "exit_questions_version",
    "session_cap",
    "idle_timeout_minutes",
    "allow_cant_tell",
    "ask_confidence",
    "attention_max_failures",
    "fast_exclusion_share",
    "instructed_max_failures",
    "attention_instruction",
    "floor_wpm",
    "floor_max_share",
    "created_at",
)
PLATFORM_WARNING = (
    "This package holds the participants' recruiting-platform ids (platform_participant, "
    "platform_study, platform_session in data/participants.csv). They identify people on "
    "that platform: share it only where the participants' consent allows."
)


GENERIC_ITEMS_WARNING = (
    "The items of a benchmark imported through a field mapping are not bundled: import "
    "the same file with the same mapping, name and version on the other install first "
    "(items.csv holds each item's id and the sha256 of its texts, answers and "
    "categories, so the import checks they are the very items answered)."
)


class ExportRefused(ValueError):
    """The package cannot be written (a run of another benchmark, a secret found…)."""


@dataclass
class ExportResult:
    path: Path
    package_id: str
    counts: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def app_version() -> str:
    """The version stamped on responses (``TOMLAB_VERSION``), else pyproject's."""
    version = getattr(settings, "TOMLAB_VERSION", "")
    if version:
        return version
    try:
        data = tomllib.loads((Path(settings.BASE_DIR) / "pyproject.toml").read_text())
        return str(data.get("project", {}).get("version", ""))
    except (OSError, tomllib.TOMLDecodeError):
        return ""


def package_runs(study: Study, runs: str | Sequence[int]) -> list[Run]:
    """``"all"``: every finished run of the study's benchmark; else these ids, each of
    which must be a run of that benchmark (``ExportRefused`` names the others). A
    generic study's benchmark is its work: runs with predictions on its items."""
    qs = Run.objects.filter(benchmark=study.benchmark).select_related("backend", "template")
    where = f"a {study.benchmark} study"
    if study.benchmark == Benchmark.GENERIC:
        try:
            work_id = study_work_id(study.pk)
        except ValueError as exc:
            raise ExportRefused(str(exc)) from None
        qs = qs.filter(pk__in=generic_work_runs(work_id))
        where = f"a study of the generic benchmark with work id {work_id}"
    if runs == "all":
        return list(qs.exclude(status__in=[Run.Status.QUEUED, Run.Status.RUNNING]).order_by("pk"))
    ids = sorted(set(runs))
    found = list(qs.filter(pk__in=ids).order_by("pk"))
    missing = sorted(set(ids) - {r.pk for r in found})
    if missing:
        raise ExportRefused(
            f"no {study.benchmark} run with id {', '.join(map(str, missing))} "
            f"(the study is {where})"
        )
    return found


def _pseudonyms(participants: Sequence[Participant]) -> dict[int, str]:
    """A random id per participant, fresh for every package (never derived from the
    token or the row id, so two packages of one study cannot be joined on it)."""
    seen: set[str] = set()
    out: dict[int, str] = {}
    for p in participants:
        while (pseudonym := f"P-{secrets.token_hex(4)}") in seen:
            continue
        seen.add(pseudonym)
        out[p.pk] = pseudonym
    return out


def package_export(
    study: Study,
    out: Path | str,
    *,
    with_items: bool = False,
    runs: str | Sequence[int] = "all",
    with_platform_ids: bool = False,
) -> ExportResult:
    """Write ``study`` with ``runs`` (``"all"`` or run ids) as a zip at ``out``.

    ``with_items`` adds the items of every work the package names in their benchmark's
    own format (``items/<benchmark>/``, the ``export_benchmark`` files);
    ``with_platform_ids`` adds the recruiting platform's ids, with a warning in the
    manifest. Raises ``ExportRefused`` for a run of another benchmark, or when a
    credential would end up in the zip (nothing is written then).
    """
    out = Path(out)
    run_list = package_runs(study, runs)
    registry = ItemRegistry()
    participants = list(Participant.objects.filter(study=study).order_by("created_at", "pk"))
    pseudonyms = _pseudonyms(participants)
    withdrawn = {p.pk for p in participants if p.withdrawn_at is not None}
    statuses = {row.participant.pk: row.status.key for row in study_ledger(study=study)}
    files: dict[str, bytes] = {}
    tables: dict[str, list[dict[str, Any]]] = {}

    # -- the study ---------------------------------------------------------------
    study_works = list(
        StudyWork.objects.filter(study=study).select_related("work").order_by("position", "pk")
    )
    tables["study_works"] = [
        {
            "benchmark": sw.work.benchmark,
            "work": sw.work.key,
            "position": sw.position,
            "name_map": sw.name_map or {},
        }
        for sw in study_works
    ]
    work_of = {sw.pk: sw.work for sw in study_works}
    versions = list(StudyTextVersion.objects.filter(study=study).order_by("kind", "version"))
    tables["text_versions"] = [
        {
            "kind": v.kind,
            "version": v.version,
            "content": json.dumps(v.content, ensure_ascii=False),
            "created_at": v.created_at,
        }
        for v in versions
    ]
    # The texts now on the study, where no snapshot holds them yet (one is written only
    # when a text is edited or answered against): every version shown is in the table.
    stored = {(v.kind, v.version) for v in versions}
    for kind, (version, content) in study_current_texts(study).items():
        if (kind, version) not in stored:
            tables["text_versions"].append(
                {
                    "kind": str(kind),
                    "version": version,
                    "content": json.dumps(content, ensure_ascii=False),
                    "created_at": None,
                }
            )
    tables["text_versions"].sort(key=lambda row: (row["kind"], row["version"]))
    items = list(
        StudyItem.objects.filter(study=study).order_by("study_work__position", "position", "pk")
    )
    item_refs = {item.pk: f"SI{n}" for n, item in enumerate(items, start=1)}
    raw_items = []
    for item in items:
        kind, pk = (
            ("scene", item.scene_id)
            if item.scene_id
            else ("qa", item.qa_item_id)
            if item.qa_item_id
            else ("mc", item.mc_item_id)
            if item.mc_item_id
            else ("stage", item.stage_id)
            if item.stage_id
            else ("instructed", None)  # a check the researcher wrote: no bank item
        )
        registry.add(kind, pk)
        for qid in item.question_ids or []:
            registry.add("question", qid)
        raw_items.append((item, kind, pk))

    # -- participants and their answers (withdrawn participants' answers stay home) --
    tables["participants"] = [
        {
            "participant": pseudonyms[p.pk],
            "status": statuses.get(p.pk, ""),
            **{
                name: getattr(p, name)
                for name, _ in TABLES["participants"]
                if hasattr(Participant, name) and name not in ("participant", "status")
            },
            **(
                {
                    "platform_participant": (p.platform_ids or {}).get("participant", ""),
                    "platform_study": (p.platform_ids or {}).get("study", ""),
                    "platform_session": (p.platform_ids or {}).get("session", ""),
                }
                if with_platform_ids
                else {}
            ),
        }
        for p in participants
    ]
    counted = [p.pk for p in participants if p.pk not in withdrawn]
    tables["familiarities"] = [
        {
            "participant": pseudonyms[f.participant_id],
            "benchmark": f.work.benchmark,
            "work": f.work.key,
            "seen": f.seen,
            "declared_at": f.declared_at,
        }
        for f in Familiarity.objects.filter(participant_id__in=counted)
        .select_related("work")
        .order_by("participant__created_at", "participant_id", "work__key")
    ]
    sessions = list(
        WorkSession.objects.filter(participant_id__in=counted).order_by(
            "participant__created_at", "participant_id", "started_at", "pk"
        )
    )
    session_refs = {s.pk: f"W{n}" for n, s in enumerate(sessions, start=1)}
    tables["sessions"] = [
        {
            "session": session_refs[s.pk],
            "participant": pseudonyms[s.participant_id],
            "benchmark": work_of[s.study_work_id].benchmark,
            "work": work_of[s.study_work_id].key,
            "seen": s.seen,
            "seed": s.seed,
            "history_confirmed_at": s.history_confirmed_at,
            "history_views": s.history_views,
            "started_at": s.started_at,
            "finished_at": s.finished_at,
        }
        for s in sessions
    ]
    assignments = list(
        Assignment.objects.filter(participant_id__in=counted).order_by(
            "participant__created_at", "participant_id", "session__started_at", "position", "pk"
        )
    )
    assignment_refs = {a.pk: f"A{n}" for n, a in enumerate(assignments, start=1)}
    tables["assignments"] = [
        {
            "assignment": assignment_refs[a.pk],
            "participant": pseudonyms[a.participant_id],
            "session": session_refs[a.session_id],
            "study_item": item_refs[a.study_item_id],
            **{
                name: getattr(a, name)
                for name, _ in TABLES["assignments"][4:]
                if name not in ("version",)
            },
            "version": a.version or {},
        }
        for a in assignments
    ]
    guesses = list(
        Guess.objects.filter(assignment__participant_id__in=counted)
        .order_by("assignment_id", "instance__code", "pk")
        .values()
    )
    for g in guesses:
        registry.add("speaker", g["instance_id"])
    # Picks in id order: the report tables read them in that order (``human_choice_rows``).
    choices = list(
        ChoiceAnswer.objects.filter(assignment__participant_id__in=counted).order_by("pk").values()
    )
    for c in choices:
        registry.add("qa", c["qa_item_id"])
        registry.add("question", c["question_id"])
        registry.add("mc", c["mc_item_id"])

    # -- model runs ----------------------------------------------------------------
    templates: dict[int, PromptTemplate] = {
        r.template_id: r.template for r in run_list if r.template
    }
    template_refs = {
        pk: f"T{n}"
        for n, pk in enumerate(
            sorted(templates, key=lambda pk: (templates[pk].name, templates[pk].version)), start=1
        )
    }
    run_refs = {r.pk: f"R{n}" for n, r in enumerate(run_list, start=1)}
    calls = list(
        RunCall.objects.filter(run_id__in=list(run_refs)).order_by("run_id", "pk").values()
    )
    call_refs = {c["id"]: f"C{n}" for n, c in enumerate(calls, start=1)}
    predictions = list(
        Prediction.objects.filter(run_id__in=list(run_refs)).order_by("run_id", "pk").values()
    )
    for p in predictions:
        registry.add("question", p["dyntom_question_id"])
        registry.add("qa", p["qa_item_id"])
        registry.add("speaker", p["speaker_instance_id"])
        registry.add("mc", p["mc_item_id"])

    registry.freeze()
    ref = registry.ref
    tables["items"] = registry.rows
    tables["study_items"] = [
        {
            "study_item": item_refs[item.pk],
            "benchmark": work_of[item.study_work_id].benchmark,
            "work": work_of[item.study_work_id].key,
            "item": ref(kind, pk),
            "kind": kind,
            "position": item.position,
            "role": item.role,
            "held_back": item.held_back,
            "question_items": [ref("question", q) for q in item.question_ids or []],
            "leaks": item.leaks or [],
            "instructed": item.instructed or None,
        }
        for item, kind, pk in raw_items
    ]
    tables["guesses"] = [
        {
            "assignment": assignment_refs[g["assignment_id"]],
            "item": ref("speaker", g["instance_id"]),
            "answer": g["answer"],
            "cant_tell": g["cant_tell"],
            "correct": g["correct"],
            "tags": g["tags"] or [],
            "evidence": g["evidence"],
            "updated_at": g["updated_at"],
        }
        for g in guesses
    ]
    tables["choices"] = [
        {
            "assignment": assignment_refs[c["assignment_id"]],
            "item": ref("qa", c["qa_item_id"])
            or ref("question", c["question_id"])
            or ref("mc", c["mc_item_id"]),
            **{name: c[name] for name, _ in TABLES["choices"][2:]},
        }
        for c in choices
    ]
    tables["templates"] = [
        {
            "template": template_refs[pk],
            **{name: getattr(t, name) for name, _ in TABLES["templates"][1:]},
        }
        for pk, t in sorted(templates.items(), key=lambda kv: template_refs[kv[0]])
    ]
    tables["runs"] = [
        {
            "run": run_refs[r.pk],
            "backend_kind": r.backend.kind if r.backend else "",
            "template": template_refs.get(r.template_id, ""),
            **{
                name: getattr(r, name)
                for name, _ in TABLES["runs"]
                if name not in ("run", "backend_kind", "template")
            },
        }
        for r in run_list
    ]
    tables["calls"] = [
        {
            "call": call_refs[c["id"]],
            "run": run_refs[c["run_id"]],
            **{name: c[name] for name, _ in TABLES["calls"][2:]},
        }
        for c in calls
    ]
    tables["predictions"] = [
        {
            "run": run_refs[p["run_id"]],
            "call": call_refs.get(p["call_id"], ""),
            "sample_index": p["sample_index"],
            "item": ref("question", p["dyntom_question_id"])
            or ref("qa", p["qa_item_id"])
            or ref("speaker", p["speaker_instance_id"])
            or ref("mc", p["mc_item_id"]),
            **{name: p[name] for name, _ in TABLES["predictions"][4:]},
        }
        for p in predictions
    ]
    for name in TABLES:
        files[f"data/{name}.csv"] = table_bytes(name, tables.get(name, []))

    # -- the human-readable responses export, pseudonymised ------------------------
    export = response_export(study, include_excluded=True)
    response_rows = []
    for row in export.rows:
        if row.get("participant_id") in withdrawn:
            continue
        pseudonym = pseudonyms.get(row.get("participant_id"), "")
        response_rows.append({**row, "participant_id": pseudonym, "participant": pseudonym})
    files["data/responses.csv"] = csv_bytes(export.columns, response_rows)

    # -- the report -------------------------------------------------------------------
    run_names = {r.pk: (run_refs[r.pk], r.name) for r in run_list}
    with package_view(study=study, pseudonyms=pseudonyms, run_ids=list(run_refs)):
        built = reports_build(study.benchmark, run_ids=list(run_refs), study_id=study.pk)
    for name, data in built.items():
        normalised = report_normalise(data, runs=run_names, study=(study.pk, STUDY_REF))
        files[f"reports/{name}"] = _json(normalised)

    # -- the study, the manifest, the README, the bundled items -------------------
    study_doc = {name: getattr(study, name) for name in STUDY_SETTINGS}
    study_doc["kind"] = study.benchmark
    study_doc["exclusion_rule"] = {
        "attention_max_failures": study.attention_max_failures,
        "fast_exclusion_share": study.fast_exclusion_share,
        "instructed_max_failures": study.instructed_max_failures,
        "floor_wpm": study.floor_wpm,
        "floor_max_share": study.floor_max_share,
    }
    if study.benchmark == Benchmark.GENERIC:
        study_doc["allocation"] = _allocation_doc(study)
    files["study.json"] = _json(study_doc)
    package_id = str(uuid.uuid4())
    warnings = [PLATFORM_WARNING] if with_platform_ids else []
    counts = {name: len(tables.get(name, [])) for name in TABLES}
    counts["responses"] = len(response_rows)
    works = registry.works()
    if with_items:
        files.update(_bundled_items(works))
        if any(benchmark == Benchmark.GENERIC for benchmark, _ in works):
            warnings.append(GENERIC_ITEMS_WARNING)
    manifest = {
        "format": FORMAT,
        "package_id": package_id,
        "exported_at": timezone.now().isoformat(),
        "app_version": app_version(),
        "study": {"name": study.name, "kind": study.benchmark},
        "runs": [
            {"run": run_refs[r.pk], "name": r.name, "model": r.model, "method": r.method}
            for r in run_list
        ],
        "works": [{"benchmark": b, "work": w} for b, w in works],
        "options": {
            "with_items": with_items,
            "runs": "all" if runs == "all" else [run_refs[r.pk] for r in run_list],
            "with_platform_ids": with_platform_ids,
        },
        "report_seed": 0,
        "counts": counts,
        "warnings": warnings,
    }
    files["manifest.json"] = _json(manifest)
    files["README.md"] = readme.readme_text(
        study=study, manifest=manifest, files=[*sorted(files), "datapackage.json"]
    ).encode("utf-8")
    files["datapackage.json"] = _json(_descriptor(study, manifest, files))
    _refuse_secrets(files, study=study, participants=participants, runs=run_list)

    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".part")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(files):
            archive.writestr(name, files[name])
    os.replace(partial, out)
    return ExportResult(path=out, package_id=package_id, counts=counts, warnings=warnings)


def _json(data: Any) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n").encode("utf-8")


def _bundled_items(works: Iterable[tuple[str, str]]) -> dict[str, bytes]:
    """The works' items in their benchmark's own format, by path in the package."""
    by_benchmark: dict[str, list[str]] = {}
    for benchmark, work in works:
        if benchmark == Benchmark.GENERIC:
            continue  # no exporter writes a mapped benchmark back (GENERIC_ITEMS_WARNING)
        by_benchmark.setdefault(benchmark, []).append(work)
    files: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="tomlab-package-") as tmp:
        for benchmark, keys in sorted(by_benchmark.items()):
            folder = Path(tmp) / benchmark
            folder.mkdir()
            benchmark_export(format_name=benchmark, out=folder, work_keys=sorted(keys))
            for path in sorted(folder.rglob("*")):
                if path.is_file():
                    files[f"items/{benchmark}/{path.relative_to(folder).as_posix()}"] = (
                        path.read_bytes()
                    )
    return files


def _digest(data: bytes) -> dict[str, Any]:
    """A file's size and SHA-256, as the Data Package spec writes them: the import
    refuses a file whose bytes no longer match."""
    return {"bytes": len(data), "hash": f"sha256:{hashlib.sha256(data).hexdigest()}"}


def _descriptor(study: Study, manifest: dict[str, Any], files: dict[str, bytes]) -> dict[str, Any]:
    """``datapackage.json``: a Table Schema for every CSV, every other file listed."""
    resources = []
    for path in sorted(files):
        name = path.rsplit(".", 1)[0].replace("/", "-").replace("_", "-").lower()
        name = "".join(ch if ch.isalnum() or ch in "-._" else "-" for ch in name)
        if path.startswith("data/") and path.endswith(".csv"):
            table = path[len("data/") : -len(".csv")]
            if table in TABLES:
                columns = TABLES[table]
            else:  # responses.csv: its export's columns, as text
                header = files[path].split(b"\n", 1)[0].decode("utf-8")
                columns = [(c, "string") for c in header.split(",")]
            resources.append(
                {
                    "name": name,
                    "path": path,
                    "type": "table",
                    "format": "csv",
                    "mediatype": "text/csv",
                    "encoding": "utf-8",
                    "schema": schema(columns),
                    **_digest(files[path]),
                }
            )
        else:
            suffix = path.rsplit(".", 1)[-1]
            mediatype = {
                "json": "application/json",
                "jsonl": "application/jsonl",
                "md": "text/markdown",
            }.get(suffix, "text/plain")
            # "file": listed and checked to exist, never parsed as a table (a bundled
            # TSV or JSONL is the benchmark's own format, not a package table).
            resources.append(
                {
                    "name": name,
                    "path": path,
                    "type": "file",
                    "mediatype": mediatype,
                    **_digest(files[path]),
                }
            )
    return {
        "name": f"tomlab-study-{manifest['package_id'][:8]}",
        "id": manifest["package_id"],
        "title": f"ToMLab replication package: {study.name}",
        "description": "A ToMLab study, its model runs and its report; see README.md.",
        "created": manifest["exported_at"],
        "version": FORMAT,
        "resources": resources,
    }


def _secrets(
    study: Study, participants: Sequence[Participant], runs: Sequence[Run]
) -> list[tuple[str, str]]:
    """(what, value) of every credential a package must never hold."""
    found: list[tuple[str, str]] = []
    for p in participants:
        found.append(("an invite token", p.token))
    if study.public_token:
        found.append(("the public link token", study.public_token))
    if study.webhook_secret:
        # The ciphertext is never exported; the key itself must not be in any file (one
        # unreadable here cannot be in a file of this export either).
        with contextlib.suppress(CredentialUnreadable):
            found.append(("the webhook secret", decrypt_secret(study.webhook_secret)))
    user_ids = {p.user_id for p in participants if p.user_id} | {study.created_by_id}
    user_ids |= {r.created_by_id for r in runs}
    for password in (
        get_user_model().objects.filter(pk__in=user_ids - {None}).values_list("password", flat=True)
    ):
        if password:
            found.append(("a password hash", password))
    backends = Backend.objects.filter(pk__in={r.backend_id for r in runs} - {None})
    for backend in backends:
        try:
            key = backend.get_api_key()
        except Exception:  # unreadable ciphertext: the ciphertext alone is looked for
            key = ""
        if backend.api_key:
            found.append(("a stored API key", backend.api_key))
        if key:
            found.append(("an API key", key))
        if backend.api_key_env and (value := os.environ.get(backend.api_key_env, "")):
            found.append((f"the value of {backend.api_key_env}", value))
        try:
            options = option_secret_values(backend.get_options())
        except BackendError:  # unreadable ciphertext: nothing a client could have sent
            options = []
        for value in options:
            # "Bearer sk-…": the credential alone too, as a reply may quote just that.
            for part in secret_parts(value):
                found.append(("a secret backend option", part))
        password = urlsplit(backend.base_url).password
        if password:
            found.append(("a password in a backend URL", password))
    # Too short to look for without false alarms, and none of ours is that short.
    return [(what, value) for what, value in found if len(value) >= 8]


def _refuse_secrets(
    files: dict[str, bytes],
    *,
    study: Study,
    participants: Sequence[Participant],
    runs: Sequence[Run],
) -> None:
    """Refuse the export when any credential appears anywhere in the package (a reply
    quoting a key, a note holding a token): a package is meant to be published."""
    for what, value in _secrets(study, participants, runs):
        needle = value.encode("utf-8")
        for path, data in files.items():
            if needle in data:
                raise ExportRefused(
                    f"{path} holds {what}; remove it there before exporting this study"
                )


def _allocation_doc(study: Study) -> dict[str, Any]:
    """How the study allocated its answers (issue 50): the settings, the design in words
    as the report says it, and for a ``widest`` design the model side it ran with (the
    named runs' accuracy per item, by item id, as fixed at go-live)."""
    doc: dict[str, Any] = dict((study.sampling or {}).get("allocation") or {})
    design = generic_study_designs([study.pk]).get(study.pk)
    if design is not None:
        doc["description"] = design["text"]
        ids = dict(
            StudyItem.objects.filter(study=study, mc_item__isnull=False).values_list(
                "mc_item_id", "mc_item__item_id"
            )
        )
        doc["model"] = {ids[mc]: value for mc, value in sorted(design["model"].items())}
    return doc
