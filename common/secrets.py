"""Secrets at rest: Fernet ciphertext under a key derived from ``SECRET_KEY``.

A stored secret is a Fernet token (AES-128-CBC + HMAC-SHA256) under a key derived from
``settings.SECRET_KEY`` with HKDF-SHA256, prefixed with ``fernet:``, so the column
holds ciphertext only and a database dump or a lookup on the column teaches nothing
about it. Secrets encrypted under a retired secret key stay readable while that key is
listed in ``SECRET_KEY_FALLBACKS`` (Django's own rotation setting).
https://cryptography.io/en/latest/fernet/

Backend API keys and secret options (``modeling.credentials``) and studies' webhook
signing keys (``studies.models``) are stored this way.
"""

from __future__ import annotations

import base64
from functools import lru_cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.db import models

CIPHERTEXT_PREFIX = "fernet:"
REDACTED = "********"
# Fixed, public inputs of the derivation: they only separate this use of SECRET_KEY
# from Django's own (signing, sessions), as HKDF's salt and info are meant to. They
# name where this began (backend keys); changing them would make every stored secret
# unreadable.
_HKDF_SALT = b"tomlab.modeling.credentials"
_HKDF_INFO = b"backend api key v1"


class CredentialUnreadable(Exception):
    """A stored key that no current or fallback SECRET_KEY decrypts."""


@lru_cache(maxsize=8)
def _fernet_for(secret: str) -> Fernet:
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=_HKDF_SALT, info=_HKDF_INFO).derive(
        secret.encode("utf-8")
    )
    return Fernet(base64.urlsafe_b64encode(derived))


def _box() -> MultiFernet:
    # Read the settings on every call: tests and key rotation change them at run time.
    secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return MultiFernet([_fernet_for(secret) for secret in secrets])


def is_ciphertext(value: str) -> bool:
    return value.startswith(CIPHERTEXT_PREFIX)


def encrypt_secret(plaintext: str) -> str:
    """The stored form of ``plaintext``; the empty string stays empty (no key)."""
    if not plaintext:
        return ""
    token = _box().encrypt(plaintext.encode("utf-8")).decode("ascii")
    return CIPHERTEXT_PREFIX + token


def decrypt_secret(stored: str) -> str:
    """The plaintext of a stored key ("" for none)."""
    if not stored:
        return ""
    if not is_ciphertext(stored):
        raise CredentialUnreadable("the stored key is not ciphertext; save it again")
    try:
        return _box().decrypt(stored[len(CIPHERTEXT_PREFIX) :].encode("ascii")).decode("utf-8")
    except (InvalidToken, UnicodeError):
        raise CredentialUnreadable(
            "the stored secret cannot be decrypted with DJANGO_SECRET_KEY (was the secret "
            "key changed? list the old one in SECRET_KEY_FALLBACKS, or type the API key or "
            "make a new webhook key again)"
        ) from None


class EncryptedSecretField(models.TextField):
    """A text column that only ever receives ciphertext.

    The attribute holds the stored (encrypted) form; plaintext assigned to it is
    encrypted on save, and plaintext in ``update()`` or an exact/range lookup is
    encrypted too, so no ORM write can put a key in the clear and no such lookup can
    compare against one. Pattern lookups (``startswith``…) bypass ``get_prep_value``
    but only ever see ciphertext; the admin and the API refuse lookups on it anyway.
    """

    # Marks a column no admin or API lookup, search or ordering may reach
    # (common.admin_input refuses them by this attribute, whatever the model).
    holds_secrets = True

    def pre_save(self, model_instance: models.Model, add: bool) -> str:
        value = getattr(model_instance, self.attname) or ""
        if value and not is_ciphertext(value):
            value = encrypt_secret(value)
            setattr(model_instance, self.attname, value)
        return value

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        if isinstance(value, str) and value and not is_ciphertext(value):
            return encrypt_secret(value)
        return value
