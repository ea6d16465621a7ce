"""The Celery app; tasks live in the ``tasks`` module of each app or workflow package."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

# Workflow packages below an app's top folder, whose ``tasks`` modules Django's app
# list alone would not reach (autodiscovery looks at ``<app>.tasks`` only).
TASK_PACKAGES = [
    "annotation.chartom",
    "annotation.dyntom.generation",
    "modeling.pipelines.chartom_qa",
    "modeling.runs",
]

app = Celery("tomlab")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
app.autodiscover_tasks(TASK_PACKAGES)
