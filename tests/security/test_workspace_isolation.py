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
from django.test import Client
from django.urls import get_resolver, resolve

from accounts.models import Workspace
from accounts.services import user_create_with_role
from accounts.workspaces import workspace_create
from annotation.chartom.models import QualificationSet
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
    """The Default workspace's researcher, and an outsider managing another workspace.

    Nothing is published here (the demo publishes its item bank): every row is the
    Default workspace's alone, so the outsider must find none of it.
    """
    Work._base_manager.update(shared=False)
    insider = user_create_with_role(username="insider", password="pw-in-123!", role="researcher")
    outsider_user = user_create_with_role(
        username="outsider",
        password="pw-out-123!",
        role="researcher",
        workspace=workspace_create(name="Other lab"),
    )
    clients = {}
    for name, user in (("insider", insider), ("outsider", outsider_user)):
        client = Client(raise_request_exception=False)
        client.force_login(user)
        clients[name] = client
    return clients


def annotation(name: str):
    return apps.get_model("annotation", name)


def _default_objects() -> dict[str, list[int]]:
    """Candidate ids per path parameter: the Default workspace's rows of each kind."""
    default = Workspace.objects.get(slug="default")

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
    return {
        **item_bank,
        "works": ids(Work, workspace=default),
        "speaker-instances": ids(SpeakerInstance, scene__work__workspace=default),
        "dyntom-questions": ids(DynToMQuestion, stage__work__workspace=default),
        "backends": ids(Backend, workspace=default),
        "runs": ids(Run, workspace=default),
        "prompt-templates": ids(PromptTemplate, workspace=default),
        "template_id": ids(PromptTemplate, workspace=default),
        "study_id": ids(Study, workspace=default),
        "run_id": ids(Run, workspace=default),
        "backend_id": ids(Backend, workspace=default),
        "import_job": ids(ImportJob, workspace=default),
        "report_job": ids(ReportJob, workspace=default),
        "generation_job": ids(GenerationJob, workspace=default),
        "validation_batch": ids(ValidationBatch, workspace=default),
        "note_batch": ids(apps.get_model("annotation", "NoteBatch"), workspace=default),
        "qset_id": ids(QualificationSet, workspace=default),
        "construction_id": ids(
            apps.get_model("annotation", "Construction"), note__batch__workspace=default
        ),
        "vstage_id": ids(apps.get_model("annotation", "ValidationStage"), batch__workspace=default),
        "object_id": ids(
            apps.get_model("annotation", "ValidationObject"), batch__workspace=default
        ),
        "sample_id": ids(apps.get_model("annotation", "JudgementSample"), workspace=default),
        "attempt_id": ids(
            apps.get_model("annotation", "QualificationAttempt"), qset__workspace=default
        ),
    }


def _candidates(route_text: str, params: list[str], objects: dict[str, list[int]]) -> list[dict]:
    """Fillings of the route's parameters with Default's objects, most likely first."""
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
    fixed = {
        "benchmark": "dyntom",
        "key": "accuracy",
        "fmt": "csv",
        "format": "json",
        "kind": "extraction",
        "table": "constructions",
        "position": "1",
    }
    id_params = [p for p in params if p not in fixed]
    if not id_params:
        return []
    head = id_params[0]
    key = primary.get(head, head)
    fillings = []
    for pk in objects.get(key, []):
        filling = {p: fixed[p] for p in params if p in fixed}
        filling[head] = str(pk)
        for dependent in id_params[1:]:
            value = _dependent(head, pk, dependent)
            if value is None:
                break
            filling[dependent] = str(value)
        else:
            fillings.append(filling)
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
    for route in _routes(get_resolver().url_patterns):
        if route.text.startswith(NOT_SCOPED_PREFIXES) or not route.regexes:
            continue
        params = list(route.regexes)
        if set(params) - {"format"}:
            yield route, params


def test_no_url_with_an_id_shows_another_workspaces_object(walkers):
    insider, outsider = walkers["insider"], walkers["outsider"]
    objects = _default_objects()
    leaks: list[str] = []
    walked = 0
    unfilled: list[str] = []
    for route, params in _id_routes():
        found = None
        for filling in _candidates(route.text, params, objects):
            url = _fill(route, filling)
            if not _resolves(url, route):
                continue
            status = insider.get(url).status_code
            if status != 404:
                found = (url, status)
                break
        if found is None:
            unfilled.append(route.text)
            continue
        url, status = found
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
    assert walked > 100, "\n".join(unfilled)
    assert not leaks, f"{len(leaks)} leaks:\n" + "\n".join(leaks)


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
