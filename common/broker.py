"""Kombu's filesystem transport (the embedded default's broker) with whole messages.

Kombu's own ``Channel._put`` creates the message file under its final name and then
writes it, while ``_get`` takes any file of that name by renaming it: a worker polling
in between reads an empty file and dies ("Unrecoverable error: JSONDecodeError", seen
in CI once). Here a message is written under a name ``_get`` does not match and then
renamed into place, so a reader sees all of it or nothing. ``CELERY_BROKER_TRANSPORT``
names this class when the broker URL is ``filesystem://`` (config/settings/base.py).
"""

from __future__ import annotations

import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs) -> None:
        # The name kombu gives, so that _get's order and queue match are unchanged.
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = f"{final}.part"  # "….msg.part" is no queue's ".msg": _get skips it
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
