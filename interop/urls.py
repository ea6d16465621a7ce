"""The harness export page, mounted at /harness/ by config/urls.py."""

from django.urls import path

from . import views

app_name = "interop"

urlpatterns = [
    path("export/", views.harness_export, name="export"),
]
