from django.apps import AppConfig


class StudiesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "studies"

    def ready(self) -> None:
        from .choice import hooks  # noqa: F401  (connects the receivers)
