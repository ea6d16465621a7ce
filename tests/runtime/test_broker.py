"""The embedded broker hands a worker whole messages (common/broker.py)."""

from __future__ import annotations

import os
import threading
from queue import Empty

from kombu import Connection

import common.broker
from common.broker import Transport
from config.celery import app as celery_app


def _connection(folder) -> Connection:
    return Connection(
        "filesystem://",
        transport=Transport,
        transport_options={"data_folder_in": str(folder), "data_folder_out": str(folder)},
    )


def test_the_app_uses_this_transport_for_the_filesystem_broker_only(settings):
    transport = type(celery_app.connection_for_write().transport)
    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        assert settings.CELERY_BROKER_TRANSPORT == "common.broker:Transport"
        assert transport is Transport
    else:  # Redis (CI's second pass): the URL's own transport, never the folders'
        assert not hasattr(settings, "CELERY_BROKER_TRANSPORT")
        assert transport.__module__ == "kombu.transport.redis"


def test_a_reader_polling_while_messages_are_written_gets_each_one_whole(tmp_path):
    """Kombu's own _put creates the file and then writes it; a reader polling between
    the two read an empty message and the worker died. 2,000 messages written in one
    thread while another takes them as fast as it can: all arrive, whole, once."""
    count = 2000
    body = {"task": "x", "args": ["y" * 2000]}
    received: list[dict] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        with _connection(tmp_path) as conn:
            channel = conn.default_channel
            while not (done.is_set() and len(received) == count):
                try:
                    received.append(channel._get("q"))
                except Empty:
                    continue
                except Exception as exc:  # the failure under test: an empty message
                    errors.append(exc)
                    return

    reader = threading.Thread(target=read)
    reader.start()
    with _connection(tmp_path) as conn:
        channel = conn.default_channel
        for i in range(count):
            channel._put("q", {**body, "i": i})
    done.set()
    reader.join(60)
    assert not reader.is_alive()
    assert errors == []
    assert sorted(m["i"] for m in received) == list(range(count))
    assert all(m["args"] == body["args"] for m in received)
    assert not list(tmp_path.glob("*.part"))


def test_a_message_is_out_of_a_readers_reach_until_it_is_whole(tmp_path, monkeypatch):
    """At the moment the written file is renamed into place, it is complete and a
    reader polling the folder finds nothing to take yet (kombu's own _put exposed the
    file under its final name before writing it)."""
    real_replace = os.replace
    checked: list[bytes] = []
    with _connection(tmp_path) as conn:
        channel = conn.default_channel

        def replace(src, dst):
            try:
                channel._get("q")
            except Empty:
                pass
            else:
                raise AssertionError("a reader took the message before it was whole")
            with open(src, "rb") as f:
                checked.append(f.read())
            real_replace(src, dst)

        monkeypatch.setattr(common.broker.os, "replace", replace)
        channel._put("q", {"task": "x", "i": 1})
        monkeypatch.undo()
        assert channel._get("q") == {"task": "x", "i": 1}
    assert len(checked) == 1 and b'"i": 1' in checked[0]
