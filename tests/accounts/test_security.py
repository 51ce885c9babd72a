"""Deployment settings (issue #10): the production block of .env.example passes
`check --deploy` without a warning, the defaults still serve plain http on 127.0.0.1, every page
carries a Content-Security-Policy that the templates can live with, and tests hash passwords
with MD5 while nothing else ever does."""

import base64
import hashlib
import http.cookiejar
import json
import os
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from tests.base import PASSWORD, ROOT, make_user

# What a test run sets that a user's process would not have.
TEST_ONLY_VARIABLES = {
    "EVALSITE_TESTING",
    "DATABASE_URL",
    "REDIS_URL",
    "TEST_REDIS_URL",
    "EVALSITE_DATA_DIR",
    "DJANGO_SETTINGS_MODULE",
    "PYTEST_CURRENT_TEST",
    "DJANGO_ALLOW_ASYNC_UNSAFE",
}


def production_block() -> dict[str, str]:
    """NAME=value pairs of the commented production block at the end of .env.example, read as
    bin/run reads .env once the leading "# " is removed (" #" starts a comment, NAME= is unset)."""
    text = (ROOT / ".env.example").read_text()
    _, found, block = text.partition("# ---- Production")
    assert found, ".env.example has no production block"
    values: dict[str, str] = {}
    for raw in block.splitlines()[1:]:
        line = raw.removeprefix("#").strip()
        key, sep, value = line.partition("=")
        if not sep or not key.isidentifier() or not key.isupper():
            continue  # prose
        value = "" if value.strip().startswith("#") else value.split(" #", 1)[0].strip()
        values[key] = value
    return values


def user_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A user's environment: no test-run variables, a throwaway data directory."""
    env = {k: v for k, v in os.environ.items() if k not in TEST_ONLY_VARIABLES}
    env.update(EVALSITE_DATA_DIR=str(tmp_path / "data"), PYTHONUNBUFFERED="1")
    env.update({key: value for key, value in extra.items() if value})
    return env


def run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "evalsite.settings"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# ---- check --deploy ---------------------------------------------------------------------------
def test_the_production_block_passes_check_deploy_without_a_warning(tmp_path):
    block = production_block()
    assert block["DEBUG"] == "false"
    for name in (
        "SECURE_SSL_REDIRECT",
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS",
        "SECURE_HSTS_PRELOAD",
    ):
        assert block[name] == "true", name
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=user_env(tmp_path, **block),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "WARNINGS" not in output, output
    assert "no issues" in output, output


def test_the_production_block_sets_what_it_says(tmp_path):
    result = run_python(
        "from django.conf import settings as s; import json; print(json.dumps(["
        "s.SECURE_PROXY_SSL_HEADER, s.SECURE_HSTS_SECONDS, s.SESSION_COOKIE_SECURE,"
        "s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, s.CLIENT_IP_HEADER, s.DEBUG]))",
        user_env(tmp_path, **production_block()),
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == [
        ["HTTP_X_FORWARDED_PROTO", "https"],
        31536000,
        True,
        True,
        True,
        "HTTP_X_FORWARDED_FOR",
        False,
    ]


def test_a_malformed_proxy_ssl_header_is_refused_at_start(tmp_path):
    result = run_python("", user_env(tmp_path, SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO"))
    assert result.returncode != 0
    assert "SECURE_PROXY_SSL_HEADER must be NAME,VALUE" in result.stderr


# ---- the defaults: plain http on 127.0.0.1 -----------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_defaults_serve_plain_http_on_127_0_0_1(live_server):
    """A real HTTP client with a cookie jar that, like a browser, never sends a Secure cookie
    over http: the login must stick and pages must load, with no redirect to https."""
    make_user("reviewer", "alice")
    base = live_server.url.replace("localhost", "127.0.0.1")
    assert base.startswith("http://127.0.0.1:")
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))

    login_page = opener.open(f"{base}/accounts/login/")
    assert login_page.url.startswith("http://")
    assert "Strict-Transport-Security" not in login_page.headers
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login_page.read().decode())
    form = urllib.parse.urlencode(
        {"username": "alice", "password": PASSWORD, "csrfmiddlewaretoken": token.group(1)}
    ).encode()
    after_login = opener.open(f"{base}/accounts/login/", data=form)
    assert after_login.url == f"{base}{reverse('datasets:task-list')}", after_login.url
    assert "Log out" in after_login.read().decode()
    assert {cookie.name for cookie in jar} == {"csrftoken", "sessionid"}
    assert not any(cookie.secure for cookie in jar)


# ---- Content-Security-Policy -------------------------------------------------------------------
def directives(header: str) -> dict[str, list[str]]:
    return {part.split()[0]: part.split()[1:] for part in header.split(";") if part.strip()}


@pytest.mark.django_db
def test_every_page_carries_a_strict_script_policy(admin_client):
    for response in (
        Client().get(reverse("accounts:login")),  # anonymous
        admin_client.get(reverse("datasets:task-list")),
    ):
        policy = directives(response["Content-Security-Policy"])
        assert policy["script-src"][0] == "'self'"
        assert "'unsafe-inline'" not in policy["script-src"]
        assert "'unsafe-eval'" not in policy["script-src"]
        assert policy["object-src"] == ["'none'"]
        assert policy["frame-ancestors"] == ["'none'"]


TEMPLATE_DIRS = [ROOT / "templates", *(ROOT / "apps").glob("*/templates")]
INLINE_SCRIPT = re.compile(r"<script\b(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)
INLINE_HANDLER = re.compile(r"<[^>]*\son[a-z]+\s*=", re.IGNORECASE)


def test_no_template_has_an_inline_script_or_handler():
    """script-src has no 'unsafe-inline': an inline script or onclick= would silently not run
    (a confirm() before a delete would be skipped). Use static/js and data-* attributes."""
    offenders = []
    for folder in TEMPLATE_DIRS:
        for path in folder.rglob("*.html"):
            text = path.read_text()
            for pattern in (INLINE_SCRIPT, INLINE_HANDLER):
                offenders += [
                    f"{path.relative_to(ROOT)}: {m.group(0)[:80]}" for m in pattern.finditer(text)
                ]
    assert offenders == []


def test_django_rqs_inline_script_is_allowed_by_its_hash():
    """django-rq's admin job lists carry one fixed inline script; the policy allows exactly it.
    A new django-rq version with another script fails here rather than in an admin's browser."""
    import django_rq

    folder = Path(django_rq.__file__).parent / "templates"
    bodies = {
        match.group(1)
        for path in folder.rglob("*.html")
        for match in re.finditer(
            r"<script[^>]*>(.*?)</script>", path.read_text(), re.DOTALL | re.IGNORECASE
        )
        if match.group(1).strip()
    }
    assert bodies, "django-rq's templates have no inline script any more: drop the hash"
    for body in bodies:
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in settings.SECURE_CSP["script-src"], body


# ---- password hashers --------------------------------------------------------------------------
@pytest.mark.django_db
def test_users_made_in_tests_are_hashed_with_md5():
    user = make_user("viewer")
    assert user.password.startswith("md5$"), user.password[:20]
    assert user.check_password(PASSWORD)


def test_without_evalsite_testing_passwords_are_hashed_with_a_slow_hasher(tmp_path):
    result = run_python(
        "from django.contrib.auth.hashers import make_password; print(make_password('x'))",
        user_env(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    algorithm = result.stdout.strip().splitlines()[-1].split("$")[0]
    assert algorithm in {"pbkdf2_sha256", "argon2", "scrypt", "bcrypt_sha256"}, algorithm
