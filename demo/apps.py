from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The demo loader (``manage.py load_demo``), on top of every other app."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "demo"
