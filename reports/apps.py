from django.apps import AppConfig


class ReportsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "reports"

    def ready(self) -> None:
        from . import hooks  # noqa: F401  (connects the receivers)
