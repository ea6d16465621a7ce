"""One guarded way out of the server (issue 45, findings 1 and 2; common/egress.py).

The probe: backend URLs, "Test connection" and webhooks reached loopback and link-local
addresses and told the ports behind them apart (0.06 s "Connection error" for a closed
port, 1.5-2 s for PostgreSQL and Redis, "HTTP 404" for a web server); a 307 from the one
allowed host sent the next request, with the decrypted ``X-Api-Key`` header, to another
port. Now every address is checked before anything is sent, the connection goes to the
checked address, and no redirect is followed.

The suite's own model server and webhook receivers listen on 127.0.0.1, which the test
settings allow (as ``make run`` does); each test here takes the allowance away or
narrows it.
"""

from __future__ import annotations

import json
import socket

import pytest
from django.core.exceptions import ValidationError

from common import egress
from modeling.backends import BackendError, ChatRequest, get_backend
from modeling.models import Backend
from modeling.runs.backend_services import backend_test_connection
from studies.participation import webhooks
from tests.llm_server import LLMTestServer
from tests.studies.conftest import friends, live_study  # noqa: F401
from tests.studies.test_webhooks import dead_url, receiver  # noqa: F401

pytestmark = pytest.mark.django_db

INTERNAL_URLS = [
    "http://127.0.0.1:5432/",
    "http://127.9.9.9/",
    "http://localhost:6379/",
    "http://[::1]:8000/v1",
    "http://0.0.0.0/",
    "http://[::]/",
    "http://[::ffff:127.0.0.1]:5432/",
    "http://[::ffff:169.254.169.254]/",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.1.2.3/",
    "http://172.16.0.1/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",
    "http://[fd00::1]/",
    "http://[fe80::1]/",
    "http://224.0.0.1/",
    "http://[ff02::1]/",
    # What the C resolver reads as 127.0.0.1: a decimal and a hex-dotted form.
    "http://2130706433/",
    "http://0x7f.1/",
]


@pytest.fixture
def no_allowance(settings):
    settings.TOMLAB_EGRESS_ALLOW = []
    return settings


@pytest.fixture
def backend(db, llm_server):
    return Backend.objects.create(
        name="probe",
        kind=Backend.Kind.OPENAI,
        base_url=llm_server.base_url,
        default_model="test-model",
        api_key="sk-egress-" + "k" * 24,
        options={"headers": {"X-Api-Key": "opt-egress-secret-0123456789"}},
        max_retries=0,
        timeout_s=5,
    )


def _complete(backend: Backend) -> str:
    client = get_backend(backend)
    try:
        request = ChatRequest.build(
            [{"role": "user", "content": "hi"}], model="test-model", params={}
        )
        return client.complete(request).text
    finally:
        client.close()


@pytest.mark.parametrize("url", INTERNAL_URLS)
def test_every_internal_address_form_is_refused(no_allowance, url):
    with pytest.raises(egress.EgressRefused, match="internal address") as refused:
        egress.destination(url)
    assert "TOMLAB_EGRESS_ALLOW" in str(refused.value)


def test_a_refusal_reads_the_same_for_a_closed_port_and_an_open_one(no_allowance, llm_server):
    closed, listening = dead_url(), llm_server.base_url
    assert egress.refusal(closed) == egress.refusal(listening) != ""
    assert str(llm_server.port) not in egress.refusal(listening)
    assert llm_server.request_count == 0


def test_public_addresses_pass_without_an_allowance(no_allowance):
    target = egress.destination("https://8.8.8.8/v1")
    assert (target.host, target.port, str(target.address)) == ("8.8.8.8", 443, "8.8.8.8")
    assert egress.refusal("https://[2001:4860:4860::8888]/") == ""
    # A name that does not resolve now passes a save (the request checks again).
    assert egress.refusal("https://llm.lab.example/v1") == ""
    with pytest.raises(egress.Unresolvable):
        egress.destination("https://llm.lab.example/v1")


def test_a_backend_at_an_internal_address_is_refused_on_save_and_on_test(
    no_allowance, backend, llm_server
):
    with pytest.raises(ValidationError) as refused:
        backend.full_clean()
    assert "internal address" in str(refused.value.message_dict["base_url"])

    result = backend_test_connection(backend=backend)

    assert not result.ok and "internal address" in result.error
    assert llm_server.request_count == 0


def test_a_backend_test_reaches_an_allowed_address(settings, backend, llm_server):
    settings.TOMLAB_EGRESS_ALLOW = ["127.0.0.1/32"]
    llm_server.enqueue("ready")
    assert backend_test_connection(backend=backend).ok
    assert llm_server.request_count == 1


def test_a_redirect_is_not_followed_and_carries_no_secret_anywhere(settings, backend, llm_server):
    settings.TOMLAB_BACKEND_HOSTS = [f"127.0.0.1:{llm_server.port}"]
    with LLMTestServer() as elsewhere:
        llm_server.enqueue(
            status=307, headers={"Location": f"{elsewhere.base_url}/chat/completions"}
        )

        with pytest.raises(BackendError, match="HTTP 307"):
            _complete(backend)

        assert elsewhere.request_count == 0
    assert llm_server.request_count == 1
    assert llm_server.header_values("X-Api-Key") == ["opt-egress-secret-0123456789"]


def test_the_connection_goes_to_the_checked_address_not_a_second_lookup(
    settings, backend, llm_server, monkeypatch
):
    """DNS rebinding: the name answers an allowed address to the check and the model
    server's address to any later lookup; nothing may reach the model server."""
    settings.TOMLAB_EGRESS_ALLOW = ["127.0.0.2/32"]  # a LAN host; 127.0.0.1 is not allowed
    lookups = []

    def rebinding(host, port, *args, **kwargs):
        lookups.append(host)
        address = "127.0.0.2" if len(lookups) == 1 else "127.0.0.1"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(egress, "getaddrinfo", rebinding)
    target = egress.destination(f"http://model.lab.example:{llm_server.port}/v1")
    assert str(target.address) == "127.0.0.2" and lookups == ["model.lab.example"]

    lookups.clear()
    connection = egress.http_connection(
        f"http://model.lab.example:{llm_server.port}/v1/models", timeout=2
    )
    with pytest.raises(OSError):  # 127.0.0.2: nothing listens there
        connection.request("GET", "/v1/models")
    connection.close()
    assert lookups == ["model.lab.example"]  # one lookup, made by the check
    assert llm_server.request_count == 0


def test_an_allowed_lab_host_by_name_is_called_with_its_name(settings, llm_server, monkeypatch):
    """A lab's own server on the LAN, allowed by name: the request reaches it, with the
    name in the Host header (what virtual hosts and TLS certificates need)."""
    settings.TOMLAB_EGRESS_ALLOW = ["vllm.lab.example"]

    def lab_dns(host, port, *args, **kwargs):
        assert host == "vllm.lab.example"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    monkeypatch.setattr(egress, "getaddrinfo", lab_dns)
    backend = Backend.objects.create(
        name="lab",
        kind=Backend.Kind.OPENAI,
        base_url=f"http://vllm.lab.example:{llm_server.port}/v1",
        default_model="test-model",
        max_retries=0,
        timeout_s=5,
    )
    backend.full_clean()
    llm_server.enqueue("from the lab")

    assert _complete(backend) == "from the lab"
    assert llm_server.header_values("Host") == [f"vllm.lab.example:{llm_server.port}"]


def test_a_webhook_to_an_internal_address_is_refused_when_set_and_when_sent(
    settings,
    live_study,  # noqa: F811
    receiver,  # noqa: F811
):
    settings.TOMLAB_EGRESS_ALLOW = []
    with pytest.raises(webhooks.WebhookError, match="internal address"):
        webhooks.webhook_set(study=live_study, url=receiver.url)
    settings.TOMLAB_EGRESS_ALLOW = ["127.0.0.1"]
    webhooks.webhook_set(study=live_study, url=receiver.url)
    live_study.refresh_from_db()
    delivery = webhooks.webhook_event_record(study=live_study, event="webhook.test")
    settings.TOMLAB_EGRESS_ALLOW = []  # the operator narrowed it since

    webhooks.webhook_deliver(delivery_id=delivery.pk)

    delivery.refresh_from_db()
    assert "internal address" in delivery.last_error
    assert receiver.requests == []


@pytest.mark.parametrize(
    "value",
    [
        "sk-proj-0123456789abcdefXYZ",
        "hf_0123456789abcdefABCD",
        "ghp_0123456789abcdefABCD",
        "AKIAABCDEFGHIJKLMNOP",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJl",
    ],
)
def test_an_option_shaped_like_a_key_is_stored_encrypted_under_any_name(db, value):
    """Finding 10: option values under ordinary names were shown in clear even when they
    were shaped like a key."""
    backend = Backend.objects.create(
        name="shaped",
        kind=Backend.Kind.OPENAI,
        base_url="https://llm.lab.example/v1",
        options={"extra_body": {"note": value}, "temperature_hint": "0.2"},
    )
    backend.refresh_from_db()

    assert value not in json.dumps(backend.options)  # ciphertext in the column
    assert backend.redacted_options()["extra_body"]["note"] == "********"
    assert backend.redacted_options()["temperature_hint"] == "0.2"
    assert backend.get_options()["extra_body"]["note"] == value
