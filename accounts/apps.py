from django.apps import AppConfig
from django.contrib.auth.signals import user_login_failed
from django.db.models.signals import post_migrate


def _ensure_roles(sender, **kwargs) -> None:
    from .services import roles_ensure

    roles_ensure()


def _count_failed_login(sender, credentials: dict, request=None, **kwargs) -> None:
    from .throttling import login_failure_record

    login_failure_record(request, credentials.get("username"))


class AccountsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "accounts"

    def ready(self) -> None:
        # Role groups exist on every database, test databases included.
        post_migrate.connect(_ensure_roles, sender=self)
        # Every failed password, whatever the path (page, admin, API), feeds the throttle.
        user_login_failed.connect(_count_failed_login, dispatch_uid="tomlab-throttle")
