"""Template context about the signed-in user's roles, for the navigation."""

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from .roles import ANNOTATOR, has_role, is_researcher, may_adjudicate
from .workspaces import request_memberships


def roles(request: HttpRequest) -> dict[str, object]:
    """``can_annotate``: the validation queue is theirs (annotators and researchers);
    ``can_review``: they may settle disagreements (Annotation → Review disagreements).

    Lazy, so pages that never show the navigation's annotation link pay no query.
    """
    user = request.user
    return {
        "can_annotate": SimpleLazyObject(lambda: has_role(user, ANNOTATOR) or is_researcher(user)),
        # The reviewer queue's menu entry (annotation.adjudicate, or a researcher).
        "can_review": SimpleLazyObject(lambda: may_adjudicate(user)),
        "workspace_menu": SimpleLazyObject(lambda: _workspace_menu(request)),
    }


def _workspace_menu(request: HttpRequest) -> dict[str, object]:
    """The navigation's workspace menu: where this request reads, and where else the
    user may switch to."""
    user = request.user
    current = getattr(request, "workspace", None)
    if not user.is_authenticated or not (request_memberships(request) or user.is_superuser):
        return {}  # a rater, or someone no workspace has yet
    return {
        "current_id": current.workspace_id if current is not None else None,
        "current_name": current.name if current is not None else "",
        "current": current,
        "memberships": request_memberships(request),
    }
