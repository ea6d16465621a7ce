"""CharToM-QA construction pages (review) at /annotation/chartom/, namespace "annotation"."""

from django.urls import path  # noqa: F401

urlpatterns: list = []
