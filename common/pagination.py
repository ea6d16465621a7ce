"""The page size rules of every API list endpoint (``REST_FRAMEWORK`` in settings)."""

from __future__ import annotations

from django.conf import settings
from rest_framework.pagination import PageNumberPagination


class CappedPageNumberPagination(PageNumberPagination):
    """``?page_size=`` up to ``TOMLAB_API_MAX_PAGE_SIZE``; larger asks get the maximum.

    With the per-field import limit (``TOMLAB_IMPORT_MAX_FIELD_BYTES``) this bounds a
    list response: a client cannot ask for every row at once.
    https://www.django-rest-framework.org/api-guide/pagination/#pagenumberpagination
    """

    page_size_query_param = "page_size"

    @property
    def max_page_size(self) -> int:  # type: ignore[override]
        # Read per request, so settings overrides (tests, per-deployment) apply.
        return settings.TOMLAB_API_MAX_PAGE_SIZE
