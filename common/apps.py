from django.apps import AppConfig


class CommonConfig(AppConfig):
    name = "common"
    label = "common"
    verbose_name = "Queued jobs"
    default_auto_field = "django.db.models.BigAutoField"
