from django.apps import AppConfig
from django.core import checks
from django.db.models.signals import post_migrate


def _ensure_roles(sender, **kwargs) -> None:
    from .services import roles_ensure

    roles_ensure()


class AccountsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "accounts"

    def ready(self) -> None:
        from .throttling import cache_check

        # Role groups exist on every database, test databases included.
        post_migrate.connect(_ensure_roles, sender=self)
        # Failed passwords are counted by the authentication backend itself, which
        # takes a place under the throttle's limits before it checks one.
        checks.register(cache_check, checks.Tags.security)
