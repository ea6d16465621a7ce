"""The Celery app; tasks are discovered in each installed app's ``tasks`` module."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

app = Celery("tomlab")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
