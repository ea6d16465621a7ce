"""Where a backend may send a key: which environment variables a key may come from, and
which hosts may receive one.

Researchers configure backends; the server's operator decides what they may point them
at. ``TOMLAB_BACKEND_KEY_ENVS`` lists the environment variables a backend may name as
``api_key_env`` (``OPENAI_API_KEY`` and ``TOMLAB_KEY_*`` by default); the variables
Django's settings read (``DJANGO_SECRET_KEY``, ``DATABASE_URL``, ``CELERY_*``…) are
refused whatever that list says. ``TOMLAB_BACKEND_HOSTS``, when set, lists the hosts a
backend may call. Both are checked when a backend is saved and again when a client is
made for it, since the settings may have changed since it was saved.
"""

from __future__ import annotations

import importlib
import os
import re
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings

# The openai client's own default when no base URL is given (and OPENAI_BASE_URL unset).
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_KEY_ENVS = ("OPENAI_API_KEY", "TOMLAB_KEY_*")
# Prefixes of the variables the settings are made of; names read by the settings
# modules themselves are added by reading them (settings_variables).
_SETTINGS_PREFIXES = ("DJANGO_", "CELERY_", "DATABASE_")
_ENV_READ = re.compile(
    r"""(?:\benv(?:\.\w+)?|os\.environ\.get|os\.environ\.setdefault|os\.getenv|os\.environ)"""
    r"""\s*[(\[]\s*["']([A-Za-z_][A-Za-z0-9_]*)["']"""
)
_DEFAULT_PORTS = {"http": 80, "https": 443}


@lru_cache(maxsize=4)
def _variables_read_by(package: str) -> frozenset[str]:
    try:
        module = importlib.import_module(package)
    except ImportError:
        return frozenset()
    folder = Path(getattr(module, "__file__", "") or ".").parent
    names: set[str] = set()
    for source in folder.glob("*.py"):
        names.update(_ENV_READ.findall(source.read_text(encoding="utf-8", errors="replace")))
    return frozenset(names)


def settings_variables() -> frozenset[str]:
    """Environment variables the settings package (``config/settings/*.py``) reads."""
    # settings.SETTINGS_MODULE is None while settings are overridden (tests).
    module = getattr(settings, "SETTINGS_MODULE", None) or os.environ.get(
        "DJANGO_SETTINGS_MODULE", ""
    )
    if not module:
        return frozenset()
    return _variables_read_by(module.rpartition(".")[0] or module)


def _matches(name: str, patterns: list[str] | tuple[str, ...]) -> bool:
    for pattern in patterns:
        pattern = pattern.strip()
        if pattern.endswith("*") and name.startswith(pattern[:-1]):
            return True
        if name == pattern:
            return True
    return False


def allowed_key_envs() -> list[str]:
    return list(getattr(settings, "TOMLAB_BACKEND_KEY_ENVS", DEFAULT_KEY_ENVS))


def key_env_refusal(name: str) -> str:
    """Why a backend may not read its key from the variable ``name`` ("" if it may)."""
    if not name:
        return ""
    if name.startswith(_SETTINGS_PREFIXES) or name in settings_variables():
        return (
            f"{name} holds one of the server's own settings, not an API key; put the key "
            "in a variable of its own (e.g. TOMLAB_KEY_<NAME>)."
        )
    allowed = allowed_key_envs()
    if not _matches(name, allowed):
        return (
            f"{name} is not a variable backends may read; allowed: "
            f"{', '.join(allowed) or 'none'} (the server's TOMLAB_BACKEND_KEY_ENVS)."
        )
    return ""


def effective_base_url(base_url: str) -> str:
    """The URL an OpenAI-compatible client calls for ``base_url`` (blank: the default)."""
    return base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_BASE_URL


def origin(base_url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of ``base_url``: a key belongs to the server it was made for."""
    try:
        parts = urlsplit(effective_base_url(base_url).strip())
        scheme = parts.scheme.lower()
        return scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError:  # a port out of range: no origin matches it
        return "", base_url, None


def allowed_hosts() -> list[str]:
    return [h.strip().lower() for h in getattr(settings, "TOMLAB_BACKEND_HOSTS", []) if h.strip()]


def host_refusal(base_url: str) -> str:
    """Why a backend may not call ``base_url`` ("" if it may): ``TOMLAB_BACKEND_HOSTS``."""
    hosts = allowed_hosts()
    if not hosts:
        return ""
    _scheme, host, port = origin(base_url)
    for entry in hosts:
        name, _, entry_port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if name.strip("[]") == host and (not entry_port or entry_port == str(port)):
            return ""
    shown = f"{host}:{port}" if port else host
    return (
        f"{shown or repr(base_url)} is not a host backends may call; allowed: {', '.join(hosts)} "
        "(the server's TOMLAB_BACKEND_HOSTS)."
    )
