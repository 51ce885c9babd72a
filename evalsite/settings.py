"""evalsite settings: one module, driven by environment variables (see .env.example)."""

import json
import os
import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

BASE_DIR = Path(__file__).resolve().parent.parent


def env(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value not in (None, "") else default


def env_list(name: str, default: str = "") -> list[str]:
    return [part.strip() for part in env(name, default).split(",") if part.strip()]


DATA_DIR = Path(env("EVALSITE_DATA_DIR", str(BASE_DIR / "data")))
DATA_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", False)


def _secret_key() -> str:
    """SECRET_KEY from the environment, else one generated once and kept in an ignored file."""
    if key := env("SECRET_KEY"):
        return key
    key_file = DATA_DIR / "secret_key"
    if key_file.exists():
        return key_file.read_text().strip()
    # Processes that start at once on a fresh data directory (bin/run's web server and worker,
    # parallel test workers) must agree on one key, and none may read a half-written file: the
    # key is written whole under a private name, then linked into place; linking fails if
    # another process was first, and then its key is the one.
    key = secrets.token_urlsafe(50)
    staged = DATA_DIR / f".secret_key.{os.getpid()}"
    staged.write_text(key)
    staged.chmod(0o600)
    try:
        os.link(staged, key_file)
    except FileExistsError:
        key = key_file.read_text().strip()
    finally:
        staged.unlink()
    return key


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "apps.accounts.admin_config.AdminSiteConfig",  # django.contrib.admin, behind our roles
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "django_rq",
    "axes",
    # django-ninja: its docs page's scripts and styles, served from here (there is no CDN).
    "ninja",
    "apps.accounts",
    "apps.datasets",
    "apps.runs",
    "apps.drafting",
    "apps.judges",
    "apps.review",
    "apps.leaderboards",
    "apps.interop",
    "apps.configs",
    "apps.notifications",
    "apps.api",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Before anything reads a body (CSRF parses a multipart one): refuses it by its length.
    "apps.accounts.middleware.RequestBodyLimitMiddleware",
    # Every page needs login unless its view is marked @login_not_required.
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    # Viewers never change anything, whatever a view forgets to check.
    "apps.accounts.middleware.ReadOnlyViewerMiddleware",
    # Nobody reaches a project's things without being its member (admins: every project).
    "apps.accounts.middleware.ProjectScopeMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: it turns a refused login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "evalsite.urls"
WSGI_APPLICATION = "evalsite.wsgi.application"
ASGI_APPLICATION = "evalsite.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env("DATABASE_URL", f"sqlite:///{DATA_DIR / 'evalsite.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the worker write while pages read; the busy timeout waits for a
    # writer instead of failing with "database is locked"; IMMEDIATE takes the
    # write lock at BEGIN so two writers queue rather than deadlock.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": env_int("SQLITE_BUSY_TIMEOUT", 30),
        "transaction_mode": "IMMEDIATE",
        "init_command": (
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
            "PRAGMA busy_timeout=30000; PRAGMA cache_size=-64000;"
        ),
    }
    # One file per test process: two pytest runs in one checkout must not share (and break)
    # one test database. Worker subprocesses get the file's path through DATABASE_URL.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / f"test-{os.getpid()}.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "accounts.User"
LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "datasets:task-list"
LOGOUT_REDIRECT_URL = "accounts:login"

# django-axes' backend comes first: it refuses a locked-out login before any password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

# ---- Single sign-on with OpenID Connect (apps/accounts/sso.py, mozilla-django-oidc; docs/accounts.md).
# Set OIDC_ISSUER and OIDC_CLIENT_ID (and the secret) to show "Sign in with single sign-on" on the
# login page. The endpoints come from the issuer's discovery document; the code flow always sends
# a PKCE challenge (S256). Users are made on their first sign-in; the groups claim gives the role
# at every sign-in (the highest of the groups listed below), and a user in none of them is refused
# (and deactivated, API tokens included) unless OIDC_DEFAULT_ROLE names a role for them.
OIDC_ISSUER = env("OIDC_ISSUER")
OIDC_RP_CLIENT_ID = env("OIDC_CLIENT_ID")
OIDC_RP_CLIENT_SECRET = env("OIDC_CLIENT_SECRET")
OIDC_RP_SCOPES = env("OIDC_SCOPES", "openid email profile groups")
OIDC_RP_SIGN_ALGO = env("OIDC_SIGN_ALGO", "RS256")
OIDC_USE_PKCE = True
OIDC_TIMEOUT = env_int("OIDC_TIMEOUT", 10)
OIDC_CLOCK_LEEWAY = env_int("OIDC_CLOCK_LEEWAY", 60)  # seconds of clock difference forgiven
OIDC_AUTHENTICATION_CALLBACK_URL = "accounts:sso-callback"
OIDC_GROUPS_CLAIM = env("OIDC_GROUPS_CLAIM", "groups")
OIDC_ADMIN_GROUPS = env_list("OIDC_ADMIN_GROUPS")
OIDC_REVIEWER_GROUPS = env_list("OIDC_REVIEWER_GROUPS")
OIDC_VIEWER_GROUPS = env_list("OIDC_VIEWER_GROUPS")
OIDC_DEFAULT_ROLE = env("OIDC_DEFAULT_ROLE")
# Set (e.g. "evalsite:"): groups "evalsite:<project>[:<role>]" are the user's project memberships,
# kept in step at every sign-in. Unset: single sign-on users are members of the default project.
OIDC_PROJECT_GROUP_PREFIX = env("OIDC_PROJECT_GROUP_PREFIX")
if OIDC_DEFAULT_ROLE not in ("", "admin", "reviewer", "viewer"):
    raise ImproperlyConfigured("OIDC_DEFAULT_ROLE must be admin, reviewer, viewer or empty.")
OIDC_LOGIN_LABEL = env("OIDC_LOGIN_LABEL", "Sign in with single sign-on")
# Off: the login page offers single sign-on only and refuses passwords (API tokens still work).
LOCAL_LOGIN = env_bool("LOCAL_LOGIN", True)
if not LOCAL_LOGIN and not OIDC_ISSUER:
    raise ImproperlyConfigured("LOCAL_LOGIN=false needs OIDC_ISSUER: nobody could sign in.")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
FORMAT_MODULE_PATH = ["evalsite.formats"]  # one date format everywhere
TIME_ZONE = env("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Hashed, compressed files once `collectstatic` has run (the run script does);
# before that (tests, a bare checkout) whitenoise serves straight from static/.
_COLLECTED = (STATIC_ROOT / "staticfiles.json").exists() and not env_bool("EVALSITE_TESTING")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if _COLLECTED
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
MEDIA_ROOT = DATA_DIR / "media"
WHITENOISE_USE_FINDERS = not _COLLECTED

if env_bool("EVALSITE_TESTING"):
    # Tests make hundreds of users: PBKDF2 made make_user a quarter of the suite's time. MD5 is
    # worthless against a stolen database, so it is used only when the tests say they run.
    PASSWORD_HASHERS = [
        "django.contrib.auth.hashers.MD5PasswordHasher",
        "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    ]

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # HTMX reads the token from the page, not the cookie.
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True

# ---- HTTPS. All off by default: bin/run serves http://127.0.0.1, where a browser never sends
# a Secure cookie back (no login would stick) and HSTS would pin the name to https. Behind a TLS
# proxy turn them on (.env.example's production block); `manage.py check --deploy` asks for them.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)


def _proxy_ssl_header() -> tuple[str, str] | None:
    """SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO,https: the header (request.META name) and
    value by which the TLS proxy says the request came over https. Only set it when the proxy
    always sets (or strips) that header, or a client could claim https itself."""
    parts = env_list("SECURE_PROXY_SSL_HEADER")
    if not parts:
        return None
    if len(parts) != 2:
        raise ImproperlyConfigured(
            "SECURE_PROXY_SSL_HEADER must be NAME,VALUE, e.g. HTTP_X_FORWARDED_PROTO,https"
        )
    return parts[0], parts[1]


SECURE_PROXY_SSL_HEADER = _proxy_ssl_header()

# ---- Content-Security-Policy (Django's own middleware), on in every mode so that the browser
# tests see what production sees. Scripts only from our origin: the pages have no inline script
# and no on*= handler (templates use data-confirm; static/js/evalsite.js asks). Styles allow
# 'unsafe-inline': templates draw bars with style="width: N%" and htmx injects its indicator
# <style>; an inline style cannot run code, and every value in it is autoescaped.
# django-rq's admin job lists carry one fixed inline script (it wires the select-all checkbox),
# allowed by its hash; tests/accounts/test_security.py recomputes it from the installed package.
DJANGO_RQ_ACTIONS_SCRIPT = "'sha256-1kZe1KRxelr3ptMPsod17Z6BDvbtm4WcufgsZGvsErM='"
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, DJANGO_RQ_ACTIONS_SCRIPT],
    "style-src": [CSP.SELF, CSP.UNSAFE_INLINE],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

# ---- Login throttling (django-axes, database handler: the counts live in the database, so they
# hold across gunicorn workers and machines). After LOGIN_FAILURE_LIMIT failures a username is
# refused from every address, and an address is refused for every username, until
# LOGIN_COOLOFF_MINUTES pass without a failure; nonexistent usernames count the same way, so the
# refusal says nothing about who exists. `manage.py axes_reset_username NAME` lifts a lockout.
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
# A success does not wipe the failures (axes' default). Wiping them would delete every record of
# the address too, so one user with a valid password could reset the count between guesses at
# another user's password from the same machine.
AXES_RESET_ON_SUCCESS = False
AXES_LOCKOUT_CALLABLE = "apps.accounts.throttle.locked_out"
AXES_CLIENT_IP_CALLABLE = "apps.accounts.throttle.client_ip"
AXES_VERBOSE = False  # no "AXES: BEGIN" banner in every manage.py command's output
# The request.META name of the header in which a reverse proxy passes the client's address
# (e.g. HTTP_X_FORWARDED_FOR or HTTP_X_REAL_IP). Unset: REMOTE_ADDR, because without a proxy
# that rewrites it the header is whatever the client chose to send.
CLIENT_IP_HEADER = env("CLIENT_IP_HEADER")

REDIS_URL = env("REDIS_URL", "redis://127.0.0.1:6379/0")
# One queue per kind of work, in the order a worker serves them: RQ takes the next job from the
# first of its queues that has one, so an upload's import (or a perturbed copy) starts before
# the next chunk of a long run, and a batch's poll is not held up behind the chunks either.
# "default" takes the rest (worker checks, board summaries) and jobs queued before the queues
# were split. `bin/run`'s worker listens to all of them in this order; a larger install may run
# a worker per queue (README, "More workers").
RQ_QUEUES = {
    name: {"URL": REDIS_URL, "DEFAULT_TIMEOUT": env_int("RQ_DEFAULT_TIMEOUT", 3600)}
    for name in ("imports", "polls", "default", "runs")
}
RQ_SHOW_ADMIN_LINK = True
# Every `manage.py rqworker` rides out a Redis outage instead of exiting (evalsite/worker.py).
RQ = {"WORKER_CLASS": "evalsite.worker.Worker"}

# The registry of run kinds: Run.Kind value -> dotted path of its plug-in (apps.runs.engine's
# RunPlugin). The one list of kinds: the engine looks a run's kind up here and names no kind's
# module, and no kind registers itself on import. Here, not in the runs app, because kinds live
# in later apps too (judges): a runs module naming them would point against the flow.
RUN_KINDS = {
    "generation": "apps.runs.kinds.generation.GENERATION",
    "choice": "apps.runs.kinds.choices.CHOICE",
    "script": "apps.runs.kinds.scripts.SCRIPT",
    "simulation": "apps.runs.kinds.simulation.SIMULATION",
    "gen_dataset": "apps.drafting.drafts.DATASET_GENERATION",
    "judge": "apps.judges.judging.JUDGE",
    "check": "apps.judges.judging.CHECK",
    "pairwise": "apps.judges.pairwise.PAIRWISE",
}

# Defaults for endpoints that do not say otherwise.
OPENAI_API_KEY = env("OPENAI_API_KEY")
OPENAI_BASE_URL = env("OPENAI_BASE_URL")

# Uploads: the limit is ours, Django's in-memory limit only decides when to spill to disk.
DATASET_MAX_UPLOAD_BYTES = env_int("DATASET_MAX_UPLOAD_BYTES", 200 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 10 * 1024 * 1024)
DATASET_SYNC_MAX_ROWS = env_int("DATASET_SYNC_MAX_ROWS", 5000)  # bigger: imported by a worker
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
# Larger uploads spill here rather than to /tmp: on the data directory's disk, which is sized
# for datasets, and swept of what a crashed server left when gunicorn starts (gunicorn_conf).
FILE_UPLOAD_TEMP_DIR = str(DATA_DIR / "upload-tmp")
Path(FILE_UPLOAD_TEMP_DIR).mkdir(exist_ok=True)
# /health/ready says "no worker" when no RQ worker has sent a heartbeat for this long (s).
HEALTH_WORKER_SILENCE = env_int("HEALTH_WORKER_SILENCE", 600)

# USD per 1M tokens (input, output) by model name; JSON in EVALSITE_PRICE_TABLE overrides.
PRICE_TABLE: dict[str, list[float]] = {
    "gpt-4o": [2.50, 10.00],
    "gpt-4o-mini": [0.15, 0.60],
    "gpt-4.1": [2.00, 8.00],
    "gpt-4.1-mini": [0.40, 1.60],
    "gpt-4.1-nano": [0.10, 0.40],
    **json.loads(env("EVALSITE_PRICE_TABLE", "{}")),
}
# Providers' Batch APIs bill at a share of the listed price (OpenAI: half).
BATCH_PRICE_FACTOR = env_float("EVALSITE_BATCH_PRICE_FACTOR", 0.5)
# Batch mode: seconds between polls of a run's batches, and the size of one batch file
# (OpenAI takes at most 50,000 requests and 200 MB per file; bigger runs send several).
BATCH_POLL_SECONDS = env_float("EVALSITE_BATCH_POLL_SECONDS", 30.0)
BATCH_MAX_REQUESTS = env_int("EVALSITE_BATCH_MAX_REQUESTS", 50_000)
BATCH_MAX_BYTES = env_int("EVALSITE_BATCH_MAX_BYTES", 200_000_000)

# Notifications (apps/notifications, docs/operations.md "Notifications"): the site's address for
# links in webhooks and emails, a webhook's time to answer, and Django's mail settings.
EVALSITE_URL = env("EVALSITE_URL", "http://127.0.0.1:8000").rstrip("/")
NOTIFY_TIMEOUT = env_float("NOTIFY_TIMEOUT", 10.0)
# Django 6.1's MAILERS (its EMAIL_HOST… settings are deprecated), read from the variables
# people know: EMAIL_HOST and the rest.
MAILERS = {
    "default": {
        "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "OPTIONS": {
            "host": env("EMAIL_HOST", "localhost"),
            "port": env_int("EMAIL_PORT", 25),
            "username": env("EMAIL_HOST_USER"),
            "password": env("EMAIL_HOST_PASSWORD"),
            "use_tls": env_bool("EMAIL_USE_TLS", False),
            "use_ssl": env_bool("EMAIL_USE_SSL", False),
            "timeout": env_int("EMAIL_TIMEOUT", 10),
        },
    }
}
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", "evalsite@localhost")

# Python plug-ins (apps/judges/plugins.py, docs/judges.md): modules to import for metrics,
# dataset metrics, post-processors and field converters, besides installed packages' entry
# points. Every web and worker process must see the same code.
EVALSITE_PLUGINS = env_list("EVALSITE_PLUGINS")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
    # The SDK logs request options (headers included) at DEBUG: never let a key reach a log.
    "loggers": {
        "openai": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        # Failed logins and lockouts are warnings; every success and clean-up would be INFO noise.
        "axes": {"level": "WARNING"},
        "mozilla_django_oidc": {"level": "WARNING"},
    },
}
