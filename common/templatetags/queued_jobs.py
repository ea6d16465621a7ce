from typing import Any

from django import template

from common.queueing import queued_job_waiting_for

register = template.Library()


@register.inclusion_tag("common/queued_job_notice.html", takes_context=True)
def queued_job_notice(context: template.Context, job: Any) -> dict[str, Any]:
    """ "Queued 7 minutes ago, no worker has taken it", with Re-queue, while that holds."""
    request = context.get("request")
    return {
        "queued_job": queued_job_waiting_for(job),
        "next": request.get_full_path() if request else "",
        "csrf_token": context.get("csrf_token"),
    }
