from django.apps import AppConfig


class ReportsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "reports"

    def ready(self) -> None:
        # The item bank lists what can be uploaded; it may not import this app.
        from benchmarks.uploads import upload_source_register
        from studies.choice.model_side import model_side_register

        from . import hooks  # noqa: F401  (connects the receivers)
        from .replication.upload import PACKAGE_SOURCE
        from .study_model_side import MODEL_SIDE

        upload_source_register(PACKAGE_SOURCE)
        # A generic study's widest-comparison design reads runs through it.
        model_side_register(MODEL_SIDE)
