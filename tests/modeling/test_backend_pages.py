"""Backend pages under /runs/backends/: create/edit with a write-only key, disable,
test connection against the stand-in server, ?next=, roles and the host policy."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from common.models import QueuedJob
from modeling.models import Backend
from modeling.runs import backend_services
from modeling.runs.forms import RunForm

# The session fixture that builds a tiny local Llama (requested by name below).
from tests.modeling.test_transformers_backend import tiny_models  # noqa: F401

pytestmark = pytest.mark.django_db

SECRET = "sk-typed-once-7f3a9c"
NEW_URL = reverse("modeling:backend-new")
LIST_URL = reverse("modeling:backend-list")


@pytest.fixture
def res_client(client, researcher):
    client.force_login(researcher)
    return client


def _form(base_url: str, **overrides) -> dict:
    data = {
        "name": "stand-in",
        "kind": "openai",
        "base_url": base_url,
        "default_model": "test-model",
        "model_path": "",
        "api_key_env": "",
        "new_api_key": "",
        "max_concurrency": 2,
        "max_retries": 1,
        "timeout_s": 5,
        "price_input_per_1k": 0,
        "price_output_per_1k": 0,
        "options": "{}",
    }
    return data | overrides


def test_create_with_env_key(res_client, researcher, llm_server):
    response = res_client.post(NEW_URL, _form(llm_server.base_url, api_key_env="OPENAI_API_KEY"))
    assert response.status_code == 302
    backend = Backend.objects.get(name="stand-in")
    assert backend.api_key_env == "OPENAI_API_KEY"
    assert not backend.has_api_key
    assert backend.created_by == researcher
    assert "env <code>OPENAI_API_KEY</code>" in res_client.get(LIST_URL).content.decode()


def test_stored_key_never_shown_again(res_client, llm_server, caplog):
    caplog.set_level(logging.DEBUG)
    response = res_client.post(NEW_URL, _form(llm_server.base_url, new_api_key=SECRET))
    assert response.status_code == 302
    backend = Backend.objects.get(name="stand-in")
    assert backend.has_api_key and backend.get_api_key() == SECRET
    assert SECRET not in backend.api_key  # ciphertext in the row
    pages = [
        res_client.get(LIST_URL),
        res_client.get(reverse("modeling:backend-edit", args=[backend.pk])),
        res_client.post(reverse("modeling:backend-test", args=[backend.pk])),
        _tested(res_client, backend),
        res_client.get(reverse("modeling:run-new")),
    ]
    for page in pages:
        assert SECRET not in page.content.decode()
    assert "stored" in pages[0].content.decode()
    assert llm_server.authorizations[-1] == f"Bearer {SECRET}"  # the key was really sent
    assert SECRET not in caplog.text


def test_edit_blank_key_keeps_it(res_client, researcher, llm_server):
    res_client.post(NEW_URL, _form(llm_server.base_url, new_api_key=SECRET))
    backend = Backend.objects.get(name="stand-in")
    url = reverse("modeling:backend-edit", args=[backend.pk])
    response = res_client.post(url, _form(llm_server.base_url, default_model="other-model"))
    assert response.status_code == 302
    backend.refresh_from_db()
    assert backend.default_model == "other-model"
    assert backend.get_api_key() == SECRET
    res_client.post(url, _form(llm_server.base_url, clear_api_key="on"))
    backend.refresh_from_db()
    assert not backend.has_api_key


def test_disable_hides_from_run_form(res_client, openai_backend):
    assert openai_backend in RunForm().fields["backend"].queryset
    toggle = reverse("modeling:backend-toggle", args=[openai_backend.pk])
    # The fixture's backend has no creator: only an explicit permission may change it.
    assert res_client.post(toggle, {"action": "disable"}).status_code == 403
    openai_backend.created_by = res_client.get(LIST_URL).wsgi_request.user
    openai_backend.save(update_fields=["created_by"])
    assert res_client.post(toggle, {"action": "disable"}).status_code == 302
    assert openai_backend not in RunForm().fields["backend"].queryset
    page = res_client.get(reverse("modeling:run-new")).content.decode()
    assert f">{openai_backend.name}<" not in page
    assert "disabled" in res_client.get(LIST_URL).content.decode()
    res_client.post(toggle, {"action": "enable"})
    assert openai_backend in RunForm().fields["backend"].queryset


def test_disabled_flag_survives_an_edit(res_client, researcher, llm_server):
    res_client.post(NEW_URL, _form(llm_server.base_url))
    backend = Backend.objects.get(name="stand-in")
    backend_services.backend_disable(backend=backend)
    edit = reverse("modeling:backend-edit", args=[backend.pk])
    assert "disabled" not in res_client.get(edit).context["form"].initial["options"]
    res_client.post(edit, _form(llm_server.base_url, options='{"headers": {}}'))
    backend.refresh_from_db()
    assert backend_services.backend_is_disabled(backend)
    assert backend.options["headers"] == {}


def _tested(res_client, backend: Backend):
    """Test connection as the page does it: queued (the cell says so and polls), run by a
    worker (here the service the task calls), then the polled cell with the outcome."""
    queued = res_client.post(
        reverse("modeling:backend-test", args=[backend.pk]), HTTP_HX_REQUEST="true"
    )
    status_url = reverse("modeling:backend-test-status", args=[backend.pk])
    assert queued.status_code == 200
    assert 'data-testid="test-pending"' in queued.content.decode()
    assert f'hx-get="{status_url}"' in queued.content.decode()
    polled = res_client.get(status_url, HTTP_HX_REQUEST="true")
    assert polled.status_code == 200 and 'data-testid="test-pending"' in polled.content.decode()
    assert backend_services.backend_test_execute(backend_id=backend.pk) == "tested"
    done = res_client.get(status_url, HTTP_HX_REQUEST="true")
    assert done.status_code == 286  # htmx stops polling
    assert 'data-testid="test-pending"' not in done.content.decode()
    return done


def test_connection_is_queued_and_the_cell_shows_reply_and_tokens(
    res_client, openai_backend, llm_server
):
    llm_server.enqueue("ready", prompt_tokens=11, completion_tokens=1)
    response = _tested(res_client, openai_backend)
    html = response.content.decode()
    assert "<html" not in html  # the partial only
    assert "“ready”" in html
    assert "11 prompt + 1 completion tokens" in html
    assert llm_server.request_count == 1
    openai_backend.refresh_from_db()
    last = backend_services.backend_last_test(openai_backend)
    assert last is not None and last.ok and last.reply == "ready"
    assert "“ready”" in res_client.get(LIST_URL).content.decode()


def test_failing_server_error_shown_with_key_redacted(res_client, researcher, llm_server):
    res_client.post(NEW_URL, _form(llm_server.base_url, new_api_key=SECRET))
    backend = Backend.objects.get(name="stand-in")
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {SECRET}"}})
    llm_server.enqueue(status=401, body=body)
    queued = res_client.post(reverse("modeling:backend-test", args=[backend.pk]))
    assert "testing…" in queued.content.decode()  # the whole page, without htmx
    backend_services.backend_test_execute(backend_id=backend.pk)
    html = res_client.get(LIST_URL).content.decode()
    assert "Incorrect API key provided" in html
    assert SECRET not in html
    assert "failed" in html
    backend.refresh_from_db()
    assert SECRET not in json.dumps(backend.options)


def test_wrong_port_shows_the_error(res_client, openai_backend):
    openai_backend.base_url = "http://127.0.0.1:9/v1"
    openai_backend.save()
    result = backend_services.backend_test_connection(backend=openai_backend)
    assert not result.ok and result.error
    html = _tested(res_client, openai_backend).content.decode()
    assert 'data-testid="test-error"' in html


def test_a_test_no_worker_took_says_so(res_client, openai_backend):
    queued = backend_services.backend_test_queue(backend=openai_backend)
    assert queued.pending and not queued.waiting_long
    long_ago = (timezone.now() - timedelta(minutes=2)).isoformat()
    Backend.objects.filter(pk=openai_backend.pk).update(
        last_test={"ok": False, "pending": True, "at": long_ago}
    )
    html = res_client.get(LIST_URL).content.decode()
    assert 'data-testid="test-waiting"' in html and "is a Celery worker running?" in html
    assert QueuedJob.objects.filter(task=backend_services.TEST_TASK_NAME).count() == 1


def test_next_redirect_and_foreign_next_ignored(res_client, llm_server):
    run_new = reverse("modeling:run-new")
    page = res_client.get(run_new).content.decode()
    assert f'href="{NEW_URL}?next={run_new}"' in page
    response = res_client.post(f"{NEW_URL}?next={run_new}", _form(llm_server.base_url))
    assert response.status_code == 302 and response.url == run_new
    form = _form(llm_server.base_url, name="other", next="https://evil.example/")
    response = res_client.post(NEW_URL, form)
    assert response.status_code == 302 and response.url == LIST_URL


@pytest.mark.parametrize("user_fixture", ["rater", "annotator"])
def test_other_roles_get_403(client, request, user_fixture, openai_backend):
    client.force_login(request.getfixturevalue(user_fixture))
    assert client.get(LIST_URL).status_code == 403
    assert client.get(NEW_URL).status_code == 403
    assert client.post(NEW_URL, _form("http://127.0.0.1:1/v1")).status_code == 403
    assert (
        client.post(reverse("modeling:backend-test", args=[openai_backend.pk])).status_code == 403
    )
    assert not Backend.objects.filter(name="stand-in").exists()


def test_bad_host_refused_with_field_named(res_client, settings):
    settings.TOMLAB_BACKEND_HOSTS = ["127.0.0.1"]
    response = res_client.post(NEW_URL, _form("http://evil.example/v1"))
    assert response.status_code == 200
    assert (
        "evil.example:80 is not a host backends may call"
        in response.context["form"].errors["base_url"][0]
    )
    assert 'href="#id_base_url">Base URL</a>' in response.content.decode()
    assert not Backend.objects.exists()


def test_key_env_refused(res_client, llm_server):
    response = res_client.post(NEW_URL, _form(llm_server.base_url, api_key_env="DJANGO_SECRET_KEY"))
    assert "api_key_env" in response.context["form"].errors
    assert not Backend.objects.exists()


def test_nav_links_to_backends(res_client):
    assert f'href="{LIST_URL}"' in res_client.get(reverse("modeling:run-list")).content.decode()


def test_transformers_backend_page_and_test(res_client, request, tmp_path):
    models = request.getfixturevalue("tiny_models")
    form = _form(
        "", name="tiny", kind="transformers", default_model="", model_path=str(models.chat)
    )
    form["options"] = '{"max_new_tokens": 4, "device": "cpu"}'
    assert res_client.post(NEW_URL, form).status_code == 302
    backend = Backend.objects.get(name="tiny")
    result = backend_services.backend_test_connection(backend=backend)
    assert result.ok, result.error
    assert result.prompt_tokens > 0
    assert 0 < result.completion_tokens <= backend_services.TEST_MAX_TOKENS
    assert str(models.chat) in res_client.get(LIST_URL).content.decode()

    backend.model_path = str(tmp_path / "missing")
    backend.save()
    result = backend_services.backend_test_connection(backend=backend)
    assert not result.ok and "missing" in result.error
