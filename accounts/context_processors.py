"""Template context about the signed-in user's roles, for the navigation."""

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from .roles import ANNOTATOR, has_role, is_researcher


def roles(request: HttpRequest) -> dict[str, object]:
    """``can_annotate``: the validation queue is theirs (annotators and researchers).

    Lazy, so pages that never show the navigation's annotation link pay no query.
    """
    user = request.user
    return {
        "can_annotate": SimpleLazyObject(lambda: has_role(user, ANNOTATOR) or is_researcher(user))
    }
