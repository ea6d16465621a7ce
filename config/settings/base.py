"""Settings read from the environment (12-factor), with safe defaults.

Embedded default: a SQLite file and Celery over kombu's ``filesystem://`` transport,
so one laptop runs everything with no servers. Scale-out: set ``DATABASE_URL`` and
``CELERY_BROKER_URL`` (PostgreSQL + Redis).
"""

import os
from pathlib import Path

import environ

# transformers 5 no longer reads TRANSFORMERS_OFFLINE; HF_HUB_OFFLINE must be set before
# huggingface_hub is first imported, or a hub id retries for ~25 s before failing.
# Models load from local paths only (Backend.model_path).
os.environ.setdefault("HF_HUB_OFFLINE", "1")

BASE_DIR = Path(__file__).resolve().parent.parent.parent
env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

# numpy's OpenBLAS starts a thread per core for every matrix product. The processes that
# build reports already fill the cores (gunicorn's cores + 1 workers, Celery's pool), so
# those threads only wait on each other: a DynToM report's bootstrap products took
# 52-411 ms each under load instead of 1.5-30 ms, and an API first build at 1M
# predictions 0.57-0.61 s instead of 0.48 s on a near-quiet 2-core machine
# (docs/benchmarks.md). One thread per process unless the environment or .env says
# otherwise; OpenBLAS reads it when numpy first loads, which is after the settings.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

DEBUG = env.bool("DJANGO_DEBUG", default=False)
# Outside DEBUG a missing key is a start-up error, never a silent default.
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="") or ("insecure-dev-only-key" if DEBUG else "")
if not SECRET_KEY:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY is required when DJANGO_DEBUG is off (`make run` writes one into .env)."
    )
# The key signs sessions and derives the key that encrypts stored backend API keys, so
# outside DEBUG a guessable one is a start-up error; the rule is the one Django's
# `check --deploy` (security.W009) warns about.
if not DEBUG and (
    len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5 or SECRET_KEY.startswith("django-insecure")
):
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY is too weak: use at least 50 characters with at least 5 different "
        "ones, not starting with 'django-insecure' (e.g. python -c 'import secrets; "
        "print(secrets.token_urlsafe(50))')."
    )
# Retired keys: sessions signed and backend API keys encrypted under them stay readable.
SECRET_KEY_FALLBACKS = env.list("DJANGO_SECRET_KEY_FALLBACKS", default=[])
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

DATA_DIR = Path(env.str("TOMLAB_DATA_DIR", default=str(BASE_DIR / "var")))
DATA_DIR.mkdir(parents=True, exist_ok=True)

INSTALLED_APPS = [
    # django.contrib.admin, with malformed admin input as form errors, not 500s.
    "common.admin_input.InputSafeAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI served from our static files, not a CDN
    "django_htmx",
    "template_partials",
    "benchmarks",
    "studies",
    "annotation",
    "modeling",
    "interop",
    "reports",
    "accounts",
    "demo",
    "common",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "accounts.middleware.WorkspaceMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "common.middleware.ContentSecurityPolicyMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "accounts.context_processors.roles",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{DATA_DIR / 'tomlab.sqlite3'}")
}
DATABASES["default"]["ATOMIC_REQUESTS"] = False
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL + a busy timeout let the web process and the Celery worker share the file
    # without "database is locked" errors; IMMEDIATE makes write transactions take
    # the write lock up front instead of failing on upgrade.
    # https://docs.djangoproject.com/en/5.2/ref/databases/#sqlite-notes
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
else:
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)
    # Django turns psycopg's prepared statements off. Only the rater's hot statements
    # are bound on the server (common.compiled_queries.binding_cursor), and psycopg
    # prepares those once a connection has run one this many times; Django's own
    # client-bound queries are never prepared. "none" turns it off (e.g. behind a
    # pooler that cannot keep prepared statements).
    _prepare = env.str("DATABASE_PREPARE_THRESHOLD", default="5")
    DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = (
        None if _prepare.lower() in ("", "none", "off") else int(_prepare)
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Django's backend, refusing user names and addresses locked out for failed passwords.
AUTHENTICATION_BACKENDS = ["accounts.backends.ThrottledModelBackend"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise warns on every start when it is missing

SESSION_COOKIE_HTTPONLY = True
# DJANGO_SECURE=1: production behind HTTPS. One switch for everything
# `manage.py check --deploy` asks for. The SSL redirect trusts X-Forwarded-Proto from
# the TLS-terminating proxy, which must set (overwrite) it.
# https://docs.djangoproject.com/en/5.2/howto/deployment/checklist/
SECURE = env.bool("DJANGO_SECURE", default=False)
SESSION_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=SECURE)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
if SECURE:
    SECURE_SSL_REDIRECT = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = env.int("DJANGO_HSTS_SECONDS", default=31_536_000)  # one year
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
# Every response: our own scripts, styles, images and fonts only (htmx is in static/).
# Inline <script>, style="" and eval are refused; the SVG charts get their own policy.
CONTENT_SECURITY_POLICY = env.str(
    "DJANGO_CSP",
    default="default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'",
)
# Third-party pages under /api/ (DRF's browsable API, Swagger UI) carry inline styles in
# their own templates; they may keep those, while scripts stay 'self' there too.
CONTENT_SECURITY_POLICY_BY_PATH = {
    "/api/": CONTENT_SECURITY_POLICY.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")
}

# Counters for the log-in and invite-token throttles (accounts.throttling). Per
# process by default; with several web processes share them: CACHE_URL=redis://…/1
CACHES = {"default": env.cache_url("CACHE_URL", default="locmemcache://")}
if CACHES["default"]["BACKEND"].endswith("LocMemCache"):
    # LocMem keeps 300 entries by default and then culls a third of them; a live study
    # caches four per scene (studies/scene/cache.py: speakers, gold, body, blank form),
    # so a 583-scene study (TVShowGuess Friends + 10 copies) would evict its own scenes
    # as soon as raters spread over it. 10,000 entries, a few kB each, per process.
    CACHES["default"].setdefault("OPTIONS", {}).setdefault("MAX_ENTRIES", 10_000)
TOMLAB_THROTTLE_LOGIN_FAILURES_PER_USERNAME = env.int(
    "TOMLAB_THROTTLE_LOGIN_FAILURES_PER_USERNAME", default=10
)
TOMLAB_THROTTLE_LOGIN_FAILURES_PER_IP = env.int("TOMLAB_THROTTLE_LOGIN_FAILURES_PER_IP", default=20)
TOMLAB_THROTTLE_LOGIN_WINDOW_S = env.int("TOMLAB_THROTTLE_LOGIN_WINDOW_S", default=15 * 60)
TOMLAB_THROTTLE_TOKEN_MISSES_PER_IP = env.int("TOMLAB_THROTTLE_TOKEN_MISSES_PER_IP", default=30)
TOMLAB_THROTTLE_TOKEN_WINDOW_S = env.int("TOMLAB_THROTTLE_TOKEN_WINDOW_S", default=10 * 60)
# Behind a proxy REMOTE_ADDR is the proxy's: name the header it sets (HTTP_X_REAL_IP).
TOMLAB_CLIENT_IP_HEADER = env.str("TOMLAB_CLIENT_IP_HEADER", default="")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "accounts.authentication.ThrottledBasicAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["accounts.permissions.IsResearcher"],
    # Every list endpoint: 50 a page, ?page_size= up to TOMLAB_API_MAX_PAGE_SIZE.
    "DEFAULT_PAGINATION_CLASS": "common.pagination.CappedPageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
TOMLAB_API_MAX_PAGE_SIZE = env.int("TOMLAB_API_MAX_PAGE_SIZE", default=200)
SPECTACULAR_SETTINGS = {
    "TITLE": "ToMLab API",
    "DESCRIPTION": "Item bank, studies, model runs and reports for Theory-of-Mind benchmarks.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["accounts.permissions.IsResearcher"],
    # Swagger UI from drf-spectacular-sidecar's static files (no CDN, CSP 'self').
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # One name per choice set that several serializers share.
    "ENUM_NAME_OVERRIDES": {
        "StudyStatusEnum": "studies.models.Study.Status",
        "StudyRevealEnum": "studies.models.Study.Reveal",
        "QuestionTypeEnum": "benchmarks.models.DynToMQuestion.QuestionType",
    },
}

# Celery: https://docs.celeryq.dev/en/stable/userguide/configuration.html
# The embedded default needs no server: kombu's filesystem transport passes
# messages through folders under DATA_DIR.
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://")
_BROKER_DIR = DATA_DIR / "broker"
if CELERY_BROKER_URL.startswith("filesystem://"):
    for _sub in ("out", "processed", "control"):
        (_BROKER_DIR / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_BROKER_DIR / "out"),
        "data_folder_out": str(_BROKER_DIR / "out"),
        "processed_folder": str(_BROKER_DIR / "processed"),
        # Defaults to ./control in the working directory, which littered the checkout.
        "control_folder": str(_BROKER_DIR / "control"),
        "store_processed": False,
    }
    # Kombu's filesystem transport, writing each message whole before a worker can
    # take it (common/broker.py).
    CELERY_BROKER_TRANSPORT = "common.broker:Transport"
CELERY_RESULT_BACKEND = None  # job state lives in our own Run rows
CELERY_TASK_ACKS_LATE = True  # a killed worker's job is redelivered, not lost
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
# A queued job no worker took within this many seconds is sent again; workers sweep on
# start-up and every TOMLAB_SWEEP_EVERY_S (common.queueing, config/celery.py).
TOMLAB_REQUEUE_AFTER_S = env.int("TOMLAB_REQUEUE_AFTER_S", default=300)
TOMLAB_SWEEP_EVERY_S = env.int("TOMLAB_SWEEP_EVERY_S", default=60)
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_TASK_ROUTES = {
    "modeling.tasks.train_*": {"queue": "gpu"},
    "modeling.score_text_similarity": {"queue": "gpu"},  # loads a local BERT
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "filters": {
        "redact_tokens": {"()": "common.log_redaction.RedactInviteTokens"},
        "redact_secrets": {"()": "common.log_redaction.RedactSecrets"},
        "no_denial_tracebacks": {"()": "accounts.log_filters.NoTracebackForDenials"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["no_denial_tracebacks"],
        }
    },
    "root": {"handlers": ["console"], "level": env.str("DJANGO_LOG_LEVEL", default="INFO")},
    # httpx2 (inside openai) logs every request at INFO: one line per paid call.
    "loggers": {
        "httpx2": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        # Named so that Django's own handlers on it (DEFAULT_LOGGING's console when DEBUG
        # is on, mail_admins when it is off) are dropped: they do not redact, and its
        # records reach the root's console, which does.
        "django": {"handlers": [], "level": "INFO"},
        # runserver's request lines: through our console handler, so tokens are redacted.
        "django.server": {"handlers": ["console"], "level": "INFO", "propagate": False},
        # gunicorn's error log ("Error handling request /s/p/<token>/"), in the worker
        # processes that load Django: through the same redacting handler.
        "gunicorn.error": {"handlers": ["console"], "propagate": False},
    },
}
# Every handler, whoever adds it (a file, mail_admins), redacts URL tokens and secrets
# first (common.log_redaction); Celery's own worker handlers get them by a signal there.
for _handler in LOGGING["handlers"].values():
    _handler["filters"] = [
        "redact_tokens",
        "redact_secrets",
        *(f for f in _handler.get("filters", []) if f not in ("redact_tokens", "redact_secrets")),
    ]

TOMLAB_SHARED_DATA = Path(
    env.str("TOMLAB_SHARED_DATA", default=str(BASE_DIR.parent / "shared" / "data"))
)

# Import limits (benchmarks/importers/base.py). Largest input file per format or file
# kind, checked before any parsing; override entries with e.g.
# TOMLAB_IMPORT_MAX_BYTES="screenplay=100000000,dyntom-story=4000000".
_MB = 1024 * 1024
TOMLAB_IMPORT_MAX_BYTES = {
    "screenplay": 50 * _MB,
    "tvshowguess-raw": 50 * _MB,
    "tvshowguess-sheet": 20 * _MB,
    "chartom-qa": 200 * _MB,
    "tom-in-amc": 500 * _MB,
    "dyntom-story": 2 * _MB,  # the release's largest story.json is ~20 KB
    "dyntom-questions": 10 * _MB,  # ... and question_new.json ~0.3 MB
    "predictions": 200 * _MB,  # predictions JSONL uploaded in the browser or the API
    "generic": 200 * _MB,  # each file of a benchmark imported through a field mapping
    # Eval-harness results (interop): an Inspect log (.eval is a zip, .json plain; a
    # log's samples hold every message, so logs are large) and lm-eval samples files.
    "inspect-log": 500 * _MB,
    "lm-eval": 500 * _MB,
}
for _entry in env.list("TOMLAB_IMPORT_MAX_BYTES", default=[]):
    _name, _, _value = _entry.partition("=")
    TOMLAB_IMPORT_MAX_BYTES[_name.strip()] = int(_value)
# Largest text or JSON value an import may store in one field (a scene's text, a QA
# context, one unknown field kept in `extra`): bounds rows and API responses.
TOMLAB_IMPORT_MAX_FIELD_BYTES = env.int("TOMLAB_IMPORT_MAX_FIELD_BYTES", default=2 * _MB)
# Imports from uploaded files (benchmarks/uploads.py, the /data/ pages and /api/imports/).
# All the files of one upload together, and a .zip's members once unpacked, at most:
TOMLAB_UPLOAD_MAX_BYTES = env.int("TOMLAB_UPLOAD_MAX_BYTES", default=1024 * _MB)
# An upload left unconfirmed this long is deleted when the next upload comes in.
TOMLAB_UPLOAD_TTL_S = env.int("TOMLAB_UPLOAD_TTL_S", default=24 * 3600)
# Confirmed uploads above this many bytes import on a Celery worker, with a progress
# bar; smaller ones import in the request.
TOMLAB_IMPORT_BACKGROUND_BYTES = env.int("TOMLAB_IMPORT_BACKGROUND_BYTES", default=2 * _MB)

# Study webhooks (studies/participation/webhooks.py): plain http URLs only in development
# unless allowed here; tries per event, the wait before the second (doubled each time),
# and each call's timeout.
TOMLAB_WEBHOOK_ALLOW_HTTP = env.bool("TOMLAB_WEBHOOK_ALLOW_HTTP", default=DEBUG)
TOMLAB_WEBHOOK_MAX_ATTEMPTS = env.int("TOMLAB_WEBHOOK_MAX_ATTEMPTS", default=6)
TOMLAB_WEBHOOK_BACKOFF_S = env.float("TOMLAB_WEBHOOK_BACKOFF_S", default=10.0)
TOMLAB_WEBHOOK_TIMEOUT_S = env.float("TOMLAB_WEBHOOK_TIMEOUT_S", default=5.0)

# DynToM generation: replies per step (the first and its retries, each carrying the
# validation error) before a stage is marked "needs attention"
# (annotation/dyntom/generation/services.py).
TOMLAB_GENERATION_MAX_ATTEMPTS = env.int("TOMLAB_GENERATION_MAX_ATTEMPTS", default=3)
# Annotators per object in the validation batch a generation job queues by itself.
TOMLAB_VALIDATION_K = env.int("TOMLAB_VALIDATION_K", default=4)

# CharToM-QA construction (annotation/chartom): a human task not submitted within this
# many seconds goes back to its queue.
TOMLAB_ANNOTATION_TASK_TIMEOUT_S = env.int("TOMLAB_ANNOTATION_TASK_TIMEOUT_S", default=1800)
# Tokenizer the 1k/2k plot windows are counted in: "words" (the default: words and
# punctuation marks, no download) or the path of a local tokenizer.json / tokenizer
# directory (e.g. GPT-2's) read with the `tokenizers` library.
TOMLAB_PLOT_TOKENIZER = env.str("TOMLAB_PLOT_TOKENIZER", default="words")
# CharToM-QA question generation: candidates sampled per construction (Appendix H).
TOMLAB_CHARTOM_QUESTION_CANDIDATES = env.int("TOMLAB_CHARTOM_QUESTION_CANDIDATES", default=6)
# Local model directory for BERTScore (nothing is downloaded); empty = not computed.
TOMLAB_BERTSCORE_MODEL = env.str("TOMLAB_BERTSCORE_MODEL", default="")
TOMLAB_BERTSCORE_LAYERS = env.int("TOMLAB_BERTSCORE_LAYERS", default=0)  # 0 = last layer

# Trained baselines (modeling/baselines, ToM-in-AMC §5 and Appendix B): the local
# directory of the Longformer they start from (e.g. allenai/longformer-base-4096 saved
# with save_pretrained; nothing is downloaded), and where runs keep their checkpoints.
TOMLAB_BASELINE_ENCODER = env.str("TOMLAB_BASELINE_ENCODER", default="")
TOMLAB_BASELINE_CHECKPOINT_DIR = Path(
    env.str("TOMLAB_BASELINE_CHECKPOINT_DIR", default=str(DATA_DIR / "baselines"))
)

# Where LLM backends may send keys (modeling/backends/policy.py; docs/operations.md,
# Security). The environment variables a backend may name as its key's: exact names,
# or prefixes ending in *. The server's own settings (DJANGO_*, DATABASE_URL, CELERY_*,
# any variable this package reads) are refused whatever this says.
TOMLAB_BACKEND_KEY_ENVS = env.list(
    "TOMLAB_BACKEND_KEY_ENVS", default=["OPENAI_API_KEY", "TOMLAB_KEY_*"]
)
# Hosts (host or host:port) backends may call; empty: any. Checked on save and again
# whenever a worker makes a client for a backend (the list may have changed since).
TOMLAB_BACKEND_HOSTS = env.list("TOMLAB_BACKEND_HOSTS", default=[])
# What the server may call beside public addresses, when a URL a user typed leads to
# one (backends, Test connection, webhooks; common/egress.py): host names, addresses,
# CIDR networks. Empty: loopback, private, link-local… addresses are refused. `make run`
# allows loopback (scripts/run_embedded.py).
TOMLAB_EGRESS_ALLOW = env.list("TOMLAB_EGRESS_ALLOW", default=[])

# How long a worker holds a model run before another may take it over (seconds).
MODELING_RUN_LEASE_S = env.int("MODELING_RUN_LEASE_S", default=60)
# Engine processes per run (modeling.runs.processes): one process keeps about 300-450
# calls a second in flight; raise it, up to the cores, for fast local model servers.
MODELING_RUN_PROCESSES = env.int("MODELING_RUN_PROCESSES", default=1)
