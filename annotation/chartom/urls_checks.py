"""CharToM-QA construction pages (checks) at /annotation/chartom/, namespace "annotation"."""

from django.urls import path  # noqa: F401

urlpatterns: list = []
