from django.apps import AppConfig
from django.contrib.auth.signals import user_logged_in
from django.core import checks
from django.db.models.signals import post_migrate


def _one_time_password(sender, request, user, **kwargs) -> None:
    """Signing in with a one-time password: the session is sent to the password change
    (``accounts.middleware``) until the user picks their own."""
    from .models import PasswordChangeRequired

    session = getattr(request, "session", None)
    if session is not None and PasswordChangeRequired.objects.filter(user=user).exists():
        session[PASSWORD_CHANGE_SESSION_KEY] = True


PASSWORD_CHANGE_SESSION_KEY = "tomlab_password_change"


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
        user_logged_in.connect(_one_time_password, dispatch_uid="tomlab_one_time_password")
        # Failed passwords are counted by the authentication backend itself, which
        # takes a place under the throttle's limits before it checks one.
        checks.register(cache_check, checks.Tags.security)
