"""Issue 46: workspaces, their members and roles, and what scoping means for each
surface: the pages, the API (token and explicit workspace), runs and their backends."""

from __future__ import annotations

import base64
import re

import pytest
from django.contrib.sessions.models import Session
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts.models import Membership, MembershipEvent, PasswordChangeRequired
from accounts.services import user_create_with_role
from accounts.workspaces import member_remove, member_set, workspace_create
from benchmarks.models import Work
from common.scoping import scoped_to
from modeling.models import Backend, PromptTemplate, Run
from modeling.runs.executor import run_execute
from modeling.runs.prompt_templates import (
    prompt_template_revise,
    prompt_templates_ensure_defaults,
)
from modeling.runs.services import run_create
from studies.models import Study
from tests.factories import DynToMStageFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def labs(researcher):
    """Default (the researcher's) and a second lab managed by someone else."""
    second = workspace_create(name="Second lab")
    other = user_create_with_role(
        username="other", password="pw-other-123!", role="researcher", workspace=second
    )
    return {"second": second, "other": other}


def _basic(username: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{username}:{password}".encode()).decode()
    return {"HTTP_AUTHORIZATION": f"Basic {token}"}


def test_rows_are_born_in_the_requests_workspace_and_default_elsewhere(labs):
    with scoped_to(labs["second"].pk):
        inside = Study.objects.create(name="made in the second lab", benchmark="dyntom")
    outside = Study.objects.create(name="made by a command", benchmark="dyntom")

    assert inside.workspace_id == labs["second"].pk
    assert outside.workspace.slug == "default"
    with scoped_to(labs["second"].pk):
        assert list(Study.objects.values_list("name", flat=True)) == ["made in the second lab"]
    assert Study.objects.count() == 2  # unscoped: a task, a command


def test_pages_answer_404_for_another_workspaces_study_and_list_only_their_own(
    client, researcher, labs
):
    mine = Study.objects.create(name="mine", benchmark="dyntom")
    client.force_login(labs["other"])

    assert client.get(reverse("studies:detail", args=[mine.pk])).status_code == 404
    assert client.post(reverse("studies:pause", args=[mine.pk])).status_code == 404
    assert "mine" not in client.get(reverse("studies:list")).content.decode()


def test_a_viewer_reads_and_changes_nothing(client, researcher, labs):
    study = Study.objects.create(name="read me", benchmark="dyntom")
    viewer = user_create_with_role(
        username="viewer", password="pw-view-123!", role="researcher", workspace_role="viewer"
    )
    client.force_login(viewer)

    assert "read me" in client.get(reverse("studies:list")).content.decode()
    refused = client.post(reverse("studies:pause", args=[study.pk]))
    assert refused.status_code == 403
    assert "viewer" in refused.content.decode()
    api = client.post(reverse("studies-pause", args=[study.pk]))
    assert api.status_code == 403
    assert "Viewers" in api.json()["detail"]


def test_the_api_takes_the_workspace_from_the_token_user_and_an_explicit_header(
    client, researcher, labs
):
    Study.objects.create(name="in default", benchmark="dyntom")
    with scoped_to(labs["second"].pk):
        Study.objects.create(name="in the second lab", benchmark="dyntom")
    # The researcher manages Default and is also a viewer in the second lab.
    member_set(workspace=labs["second"], user=researcher, role="viewer", by=labs["other"])
    auth = _basic("res", "pw-res-123!")

    def names(**extra) -> list[str]:
        response = client.get(reverse("studies-list"), **auth, **extra)
        assert response.status_code == 200, response.content
        return [row["name"] for row in response.json()["results"]]

    assert names() == ["in default"]  # the first membership, by workspace name
    assert names(HTTP_X_TOMLAB_WORKSPACE="second-lab") == ["in the second lab"]
    assert names(HTTP_X_TOMLAB_WORKSPACE=str(labs["second"].pk)) == ["in the second lab"]
    by_parameter = client.get(reverse("studies-list") + "?workspace=second-lab", **auth)
    assert [r["name"] for r in by_parameter.json()["results"]] == ["in the second lab"]

    stranger = workspace_create(name="Stranger lab")
    refused = client.get(reverse("studies-list"), HTTP_X_TOMLAB_WORKSPACE=stranger.slug, **auth)
    assert refused.status_code == 400
    assert "not a member" in refused.content.decode()


def test_a_backends_key_is_never_used_by_a_run_of_another_workspace(
    client, researcher, labs, llm_server
):
    stage = DynToMStageFactory()
    paid = Backend.objects.create(
        name="paid", kind=Backend.Kind.OPENAI, base_url=llm_server.base_url, default_model="m"
    )
    paid.set_api_key("sk-default-lab-secret-1234")
    paid.save()
    client.force_login(labs["other"])
    payload = {
        "benchmark": "dyntom",
        "method": "vanilla",
        "backend": "paid",
        "selection": {"works": [stage.work.key]},
    }

    response = client.post(reverse("modeling-run-list"), payload, content_type="application/json")
    assert response.status_code == 400
    assert "backend" in response.json()

    # A run row that names it anyway (an old client, the shell): refused at execution.
    with scoped_to(labs["second"].pk):
        run = run_create(
            benchmark="dyntom",
            method="vanilla",
            backend=paid,
            selection={"works": [stage.work.key]},
            enqueue=False,
        )
    assert run.workspace_id == labs["second"].pk
    assert run_execute(run_id=run.pk) == Run.Status.FAILED
    run.refresh_from_db()
    assert "another workspace" in run.error
    assert llm_server.request_count == 0


def test_a_run_pins_only_templates_its_workspace_reads(labs):
    """A ToMPro run may pin a built-in template or its own workspace's revision of it,
    never another workspace's wording, which its scope cannot read."""
    prompt_templates_ensure_defaults()
    builtin = PromptTemplate.objects.get(workspace=None, name="tom-in-amc-tompro-personality")
    default_revision = prompt_template_revise(template=builtin, notes="Default's wording")
    with scoped_to(labs["second"].pk):
        backend = Backend.objects.create(
            name="second-lab", kind=Backend.Kind.OPENAI, default_model="m"
        )

        def pin(pk: int) -> Run:
            return run_create(
                benchmark="tom-in-amc",
                method="tompro",
                backend=backend,
                selection={"scene_limit": 1},
                params={"options": {"templates": {"personality": pk}}},
                enqueue=False,
            )

        with pytest.raises(ValueError, match=r"templates.personality: no tom-in-amc-tompro"):
            pin(default_revision.pk)
        pinned = pin(builtin.pk)
    assert pinned.params["options"]["templates"]["personality"] == builtin.pk
    with pytest.raises(ValueError, match="in this workspace"), scoped_to(labs["second"].pk):
        pin(PromptTemplate.objects.get(workspace=None, name="tom-in-amc-tompro-instant").pk)


def test_membership_changes_are_logged_and_a_removed_member_is_signed_out(researcher, labs):
    second, other = labs["second"], labs["other"]
    member_set(workspace=second, user=researcher, role="researcher", by=other)
    member_set(workspace=second, user=researcher, role="viewer", by=other)
    signed_in = Client()
    signed_in.force_login(researcher)
    assert Session.objects.count() == 1

    member_remove(workspace=second, user=researcher, by=other)

    events = list(
        MembershipEvent.objects.filter(workspace=second, username="res")
        .order_by("pk")
        .values_list("action", "role_before", "role_after", "by_username")
    )
    assert events == [
        ("added", "", "researcher", "other"),
        ("role_changed", "researcher", "viewer", "other"),
        ("removed", "viewer", "", "other"),
    ]
    assert Session.objects.count() == 0
    assert signed_in.get(reverse("studies:list")).status_code == 302  # to the log-in page
    with pytest.raises(ValueError, match="at least one manager"):
        member_remove(workspace=second, user=other, by=other)
    assert Membership.objects.filter(workspace=second, user=other, role="manager").exists()


def test_a_signed_in_request_reads_its_user_and_memberships_in_one_query(client, researcher, labs):
    """The session's user comes with their memberships (accounts.backends), read again
    on every request: a membership deleted without a sign-out (as the admin deletes
    one) is gone from the next page."""
    member_set(workspace=labs["second"], user=researcher, role="viewer", by=labs["other"])
    client.force_login(researcher)

    with CaptureQueriesContext(connection) as queries:
        page = client.get(reverse("studies:list"))
    assert page.status_code == 200
    reads = [
        q["sql"] for q in queries if re.search(r'FROM "(auth_user|accounts_membership)"', q["sql"])
    ]
    assert 'FROM "accounts_membership" INNER JOIN' in reads[0]
    assert 'INNER JOIN "auth_user"' in reads[0] and 'INNER JOIN "accounts_workspace"' in reads[0]
    assert not [sql for sql in reads if sql.lstrip().startswith('SELECT "auth_user"."id"')]
    assert sum('FROM "accounts_membership"' in sql for sql in reads) == 1
    menu = page.content.decode()
    assert menu.index("Default (") < menu.index("Second lab (viewer)")  # name order, as before

    Membership.objects.filter(workspace=labs["second"], user=researcher).delete()
    assert "Second lab" not in client.get(reverse("studies:list")).content.decode()


def test_a_user_with_no_membership_is_read_as_django_reads_them(admin_client):
    page = admin_client.get(reverse("studies:list"))
    assert page.status_code == 200
    assert page.wsgi_request.user.is_superuser
    assert page.wsgi_request._tomlab_memberships == []


def test_only_a_manager_changes_members(client, researcher, labs):
    member_set(workspace=labs["second"], user=researcher, role="researcher", by=labs["other"])
    client.force_login(researcher)
    client.post(reverse("workspace-switch"), {"workspace": labs["second"].pk})

    page = client.get(reverse("workspace-members"))
    assert page.status_code == 200 and "other" in page.content.decode()
    refused = client.post(reverse("workspace-members"), {"username": "other", "remove": "on"})
    assert refused.status_code == 403
    assert Membership.objects.filter(workspace=labs["second"], user=labs["other"]).exists()
    # Switching to a workspace one is not a member of: nothing to find.
    stranger = workspace_create(name="Stranger lab")
    assert client.post(reverse("workspace-switch"), {"workspace": stranger.pk}).status_code == 404


def test_a_one_time_password_must_be_changed_first(client, researcher):
    client.force_login(researcher)
    created = client.post(reverse("users"), {"username": "newbie", "role": "annotator"})
    password = created.context["password"]
    assert PasswordChangeRequired.objects.filter(user__username="newbie").exists()
    assert Membership.objects.get(user__username="newbie").role == "annotator"

    newbie = Client()
    assert (
        newbie.post(reverse("login"), {"username": "newbie", "password": password}).status_code
        == 302
    )
    response = newbie.get(reverse("annotation:validation"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("password_change"))
    newbie.post(
        reverse("password_change"),
        {
            "old_password": password,
            "new_password1": "a-long-new-pass-991",
            "new_password2": "a-long-new-pass-991",
        },
    )
    assert not PasswordChangeRequired.objects.filter(user__username="newbie").exists()
    assert newbie.get(reverse("annotation:validation")).status_code == 200


def test_a_published_work_is_read_by_every_workspace_and_changed_by_none_of_the_others(
    client, admin_client, researcher, labs
):
    from benchmarks.services import benchmark_publish

    work = DynToMStageFactory().work
    client.force_login(labs["other"])
    change = reverse("admin:benchmarks_work_change", args=[work.pk])
    other = labs["other"]
    other.is_staff = True
    other.save()

    assert client.get(reverse("work-detail", args=[work.pk])).status_code == 404
    assert benchmark_publish(works=Work.objects.filter(pk=work.pk)) == 1
    assert client.get(reverse("work-detail", args=[work.pk])).status_code == 200
    page = client.get(change)
    assert page.status_code == 200 and page.context["has_change_permission"] is False
    assert client.post(change, {"title": "renamed"}).status_code == 403
    work.refresh_from_db()
    assert work.title != "renamed"


def test_importing_a_work_another_workspace_holds_fails_saying_so(labs, shared_data):
    from benchmarks.services import benchmark_publish, import_job_create, import_job_run

    stage = shared_data / "dyntom" / "trial149"
    first = import_job_create(format_name="dyntom", path=stage)
    assert import_job_run(job_id=first.pk) == "succeeded"
    with scoped_to(labs["second"].pk):
        second = import_job_create(format_name="dyntom", path=stage)

    assert second.workspace_id == labs["second"].pk
    assert import_job_run(job_id=second.pk) == "failed"
    second.refresh_from_db()
    assert "already in another workspace's item bank" in second.error
    assert Work.objects.get().workspace.slug == "default"  # untouched, still Default's

    # Published, the work is the second lab's to read, never to import over.
    benchmark_publish(works=Work.objects.all())
    with scoped_to(labs["second"].pk):
        again = import_job_create(format_name="dyntom", path=stage)
    assert import_job_run(job_id=again.pk) == "failed"
    work = Work.objects.get()
    assert (work.workspace.slug, work.shared) == ("default", True)


@pytest.mark.parametrize("value", ["²", "1" + "0" * 30, "9" * 5000, "a\x00b", "-1", ""])
def test_odd_workspace_values_are_4xx(client, admin_client, researcher, value):
    client.force_login(researcher)
    assert client.post(reverse("workspace-switch"), {"workspace": value}).status_code == 404
    assert client.get(reverse("studies-list"), {"workspace": value}).status_code in (200, 400)
    # A superuser may name any workspace: an odd one is simply none.
    assert admin_client.get(reverse("studies:list"), {"workspace": value}).status_code in (
        200,
        400,
    )


def test_a_saved_mapping_and_a_mapped_item_set_stay_in_their_workspace(client, researcher, labs):
    """Issue 47's rows: a mapping preset saved in Default is neither offered to nor
    usable by the second lab (the API answers 400 naming the presets it has), and
    Default's unpublished item set is neither offered to its studies nor reported."""
    from benchmarks.models import MappingPreset
    from tests.benchmarks.test_generic_upload import API, PLAIN, items_file
    from tests.generic_items import make_generic_benchmark

    MappingPreset.objects.create(name="Default's mapping", mapping=PLAIN)
    work = make_generic_benchmark()
    client.force_login(labs["other"])

    page = client.get(reverse("benchmarks:import"), {"format": "generic"}).content.decode()
    assert "Default&#x27;s mapping" not in page and "ToMBench" in page
    refused = client.post(
        API,
        {
            "format": "generic",
            "files": [items_file()],
            "preset": "Default's mapping",
            "name": "Theirs",
            "version": "1",
        },
    )
    assert refused.status_code == 400
    assert "no mapping preset named" in refused.content.decode()
    study_form = client.get(reverse("studies:choice-new")).content.decode()
    assert work.title not in study_form
    report = client.get(reverse("reports:report", args=["generic"]), {"work": work.pk})
    assert report.status_code == 404
    assert MappingPreset.objects.count() == 1  # nothing saved on the refusal


def test_a_row_reached_through_its_owner_is_scoped_on_its_own_foreign_key():
    """The scope of a prediction reads the runs' table, not the predictions' own: a
    subquery over the predictions (``pk IN (SELECT id FROM prediction JOIN run …)``)
    made PostgreSQL hash a million ids for each report (issue 51's report bench)."""
    from benchmarks.models import Character
    from modeling.models import Prediction

    with scoped_to(1):
        prediction_sql = str(Prediction.objects.order_by("pk").query)
        character_sql = str(Character.objects.order_by("pk").query)
    assert prediction_sql.count('FROM "modeling_prediction"') == 1, prediction_sql
    assert '"modeling_prediction"."run_id" IN (SELECT' in prediction_sql
    assert 'FROM "modeling_run" U0 WHERE U0."workspace_id" = 1' in prediction_sql
    # Owned and published in one subquery over the works.
    assert '"benchmarks_character"."work_id" IN (SELECT' in character_sql
    assert 'U0."workspace_id" = 1 OR U0."shared"' in character_sql
