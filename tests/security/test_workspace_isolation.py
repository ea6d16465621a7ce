"""Issue 46: a member of another workspace finds nothing of this one.

The demo (studies, runs, backends, batches, report and import jobs) is loaded into
the Default workspace. A researcher who manages a second, empty workspace then walks:

- every URL pattern of ours that takes an id, filled with the Default workspace's
  objects: a GET and a POST must answer 404 (405 where the method is not served),
  never the page, a redirect after a change, a 400 about the form or a 403;
- every admin change page of a workspace-owned model: no page of the object;
- every admin list and every API list, with filters and orderings over related
  fields: nothing of the Default workspace in it.

Leaks are counted and printed (``pytest -s``); the test wants 0. The Default
workspace's own researcher walks the same URLs first, so a URL only counts where the
object is really there for its members (a GET that is not a 404).
"""

from __future__ import annotations

import re

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import get_resolver, resolve

from accounts.models import Workspace
from accounts.services import user_create_with_role
from accounts.workspaces import workspace_create
from annotation.chartom.models import JudgementSample, NoteBatch, QualificationSet, TaskKind
from annotation.chartom.note_checks import note_check_sample
from annotation.chartom.workflow import WorkflowError
from annotation.models import GenerationJob, ValidationBatch
from benchmarks.models import (
    Character,
    DynToMQuestion,
    DynToMStage,
    ImportJob,
    QAItem,
    Scene,
    SpeakerInstance,
    Work,
)
from common.scoping import WorkspaceManager
from modeling.models import Backend, Prediction, PromptTemplate, Run
from modeling.runs.prompt_templates import prompt_template_revise
from reports.models import ReportJob
from reports.services import report_job_create, report_job_execute
from studies.models import Participant, Study
from tests.security.test_url_walk import _fill, _resolves, _routes

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("demo")]

# Namespaces that are not workspace data: the participant pages (token-authorised, no
# membership needed), the log-in and password pages, the item bank's shared reports.
# The queued jobs page is the operator's (superusers only), not a workspace's.
NOT_SCOPED_PREFIXES = ("s/", "accounts/", "admin/", "api/schema", "api/docs", "static", "jobs/")


@pytest.fixture
def walkers(module_rows):
    """The Default workspace's researcher and annotator, and an outsider of each role
    in another workspace (a manager there, and an annotator there).

    Nothing is published here (the demo publishes its item bank): every row is the
    Default workspace's alone, so the outsiders must find none of it.
    """
    Work._base_manager.update(shared=False)
    other = workspace_create(name="Other lab")
    users = {
        "insider": user_create_with_role(
            username="insider", password="pw-in-123!", role="researcher"
        ),
        "outsider": user_create_with_role(
            username="outsider", password="pw-out-123!", role="researcher", workspace=other
        ),
        # The demo's annotator: qualified, with tasks open in every queue.
        "annotator": get_user_model().objects.get(username="annotator"),
        "outside_annotator": user_create_with_role(
            username="outsider-ann", password="pw-oa-123!", role="annotator", workspace=other
        ),
    }
    clients = {}
    for name, user in users.items():
        client = Client(raise_request_exception=False)
        client.force_login(user)
        clients[name] = client
    return clients


def annotation(name: str):
    return apps.get_model("annotation", name)


def _annotator_tasks(client: Client) -> None:
    """The Default annotator takes one task of every queue, a validation stage and a
    qualification trial, as they would from the board: their task screens then exist."""
    for kind in TaskKind.values:
        client.post(f"/annotation/chartom/work/{kind}/take/")
    client.post("/annotation/chartom/bonus/take/")
    client.post("/annotation/chartom/distractors/take/")
    client.post("/annotation/chartom/qualification/start/")
    researcher = get_user_model().objects.get(username="insider")
    for batch in NoteBatch.objects.order_by("pk"):
        try:
            note_check_sample(batch=batch, size=2, seed=1, k=2, created_by=researcher)
        except WorkflowError:
            continue  # a batch with no filtered notes yet
    client.post("/annotation/chartom/checks/notes/take/")
    for sample in JudgementSample.objects.order_by("pk"):
        client.post(f"/annotation/chartom/checks/judgement/samples/{sample.pk}/take/")
    for batch in ValidationBatch.objects.order_by("pk"):
        client.post(f"/annotation/validation/{batch.pk}/take/")


def _default_objects(annotator: Client) -> dict[str, list]:
    """Candidate ids per path parameter: the Default workspace's rows of each kind."""
    default = Workspace.objects.get(slug="default")
    _annotator_tasks(annotator)
    annotator_user = annotator.session.get("_auth_user_id")
    backend = Backend.objects.filter(workspace=default).order_by("pk").first()
    template = PromptTemplate.objects.filter(workspace=None).order_by("pk").first()
    GenerationJob.objects.create(
        workspace=default,
        backend=backend,
        model="demo",
        relationship_template=template,
        trajectory_template=template,
        scenarios_template=template,
        retry_template=template,
    )
    trained = Run.objects.create(
        name="trained",
        kind=Run.Kind.TRAINED,
        benchmark="tom-in-amc",
        method="protonet",
        workspace=default,
        metrics=[{"epoch": 1, "train_loss": 0.7, "dev_accuracy": 0.5}],
    )

    def ids(model, **filters) -> list[int]:
        return list(
            model._base_manager.filter(**filters).order_by("pk").values_list("pk", flat=True)[:6]
        )

    ImportJob.objects.create(format_name="dyntom", path="/nowhere", workspace=default)
    job = report_job_create(benchmark="dyntom", enqueue=False)
    report_job_execute(job_id=job.pk)
    # A revision of a built-in template: the workspace's own (built-ins are everyone's).
    template = PromptTemplate.objects.filter(workspace=None).order_by("pk").first()
    prompt_template_revise(template=template, notes="Default's own wording")
    item_bank = {
        name: ids(model, work__workspace=default)
        for name, model in (
            ("characters", Character),
            ("scenes", Scene),
            ("qa-items", QAItem),
            ("dyntom-stages", DynToMStage),
        )
    }
    # One task of each kind first: each task screen finds its own kind among six ids.
    tasks = annotation("TaskAssignment")._base_manager.filter(annotator_id=annotator_user)
    by_kind = {kind: pk for pk, kind in tasks.order_by("-pk").values_list("pk", "task__kind")}
    slots = annotation("ValidationAssignment")._base_manager.filter(annotator_id=annotator_user)
    return {
        **item_bank,
        "assignment_id": [
            *sorted(by_kind.values()),
            *slots.order_by("pk").values_list("pk", flat=True)[:2],
        ],
        "key": ["accuracy", "loss", *_report_job_keys()],
        "works": ids(Work, workspace=default),
        "speaker-instances": ids(SpeakerInstance, scene__work__workspace=default),
        "dyntom-questions": ids(DynToMQuestion, stage__work__workspace=default),
        "backends": ids(Backend, workspace=default),
        "runs": ids(Run, workspace=default),
        "prompt-templates": ids(PromptTemplate, workspace=default),
        "template_id": ids(PromptTemplate, workspace=default),
        "study_id": ids(Study, workspace=default),
        "run_id": [*ids(Run, workspace=default), trained.pk],
        "backend_id": ids(Backend, workspace=default),
        "import_job": ids(ImportJob, workspace=default),
        "report_job": ids(ReportJob, workspace=default),
        "generation_job": ids(GenerationJob, workspace=default),
        # The annotation API's viewsets (api/annotation/^<resource>/<pk>/).
        "generation-jobs": ids(GenerationJob, workspace=default),
        "validation-batches": ids(ValidationBatch, workspace=default),
        "chartom-batches": ids(apps.get_model("annotation", "NoteBatch"), workspace=default),
        "validation_batch": ids(ValidationBatch, workspace=default),
        "note_batch": ids(apps.get_model("annotation", "NoteBatch"), workspace=default),
        "qset_id": ids(QualificationSet, workspace=default),
        "construction_id": ids(
            apps.get_model("annotation", "Construction"), note__batch__workspace=default
        ),
        "vstage_id": list(
            slots.order_by("pk").values_list("object__vstage_id", flat=True).distinct()[:3]
        )
        + ids(apps.get_model("annotation", "ValidationStage"), batch__workspace=default),
        "object_id": ids(
            apps.get_model("annotation", "ValidationObject"), batch__workspace=default
        ),
        "sample_id": ids(apps.get_model("annotation", "JudgementSample"), workspace=default),
        # The reviewer queue's check tasks (note checks of Default's batches).
        "task_id": ids(
            apps.get_model("annotation", "AnnotationTask"),
            kind=TaskKind.NOTE_CHECK,
            batch__workspace=default,
        ),
        "attempt_id": ids(
            apps.get_model("annotation", "QualificationAttempt"), qset__workspace=default
        ),
    }


def _report_job_keys() -> list[str]:
    """The chart keys of the Default workspace's finished report jobs."""
    keys: list[str] = []
    for job in ReportJob._base_manager.filter(status=ReportJob.Status.SUCCEEDED).order_by("pk"):
        report = job.report()
        keys += [chart.key for chart in report.charts] if report is not None else []
    return list(dict.fromkeys(keys))[:4]


# Parameters that name no object: fixed values (a chart or table "key" is tried from a list).
FIXED = {
    "benchmark": "dyntom",
    "fmt": "csv",
    "format": "json",
    "kind": "extract",
    "table": "constructions",
    "position": "1",
}


def _fixed_value(name: str, regex: str) -> str:
    """FIXED's value, or the first the route accepts (an image route's ``fmt``: svg)."""
    if re.fullmatch(regex, FIXED[name]):
        return FIXED[name]
    return sorted(re.findall(r"\w+", regex), key=lambda v: v != "svg")[0]


def _candidates(route_text: str, regexes: dict[str, str], objects: dict[str, list]) -> list[dict]:
    """Fillings of the route's parameters with Default's objects, most likely first."""
    params = list(regexes)
    primary = {
        "job_id": (
            "import_job"
            if route_text.startswith(("data/", "api/imports/"))
            else "report_job"
            if route_text.startswith("reports/")
            else "generation_job"
        ),
        "batch_id": "note_batch" if "chartom" in route_text else "validation_batch",
        # The API's viewsets: api/<app>/^<resource>/(?P<pk>…)
        "pk": route_text.split("^", 1)[-1].split("/", 1)[0],
    }
    fixed = {p: _fixed_value(p, regexes[p]) for p in params if p in FIXED}
    id_params = [p for p in params if p not in FIXED and p != "key"]
    if not id_params:
        return []
    head = id_params[0]
    key = primary.get(head, head)
    fillings = []
    for pk in objects.get(key, []):
        filling = dict(fixed)
        filling[head] = str(pk)
        for dependent in id_params[1:]:
            value = _dependent(head, pk, dependent)
            if value is None:
                break
            filling[dependent] = str(value)
        else:
            if "key" not in params:
                fillings.append(filling)
            # A chart's or a table's key: each one known, until one exists.
            fillings += [{**filling, "key": k} for k in objects["key"] if "key" in params]
    return fillings


def _dependent(head: str, pk: int, name: str) -> int | None:
    def base(model, **filters) -> int | None:
        rows = model._base_manager.filter(**filters).order_by("pk")
        return rows.values_list("pk", flat=True).first()

    if head == "study_id":
        study_models = {
            "participant_id": (Participant, "study_id"),
            "study_work_id": (apps.get_model("studies", "StudyWork"), "study_id"),
            "scene_id": (apps.get_model("studies", "StudyItem"), "study_id"),
        }
        if name in study_models:
            model, field = study_models[name]
            return base(model, **{field: pk})
    if head == "run_id" and name == "prediction_id":
        return base(Prediction, run_id=pk)
    if head == "qset_id" and name == "item_id":
        return base(apps.get_model("annotation", "QualificationItem"), qset_id=pk)
    return None


def _id_routes():
    """Our routes that take an object's id (the others: :func:`_aggregate_routes`)."""
    for route in _routes(get_resolver().url_patterns):
        if route.text.startswith(NOT_SCOPED_PREFIXES) or not route.regexes:
            continue
        params = list(route.regexes)
        if set(params) - set(FIXED) - {"key"}:
            yield route


def _aggregate_routes():
    """Our routes whose parameters name no object (a benchmark's report, a queue's
    kind): what they show is the workspace's aggregate."""
    for route in _routes(get_resolver().url_patterns):
        if route.text.startswith(NOT_SCOPED_PREFIXES) or not route.regexes:
            continue
        params = list(route.regexes)
        if set(params) - {"format"} and not set(params) - set(FIXED) - {"key"}:
            yield route


def test_no_url_with_an_id_shows_another_workspaces_object(walkers):
    """Each route is tried by the Default researcher, then (for the task screens, which
    are an annotator's own) by the Default annotator; the outsider of the same role,
    a member of another workspace, must find nothing there."""
    objects = _default_objects(walkers["annotator"])
    leaks: list[str] = []
    walked = 0
    unfilled: list[str] = []
    for route in _id_routes():
        found = None
        for filling in _candidates(route.text, route.regexes, objects):
            url = _fill(route, filling)
            if not _resolves(url, route):
                continue
            # The researcher's page, else the annotator's (their own task screens, a
            # 403 to researchers); else a page there that refuses this researcher.
            ours = walkers["insider"].get(url).status_code
            theirs = walkers["annotator"].get(url).status_code if ours in (403, 404) else 0
            if ours not in (403, 404):
                found = (url, ours, walkers["outsider"])
            elif theirs not in (403, 404):
                found = (url, theirs, walkers["outside_annotator"])
            elif ours == 403:
                found = (url, ours, walkers["outsider"])
            if found:
                break
        if found is None:
            unfilled.append(route.text)
            continue
        url, status, outsider = found
        walked += 1
        seen = outsider.get(url).status_code
        if seen != 404 and not (status == 405 and seen == 405):
            leaks.append(f"GET {url} answered {seen} to another workspace (its members: {status})")
        posted = outsider.post(url, {}).status_code
        if posted not in (404, 405):
            leaks.append(f"POST {url} answered {posted} to another workspace")
    print(
        f"{walked} URLs with an id walked ({len(unfilled)} had no Default object); "
        f"leaks: {len(leaks)}"
    )
    assert not leaks, f"{len(leaks)} leaks:\n" + "\n".join(leaks)
    assert not unfilled, "no Default object for:\n" + "\n".join(unfilled)
    assert walked > 100


def _scoped_admin_models():
    for model, model_admin in admin.site._registry.items():
        if isinstance(model._default_manager, WorkspaceManager):
            yield model, model_admin


def test_the_admin_shows_no_object_of_another_workspace(walkers):
    insider, outsider = walkers["insider"], walkers["outsider"]
    leaks, walked = [], 0
    for model, _ in _scoped_admin_models():
        opts = model._meta
        rows = list(model._base_manager.order_by("pk").values_list("pk", flat=True)[:2])
        listing = outsider.get(f"/admin/{opts.app_label}/{opts.model_name}/")
        if listing.status_code == 200 and listing.context and "cl" in listing.context:
            cl = listing.context["cl"]
            shared = getattr(model._default_manager, "shared_path", None)
            visible = [o.pk for o in cl.result_list]
            if shared:
                # Published works (and what hangs off them) are readable by design.
                visible = [pk for pk in visible if not _is_shared(model, pk, shared)]
            if visible:
                leaks.append(f"admin list of {opts.label} shows {len(visible)} of Default's rows")
        for pk in rows:
            if getattr(model._default_manager, "shared_path", None) and _is_shared(
                model, pk, model._default_manager.shared_path
            ):
                continue
            walked += 1
            url = f"/admin/{opts.app_label}/{opts.model_name}/{pk}/change/"
            assert insider.get(url).status_code in (200, 403), url
            response = outsider.get(url)
            if response.status_code == 200:
                leaks.append(f"{url} shows another workspace's object")
    print(f"{walked} admin change pages walked; leaks: {len(leaks)}")
    assert walked > 10
    assert not leaks, "\n".join(leaks)


def _shared_row(url: str, row) -> bool:
    """A row every workspace reads by design (a built-in prompt template)."""
    queryset = getattr(getattr(resolve(url).func, "cls", None), "queryset", None)
    if queryset is None or not isinstance(row, dict) or "id" not in row:
        return False
    shared = getattr(queryset.model._default_manager, "shared_path", None)
    return bool(shared) and _is_shared(queryset.model, row["id"], shared)


def _is_shared(model, pk, shared_path: str) -> bool:
    return model._base_manager.filter(pk=pk, **{shared_path: True}).exists()


API_FILTERS = [
    "",
    "?ordering=-id",
    "?ordering=work__title",
    "?work={work}",
    "?run={run}",
    "?study={study}",
    "?benchmark=dyntom",
    "?status=succeeded",
    "?backend={backend}",
]


def test_no_api_list_shows_another_workspaces_rows(walkers):
    outsider = walkers["outsider"]
    values = {
        "work": Work.objects.order_by("pk").first().pk,
        "run": Run.objects.order_by("pk").first().pk,
        "study": Study.objects.order_by("pk").first().pk,
        "backend": Backend.objects.order_by("pk").first().pk,
    }
    lists = sorted(
        {
            "/" + re.sub(r"\^|\$|/\?$", "", route.text).rstrip("/") + "/"
            for route in _routes(get_resolver().url_patterns)
            if route.text.startswith("api/")
            and not route.regexes
            and not route.text.startswith(("api/schema", "api/docs"))
        }
    )
    leaks, walked = [], 0
    for url in lists:
        for query in API_FILTERS:
            response = outsider.get(url + query.format(**values), HTTP_ACCEPT="application/json")
            if response.status_code != 200 or "json" not in response.get("Content-Type", ""):
                continue
            body = response.json()
            results = body.get("results") if isinstance(body, dict) else body
            if not isinstance(results, list):
                continue  # an API root: links, no rows
            walked += 1
            results = [row for row in results if not _shared_row(url, row)]
            if results:
                leaks.append(f"{url}{query} lists {len(results)} rows of another workspace")
    print(f"{walked} API list requests; leaks: {len(leaks)}")
    assert walked > 20
    assert not leaks, "\n".join(leaks)


def test_reports_of_another_workspace_leave_out_this_ones_runs_and_studies(walkers):
    insider, outsider = walkers["insider"], walkers["outsider"]
    names = [
        *Run.objects.values_list("name", flat=True),
        *Study.objects.values_list("name", flat=True),
    ]
    assert names
    # The check can fail: the Default workspace's own report names its runs.
    own = insider.get("/api/reports/dyntom/").content.decode()
    assert any(f'"{n}"' in own for n in names if n)
    for benchmark in ("dyntom", "chartom-qa", "tvshowguess"):
        for url in (f"/reports/{benchmark}/", f"/api/reports/{benchmark}/"):
            response = outsider.get(url)
            assert response.status_code == 200, url
            text = response.content.decode()
            shown = [n for n in names if n and (f">{n}<" in text or f'"{n}"' in text)]
            assert not shown, f"{url} names Default's {shown}"


def test_pages_without_an_id_show_another_workspace_none_of_this_ones_work(walkers):
    """The routes whose parameters name no object (every report by benchmark, its
    tables, charts and exports; the annotators' queues): the outsiders get their own
    workspace's (empty) view, which names nothing of Default's, and taking a task from
    a queue hands them none of Default's tasks."""
    names = sorted(
        {
            n
            for n in [
                *Run.objects.values_list("name", flat=True),
                *Study.objects.values_list("name", flat=True),
                *NoteBatch.objects.values_list("name", flat=True),
                *ValidationBatch.objects.values_list("name", flat=True),
            ]
            if n and len(n) > 3
        }
    )
    assert names
    # The check can fail: the Default researcher's own streamed export names its runs.
    own = b"".join(walkers["insider"].get("/reports/dyntom/tidy.csv")).decode()
    assert any(n in own for n in names)
    shown, walked = [], 0
    for route in _aggregate_routes():
        for key in (None, "accuracy", "loss"):
            if "key" in route.regexes and key is None:
                continue
            filling = {p: _fixed_value(p, r) for p, r in route.regexes.items() if p != "key"}
            url = _fill(route, {**filling, **({"key": key} if key else {})})
            if not _resolves(url, route):
                continue
            for who in ("outsider", "outside_annotator"):
                response = walkers[who].get(url)
                assert response.status_code < 500, url
                walked += 1
                if response.status_code != 200 or not response.get("Content-Type", "").startswith(
                    ("text/", "application/json")
                ):
                    continue
                text = b"".join(response) if response.streaming else response.content
                text = text.decode(errors="replace")
                shown += [f"{url} names {n!r}" for n in names if n in text]
            if "key" not in route.regexes:
                break
    print(f"{walked} requests to pages without an id; Default's names shown: {len(shown)}")
    assert walked > 20
    assert not shown, "\n".join(shown)
    stranger = walkers["outside_annotator"]
    for kind in TaskKind.values:
        stranger.post(f"/annotation/chartom/work/{kind}/take/")
    stranger.post("/annotation/chartom/checks/notes/take/")
    taken = annotation("TaskAssignment")._base_manager.filter(annotator__username="outsider-ann")
    assert not taken.exists()
