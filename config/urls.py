from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from accounts import workspace_views
from accounts.decorators import operator_required, researcher_required
from accounts.user_views import user_list
from accounts.views import ThrottledLoginView, ThrottledPasswordChangeView, admin_login
from common.views import healthz, queued_job_requeue, queued_jobs
from reports.home import home

# 503 with Retry-After while the database cannot be reached, Django's 500 otherwise.
handler500 = "common.views.server_error"

urlpatterns = [
    path("", home, name="home"),
    path("healthz", healthz, name="healthz"),
    # Every workspace's jobs: the operator's page. A job's own page re-queues it.
    path("jobs/", operator_required(queued_jobs), name="queued-jobs"),
    path(
        "jobs/<int:pk>/requeue/",
        researcher_required(queued_job_requeue),
        name="queued-job-requeue",
    ),
    # Browsers ask for /favicon.ico whatever the page says: send them to the SVG.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("accounts/login/", ThrottledLoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/users/", user_list, name="users"),
    path("accounts/workspaces/switch/", workspace_views.switch, name="workspace-switch"),
    path("accounts/workspaces/members/", workspace_views.members, name="workspace-members"),
    path("accounts/workspaces/new/", workspace_views.new, name="workspace-new"),
    path(
        "accounts/password/",
        ThrottledPasswordChangeView.as_view(success_url="/"),
        name="password_change",
    ),
    # Before admin.site.urls, which has the same path: the admin log-in, throttled.
    path("admin/login/", admin_login),
    path("admin/", admin.site.urls),
    path("data/", include("benchmarks.urls")),
    path("runs/", include("modeling.urls")),
    path("studies/", include("studies.urls")),
    path("s/", include("studies.rater_urls")),
    path("reports/", include("reports.urls")),
    path("annotation/", include("annotation.urls")),
    path("harness/", include("interop.urls")),
    path("api/", include("config.api_router")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves its start-up script as a file: no inline <script> under the CSP.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
]
