from django.apps import AppConfig


class InteropConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "interop"
    verbose_name = "Eval-harness interop"

    def ready(self) -> None:
        # The item bank lists what can be uploaded; it may not import this app.
        from benchmarks.uploads import upload_source_register

        from .inspect_upload import INSPECT_SOURCE
        from .lmeval_upload import LM_EVAL_SOURCE

        upload_source_register(INSPECT_SOURCE)
        upload_source_register(LM_EVAL_SOURCE)
