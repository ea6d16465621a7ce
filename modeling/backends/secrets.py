"""Masking the secrets a backend sends in any text that came back from its server.

OpenAI-style servers answer a bad key with "Incorrect API key provided: sk-…", and
proxies echo request headers in their 5xx bodies. Error text from a server is stored
(RunCall, Run, generation and CharToM step reasons), shown and logged, so the backend
client masks it before it raises (:meth:`ChatBackend.mask`), and everything else that
writes such text can call :func:`mask_secrets`.
"""

from __future__ import annotations

from collections.abc import Iterable

from common.log_redaction import MASK, remember_secrets
from common.log_redaction import mask_secrets as _mask

__all__ = ["MASK", "mask_secrets", "secret_parts"]


def secret_parts(value: str) -> list[str]:
    """``value`` and, for "Bearer sk-…"-style values, the credential after the scheme."""
    parts = [value]
    words = value.split()
    if len(words) > 1:
        parts += words[1:]
    return parts


def mask_secrets(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every one of ``secrets`` masked, as well as every secret a backend
    client of this process has sent and anything shaped like an API key or a bearer
    token. Secrets given here are remembered for the log filter too."""
    secrets = [part for secret in secrets if secret for part in secret_parts(str(secret))]
    remember_secrets(secrets)
    return _mask(str(text), secrets)
