from django.apps import AppConfig


class ModelingConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "modeling"

    def ready(self) -> None:
        # The item bank lists what can be uploaded; it may not import this app.
        from benchmarks.uploads import upload_source_register

        from .runs.prediction_upload import PREDICTIONS_SOURCE

        upload_source_register(PREDICTIONS_SOURCE)
