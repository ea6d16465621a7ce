from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "annotation"

    def ready(self) -> None:
        from .chartom import hooks  # noqa: F401  (connects the receivers)
        from .dyntom.generation import hooks as generation_hooks  # noqa: F401
