"""CharToM-QA board pages at /annotation/chartom/ (namespace "annotation").

Batches, progress, provenance, bonus point and distractor review.
"""

from django.urls import path  # noqa: F401

urlpatterns: list = []
