"""Backend credentials: API keys and secret options encrypted at rest, and shown redacted.

A stored key is ciphertext (``common.secrets``: Fernet under a key derived from
``settings.SECRET_KEY``), so a database dump or a lookup on the column teaches nothing
about the key.

Option values named like secrets (``headers.Authorization``, ``api_key``, ``token``…)
or shaped like one ("Bearer …") are stored the same way, each as its own ciphertext
string inside the JSON, so a lookup on ``options`` (``options__icontains``, a key
transform, ``has_key`` on a value) only ever meets ciphertext; ``Backend.get_options``
decrypts them for the LLM client.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from django.db import models

# The encryption itself is common's (webhook keys use it too); these names stay
# importable from here for the backends' code and migrations 0004 and 0007.
from common.secrets import (  # noqa: F401
    CIPHERTEXT_PREFIX,
    REDACTED,
    CredentialUnreadable,
    EncryptedSecretField,
    decrypt_secret,
    encrypt_secret,
    is_ciphertext,
)

# Names of option keys whose values are secrets, compared word by word: "api_key",
# "X-Api-Key", "accessToken", "client_secret", "Authorization" are redacted, while
# "max_new_tokens" or "tokenizer" (ordinary transformers options) are not, which a
# plain substring test for "token" would hide from the researcher.
_SECRET_WORDS = frozenset(
    {"auth", "authorization", "bearer", "cookie", "credential", "credentials", "passphrase"}
    | {"passwd", "pwd", "secrets", "keys", "signature"}
)
_SECRET_ENDINGS = ("key", "token", "secret", "password")
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
# A value that is a credential whatever its name: "Bearer sk-…", "Basic dXNl…", and
# the shapes of the keys labs hold (OpenAI and compatible servers, Hugging Face, GitHub,
# Slack, AWS access keys, JWTs), so one under an ordinary name is encrypted and masked.
_SECRET_VALUE = re.compile(
    r"^\s*(?:(?:bearer|basic|token)\s+\S|sk-[A-Za-z0-9_\-]{8,}|hf_[A-Za-z0-9]{8,}"
    r"|gh[pousr]_[A-Za-z0-9]{8,}|github_pat_\w{8,}|xox[abprs]-[A-Za-z0-9\-]{8,}"
    r"|AKIA[0-9A-Z]{16}|eyJ[\w\-]{8,}\.[\w\-]{8,}\.[\w\-]+)",
    re.IGNORECASE,
)


def is_secret_name(name: str) -> bool:
    """Whether an option named ``name`` (any case, any separator) holds a secret."""
    for word in _WORD.findall(str(name)):
        word = word.lower()
        if word in _SECRET_WORDS or word.endswith(_SECRET_ENDINGS) or "password" in word:
            return True
    return False


def _secret_entry(name: str, value: Any) -> bool:
    # An empty value is left as it is: "no token" is not a secret, and showing it helps.
    return is_secret_name(name) and value not in (None, "")


def redact_secrets(value: Any) -> Any:
    """A copy of ``value`` with every secret-looking entry replaced by ``REDACTED``."""
    if isinstance(value, dict):
        return {
            key: REDACTED if _secret_entry(key, item) else redact_secrets(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [redact_secrets(item) for item in value]
    if isinstance(value, str) and (_SECRET_VALUE.match(value) or is_ciphertext(value)):
        return REDACTED
    return value


def restore_redacted(edited: Any, stored: Any) -> Any:
    """``edited`` with each ``REDACTED`` placeholder put back to the stored value there.

    A form that shows redacted options sends the placeholders back; this keeps the
    secrets a researcher did not retype instead of saving the asterisks.
    """
    if edited == REDACTED:
        return stored if stored is not None else edited
    if isinstance(edited, dict) and isinstance(stored, dict):
        return {key: restore_redacted(item, stored.get(key)) for key, item in edited.items()}
    if isinstance(edited, list) and isinstance(stored, list):
        return [
            restore_redacted(item, stored[i] if i < len(stored) else None)
            for i, item in enumerate(edited)
        ]
    return edited


# --- secret options: encrypted value by value -----------------------------------------


def _is_secret_value(value: Any) -> bool:
    return isinstance(value, str) and bool(_SECRET_VALUE.match(value))


def _encrypt_option(value: Any) -> str:
    if isinstance(value, str) and is_ciphertext(value):
        return value  # stored already (or put back from the stored options)
    # JSON inside, so a secret that is a number or an object comes back as it was.
    return encrypt_secret(json.dumps(value))


def encrypt_option_secrets(value: Any) -> Any:
    """A copy of ``value`` with every entry :func:`redact_secrets` masks encrypted."""
    if isinstance(value, dict):
        return {
            key: _encrypt_option(item) if _secret_entry(key, item) else encrypt_option_secrets(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [encrypt_option_secrets(item) for item in value]
    if _is_secret_value(value):
        return _encrypt_option(value)
    return value


def decrypt_option_secrets(value: Any) -> Any:
    """A copy of stored options with every encrypted value in plaintext again."""
    if isinstance(value, dict):
        return {key: decrypt_option_secrets(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decrypt_option_secrets(item) for item in value]
    if isinstance(value, str) and is_ciphertext(value):
        return json.loads(decrypt_secret(value))
    return value


def option_secret_values(options: Any, *, under_secret: bool = False) -> list[str]:
    """Every secret string in plaintext ``options`` (secret entries, credential-shaped
    values, and all header values), for masking what a server echoes."""
    found: list[str] = []
    if isinstance(options, dict):
        for key, item in options.items():
            secret = under_secret or _secret_entry(key, item) or str(key).lower() == "headers"
            found += option_secret_values(item, under_secret=secret)
    elif isinstance(options, list):
        for item in options:
            found += option_secret_values(item, under_secret=under_secret)
    elif (
        isinstance(options, str | int | float)
        and not isinstance(options, bool)
        and (under_secret or _is_secret_value(options))
    ):
        found.append(str(options))
    return found


def drop_carried_secrets(edited: Any, stored: Any) -> tuple[Any, int]:
    """``edited`` without the encrypted values it carries over from ``stored`` at the
    same place, and how many were dropped (the backend moved to another server)."""
    if isinstance(edited, dict):
        kept, dropped = {}, 0
        for key, item in edited.items():
            before = stored.get(key) if isinstance(stored, dict) else None
            if isinstance(item, str) and is_ciphertext(item) and item == before:
                dropped += 1
                continue
            kept[key], n = drop_carried_secrets(item, before)
            dropped += n
        return kept, dropped
    if isinstance(edited, list):
        items, dropped = [], 0
        for i, item in enumerate(edited):
            before = stored[i] if isinstance(stored, list) and i < len(stored) else None
            if isinstance(item, str) and is_ciphertext(item) and item == before:
                dropped += 1
                continue
            kept, n = drop_carried_secrets(item, before)
            items.append(kept)
            dropped += n
        return items, dropped
    return edited, 0


def contains_ciphertext(value: Any) -> bool:
    """Whether any string in ``value`` is (or pretends to be) stored ciphertext."""
    if isinstance(value, dict):
        return any(contains_ciphertext(item) for item in value.values())
    if isinstance(value, list):
        return any(contains_ciphertext(item) for item in value)
    return isinstance(value, str) and is_ciphertext(value)


class EncryptedOptionsField(models.JSONField):
    """A JSON column whose secret-looking values are stored as ciphertext, one by one.

    Like :class:`EncryptedSecretField`, plaintext secrets are encrypted on save and in
    ``update()``; the instance attribute then holds the stored form.
    """

    holds_secrets = True

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        value = encrypt_option_secrets(getattr(model_instance, self.attname))
        setattr(model_instance, self.attname, value)
        return value

    def get_db_prep_save(self, value: Any, connection: Any) -> Any:
        if not hasattr(value, "resolve_expression"):
            value = encrypt_option_secrets(value)
        return super().get_db_prep_save(value, connection)


def backend_secret_values(backend: Any) -> list[str]:
    """Every credential a backend's client may send (the key, from its environment
    variable or the row, and the secret option values), to mask in text that came back."""
    from .backends.base import BackendError

    secrets = [os.environ.get(backend.api_key_env, "") if backend.api_key_env else ""]
    try:
        secrets.append(backend.get_api_key())
        secrets += option_secret_values(backend.get_options())
    except (BackendError, CredentialUnreadable):
        pass  # unreadable: the client cannot send it either
    return [s for s in secrets if s]
