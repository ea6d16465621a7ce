"""Work a web worker does once, before its first request (gunicorn's
``post_worker_init``, config/gunicorn_conf.py).

A fresh worker imported the URLconf (every app's views, DRF's schema views, openpyxl:
about 0.4 s of CPU) and compiled each rater template on its first requests. When a
study opens, fifty raters arrive within a second, and those first requests were
theirs: every worker's first pages took 0.5-0.7 s. Done here, it is paid while the
worker starts, before it accepts a connection.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from django.conf import settings
from django.template.loader import get_template
from django.urls import get_resolver, reverse

logger = logging.getLogger(__name__)

# The pages raters and annotators reach first (the study and annotation flows).
WARM_TEMPLATE_DIRS = ("studies", "annotation")


def warm_up() -> list[str]:
    """Import the URLconf and compile the templates; the templates' names."""
    started = time.process_time()
    get_resolver().url_patterns  # noqa: B018 (imports every view module)
    reverse("healthz")  # builds the reverse lookup tables too
    # Kept by the cached template loader (Django's default when DEBUG is off).
    names = [
        str(path.relative_to(base))
        for base in settings.TEMPLATES[0]["DIRS"]
        for folder in WARM_TEMPLATE_DIRS
        for path in sorted((Path(base) / folder).rglob("*.html"))
    ]
    for name in names:
        get_template(name)
    logger.info(
        "worker warmed up: URLconf and %d templates in %.0f ms of CPU",
        len(names),
        (time.process_time() - started) * 1000,
    )
    return names
